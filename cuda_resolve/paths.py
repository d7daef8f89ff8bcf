"""Where cuda-resolve keeps its own files (one place, so tests and users can move them)."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from ._bounded import check_regular
from .errors import UsageError

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = [
    "CONFIG_ENV",
    "atomic_writer",
    "cache_root",
    "config_path",
    "existing_mode",
    "new_log_path",
    "own_cache_roots",
    "remove_leftovers",
    "resolve_target",
    "user_cache_dir",
    "user_config_dir",
    "writable",
    "writable_cache_root",
    "write_atomic",
    "write_temporary",
]

#: Environment variable naming the config file to use instead of the per-user one.
CONFIG_ENV = "CUDA_RESOLVE_CONFIG"
_APP = "cuda-resolve"


def _home(environ: Mapping[str, str]) -> str:
    home = environ.get("HOME", "")
    if os.path.isabs(home):
        return home
    # Unset, empty or relative: the account's entry, as platformdirs does.
    try:
        import pwd

        entry = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        entry = ""
    if not os.path.isabs(entry):
        raise UsageError(
            f"cannot tell your home folder: HOME is {home!r} and the user database has none",
            hint="set HOME, or XDG_CACHE_HOME and XDG_CONFIG_HOME, to an absolute path",
        )
    return entry


def _xdg_dir(variable: str, default: str, environ: Mapping[str, str]) -> Path:
    # platformdirs' rule on Linux (the XDG base-directory spec: a relative value is ignored),
    # read here because every command needs these folders and importing platformdirs costs
    # each run a few milliseconds (doctor's start-up, issue 8).
    base = environ.get(variable, "")
    if not os.path.isabs(base):
        base = os.path.join(_home(environ), default)
    return Path(base) / _APP


def user_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``platformdirs.user_cache_dir("cuda-resolve")``: ``$XDG_CACHE_HOME/cuda-resolve`` on
    Linux."""
    env = os.environ if environ is None else environ
    if sys.platform == "linux":
        return _xdg_dir("XDG_CACHE_HOME", ".cache", env)
    import platformdirs

    return Path(platformdirs.user_cache_dir(_APP, appauthor=False))


def user_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``platformdirs.user_config_dir("cuda-resolve")``: ``$XDG_CONFIG_HOME/cuda-resolve`` on
    Linux."""
    env = os.environ if environ is None else environ
    if sys.platform == "linux":
        return _xdg_dir("XDG_CONFIG_HOME", ".config", env)
    import platformdirs

    return Path(platformdirs.user_config_dir(_APP, appauthor=False))


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$CUDA_RESOLVE_CONFIG``, else ``user_config_dir()/config.toml``."""
    env = os.environ if environ is None else environ
    override = env.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    return user_config_dir(env) / "config.toml"


def cache_root() -> Path:
    """``$CUDA_RESOLVE_CACHE_DIR``, else the platform's user cache directory for cuda-resolve;
    absolute (``CUDA_RESOLVE_CACHE_DIR=./cache`` is taken from the current folder once, here: a
    relative path written into a ``file://`` URL, a link or a child's command names nothing)."""
    override = os.environ.get("CUDA_RESOLVE_CACHE_DIR")
    if override:
        return Path(os.path.abspath(override))
    return user_cache_dir()


def writable(folder: Path) -> bool:
    """Whether this process can create files in ``folder`` (or, where it does not exist yet,
    in its nearest existing parent). ``os.access`` answers for the file system too: a read-only
    mount is not writable even for root, who ignores permission bits."""
    here = Path(folder)
    while not here.exists():
        if here.parent == here:
            return False
        here = here.parent
    return here.is_dir() and os.access(here, os.W_OK | os.X_OK)


def own_cache_roots() -> tuple[Path, ...]:
    """The cache folders to read, in order: ``cache_root()`` (``$CUDA_RESOLVE_CACHE_DIR`` may
    name a lab's shared, read-only folder), then the user's own cache folder."""
    return tuple(dict.fromkeys((cache_root(), user_cache_dir())))


def writable_cache_root() -> Path | None:
    """The first of :func:`own_cache_roots` this process can write, or None."""
    return next((root for root in own_cache_roots() if writable(root)), None)


def new_log_path(name: str) -> Path:
    """A fresh log file under ``cache_root()/logs``: ``NAME-<UTC time>-<pid>.log``.

    The file is created here, empty and readable by its owner only (0600), in a folder that is
    the owner's only (0700): a log holds pip's and the build's output, which may quote index or
    proxy credentials however carefully it is redacted. Callers open it with ``open(path, "a")``
    or ``"w"``, which keep that mode. A file of that name already there (the same name twice in
    one second) is kept, and made 0600. Where ``cache_root()`` cannot be written (a shared,
    read-only cache folder) the log goes under the user's own cache folder instead."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    failure: OSError | None = None
    for root in own_cache_roots():
        folder = root / "logs"
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            _private(folder, 0o700)
            path = folder / f"{name}-{stamp}-{os.getpid()}.log"
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600))
            if stat.S_IMODE(os.stat(path).st_mode) != 0o600:
                os.chmod(path, 0o600)
        except OSError as exc:
            failure = failure or exc
            continue
        return path
    assert failure is not None
    raise UsageError(
        f"cannot write a log file in {' or '.join(str(r / 'logs') for r in own_cache_roots())}: "
        f"{failure.strerror or failure}",
        hint="set CUDA_RESOLVE_CACHE_DIR (or XDG_CACHE_HOME) to a folder you can write",
    )


def _private(folder: Path, mode: int) -> None:
    """Narrow ``folder``'s permission bits to ``mode`` when it is ours and wider (a logs folder
    made by an older version with the umask's 0755). Never raises: the files in it are 0600."""
    try:
        info = os.stat(folder)
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & ~mode:
            os.chmod(folder, mode)
    except (OSError, AttributeError):
        pass


