"""The wheelhouse folder: publish, look up, list and remove built wheels, safely under concurrency.

Layout (``ROOT`` from :meth:`Wheelhouse.default`)::

    ROOT/index.html                          every wheel: pip --find-links ROOT/index.html
    ROOT/simple/index.html                   PEP 503 project list: pip --index-url file://ROOT/simple
    ROOT/simple/<name>/index.html            one project's wheels, relative links with #sha256=
    ROOT/wheels/<name>/<digest>/<file>.whl   the relabelled wheel (digest: WheelKey.digest)
    ROOT/wheels/<name>/<digest>/entry.json   its key, sha256, size, creation time
    ROOT/locks/<digest>.lock                 one filelock per key; wheelhouse.lock for the pages

An entry is built in ``wheels/<name>/.tmp-<digest>-*/`` (wheel first, ``entry.json`` last) and
renamed into place in one step, so a reader sees a complete entry or none; a publish that is
killed leaves only a ``.tmp-`` folder, which the next publish removes once no live process
holds that key's lock (a folder another host made: once it is also 15 minutes old).

Reuse by coverage: :meth:`Wheelhouse.lookup` wants the exact key; :meth:`Wheelhouse.find_covering`
takes a :class:`KeyQuery` (the key less its arch list) and this machine's GPU capabilities and
returns the best entry whose arch list covers every one of them (:func:`best_covering` is the
same choice over entries already read, with no I/O).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._frozen import frozen
from ..paths import cache_root, write_atomic
from ..versions import ComputeCapability
from . import simple
from .errors import WheelhouseError
from .key import Coverage, KeyQuery, WheelKey, covers

if TYPE_CHECKING:
    import filelock  # imported where a lock is taken: a plan's lookups take none (issue 28)

    from .served import ServedIndex

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "ENTRY_FILE",
    "LEFTOVER_MIN_AGE_S",
    "WHEELHOUSE_ENV",
    "LockReference",
    "StoredWheel",
    "Wheelhouse",
    "best_covering",
    "covering_reason",
    "parse_created",
    "rank_covering",
    "referenced_by_locks",
]

#: Environment variable naming the wheelhouse (wins over the config file's ``wheelhouse``).
WHEELHOUSE_ENV = "CUDA_RESOLVE_WHEELHOUSE"
#: The metadata file that marks an entry complete.
ENTRY_FILE = "entry.json"
#: Seconds to wait for a key's lock: long enough for another process's kaolin build.
DEFAULT_LOCK_TIMEOUT = 3600.0
_PAGES_LOCK_TIMEOUT = 300.0
_FORMAT = 1
_TMP = ".tmp-"
#: The step named when writing the index pages fails (see Wheelhouse._write_error).
_PAGES_STEP = "writing the index pages"
_OLD = ".old-"
#: A leftover folder made on another host is removed only once it is this old (see
#: Wheelhouse._clean_leftovers).
LEFTOVER_MIN_AGE_S = 900.0

# One FileLock object per lock file in this process: filelock is re-entrant per object, so the
# caller's ``with wheelhouse.lock(key)`` and publish()'s own acquisition must share it.
_LOCK_OBJECTS: dict[str, filelock.FileLock] = {}
_LOCK_OBJECTS_GUARD = threading.Lock()


def _file_lock(path: Path) -> filelock.FileLock:
    import filelock

    with _LOCK_OBJECTS_GUARD:
        lock = _LOCK_OBJECTS.get(str(path))
        if lock is None:
            lock = _LOCK_OBJECTS[str(path)] = filelock.FileLock(str(path))
        return lock


def _lock_timeout() -> type[Exception]:
    import filelock

    return filelock.Timeout


def _host_token() -> str:
    """8 hex digits naming this host in temporary folder names (host names may hold ``-``)."""
    import socket  # imported where used: plan and doctor never load it (issue 28)

    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def _retired_name(key: WheelKey) -> str:
    return f"{_OLD}{key.digest}-{_host_token()}-{os.getpid()}-{time.monotonic_ns()}"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_created(text: str) -> datetime | None:
    """An entry's ``created`` as an aware datetime, or None when it does not parse."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _hash_and_sync(path: Path) -> tuple[str, int]:
    """sha256 and size of ``path``, flushed to disk (NFS included) on the way."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
        os.fsync(stream.fileno())
    return digest.hexdigest(), size


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _sync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        handle = os.open(path, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


@frozen
class StoredWheel:
    """One complete wheelhouse entry."""

    key: WheelKey
    path: Path  # the .whl file
    sha256: str
    size: int
    created: str  # ISO 8601 UTC, "2026-12-02T10:11:12Z"
    requires_python: str | None = None
    stripped: tuple[str, ...] = ()  # shared objects strip --strip-debug shrank at publish
    original_name: str = ""  # the wheel file the build wrote
    original_size: int = 0

    @property
    def version(self) -> str:
        """The labelled version the wheel installs as: ``3.0.0+pt2141cu130.sm86``."""
        return self.key.labelled_version

    @property
    def filename(self) -> str:
        return self.path.name

    def to_json(self) -> dict[str, Any]:
        return {
            "package": self.key.package,
            "version": self.version,
            "label": self.key.local_label,
            "torch": self.key.torch,
            "variant": self.key.variant,
            "python": self.key.python_tag,
            "platform": self.key.platform,
            "arch_list": self.key.arch_list,
            "recipe_digest": self.key.recipe_digest,
            "digest": self.key.digest,
            "size": self.size,
            "sha256": self.sha256,
            "created": self.created,
            "path": str(self.path),
            "requires_python": self.requires_python,
            "stripped": list(self.stripped),
            "original_name": self.original_name,
            "original_size": self.original_size,
        }


def _entry_document(entry: StoredWheel) -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "key": entry.key.to_json(),
        "file": entry.path.name,
        "sha256": entry.sha256,
        "size": entry.size,
        "created": entry.created,
        "requires_python": entry.requires_python,
        "stripped": list(entry.stripped),
        "original": {"file": entry.original_name, "size": entry.original_size},
    }


def _removal(folder: Path) -> str:
    """The command that removes an unusable entry folder (a build makes it again)."""
    import shlex

    return f"rm -r {shlex.quote(str(folder))}"


def _entry_problem(origin: Path, where: str, value: object, expected: str) -> WheelhouseError:
    # prune sees no wheel in a damaged entry: removing its folder is what works.
    return WheelhouseError(
        f"{origin}: {where} = {value!r}: {expected}",
        hint=f"remove the entry ({_removal(origin.parent)}); the next build makes it again",
    )


def _parse_entry(path: Path, text: str) -> StoredWheel:
    """The entry recorded in ``path`` (an ``entry.json``); WheelhouseError names the bad field."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _entry_problem(path, "the file", text[:40], f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _entry_problem(path, "the file", type(data).__name__, "expected a JSON object")
    if data.get("format") != _FORMAT:
        raise _entry_problem(
            path,
            "format",
            data.get("format"),
            f"expected {_FORMAT} (written by another cuda-resolve version?)",
        )
    key = WheelKey.from_json(data.get("key"), origin=f"{path}: key")
    name = data.get("file")
    if (
        not isinstance(name, str)
        or not name.endswith(".whl")
        or "/" in name
        or name.startswith(".")
    ):
        raise _entry_problem(path, "file", name, "expected the wheel's file name")
    sha256 = data.get("sha256")
    if (
        not isinstance(sha256, str)
        or len(sha256) != 64
        or any(c not in "0123456789abcdef" for c in sha256)
    ):
        raise _entry_problem(path, "sha256", sha256, "expected 64 lower-case hex digits")
    size = data.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _entry_problem(path, "size", size, "expected a byte count")
    created = data.get("created")
    if not isinstance(created, str) or parse_created(created) is None:
        raise _entry_problem(path, "created", created, "expected an ISO 8601 time")
    requires_python = data.get("requires_python")
    if requires_python is not None and not isinstance(requires_python, str):
        raise _entry_problem(path, "requires_python", requires_python, "expected a string or null")
    stripped = data.get("stripped", [])
    if not isinstance(stripped, list) or not all(isinstance(item, str) for item in stripped):
        raise _entry_problem(path, "stripped", stripped, "expected a list of archive paths")
    original = data.get("original", {})
    original = original if isinstance(original, dict) else {}
    original_name = original.get("file")
    original_size = original.get("size")
    return StoredWheel(
        key=key,
        path=path.parent / name,
        sha256=sha256,
        size=size,
        created=created,
        requires_python=requires_python,
        stripped=tuple(stripped),
        original_name=original_name if isinstance(original_name, str) else "",
        original_size=original_size if isinstance(original_size, int) else 0,
    )


