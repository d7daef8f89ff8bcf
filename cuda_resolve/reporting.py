"""How the acting layers talk to whoever runs them: a reporter the entry point supplies.

Nothing below ``cli/`` prints. Builds and installs call a :class:`Reporter`; the CLI renders it
on the terminal (a status line with progress), ``--json`` collects it, tests record it. An entry
point wraps its reporter once in :class:`RedactingReporter`, so that no step or note (a mirror
URL, a pip command line, a log line) shows a credential, whoever wrote it.
"""

from __future__ import annotations

from typing import Protocol

from .redaction import redact_urls

__all__ = ["NullReporter", "RedactingReporter", "Reporter"]


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


class RedactingReporter:
    """``inner`` with every text it is given passed through
    :func:`~cuda_resolve.redaction.redact_urls` first (credentials in URLs, secret query values,
    proxies, registered secrets become ``***``). Wrapping twice is harmless."""

    def __init__(self, inner: Reporter) -> None:
        self.inner = inner

    def step(self, text: str) -> None:
        self.inner.step(redact_urls(text))

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        self.inner.progress(redact_urls(label), done, total, elapsed)

    def note(self, text: str) -> None:
        self.inner.note(redact_urls(text))