#: Temporary files older than this whose writer cannot be identified are leftovers.
_STALE_SECONDS = 3600


def file_facts(path: str | Path) -> dict[str, int]:
    """What changes when a file is written or replaced: size, mtime, ctime (no write keeps it),
    inode and device; a recorded hash holds while these do."""
    info = os.stat(path, follow_symlinks=False)
    return {
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "ctime_ns": info.st_ctime_ns,
        "ino": info.st_ino,
        "dev": info.st_dev,
    }


def write_atomic(
    path: Path, data: str | bytes, *, make_parents: bool = True, private: bool = False
) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it into place.

    Readers see the old file or the new one, never half of one; on failure the temporary file
    is removed and ``OSError`` propagates (callers decide whether that is an error). A file the
    user names (``--save-profile``) passes ``make_parents=False``: a mistyped folder is an error.

    Only a regular file is ever replaced: a device, FIFO or socket at ``path`` (or at the end
    of a symlink there) raises :class:`~cuda_resolve._bounded.NotRegularFileError`, so
    ``--save-profile /dev/null`` run as root leaves the device alone. A symlink is written
    through (the file it points at is replaced; the link stays). The replaced file keeps its
    permission bits; a new file gets 0644, or 0600 when ``private`` (it holds credentials).
    """
    with atomic_writer(path, make_parents=make_parents, private=private) as stream:
        stream.write(data.encode("utf-8") if isinstance(data, str) else data)


@contextlib.contextmanager
def atomic_writer(
    path: Path, *, make_parents: bool = True, private: bool = False
) -> Iterator[BinaryIO]:
    """``with atomic_writer(path) as stream: stream.write(...)``: :func:`write_atomic` for data
    that arrives in pieces (a download). The guarantees are the same: what is at ``path`` is
    refused before anything is written unless it is a regular file (or absent), the new file
    appears only when the block ends without an exception (fsynced, renamed into place, with the
    replaced file's mode), and an exception (Ctrl-C included) removes the temporary file.
    Temporary files a killed writer left beside ``path`` are removed on the way in."""
    target = resolve_target(path)
    if make_parents:
        target.parent.mkdir(parents=True, exist_ok=True)
    existing_mode(target)  # a device or FIFO is refused before the first byte is written
    handle, temporary = _new_temporary(target)
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        mode = existing_mode(target)  # again: a long write may see the file appear or change
        os.chmod(temporary, (0o600 if private else 0o644) if mode is None else mode)
        os.replace(temporary, target)
    except BaseException:
        _unlink_quietly(temporary)
        raise


def resolve_target(path: Path) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself, or where its symlinks lead."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def existing_mode(target: Path) -> int | None:
    """The permission bits of the regular file ``target``; ``None`` when there is none yet.

    Raises :class:`~cuda_resolve._bounded.NotRegularFileError` (or ``IsADirectoryError``)
    for anything else: it must not be replaced."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return None
    check_regular(target, info.st_mode)
    return stat.S_IMODE(info.st_mode)


def write_temporary(target: Path, data: str | bytes, *, mode: int) -> Path:
    """A new temporary file beside ``target`` holding ``data``, fsynced, with ``mode`` (for
    writers that replace several files together and rename each themselves)."""
    handle, temporary = _new_temporary(target)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data.encode("utf-8") if isinstance(data, str) else data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
    except BaseException:
        _unlink_quietly(temporary)
        raise
    return temporary


def _new_temporary(target: Path) -> tuple[int, Path]:
    """An open, empty temporary file beside ``target`` (same folder: the rename is atomic).

    Its name (``.NAME.PID.RANDOM.tmp``) names the writing process, so that leftovers of a
    killed run are recognised and removed here, by the next write beside the same file."""
    import tempfile  # only a run that writes pays for it (and for random, which it imports)

    remove_leftovers(target)
    handle, name = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp"
    )
    return handle, Path(name)


def remove_leftovers(target: Path) -> None:
    """Remove temporary files beside ``target`` left by a writer that was killed: those whose
    process is gone, and unattributable ones older than an hour. Never raises."""
    prefix = f".{target.name}."
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
            continue
        owner = entry.name[len(prefix) :].split(".", 1)[0]
        try:
            if owner.isdigit():
                if _alive(int(owner)):
                    continue
            elif now - entry.stat(follow_symlinks=False).st_mtime < _STALE_SECONDS:
                continue
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
        except OSError:
            continue


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process (or a pid we cannot judge): leave its file
    except OSError:
        return True
    return True


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
