"""Write several files all-or-nothing: every file is replaced, or none is.

``mirror set`` changes pip's config, ``.condarc`` and cuda-resolve's own config together; half of
that (pip on the mirror, cuda-resolve not) is worse than nothing. So writing happens in phases:

1. **prepare**: for each file, check that what is there is a regular file (a device, FIFO or
   socket, or a symlink to one, is never replaced), create its missing folders and write the new
   text to a temporary file beside it (:func:`cuda_resolve.paths.write_temporary`, the same
   writer as every other file cuda-resolve writes: same folder, so the final rename is atomic,
   fsynced), with the permission bits of the file it replaces, or 0600 for a new file that holds
   credentials. This is the real test that the target can be written: ``os.access`` says yes to
   root even on ``/proc`` or a read-only mount. Temporary files a killed run left are removed.
2. **back up**: copy each existing file to ``<name>.<YYYYmmdd-HHMMSS>.bak`` next to it, created
   exclusively (``O_EXCL``: a name already taken gets ``-1``, ``-2``, ...), with the original's
   permission bits, so two runs never share or overwrite a backup.
3. **replace**: ``os.replace`` each temporary file onto its target.

Concurrent runs are serialised by the caller (:mod:`cuda_resolve.mirrors.locks`).

A failure in phase 1 or 2 removes the temporary files, the backups and the folders made, and
leaves every target as it was. A failure in phase 3 (rare: the rename is the one step left)
puts the files already replaced back from their backups (and removes the ones that were new).
Either way one :class:`~cuda_resolve.errors.UsageError` names the path that failed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .._bounded import read_bytes
from .._frozen import frozen
from ..errors import UsageError
from ..paths import existing_mode, write_temporary

__all__ = ["PendingWrite", "backup_path", "make_backup", "write_all"]

#: pip.conf, .condarc and the config are kilobytes; the bounded reader refuses more than this.
_BACKUP_LIMIT = 16 * 1024 * 1024


@frozen
class PendingWrite:
    path: Path  # as the user knows it (shown in messages); may be a symlink
    target: Path  # the file actually replaced (``path`` with links followed)
    text: str
    hint: str  # what to do when this file cannot be written
    private: bool = False  # holds credentials: a new file is created 0600


@dataclass(slots=True)
class _Staged:
    write: PendingWrite
    existed: bool = False
    temporary: Path | None = None
    backup: Path | None = None
    replaced: bool = False
    folders: list[Path] = field(default_factory=list)  # created here, outermost first


def backup_path(path: Path, now: datetime) -> Path:
    """The first free ``<name>.<stamp>[-N].bak`` beside ``path`` (a hint only: :func:`make_backup`
    claims the name exclusively)."""
    return next(_backup_names(path, now))


def _backup_names(path: Path, now: datetime) -> Iterator[Path]:
    stamp = now.strftime("%Y%m%d-%H%M%S")
    yield path.with_name(f"{path.name}.{stamp}.bak")
    for counter in itertools.count(1):
        yield path.with_name(f"{path.name}.{stamp}-{counter}.bak")


def make_backup(target: Path, now: datetime) -> Path:
    """Copy ``target`` to a backup file created with ``O_EXCL`` (never one another run made),
    with the original's permission bits and times."""
    info = os.stat(target)
    data = read_bytes(target, limit=_BACKUP_LIMIT)
    flags = (
        os.O_WRONLY
        | os.O_CREAT
        | os.O_EXCL
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_BINARY", 0)
    )
    for candidate in _backup_names(target, now):
        try:
            handle = os.open(candidate, flags, 0o600)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(candidate, stat.S_IMODE(info.st_mode))
        os.utime(candidate, ns=(info.st_atime_ns, info.st_mtime_ns))
    except BaseException:
        with contextlib.suppress(OSError):
            candidate.unlink()
        raise
    return candidate


def _make_folders(folder: Path, made: list[Path]) -> None:
    """Create ``folder`` and its missing parents, appending each one made to ``made``."""
    missing: list[Path] = []
    current = folder
    while not os.path.lexists(current) and current.parent != current:
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir()
        made.append(path)


def _prepare(item: _Staged) -> None:
    target = item.write.target
    existing = existing_mode(target)  # NotRegularFileError: a device, FIFO or socket stays as it is
    _make_folders(target.parent, item.folders)
    item.existed = existing is not None
    mode = existing if existing is not None else (0o600 if item.write.private else 0o644)
    item.temporary = write_temporary(target, item.write.text, mode=mode)


def _clean_up(staged: Sequence[_Staged]) -> None:
    """Remove what phases 1 and 2 left behind for files that were not replaced."""
    for item in reversed(staged):
        if item.replaced:
            continue
        for leftover in (item.temporary, item.backup):
            if leftover is not None:
                with contextlib.suppress(OSError):
                    leftover.unlink()
        for folder in reversed(item.folders):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if still empty


def _restore(item: _Staged) -> str | None:
    """Put a replaced file back as it was; the reason when that failed."""
    target = item.write.target
    try:
        if item.backup is None:  # the file was new
            target.unlink()
            for folder in reversed(item.folders):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            return None
        mode = stat.S_IMODE(item.backup.stat().st_mode)
        temporary = write_temporary(target, read_bytes(item.backup, limit=_BACKUP_LIMIT), mode=mode)
        try:
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
    except OSError as exc:
        kept = f"; its backup is {item.backup}" if item.backup is not None else ""
        return f"{item.write.path} could not be restored ({exc.strerror or exc}){kept}"
    with contextlib.suppress(OSError):
        item.backup.unlink()  # identical to the file again
    item.replaced = False
    item.backup = None
    return None


def _reason(exc: OSError, item: _Staged) -> str:
    reason = exc.strerror or str(exc)
    where = exc.filename
    temporary = item.temporary
    shown = {str(item.write.path), str(item.write.target), str(temporary) if temporary else ""}
    if (
        isinstance(where, (str, os.PathLike))
        and str(where) not in shown
        and not Path(where).name.endswith(".tmp")
    ):
        reason += f" ({os.fspath(where)})"
    if item.write.target != item.write.path:
        reason += f"; it links to {item.write.target}"
    return reason


def write_all(
    writes: Sequence[PendingWrite], *, now: datetime | None = None
) -> tuple[Path | None, ...]:
    """Replace every file in ``writes`` with its text, or none of them; the backup of each
    (None for a file that did not exist)."""
    when = now or datetime.now()
    staged = [_Staged(write=write) for write in writes]
    current: _Staged | None = None
    try:
        for item in staged:
            current = item
            _prepare(item)
        for item in staged:
            current = item
            if item.existed:
                item.backup = make_backup(item.write.target, when)
    except OSError as exc:
        assert current is not None
        _clean_up(staged)
        raise UsageError(
            f"{current.write.path}: cannot be written: {_reason(exc, current)}",
            hint=f"nothing was changed; {current.write.hint}",
        ) from None
    except BaseException:
        _clean_up(staged)
        raise

    for item in staged:
        assert item.temporary is not None
        try:
            os.replace(item.temporary, item.write.target)
        except OSError as exc:
            problems = [
                problem
                for done in reversed(staged)
                if done.replaced and (problem := _restore(done))
            ]
            _clean_up(staged)
            if problems:
                hint = "; ".join(problems) + f"; {item.write.hint}"
            else:
                hint = (
                    "the files replaced before it were restored from their backups: nothing was "
                    f"changed; {item.write.hint}"
                )
            raise UsageError(
                f"{item.write.path}: cannot be replaced: {_reason(exc, item)}", hint=hint
            ) from None
        item.replaced = True
    return tuple(item.backup for item in staged)
