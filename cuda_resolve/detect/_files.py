"""Small file and PATH helpers for probes: read without raising, look up programs on a PATH."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from .._bounded import read_head

__all__ = ["is_executable_file", "path_dirs", "read_text", "under_root", "which"]

#: Probes read small text files (version stamps, scripts); anything larger is not what we want.
_READ_LIMIT = 256 * 1024


def read_text(path: str | os.PathLike[str], *, limit: int = _READ_LIMIT) -> str | None:
    """The first *limit* bytes of a regular file as text (undecodable bytes replaced), or ``None``
    if it cannot be read or is not a regular file (a FIFO would block, a device never end)."""
    try:
        data = read_head(path, limit)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def under_root(root: Path, absolute: str) -> Path:
    """``/proc/driver/nvidia/version`` under a fake root (``root / "proc/driver/..."``)."""
    return root / absolute.lstrip("/")


def path_dirs(environ: Mapping[str, str]) -> Iterator[str]:
    """The directories of ``environ["PATH"]``, in order, empty entries skipped."""
    seen: set[str] = set()
    for entry in environ.get("PATH", "").split(os.pathsep):
        if entry and entry not in seen:
            seen.add(entry)
            yield entry


def is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def which(name: str, environ: Mapping[str, str]) -> str | None:
    """Like ``shutil.which`` but over *environ*'s PATH, so tests and profiles can supply one."""
    suffixes = [""]
    if sys.platform == "win32":
        suffixes += environ.get("PATHEXT", ".EXE;.BAT;.CMD").lower().split(";")
    for directory in path_dirs(environ):
        for suffix in suffixes:
            candidate = os.path.join(directory, name + suffix)
            if is_executable_file(candidate):
                return candidate
    return None
