"""Output helpers shared by the subcommands: JSON, rich consoles, the one error format."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import CudaResolveError
from ..redaction import redact_data, redact_urls

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["console", "error_console", "hanging", "print_json", "report_error"]


def console() -> Console:
    from rich.console import Console  # imported on use: --json output never pays for rich

    return Console(highlight=False, soft_wrap=False)


def error_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def report_error(exc: CudaResolveError, *, as_json: bool) -> None:
    """One ``error:`` line and a ``hint:`` line on stderr; with --json the same on stdout."""
    if as_json:
        print_json(redact_data(exc.to_json()))
        return
    err = sys.stderr
    err.write(f"error: {redact_urls(exc.message)}\n")  # a mirror or proxy URL may carry a password
    if exc.hint:
        err.write(f"hint: {redact_urls(exc.hint)}\n")


def hanging(text: str, *, first: str, rest: str, width: int) -> str:
    """``text`` wrapped to ``width`` with a hanging indent: continuation lines start at ``rest``,
    never at column 0. Words and URLs are never split (a token longer than the line keeps a line
    of its own), so what is printed can be copied."""
    import textwrap

    return textwrap.fill(
        text, width=max(width, len(first) + 20), initial_indent=first, subsequent_indent=rest,
        break_long_words=False, break_on_hyphens=False,
    )