def rank_covering(
    entries: Iterable[StoredWheel], query: KeyQuery, capabilities: Sequence[ComputeCapability]
) -> list[tuple[StoredWheel, Coverage]]:
    """The entries of ``query``'s exact ABI (package, version, torch, variant, Python tag,
    platform, recipe digest) whose arch list covers every capability, best first
    (:attr:`Coverage.rank`; then the entry's digest, so the order is total). Pure: the wheel
    files are not read; :meth:`Wheelhouse.find_covering` verifies the one it returns."""
    ranked: list[tuple[StoredWheel, Coverage]] = []
    for entry in entries:
        if not query.matches(entry.key):
            continue
        coverage = covers(entry.key.arch_list, capabilities)
        if coverage is not None:
            ranked.append((entry, coverage))
    ranked.sort(key=lambda pair: (pair[1].rank, pair[0].key.digest))
    return ranked


def best_covering(
    entries: Iterable[StoredWheel], query: KeyQuery, capabilities: Sequence[ComputeCapability]
) -> tuple[StoredWheel, Coverage] | None:
    """The first of :func:`rank_covering`, or None (none of that ABI covers every GPU, or there
    is no GPU: then only :meth:`Wheelhouse.lookup`'s exact key applies)."""
    ranked = rank_covering(entries, query, capabilities)
    return ranked[0] if ranked else None


