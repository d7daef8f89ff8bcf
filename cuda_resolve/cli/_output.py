"""Output helpers shared by the subcommands: JSON, rich consoles, the one error format.

Everything these helpers write is redacted on the way out (:mod:`cuda_resolve.redaction`):
credentials in URLs, secret query values, proxies and registered secrets become ``***`` in JSON,
in ``error:``/``hint:`` lines and in whatever a :func:`console` or :func:`error_console` prints
(a plan, a dry run's pip command line, a reporter's steps), whoever composed the text.
"""

from __future__ import annotations

import json
import sys

from .._wrap import hanging
from ..errors import CudaResolveError
from ..redaction import redact_data, redact_urls

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import IO, Any, cast

    from rich.console import Console
else:

    def cast(_type: object, value: object) -> object:  # typing.cast: the value itself
        return value


__all__ = ["console", "error_console", "hanging", "print_json", "report_error"]


class _RedactedStream:
    """``sys.stdout`` or ``sys.stderr`` (looked up at each write, as rich does, so a replaced
    stream is followed) with every text written passed through :func:`redact_urls`. rich writes
    a whole rendered print at once, so a URL is never cut between two writes."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _stream(self) -> IO[str]:
        return cast("IO[str]", getattr(sys, self._name))

    def write(self, text: str) -> int:
        self._stream().write(redact_urls(text))
        return len(text)

    def flush(self) -> None:
        self._stream().flush()

    def isatty(self) -> bool:
        return self._stream().isatty()

    def fileno(self) -> int:
        return self._stream().fileno()

    @property
    def encoding(self) -> str:
        return str(getattr(self._stream(), "encoding", None) or "utf-8")


def console() -> Console:
    """A rich console on stdout whose output is redacted."""
    from rich.console import Console  # imported on use: --json output never pays for rich

    return Console(
        file=cast("IO[str]", _RedactedStream("stdout")), highlight=False, soft_wrap=False
    )


def error_console() -> Console:
    """A rich console on stderr whose output is redacted."""
    from rich.console import Console

    return Console(file=cast("IO[str]", _RedactedStream("stderr")), stderr=True, highlight=False)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, every string in it (keys included) redacted."""
    sys.stdout.write(
        json.dumps(redact_data(data), indent=2, sort_keys=False, default=_redacted_str) + "\n"
    )


def _redacted_str(value: Any) -> str:
    return redact_urls(str(value))  # a Path or another object json cannot write itself


def report_error(exc: CudaResolveError, *, as_json: bool) -> None:
    """One ``error:`` line and a ``hint:`` line on stderr; with --json the same on stdout, and
    on the terminal too where stdout goes elsewhere (``plan --json > plan.json`` that fails
    would otherwise say nothing where the user looks)."""
    if as_json:
        print_json(exc.to_json())  # print_json redacts
        if not _is_terminal(sys.stdout) and _is_terminal(sys.stderr):
            _write_error(exc)
        return
    _write_error(exc)


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _write_error(exc: CudaResolveError) -> None:
    err = sys.stderr
    err.write(f"error: {redact_urls(exc.message)}\n")  # a mirror or proxy URL may carry a password
    if exc.hint:
        err.write(f"hint: {redact_urls(exc.hint)}\n")
