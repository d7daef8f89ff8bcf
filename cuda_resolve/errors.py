"""The one exception hierarchy of cuda-resolve.

Every error carries the offending value (in its message) and a ``hint`` that tells the user
what to do. The library never prints or exits; each entry point catches :class:`CudaResolveError`
once and turns it into one ``error:`` line plus the hint.
"""

from __future__ import annotations

from ._printable import printable
from .redaction import redact_urls

__all__ = [
    "BuildError",
    "CudaResolveError",
    "IndexDataError",
    "InstallError",
    "LockError",
    "NetworkError",
    "ProfileError",
    "ResolutionImpossible",
    "UsageError",
]


class CudaResolveError(Exception):
    """Base class: a failure the user can act on."""

    #: Exit status for the CLI. 1 = the job failed; 2 = the input was bad.
    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # A message often quotes another program's output: its control characters and escape
        # sequences are shown, never obeyed by the terminal (cuda_resolve/_printable.py).
        message = printable(message)
        super().__init__(message)
        self.message = message
        self.hint = None if hint is None else printable(hint)

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict[str, str | None]:
        return {"error": self.message, "hint": self.hint}


class UsageError(CudaResolveError):
    """Bad input on the command line or in a file the user wrote."""

    exit_code = 2


class ProfileError(UsageError):
    """A machine profile (TOML) that cannot be read; the message names the file and key path."""


class IndexDataError(UsageError):
    """An index file that does not parse or validate; the message names file, key path, value."""


class ResolutionImpossible(CudaResolveError):
    """No set of builds satisfies the request on this machine."""

    def __init__(
        self, message: str, *, hint: str | None = None, reasons: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, hint=hint)
        self.reasons = reasons

    def to_json(self) -> dict[str, str | None]:
        data = super().to_json()
        data["reasons"] = list(self.reasons)  # type: ignore[assignment]
        return data


class NetworkError(CudaResolveError):
    """A fetch that failed: the message says what failed (DNS, proxy, TLS, HTTP) and the URL.

    Credentials in the URLs it names (``https://user:token@mirror/``) are replaced by ``***``.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(redact_urls(message), hint=None if hint is None else redact_urls(hint))


class BuildError(CudaResolveError):
    """A source build that failed."""


class InstallError(CudaResolveError):
    """pip or conda refused to install a planned artifact."""


class LockError(CudaResolveError):
    """A lockfile that cannot be written, read or honoured."""