def covering_reason(entry: StoredWheel, coverage: Coverage) -> str:
    """``pointnet2_ops 3.0.0+pt2110cu130.sm80.sm89 in the wheelhouse covers every GPU here
    (8.0: sm_80 exact)``."""
    return (
        f"{entry.key.package} {entry.version} in the wheelhouse covers every GPU here "
        f"({coverage.describe()})"
    )


class _LockedFile(Protocol):
    """What a lock says of one file (:class:`cuda_resolve.lock.read.LockedFile`)."""

    @property
    def package(self) -> str: ...
    @property
    def filename(self) -> str: ...
    @property
    def sha256(self) -> str | None: ...


@frozen
class LockReference:
    """Why ``wheelhouse prune`` keeps an entry: ``lock`` names its file."""

    lock: str  # the lock file's path
    package: str
    match: str  # "sha256" (the locked hash is the entry's) or "file name" (no hash, or another one)

    def to_json(self) -> dict[str, str]:
        return {"lock": self.lock, "package": self.package, "match": self.match}


def referenced_by_locks(
    entries: Iterable[StoredWheel], locks: Mapping[str, Iterable[_LockedFile]]
) -> dict[Path, tuple[LockReference, ...]]:
    """The entries some lock names, by wheel path, with each lock that does. A lock names an
    entry by its sha256 or by its file name, wherever its URL points (the served wheelhouse,
    the lab's index server, a mirror, a file path): a wheel of the same name with another hash
    is kept too, since it may be the one a node installs from this wheelhouse's pages. Pure."""
    by_hash: dict[str, list[tuple[str, _LockedFile]]] = {}
    by_name: dict[str, list[tuple[str, _LockedFile]]] = {}
    for lock, files in locks.items():
        for item in files:
            if item.sha256:
                by_hash.setdefault(item.sha256.lower(), []).append((lock, item))
            by_name.setdefault(item.filename, []).append((lock, item))
    kept: dict[Path, tuple[LockReference, ...]] = {}
    for entry in entries:
        found: dict[str, LockReference] = {}
        for lock, item in by_hash.get(entry.sha256, ()):
            found.setdefault(lock, LockReference(lock=lock, package=item.package, match="sha256"))
        for lock, item in by_name.get(entry.filename, ()):
            found.setdefault(
                lock, LockReference(lock=lock, package=item.package, match="file name")
            )
        if found:
            kept[entry.path] = tuple(found[lock] for lock in sorted(found))
    return kept


