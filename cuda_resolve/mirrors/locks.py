"""The locks that serialise ``mirror set`` runs, so concurrent runs never mix two mirrors.

- :func:`locked`: the user's own lock, in the user's cuda-resolve cache folder, held around
  planning and writing. It serialises one user's runs (the user-scope files are that user's).
- :func:`environment_locked`: the lock of an environment's files (``--scope env``), a file
  beside them (``<prefix>/.cuda-resolve-mirror.lock``), so that everyone who edits that
  environment's ``pip.conf`` and ``.condarc`` takes the same lock, whoever they are. It is
  shared the way the folder is: it gets the folder's group and is writable by the folder's group
  (and by others) when the folder is. A lock file this user cannot write is an error naming it.

Both are ``flock`` locks (filelock): the system releases them when their process dies, so a
lock file left behind is never stale and need not be removed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ..errors import UsageError
from .targets import Targets

__all__ = ["ENVIRONMENT_LOCK", "LOCK_TIMEOUT_S", "environment_locked", "locked"]

LOCK_TIMEOUT_S = 60.0
#: The name of the lock file beside an environment's pip.conf and .condarc.
ENVIRONMENT_LOCK = ".cuda-resolve-mirror.lock"


@contextlib.contextmanager
def locked(*, timeout: float = LOCK_TIMEOUT_S) -> Iterator[Path]:
    """Serialise this user's ``mirror set`` runs: plan and write under one lock file in the
    user's cuda-resolve cache folder. Yields its path."""
    from ..paths import cache_root

    path = cache_root() / "mirror-set.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot be locked: {exc.strerror or exc}",
            hint="check that its folder is writable",
        ) from None
    own = (
        "it is in your own cache folder: give it back to you (`chown`) or remove it; it "
        "holds no data"
    )
    with _holding(
        path, mode=0o644, timeout=timeout, holder="another `mirror set` of yours", unwritable=own
    ):
        yield path


@contextlib.contextmanager
def environment_locked(
    targets: Targets, *, timeout: float = LOCK_TIMEOUT_S
) -> Iterator[Path | None]:
    """Hold the lock of the environment whose files ``targets`` edits; yields its path. The user
    scope has none (its files are the user's, serialised by :func:`locked`): yields None."""
    if targets.scope != "env" or targets.prefix is None:
        yield None
        return
    folder = targets.prefix
    path = folder / ENVIRONMENT_LOCK
    holder = "another `mirror set` (perhaps another user's, on the same environment)"
    shared = (
        "everyone who edits this environment's files needs to write it: ask its owner or an "
        f"administrator to run `chmod g+w {path}` (and chgrp it to the group that shares the "
        "environment), or to remove it while no `mirror set` runs; it holds no data"
    )
    with _holding(
        path, mode=_shared_mode(folder), timeout=timeout, holder=holder, unwritable=shared
    ):
        _share(path, folder)
        yield path


@contextlib.contextmanager
def _holding(
    path: Path, *, mode: int, timeout: float, holder: str, unwritable: str
) -> Iterator[None]:
    """Hold the flock on ``path`` (created with ``mode``); ``holder`` names who may hold it,
    ``unwritable`` is the hint when the file exists but this user cannot write it."""
    from filelock import FileLock, Timeout

    if path.is_symlink():
        # In a folder others can write, a link planted here would have the lock truncate and
        # chmod the file it points at (older filelock versions open it without O_NOFOLLOW).
        raise UsageError(
            f"{path}: the lock file of `mirror set` is a symbolic link ({os.readlink(path)})",
            hint=f"remove it (rm {path}) while no `mirror set` runs; it holds no data",
        )
    lock = FileLock(str(path), timeout=timeout, mode=mode)
    try:
        lock.acquire()
    except Timeout:
        raise UsageError(
            f"{holder} has held {path} for {timeout:g} s",
            hint="wait for it to finish, then run the command again",
        ) from None
    except OSError as exc:
        raise _cannot_lock(path, exc, unwritable) from None
    try:
        yield
    finally:
        lock.release()


def _cannot_lock(path: Path, exc: OSError, unwritable: str) -> UsageError:
    if isinstance(exc, PermissionError) and os.path.lexists(path):
        return UsageError(
            f"{path}: the lock file of `mirror set` is not writable by you{_owned_by(path)}",
            hint=unwritable,
        )
    return UsageError(
        f"{path}: cannot be locked: {exc.strerror or exc}",
        hint=f"mirror set needs to write in {path.parent}: check that you can, or choose another "
        "--scope / --python",
    )


def _owned_by(path: Path) -> str:
    try:
        import pwd

        return f" (it belongs to {pwd.getpwuid(os.stat(path).st_uid).pw_name})"
    except (ImportError, KeyError, OSError):
        return ""


def _shared_mode(folder: Path) -> int:
    """Read-write for the owner, and for the folder's group and others where they may write it."""
    try:
        bits = stat.S_IMODE(os.stat(folder).st_mode)
    except OSError:
        return 0o644  # locking will report the folder
    return 0o644 | (0o060 if bits & stat.S_IWGRP else 0) | (0o006 if bits & stat.S_IWOTH else 0)


def _share(path: Path, folder: Path) -> None:
    """Give a lock file this user owns the folder's group and :func:`_shared_mode`: without a
    setgid folder it was created with this user's own group, which the others may not be in."""
    try:
        info, where = os.lstat(path), os.stat(folder)
        if stat.S_ISLNK(info.st_mode):
            return
        if info.st_uid != os.geteuid():
            return
        if info.st_gid != where.st_gid:
            os.chown(path, -1, where.st_gid)
        mode = _shared_mode(folder)
        if stat.S_IMODE(info.st_mode) != mode:
            os.chmod(path, mode)
    except (OSError, AttributeError):  # not a member of that group; no geteuid on Windows
        return
