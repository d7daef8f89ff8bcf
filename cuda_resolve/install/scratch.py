"""The folder an install's pip and uv write their temporary files in, and the removal of those
that killed runs left behind.

pip downloads into its temporary folder before it installs (a CUDA torch is gigabytes), and a
run killed by SIGKILL or the OOM killer gets no chance to remove its folder. Each run holds a
lock on a file in its own folder for as long as it lives; the kernel lets go of it when the run
dies, however it dies. A later run removes the folders whose lock it can take: their runs are
gone. The lock, not a process id, says so: a pid can be reused, and another container that shares
``/tmp`` has pids of its own. A folder younger than a minute is left alone (its run may not have
taken its lock yet), and so is a folder without a lock file (not one of ours, or being made)
until it is a day old.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SCRATCH_PREFIX", "remove_dead_scratch", "run_scratch"]

SCRATCH_PREFIX = "cuda-resolve-install-"
_OWNER = ".owner.lock"
_YOUNG_SECONDS = 60.0
_UNLOCKED_SECONDS = 86400.0


@contextlib.contextmanager
def run_scratch() -> Iterator[Path]:
    """A new folder under the temporary directory, locked by this run and removed when it ends."""
    import filelock

    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX) as name:
        folder = Path(name)
        owner = filelock.FileLock(folder / _OWNER, thread_local=False)
        with owner:
            yield folder


def _uid(default: int) -> int:
    getuid = getattr(os, "getuid", None)  # Windows has no owners to tell apart this way
    return default if getuid is None else int(getuid())


def remove_dead_scratch(parent: Path | None = None, *, now: float | None = None) -> list[Path]:
    """Remove the scratch folders of runs that died without removing them; return them.

    Never raises: a folder that cannot be read or removed stays, for the next run to try."""
    import filelock

    parent = Path(tempfile.gettempdir()) if parent is None else parent
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(SCRATCH_PREFIX):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or info.st_uid != _uid(info.st_uid):
                continue
        except OSError:
            continue
        age = now - info.st_mtime
        if age < _YOUNG_SECONDS:
            continue
        folder = Path(entry.path)
        lock_path = folder / _OWNER
        if not lock_path.exists():
            if age < _UNLOCKED_SECONDS:
                continue
            shutil.rmtree(folder, ignore_errors=True)
        else:
            owner = filelock.FileLock(lock_path, thread_local=False)
            try:
                owner.acquire(timeout=0)
            except (filelock.Timeout, OSError):
                continue  # its run is alive
            try:
                shutil.rmtree(folder, ignore_errors=True)
            finally:
                owner.release()
        if not folder.exists():
            removed.append(folder)
    return removed