class Wheelhouse:
    """A wheelhouse folder. Reading needs only read access and takes no lock (a read-only NFS
    share works for lookups and installs); :meth:`lock`, :meth:`publish` and :meth:`remove`
    need write access.

    ``shared``: read-only wheelhouses searched before this one (a lab's folder this process
    cannot write, see :meth:`default`): :meth:`lookup`, :meth:`find_covering`, :meth:`scan` and
    :meth:`entry_dir` see their entries first; everything written goes to ``root``."""

    def __init__(
        self,
        root: Path,
        *,
        origin: str = "given",
        shared: Sequence[Wheelhouse] = (),
        served: ServedIndex | None = None,
    ) -> None:
        self.root = Path(root).expanduser().absolute()
        #: The lab's index server asked before a build (served.py); None: none is configured.
        self.served = served
        #: Where the location came from, for messages: "$CUDA_RESOLVE_WHEELHOUSE", "the config file
        #: ...".
        self.origin = origin
        self.shared = tuple(shared)
        #: Said once to the user where the configured wheelhouse is read-only here.
        self.notes: tuple[str, ...] = tuple(
            f"the wheelhouse {house.root} (from {house.origin}) cannot be written here: its "
            f"wheels are used, new builds go to {self.root}; lookups search both, "
            f"{house.root} first"
            for house in self.shared
        )

    def __repr__(self) -> str:
        shared = f", shared={list(self.shared)!r}" if self.shared else ""
        return f"Wheelhouse({str(self.root)!r}, origin={self.origin!r}{shared})"

    @classmethod
    def default(cls, environ: Mapping[str, str] | None = None) -> Wheelhouse:
        """``$CUDA_RESOLVE_WHEELHOUSE``, else the config file's ``wheelhouse``, else
        ``<cuda-resolve's cache folder>/wheelhouse``; :attr:`served` from
        ``$CUDA_RESOLVE_WHEELHOUSE_URL`` or the config's ``wheelhouse_url``. A named folder this
        process cannot write (a lab's share mounted read-only) still serves its wheels: it is
        searched first, and builds go to the wheelhouse under the user's own cache folder
        (:attr:`notes` says so)."""
        env = os.environ if environ is None else environ
        named = env.get(WHEELHOUSE_ENV, "").strip()
        cache_override = env.get("CUDA_RESOLVE_CACHE_DIR", "").strip()
        base = Path(cache_override) if cache_override else cache_root()
        own = cls(base / "wheelhouse", origin="the default (cuda-resolve's cache folder)")
        if named:
            chosen = cls(Path(named), origin=f"${WHEELHOUSE_ENV}")
        else:
            from ..config import load_config

            config = load_config(environ=env)
            chosen = (
                cls(config.wheelhouse, origin=f"the config file {config.path}")
                if config.wheelhouse is not None
                else own
            )
        from .served import served_index_from

        house = chosen.with_writable_fallback(environ=env)
        house.served = served_index_from(env)
        return house

    def with_writable_fallback(self, *, environ: Mapping[str, str] | None = None) -> Wheelhouse:
        """This wheelhouse where this process can write it; else a wheelhouse under the user's
        own cache folder that searches this one first (this one unchanged when there is none)."""
        from ..paths import user_cache_dir, writable

        if writable(self.root):
            return self
        env = os.environ if environ is None else environ
        cache_override = env.get("CUDA_RESOLVE_CACHE_DIR", "").strip()
        for base in dict.fromkeys(
            [*([Path(cache_override)] if cache_override else []), user_cache_dir(env)]
        ):
            own = (base / "wheelhouse").expanduser().absolute()
            if own != self.root and writable(own):
                return Wheelhouse(
                    own,
                    origin="the user's own cache folder (the configured wheelhouse is "
                    "read-only here)",
                    shared=(self,),
                )
        return self

    def _layers(self) -> tuple[Wheelhouse, ...]:
        """Where entries are searched, in order: the shared wheelhouses, then this one."""
        return (*self.shared, self)

    # -- paths -------------------------------------------------------------------------------

    @property
    def wheels_dir(self) -> Path:
        return self.root / "wheels"

    @property
    def simple_dir(self) -> Path:
        """The PEP 503 index: ``pip install --index-url file://<this>``."""
        return self.root / "simple"

    @property
    def find_links_page(self) -> Path:
        """The flat page listing every wheel: ``pip install --find-links <this>``."""
        return self.root / "index.html"

    def entry_dir(self, key: WheelKey) -> Path:
        """The folder of ``key``'s entry: in the first shared wheelhouse that holds a complete
        one, else here (where :meth:`publish` puts it)."""
        for house in self.shared:
            if (house._own_entry_dir(key) / ENTRY_FILE).is_file():
                return house._own_entry_dir(key)
        return self._own_entry_dir(key)

    def _own_entry_dir(self, key: WheelKey) -> Path:
        return self.wheels_dir / key.canonical_package / key.digest

    def lock_path(self, key: WheelKey) -> Path:
        return self.root / "locks" / f"{key.digest}.lock"

    # -- errors ------------------------------------------------------------------------------

    def _write_error(self, exc: OSError, what: str) -> WheelhouseError:
        if exc.errno in (
            errno.ENOSPC,
            errno.EDQUOT,
        ):  # nothing half-written stays: the caller removed its staging
            try:
                free = f"{shutil.disk_usage(self.root).free / 2**20:.0f} MB free now"
            except OSError:
                free = "its free space could not be read"
            # Pages are each replaced atomically, after the entries: a full disk there leaves the
            # wheels stored and some pages older than them.
            outcome = (
                "the wheels are stored; some index pages were not updated (the next publish or "
                "prune rewrites them)"
                if what == _PAGES_STEP
                else "nothing was left half-written"
            )
            return WheelhouseError(
                f"the disk holding the wheelhouse {self.root} is full ({what}: "
                f"{exc.strerror or exc}); {outcome}",
                hint=f"free space on that disk ({free}), or choose a wheelhouse on another disk: "
                f"set {WHEELHOUSE_ENV}=/path "
                'or `wheelhouse = "/path"` in cuda-resolve\'s config file',
            )
        return WheelhouseError(
            f"cannot write to the wheelhouse {self.root} ({what}): {exc.strerror or exc}"
            + (f": {exc.filename}" if exc.filename else ""),
            hint=f"make the folder writable, or choose another one: set {WHEELHOUSE_ENV}=/path "
            'or `wheelhouse = "/path"` in cuda-resolve\'s config file (its location came from '
            f"{self.origin}); a read-only shared wheelhouse still serves lookups and installs",
        )

    def _read_error(self, exc: OSError, path: Path) -> WheelhouseError:
        return WheelhouseError(
            f"cannot read the wheelhouse {self.root}: {path}: {exc.strerror or exc}",
            hint="check the folder's permissions (and, on NFS, that it is mounted), or set "
            f"{WHEELHOUSE_ENV} to another folder",
        )

    def _check_root(self) -> bool:
        """True when the root exists (a missing wheelhouse is an empty one); error if not a
        folder."""
        # One stat, never is_dir() then exists(): another process may create the root between
        # two looks (a Slurm array's first tasks on a new shared folder, issue 25).
        try:
            mode = os.stat(self.root).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise self._read_error(exc, self.root) from None
        if stat.S_ISDIR(mode):
            return True
        raise WheelhouseError(
            f"the wheelhouse {self.root} is not a folder (its location came from {self.origin})",
            hint=f"point {WHEELHOUSE_ENV} (or the config file's `wheelhouse`) at a folder",
        )

    # -- locks -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _hold(
        self,
        path: Path,
        timeout: float,
        what: str,
        on_wait: Callable[[str], None] | None = None,
    ) -> Iterator[None]:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._write_error(exc, f"creating {path.parent}") from None
        lock = _file_lock(path)

        def owner() -> str:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                return path.with_suffix(".owner").read_text(encoding="utf-8").strip()
            return ""

        try:
            if on_wait is None:
                lock.acquire(timeout=timeout)
            else:
                try:
                    lock.acquire(timeout=0)
                except _lock_timeout():
                    # Another process holds it (a build of the same wheel can take minutes):
                    # say so before waiting, rather than sitting silent.
                    on_wait(owner())
                    lock.acquire(timeout=timeout)
        except _lock_timeout():
            holder = owner()
            raise WheelhouseError(
                f"timed out after {timeout:g} s waiting for the lock {path} ({what})"
                + (f"; last taken by {holder}" if holder else ""),
                hint="another cuda-resolve is building or publishing the same wheel: wait for it "
                "and retry; if none is running (a host that died while holding it on NFS), remove "
                "the lock file",
            ) from None
        except OSError as exc:
            raise self._write_error(exc, f"taking the lock {path}") from None
        import socket  # imported where used: plan and doctor never load it (issue 28)

        try:
            with contextlib.suppress(OSError):
                path.with_suffix(".owner").write_text(
                    f"pid {os.getpid()} on {socket.gethostname()} at {_now()}\n", encoding="utf-8"
                )
            yield
        finally:
            lock.release()

    def lock(
        self,
        key: WheelKey,
        *,
        timeout: float = DEFAULT_LOCK_TIMEOUT,
        on_wait: Callable[[str], None] | None = None,
    ) -> contextlib.AbstractContextManager[None]:
        """Hold ``key``'s lock (a :class:`filelock.FileLock`; re-entrant within a thread).

        Hold it across lookup -> build -> publish, so that concurrent builds of one key (on
        one machine or, where the file system's locks work, across an NFS share) make one wheel.
        ``on_wait`` is called once, with who last took the lock (``pid N on HOST at TIME``, or
        ``""``), when another holder makes this call wait."""
        return self._hold(
            self.lock_path(key), timeout, f"{key.package} {key.labelled_version}", on_wait
        )

    # -- reading -----------------------------------------------------------------------------

    def verify(self, entry: StoredWheel) -> str | None:
        """Why ``entry``'s file cannot be used (missing, size or sha256 differs), or None."""
        try:
            size = entry.path.stat().st_size
        except FileNotFoundError:
            return f"{entry.path} is missing"
        except OSError as exc:
            raise self._read_error(exc, entry.path) from None
        if size != entry.size:
            return f"{entry.path} has {size} bytes, its entry says {entry.size}"
        try:
            actual = _sha256(entry.path)
        except OSError as exc:
            raise self._read_error(exc, entry.path) from None
        if actual != entry.sha256:
            return f"{entry.path} has sha256 {actual}, its entry says {entry.sha256}"
        return None

    def lookup(self, key: WheelKey) -> StoredWheel | None:
        """The complete entry for ``key`` whose file matches its recorded sha256 and size, or None
        (never built, interrupted, tampered with or damaged: the caller builds and publishes).
        The shared wheelhouses are searched first; no lock is taken."""
        for house in self.shared:
            found = house.lookup(key)
            if found is not None:
                return found
        if not self._check_root():
            return None
        path = self._own_entry_dir(key) / ENTRY_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError) as exc:
            if isinstance(exc, OSError):
                raise self._read_error(exc, path) from None
            return None
        try:
            entry = _parse_entry(path, text)
        except WheelhouseError:
            return None
        if not entry.key.same_as(key) or self.verify(entry) is not None:
            return None
        return entry

    def find_covering(
        self, query: KeyQuery, capabilities: Sequence[ComputeCapability]
    ) -> tuple[StoredWheel, str] | None:
        """The best complete entry of ``query``'s ABI whose arch list covers every capability
        (:func:`rank_covering`) and whose file matches its recorded sha256 and size, with a
        one-line reason; None when there is none. A better-ranked entry that fails
        :meth:`verify` is passed over for the next. Never a wheel that misses a GPU or differs
        from ``query`` in any field; None for an empty ``capabilities`` (use :meth:`lookup`)."""
        if not capabilities:
            return None
        for house in self._layers():  # a shared wheelhouse's best before this one's
            if not house._check_root():
                continue
            entries: list[StoredWheel] = []
            house._scan_project(house.wheels_dir / query.canonical_package, entries, [])
            for entry, coverage in rank_covering(entries, query, capabilities):
                if house.verify(entry) is None:
                    return entry, covering_reason(entry, coverage)
        return None

    def scan(self) -> tuple[list[StoredWheel], list[str]]:
        """Every complete entry (file present with its recorded size; sha256 is checked by
        :meth:`lookup` and by pip through the pages' ``#sha256=``), and a note per folder
        that is not one."""
        entries: list[StoredWheel] = []
        problems: list[str] = []
        for house in self.shared:
            found, trouble = house.scan()
            entries.extend(found)
            problems.extend(trouble)
        if not self._check_root() or not self.wheels_dir.is_dir():
            return entries, problems
        try:
            projects = sorted(p for p in self.wheels_dir.iterdir() if p.is_dir())
        except OSError as exc:
            raise self._read_error(exc, Path(exc.filename or self.wheels_dir)) from None
        for project in projects:
            self._scan_project(project, entries, problems)
        entries.sort(
            key=lambda e: (e.key.canonical_package, e.key.version, e.created, e.key.digest)
        )
        return entries, problems

    def _scan_project(self, project: Path, entries: list[StoredWheel], problems: list[str]) -> None:
        """:meth:`scan` for one project folder (``wheels/<name>``; a missing one has no entries)."""
        try:
            if not project.is_dir():
                return
            for folder in sorted(project.iterdir()):
                if folder.name.startswith(".") or not folder.is_dir():
                    continue  # .tmp-/.old- folders: a publish or removal in progress or killed
                problem = self._entry_in(folder, project, entries)
                if problem is not None:  # not a wheel prune or list can see: say how it goes
                    problems.append(f"{problem}; remove it: {_removal(folder)}")
        except OSError as exc:
            raise self._read_error(exc, Path(exc.filename or project)) from None

    def _entry_in(self, folder: Path, project: Path, entries: list[StoredWheel]) -> str | None:
        """Add ``folder``'s entry to ``entries``, or say why it is not usable."""
        path = folder / ENTRY_FILE
        try:
            entry = _parse_entry(path, path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return f"{folder}: no {ENTRY_FILE} (not a complete entry)"
        except UnicodeDecodeError:
            return f"{path}: not UTF-8 text"
        except WheelhouseError as exc:
            return exc.message
        if entry.key.digest != folder.name or entry.key.canonical_package != project.name:
            return f"{path}: its key belongs in {entry.key.canonical_package}/{entry.key.digest}"
        try:
            size = entry.path.stat().st_size
        except FileNotFoundError:
            return f"{entry.path}: missing"
        if size != entry.size:
            return f"{entry.path}: {size} bytes, its entry says {entry.size}"
        entries.append(entry)
        return None

    def entries(self) -> list[StoredWheel]:
        """Every complete entry, by package, version and creation time."""
        return self.scan()[0]

    # -- writing -----------------------------------------------------------------------------

    def publish(self, key: WheelKey, built_wheel: Path, *, strip_debug: bool = True) -> StoredWheel:
        """Copy ``built_wheel`` in as ``key``'s entry (relabelled, debug info stripped) and
        regenerate the pages. Replaces an existing entry for ``key``. Takes ``key``'s lock
        (re-entrant: a caller already holding :meth:`lock` keeps it)."""
        if not built_wheel.is_file():
            raise WheelhouseError(
                f"built wheel {built_wheel} does not exist",
                hint="publish the wheel the build wrote (pip wheel's output folder)",
            )
        self._check_root()
        with self.lock(key):
            self._clean_leftovers(own=key.digest)
            project_dir = self.wheels_dir / key.canonical_package
            final = self._own_entry_dir(key)
            try:
                staging = self._staging(project_dir, key)
            except OSError as exc:
                raise self._write_error(exc, f"creating {project_dir}") from None
            retired: Path | None = None
            try:
                from .rewrite import find_strip, rewrite_wheel  # storing only (issue 28)

                written = rewrite_wheel(
                    built_wheel, key, staging, strip=find_strip() if strip_debug else None
                )
                wheel = staging / written.filename
                sha256, size = _hash_and_sync(wheel)
                entry = StoredWheel(
                    key=key,
                    path=final / written.filename,
                    sha256=sha256,
                    size=size,
                    created=_now(),
                    requires_python=written.requires_python,
                    stripped=written.stripped,
                    original_name=written.original_name,
                    original_size=written.original_size,
                )
                document = json.dumps(_entry_document(entry), indent=2) + "\n"
                with open(staging / ENTRY_FILE, "w", encoding="utf-8") as stream:
                    stream.write(document)
                    stream.flush()
                    os.fsync(stream.fileno())
                _sync_dir(staging)
                if final.exists():
                    retired = project_dir / _retired_name(key)
                    os.replace(final, retired)
                os.replace(staging, final)
                _sync_dir(project_dir)
            except OSError as exc:
                shutil.rmtree(staging, ignore_errors=True)
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    # Another machine published this key between our check and our rename
                    # (an NFS mount whose locks are local to each client): keep its entry.
                    existing = self.lookup(key)
                    if existing is not None:
                        self.refresh_pages()
                        return existing
                raise self._write_error(exc, f"publishing {built_wheel.name}") from None
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            if retired is not None:
                shutil.rmtree(retired, ignore_errors=True)
            self.refresh_pages()
            return entry

    @staticmethod
    def _staging(project_dir: Path, key: WheelKey) -> Path:
        """A new staging folder in ``project_dir``, made if missing. Another process removing
        the project's last entry takes the empty folder away (``rmdir``) between the two steps:
        then it is made again."""
        import tempfile  # storing only: plan's start-up imports none (issue 28)

        tries = 3
        while True:
            project_dir.mkdir(parents=True, exist_ok=True)
            try:
                return Path(
                    tempfile.mkdtemp(prefix=f"{_TMP}{key.digest}-{_host_token()}-", dir=project_dir)
                )
            except FileNotFoundError:
                tries -= 1
                if not tries:
                    raise

    def remove(self, entry: StoredWheel) -> None:
        """Remove ``entry`` (it disappears in one rename, then its files go) and refresh the
        pages."""
        key = entry.key
        shared = next(
            (house for house in self.shared if entry.path.is_relative_to(house.root)), None
        )
        if shared is not None:
            raise WheelhouseError(
                f"{entry.path} is in the shared wheelhouse {shared.root}, which cannot be "
                "written here",
                hint="ask whoever maintains the shared wheelhouse to remove it",
            )
        with self.lock(key):
            final = self._own_entry_dir(key)
            if final.is_dir():
                retired = final.parent / _retired_name(key)
                try:
                    os.replace(final, retired)
                except OSError as exc:
                    raise self._write_error(exc, f"removing {final}") from None
                shutil.rmtree(retired, ignore_errors=True)
                with contextlib.suppress(OSError):
                    final.parent.rmdir()  # only when it was the project's last entry
            self.refresh_pages()

    def refresh_pages(self) -> None:
        """Regenerate ``index.html`` and ``simple/`` from the complete entries, under the
        wheelhouse-wide lock, each page replaced atomically. Where two entries have one file
        name (same ABI label, different recipe digest) the newest is listed."""
        with self._hold(
            self.root / "locks" / "wheelhouse.lock", _PAGES_LOCK_TIMEOUT, "the index pages"
        ):
            newest: dict[str, StoredWheel] = {}
            own = Wheelhouse(
                self.root, origin=self.origin
            )  # the pages list this folder's wheels only
            for entry in own.entries():
                current = newest.get(entry.filename)
                if current is None or (entry.created, entry.key.digest) > (
                    current.created,
                    current.key.digest,
                ):
                    newest[entry.filename] = entry
            links = [
                simple.PageLink(
                    project=entry.key.canonical_package,
                    filename=entry.filename,
                    path=entry.path.relative_to(self.root).as_posix(),
                    sha256=entry.sha256,
                    requires_python=entry.requires_python,
                )
                for entry in newest.values()
            ]
            wanted = simple.pages(links)
            try:
                for relative, text in wanted.items():
                    target = self.root / relative
                    with contextlib.suppress(OSError, UnicodeDecodeError):
                        if target.read_text(encoding="utf-8") == text:
                            continue
                    write_atomic(target, text)
                for relative in simple.page_paths(self.root) - set(wanted):
                    page = self.root / relative
                    page.unlink(missing_ok=True)
                    with contextlib.suppress(OSError):
                        page.parent.rmdir()
            except OSError as exc:
                raise self._write_error(exc, _PAGES_STEP) from None

    def _clean_leftovers(self, *, own: str) -> None:
        """Remove ``.tmp-``/``.old-`` folders that killed publishes and removals left.

        A folder made on this host goes at once when it is ``own``'s (the caller holds that
        lock) or when nobody holds its key's lock. One made on another host must also be
        :data:`LEFTOVER_MIN_AGE_S` old: where NFS locks are local to each client, a live
        publish over there (seconds long) does not show as holding its lock here."""
        if not self.wheels_dir.is_dir():
            return
        try:
            projects = [p for p in self.wheels_dir.iterdir() if p.is_dir()]
        except OSError:
            return
        here = _host_token()
        for project in projects:
            try:
                leftovers = [c for c in project.iterdir() if c.name.startswith((_TMP, _OLD))]
            except OSError:
                continue
            for leftover in leftovers:
                parts = leftover.name.split("-")
                digest, host = (parts[1], parts[2]) if len(parts) >= 4 else ("", "")
                if host != here:
                    try:
                        age = time.time() - leftover.stat().st_mtime
                    except OSError:
                        continue
                    if age < LEFTOVER_MIN_AGE_S:
                        continue
                if digest == own:
                    shutil.rmtree(leftover, ignore_errors=True)
                    continue
                lock = _file_lock(self.root / "locks" / f"{digest or 'unnamed'}.lock")
                try:
                    lock.acquire(timeout=0)
                except (_lock_timeout(), OSError):
                    continue  # a live publish of that key
                try:
                    shutil.rmtree(leftover, ignore_errors=True)
                finally:
                    lock.release()
