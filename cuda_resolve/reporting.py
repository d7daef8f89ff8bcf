"""How the acting layers talk to whoever runs them: a reporter the entry point supplies.

Nothing below ``cli/`` prints. Builds and installs call a :class:`Reporter`; the CLI renders it
on the terminal (a status line with progress), ``--json`` collects it, tests record it.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["NullReporter", "Reporter"]


class Reporter(Protocol):
    def step(self, text: str) -> None:
        """A stage begins or a fact worth a line: "cloning ...", "pre-flight ok"."""

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        """Long work moves: compile units done / total (None when unknown) and seconds spent."""

    def note(self, text: str) -> None:
        """Something the user should read but that does not stop the work."""


class NullReporter:
    def step(self, text: str) -> None:
        pass

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        pass

    def note(self, text: str) -> None:
        pass
