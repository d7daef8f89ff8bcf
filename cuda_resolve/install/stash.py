"""An install that can really be undone: the target's files are hard-linked aside before pip runs.

pip uninstalls by renaming files away and writes new files by unlink-then-write or
write-then-rename, so a hard link taken *before* pip runs keeps every old file's content even
after pip has deleted or replaced the path (pip's own ``StashedUninstallPathSet`` works the same
way, by rename). Nothing is copied: torch's gigabytes cost one directory entry each.

Public API (all in this module; the on-disk record is :mod:`.journal`)::

    with target_lock(python, default_lock_dir(), timeout=60.0, environ=env) as prefix:
        stash = Stash.begin(python, environ=env, journal_dir=default_journal_dir())
        try:
            ...                              # every pip call that changes the target
        except BaseException:
            report = stash.restore()         # RestoreReport(restored=..., not_restored=...)
            raise
        stash.commit()                       # success: the stash and its journal are removed

    for journal in pending(default_journal_dir()):    # a run that was killed (SIGKILL, power cut)
        report = recover(journal, environ=env)        # what `cuda-resolve undo --last` does

- :meth:`Stash.begin` lists the target's distributions (one script in the target: see
  :func:`~.journal.read_state`), writes the journal, then links every file they own into
  ``<prefix>/.cuda-resolve-stash-<id>/`` (same filesystem; paths mirrored relative to the
  prefix), and writes the journal again marked ready. ``__pycache__`` files are not kept (Python
  remakes them). A file that cannot be linked (another filesystem, a refusal) or lies outside the
  prefix is not kept either: the journal names it with its identity, and the restore reports it
  if it changed. No file of the target is ever copied or moved.
- :meth:`Stash.restore` reads the target again and compares every old file with its stashed link
  by inode, so it also mends a pip that was killed half-way: it deletes the files the new
  distributions' ``RECORD`` lists (inside the prefix only, never an old file's inode) and their
  byte-code (``.pyc``, and ``.pyc.<digits>`` a killed compile half wrote), removes new metadata
  folders, pip's leftover ``~name`` entries, what is directly in a site folder that was not there
  at begin (a package a killed pip wrote before its metadata) and the folders that became
  empty, then links every changed old file back (link to a temporary name, then rename).
  Afterwards ``pip freeze --all`` of the target is what it was. The stash and journal are then
  removed, unless a file could not be put back (an ``OSError``): both are kept for a retry and
  :attr:`RestoreReport.kept` names the folder. A journal whose stash folder is gone changes
  nothing (it is reported and removed): without the old files, removing the new ones would only
  break the target. Legacy editables (``.egg-link``) are not touched; one that changed is
  reported. Restoring puts back the before-state, undoing also whatever else changed the target
  since :meth:`Stash.begin`: hold :func:`target_lock` throughout.
- Every program started while the stash is open (pip) is recorded beside the journal
  (:mod:`cuda_resolve._lifeline`); :func:`recover` refuses, changing nothing, while one of them or
  a process of its session still runs (pip dies with its parent; what pip started may not).
- :func:`target_lock` serialises cuda-pip runs on one target (keyed by its resolved
  ``sys.prefix``; a ``filelock`` lock the system releases when its process dies). It yields the
  prefix. Timing out is an :class:`~cuda_resolve.errors.InstallError` naming the target.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import socket
import stat
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import filelock
from packaging.utils import canonicalize_name

from .._bounded import read_text
from .._bounded import run as bounded_run
from .._frozen import frozen, replace
from .._lifeline import recording, running
from .._wrap import counted
from ..errors import InstallError
from ..paths import cache_root, write_atomic
from .journal import (
    Distribution,
    Journal,
    State,
    default_journal_dir,
    pending,
    read_state,
    write_journal,
)

__all__ = [
    "STASH_PREFIX",
    "RestoreReport",
    "Stash",
    "default_journal_dir",
    "default_lock_dir",
    "discard",
    "pending",
    "recover",
    "target_lock",
    "target_prefix",
    "waiting_for",
]

#: The stash folder's name in the target's prefix: ``.cuda-resolve-stash-<journal id>``.
STASH_PREFIX = ".cuda-resolve-stash-"
#: Byte-code, finished (``.pyc``) or half-written by a killed compile (``.pyc.<digits>``).
_BYTECODE = re.compile(r"\.pyc(\.[0-9]+)?$")
_DISCARDED = ".discarded"


@frozen
class RestoreReport:
    """What a restore put back, and what is still changed (each with why)."""

    restored: tuple[
        str, ...
    ] = ()  # "torch 1.0 put back (the install had put 2.0 in its place)", "foo 1.0 removed (...)"
    not_restored: tuple[str, ...] = ()
    kept: str | None = None  # the stash folder, kept with its journal for a retry (`undo --last`)

    @property
    def complete(self) -> bool:
        return not self.not_restored

    def to_json(self) -> dict[str, Any]:
        return {
            "restored": list(self.restored),
            "not_restored": list(self.not_restored),
            "kept": self.kept,
        }


class Stash:
    """The files of one target, kept by hard links while an install changes it (see the module)."""

    __slots__ = ("_environ", "_finished", "_journal", "_recording")

    def __init__(self, journal: Journal, *, environ: Mapping[str, str]) -> None:
        self._journal = journal
        self._environ = dict(environ)
        self._finished = False
        self._recording = contextlib.ExitStack()

    @classmethod
    def begin(
        cls,
        python: str,
        *,
        environ: Mapping[str, str],
        journal_dir: Path,
        only: Collection[str] | None = None,
    ) -> Stash:
        """List the target's distributions, write the journal, link their files into the stash.

        Call it before the first pip run that changes the target, holding :func:`target_lock`.
        ``only``: the names the run can replace or remove (a ``--no-deps`` install of named
        files, an uninstall); the other distributions' files are not linked but kept in the
        journal by identity, so a change to one (a file two distributions share) is reported by
        the restore, never hidden. Linking each file of a big environment (torch's: 20,000)
        costs most of a small install. Raises :class:`InstallError` when the target cannot be
        read or its prefix or the journal folder cannot be written; a failure or Ctrl-C while
        linking leaves nothing behind."""
        before = read_state(python, environ)
        _remove_discarded(before.prefix)
        ident = (
            f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}-{secrets.token_hex(4)}"
        )
        journal = Journal(
            path=journal_dir / f"{ident}.json",
            id=ident,
            python=python,
            created=time.time(),
            pid=os.getpid(),
            stash=os.path.join(before.prefix, STASH_PREFIX + ident),
            before=before,
        )
        try:
            write_journal(journal)
        except OSError as exc:
            raise InstallError(
                f"cannot write the install journal {journal.path}: {exc.strerror or exc}",
                hint=f"make {journal_dir} writable (or set CUDA_RESOLVE_CACHE_DIR)",
            ) from None
        try:
            os.mkdir(journal.stash)
        except OSError as exc:
            _unlink(journal.path)
            raise InstallError(
                f"cannot make the stash folder {journal.stash}: {exc.strerror or exc}",
                hint=f"the install could not be undone: make {before.prefix} writable (pip "
                "needs that too)",
            ) from None
        try:
            unstashed = _link_all(before, journal.stash, only)
            journal = replace(journal, unstashed=tuple(unstashed), ready=True)
            write_journal(journal)
        except BaseException as exc:
            _remove_tree(journal.stash)  # nothing has changed in the target yet
            _unlink(journal.path)
            if isinstance(exc, OSError):
                raise InstallError(
                    f"cannot stash the files of {python} in {journal.stash}: {exc.strerror or exc}",
                    hint=f"the install could not be undone: make {before.prefix} and "
                    f"{journal_dir} writable",
                ) from None
            raise
        stash = cls(journal, environ=environ)
        # Every program started from now on (pip) is written beside the journal: an undo after
        # we were killed waits for any of them that still runs.
        stash._recording.enter_context(recording(journal.processes))
        return stash

    @property
    def journal(self) -> Journal:
        return self._journal

    @property
    def python(self) -> str:
        return self._journal.python

    @property
    def folder(self) -> Path:
        """The stash folder (inside the target's prefix)."""
        return Path(self._journal.stash)

    def restore(self) -> RestoreReport:
        """Put the target back as :meth:`begin` found it (see the module); then remove the stash
        and the journal unless a file could not be put back."""
        journal = self._journal
        self._recording.close()
        if self._finished:
            return RestoreReport()
        if not journal.ready:  # begin() never returned: pip never ran, nothing changed
            self._discard()
            return RestoreReport()
        if not os.path.isdir(journal.stash):  # never guess: without the old files, change nothing
            self._discard()
            return RestoreReport(
                not_restored=(
                    f"the stash {journal.stash} is gone: nothing was changed, the "
                    "journal was removed",
                )
            )
        now = read_state(
            journal.python, self._environ, sites=journal.before.sites, prefix=journal.prefix
        )
        restored, not_restored, failed = _Restore(journal, now).run()
        if failed:
            return RestoreReport(
                restored=tuple(restored), not_restored=tuple(not_restored), kept=journal.stash
            )
        self._discard()
        return RestoreReport(restored=tuple(restored), not_restored=tuple(not_restored))

    def commit(self) -> None:
        """The install succeeded: remove the stash folder and the journal (never raises)."""
        self._discard()

    def _discard(self) -> None:
        self._recording.close()
        if not self._finished:
            discard(self._journal)
            self._finished = True


def recover(journal: Journal, *, environ: Mapping[str, str] | None = None) -> RestoreReport:
    """Restore the target of a journal that a killed run left (see :func:`~.journal.pending`);
    hold :func:`target_lock` on ``journal.python`` while doing it. While a program that install
    started still runs (pip went on, or a process pip started), nothing is changed: an
    :class:`InstallError` names what to wait for."""
    still = running(journal.processes)
    if still:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(journal.created))
        names = ", ".join(str(member) for member in still)
        raise InstallError(
            f"the install into {journal.prefix} started at {when} (cuda-pip pid {journal.pid}) "
            f"still has {names} running, which may still write to it: nothing was undone",
            hint="wait until they have ended (or end them: kill "
            + " ".join(str(m.pid) for m in still)
            + "), then run `cuda-resolve undo --last` (or the install) again",
        )
    return Stash(journal, environ=os.environ if environ is None else environ).restore()


def discard(journal: Journal) -> None:
    """Forget a journal without restoring. The stash folder is renamed ``*.discarded`` first (a
    journal is never left naming half a stash), then the journal and the folder are removed; a
    ``.discarded`` folder an interrupted discard left is removed by the next :meth:`Stash.begin`."""
    retired = journal.stash + _DISCARDED
    with contextlib.suppress(OSError):
        os.rename(journal.stash, retired)
    _unlink(journal.path)
    _unlink(journal.processes)
    _remove_tree(retired)


# -- the lock -------------------------------------------------------------------------------------


def default_lock_dir() -> Path:
    """``<cache root>/locks``."""
    return cache_root() / "locks"


def target_prefix(python: str, environ: Mapping[str, str] | None = None) -> str:
    """The target's ``sys.prefix`` with links resolved; :class:`InstallError` if it does not run."""
    done = bounded_run(
        [python, "-c", "import os, sys; print(os.path.realpath(sys.prefix))"],
        timeout=60,
        env=environ,
        cwd="/",
    )
    lines = done.stdout.strip().splitlines() if done is not None and done.ok else []
    if not lines or not os.path.isabs(lines[-1]):
        raise InstallError(
            f"{python} could not tell its prefix",
            hint="check that the target interpreter runs (pass --python PATH)",
        )
    return lines[-1]


def waiting_for(python: str, holder: str) -> str:
    """What a command says while another one holds ``python``'s environment lock."""
    return f"waiting for another install into {python} to finish" + (
        f" ({holder})" if holder else ""
    )


@contextlib.contextmanager
def target_lock(
    python: str,
    lock_dir: Path,
    *,
    timeout: float,
    environ: Mapping[str, str] | None = None,
    prefix: str | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Hold the lock of ``python``'s environment (one cuda-pip install at a time); yields its
    resolved prefix (``prefix``: already known, else asked of ``python``). Waiting more than
    ``timeout`` seconds is an :class:`InstallError`. ``on_wait`` is called once, with who took
    the lock (``pid N on HOST at TIME for PYTHON``, or ``""``), when another holder makes this
    call wait, so the caller can say so rather than sit silent."""
    prefix = prefix or target_prefix(python, environ)
    path = lock_dir / f"target-{hashlib.sha256(prefix.encode()).hexdigest()[:16]}.lock"
    owner = path.with_suffix(".owner")

    def holder() -> str:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            return read_text(owner, limit=4096).strip()
        return ""

    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(path))
        if on_wait is None:
            lock.acquire(timeout=timeout)
        else:
            try:
                lock.acquire(timeout=0)
            except filelock.Timeout:
                on_wait(holder())
                lock.acquire(timeout=timeout)
    except filelock.Timeout:
        taken_by = holder()
        raise InstallError(
            f"{prefix} (the environment of {python}) is locked: {path} was still held after "
            f"{timeout:g} s" + (f" (taken by {taken_by})" if taken_by else ""),
            hint="another cuda-pip is installing into this environment: wait for it to finish and "
            "retry (the lock is released when that process ends)",
        ) from None
    except OSError as exc:
        raise InstallError(
            f"cannot take the lock {path}: {exc.strerror or exc}",
            hint=f"make {lock_dir} writable (or set CUDA_RESOLVE_CACHE_DIR)",
        ) from None
    try:
        with contextlib.suppress(OSError):
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            write_atomic(
                owner, f"pid {os.getpid()} on {socket.gethostname()} at {stamp} for {python}\n"
            )
        yield prefix
    finally:
        lock.release()


# -- stashing -------------------------------------------------------------------------------------


def _link_all(
    before: State, stash: str, only: Collection[str] | None = None
) -> list[tuple[str, str, str]]:
    """Link every file of ``before`` (of the distributions named in ``only``, when given) into
    ``stash``; the files kept out, with why and identity."""
    made: set[str] = set()
    seen: set[str] = set()
    left: list[tuple[str, str, str]] = []
    replaceable = None if only is None else {canonicalize_name(name) for name in only}
    for dist in before.distributions:
        kept_out = replaceable is not None and canonicalize_name(dist.name) not in replaceable
        for path in dist.files:
            if path in seen or _in_pycache(path):
                continue
            seen.add(path)
            info = _lstat(path)
            if info is None or stat.S_ISDIR(info.st_mode):
                continue  # listed but not there (a .pyc never compiled): nothing to keep
            if kept_out:
                left.append(
                    (
                        path,
                        "was not stashed: this run was to change only "
                        + ", ".join(sorted(only or ())),
                        _identity(info),
                    )
                )
                continue
            if not _inside(path, before.prefix):
                left.append((path, f"outside the prefix {before.prefix}", _identity(info)))
                continue
            target = _mirror(path, before.prefix, stash)
            parent = os.path.dirname(target)
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            try:
                os.link(path, target, follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError as exc:
                left.append(
                    (path, f"could not be hard-linked: {exc.strerror or exc}", _identity(info))
                )
    return left


# -- restoring ------------------------------------------------------------------------------------


class _Restore:
    """One restore: compare, remove what the install added, link back what it changed."""

    def __init__(self, journal: Journal, now: State) -> None:
        self.journal = journal
        self.before = journal.before
        self.now = now
        self.prefix = journal.prefix
        self.unstashed = {path: identity for path, _why, identity in journal.unstashed}
        self.why = {path: why for path, why, _identity in journal.unstashed}
        self.emptied: set[str] = set()
        self.restored: list[str] = []
        self.not_restored: list[str] = []
        self.failed = False

    def stashed(self, path: str) -> str:
        return _mirror(path, self.prefix, self.journal.stash)

    def same(self, path: str) -> bool:
        """``path`` is the very file that was there at begin (the stash holds its inode)."""
        if path in self.unstashed:
            return _identity(_lstat(path)) == self.unstashed[path]
        if not _inside(path, self.prefix):
            return False
        here, kept = _lstat(path), _lstat(self.stashed(path))
        return (
            here is not None
            and kept is not None
            and (here.st_dev, here.st_ino) == (kept.st_dev, kept.st_ino)
        )

    def run(self) -> tuple[list[str], list[str], bool]:
        changed = self._changed()
        before_metas = {d.meta for d in self.before.distributions}
        now_metas = {d.meta for d in self.now.distributions}
        foreign = [
            d for d in self.now.distributions if d.meta not in before_metas or d.meta in changed
        ]
        replaced = {
            path for paths in changed.values() for path in paths
        }  # swapped in one rename each
        for dist in foreign:
            self._remove(dist, new=dist.meta not in before_metas, keep=replaced)
        put_back = {meta: self._link_back(paths) for meta, paths in changed.items()}
        self._remove_pip_leftovers()
        self._prune()
        self._remove_unlisted()  # after the prune: only what no removal accounted for
        self._report(changed, put_back, foreign, now_metas)
        self._check_egg_links()
        return self.restored, self.not_restored, self.failed

    def _changed(self) -> dict[str, list[str]]:
        """meta folder -> the old files to link back, for every old distribution that changed."""
        changed: dict[str, list[str]] = {}
        for dist in self.before.distributions:
            back: list[str] = []
            lost: list[str] = []
            for path in dist.files:
                if _in_pycache(path) or self.same(path):
                    continue
                if path in self.unstashed:
                    lost.append(path)
                elif _lstat(self.stashed(path)) is not None:
                    back.append(path)
            if back:
                changed[dist.meta] = back
            if lost:
                self.not_restored.append(
                    f"{_label(dist)}: {counted(len(lost), 'file')} changed and could not be put "
                    f"back: {lost[0]} {self.why[lost[0]]}; reinstall {dist.name}=={dist.version}"
                )
        return changed

    def _remove(self, dist: Distribution, *, new: bool, keep: set[str]) -> None:
        outside: list[str] = []
        for path in dist.files:
            if not _inside(path, self.prefix) or _inside(path, self.journal.stash):
                if _lstat(path) is not None and not self.same(path):
                    outside.append(path)
                continue
            if self.same(path):
                continue  # an old file the install left alone
            if path not in keep:
                self._delete(path)
            if path.endswith(".py"):
                self._delete_bytecode(path)
        if new:
            if os.path.isdir(dist.meta) and not os.path.islink(dist.meta):
                shutil.rmtree(dist.meta, ignore_errors=True)
            else:
                self._delete(dist.meta)
            self.emptied.add(os.path.dirname(dist.meta))
            if not dist.record:
                self.not_restored.append(
                    f"{dist.name} {dist.version}: its metadata had no RECORD (pip stopped "
                    f"half-way?): {dist.meta} was removed, but files it had written may remain"
                )
        if outside:
            self.not_restored.append(
                f"{_label(dist)}: left {counted(len(outside), 'file')} outside the prefix "
                f"{self.prefix} in place, such as {outside[0]}"
            )

    def _delete(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.not_restored.append(f"{path}: could not be removed: {exc.strerror or exc}")
            self.failed = True
            return
        self.emptied.add(os.path.dirname(path))

    def _delete_bytecode(self, path: str) -> None:
        """The byte-code of ``path``, and the half-written ``*.pyc.NNN`` a pip killed while
        compiling leaves (importlib writes under a temporary name, then renames)."""
        folder = os.path.join(os.path.dirname(path), "__pycache__")
        stem = os.path.basename(path)[:-3] + "."
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.name.startswith(stem) and _BYTECODE.search(entry.name):
                    self._delete(entry.path)

    def _link_back(self, paths: list[str]) -> list[str]:
        """Link each old file back in place; returns those that failed (and notes why)."""
        failed: list[str] = []
        for path in paths:
            try:
                _place(self.stashed(path), path)
            except OSError as exc:
                failed.append(path)
                self.not_restored.append(f"{path}: could not be put back: {exc.strerror or exc}")
                self.failed = True
        return failed

    def _remove_pip_leftovers(self) -> None:
        """pip's half-done ``~name`` folders (a pip that was killed) that were not there before."""
        for site in self.before.sites:
            with contextlib.suppress(OSError):
                for entry in os.scandir(site):
                    if entry.name.startswith("~") and entry.path not in self.before.tilde:
                        if entry.is_dir(follow_symlinks=False):
                            shutil.rmtree(entry.path, ignore_errors=True)
                        else:
                            self._delete(entry.path)

    def _remove_unlisted(self) -> None:
        """What is directly in a site folder now and was not at begin, and no RECORD listed: a
        package a killed pip had written before its metadata (a wheel's ``.dist-info`` comes
        last), or its byte-code. Restoring the before-state removes it; it is reported."""
        for site, names in self.before.entries:
            known = set(names)
            with contextlib.suppress(OSError):
                for entry in sorted(os.scandir(site), key=lambda e: e.name):
                    if entry.name in known or entry.name.startswith("~"):
                        continue
                    if _inside(self.journal.stash, entry.path):
                        continue
                    if not entry.is_dir(follow_symlinks=False):
                        self._delete(entry.path)  # says so when it cannot
                    elif not _remove_tree_fully(entry.path):
                        self.not_restored.append(f"{entry.path}: could not be removed")
                        self.failed = True
                    if _lstat(entry.path) is None:
                        self.restored.append(
                            f"{entry.path} removed (written since the install began; "
                            "no installed package lists it)"
                        )

    def _prune(self) -> None:
        """Remove the folders that the removals left empty (never a site folder, its parents, or
        a folder that was directly in the prefix before, such as ``include/``)."""
        keep = {
            self.prefix,
            *self.before.sites,
            *(os.path.join(self.prefix, name) for name in self.before.top),
        }
        for site in self.before.sites:
            parent = site
            while _inside(parent, self.prefix) and parent != self.prefix:
                parent = os.path.dirname(parent)
                keep.add(parent)
        for folder in sorted(self.emptied, key=len, reverse=True):
            while (
                _inside(folder, self.prefix)
                and folder not in keep
                and not _inside(folder, self.journal.stash)
            ):
                try:
                    os.rmdir(folder)
                except OSError:
                    break
                folder = os.path.dirname(folder)

    def _report(
        self,
        changed: Mapping[str, list[str]],
        failed: Mapping[str, list[str]],
        foreign: list[Distribution],
        now_metas: set[str],
    ) -> None:
        replaced_by: dict[str, list[Distribution]] = {}
        for dist in foreign:
            replaced_by.setdefault(canonicalize_name(dist.name), []).append(dist)
        for dist in self.before.distributions:
            if dist.meta not in changed:
                continue
            newer = [
                d
                for d in replaced_by.pop(canonicalize_name(dist.name), [])
                if d.meta != dist.meta or d.version != dist.version
            ]
            if failed[dist.meta]:
                self.not_restored.append(
                    f"{_label(dist)}: {counted(len(failed[dist.meta]), 'file')} could not be put "
                    f"back; reinstall {dist.name}=={dist.version}"
                )
            elif newer:
                self.restored.append(
                    f"{_label(dist)} put back (the install had put {newer[0].version} in its place)"
                )
            elif dist.meta not in now_metas:
                self.restored.append(f"{_label(dist)} put back (the install had removed it)")
            else:
                self.restored.append(
                    f"{_label(dist)} put back ({counted(len(changed[dist.meta]), 'file')} changed)"
                )
        for dists in replaced_by.values():
            for dist in dists:
                if dist.meta not in changed:
                    self.restored.append(f"{_label(dist)} removed (the install had added it)")

    def _check_egg_links(self) -> None:
        now = dict(self.now.egg_links)
        for path, text in self.before.egg_links:
            if now.get(path) != text:
                name = os.path.basename(path).removesuffix(".egg-link")
                source = text.splitlines()[0] if text.strip() else "its source folder"
                self.not_restored.append(
                    f"{name} (an editable install, {path}) was changed and is not restored by "
                    f"cuda-pip: pip install -e {source}"
                )


def _place(source: str, path: str) -> None:
    """Make ``path`` a hard link of ``source``, replacing whatever is there in one rename."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.cuda-resolve-{os.getpid()}.tmp"
    _unlink(temporary)
    os.link(source, temporary, follow_symlinks=False)
    try:
        os.replace(temporary, path)
    except IsADirectoryError:
        shutil.rmtree(path)
        os.replace(temporary, path)
    except BaseException:
        _unlink(temporary)
        raise


# -- small helpers --------------------------------------------------------------------------------


def _label(dist: Distribution) -> str:
    return f"{dist.name} {dist.version}"


def _mirror(path: str, prefix: str, stash: str) -> str:
    """Where the stash keeps ``path`` (normalised, inside ``prefix``): the same path under
    ``stash``."""
    return stash + path[len(prefix.rstrip(os.sep)) :]


def _in_pycache(path: str) -> bool:
    return f"{os.sep}__pycache__{os.sep}" in path


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _identity(info: os.stat_result | None) -> str:
    return "" if info is None else f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"


def _unlink(path: str | Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _remove_discarded(prefix: str) -> None:
    with contextlib.suppress(OSError):
        for entry in os.scandir(prefix):
            if entry.name.startswith(STASH_PREFIX) and entry.name.endswith(_DISCARDED):
                _remove_tree(entry.path)


def _remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _remove_tree_fully(path: str) -> bool:
    shutil.rmtree(path, ignore_errors=True)
    return _lstat(path) is None
