"""``sync``: what a profile of a lock installs here, the drift from it, and installing exactly it.

No resolution happens here: the lock names every file. An installed distribution with the
locked name, version and local label counts as satisfied (its files' hashes are not re-read).
Every file to install is fetched (through the configured mirror, by rewriting the locked URL's
prefix) and its sha256 and size checked before anything is installed; a file already in the cache
was checked when it came and is not hashed again while its stamp (size, mtime, ctime, inode
recorded then) still holds, so a cached sync opens no connection; then the executor runs
one pip step, in hash-checking mode with ``--no-deps --no-index`` over those files, with its
stash and undo: all or nothing. ``--exact`` then removes what the lock does not name, in a
second all-or-nothing step of its own (never pip, setuptools, wheel or cuda-resolve).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..environment import Environment
from ..errors import InstallError, LockError
from ..reporting import NullReporter, Reporter
from .select import Wanted

if (
    TYPE_CHECKING
):  # `sync --check` imports none of the acting layers: it must answer within a second
    from ..net.client import HttpClient
    from ..plan import Plan

__all__ = [
    "KEEP",
    "Drift",
    "cache_path",
    "cached_files",
    "drift",
    "fetch_all",
    "remove_extras",
    "sync_plan",
]

#: Never removed by ``--exact``: the tools that install.
KEEP = frozenset({"pip", "setuptools", "wheel", "cuda-resolve"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Drift:
    name: str
    state: str  # "ok", "missing", "other version", "other build", "not locked"
    locked: str | None
    installed: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "locked": self.locked,
            "installed": self.installed,
        }


def _same(installed: str, locked: str) -> bool:
    try:
        return Version(installed) == Version(locked)
    except InvalidVersion:
        return installed == locked


def drift(wanted: Sequence[Wanted], installed: Mapping[str, str], *, exact: bool) -> list[Drift]:
    """Per locked package: ok, missing, other version or other build (same version, another
    local label); with ``exact`` also what is installed and not locked."""
    found = []
    for item in wanted:
        have = installed.get(item.name)
        if have is None:
            state = "missing"
        elif _same(have, item.version):
            state = "ok"
        elif have.split("+", 1)[0] == item.version.split("+", 1)[0]:
            state = "other build"
        else:
            state = "other version"
        found.append(Drift(name=item.name, state=state, locked=item.version, installed=have))
    if exact:
        names = {w.name for w in wanted}
        found.extend(
            Drift(name=name, state="not locked", locked=None, installed=version)
            for name, version in sorted(installed.items())
            if name not in names and name not in KEEP
        )
    return found


def cache_path(cache_dir: Path, item: Wanted) -> Path:
    """Where ``item``'s file is kept: under its sha256, so two locks never share a wrong file."""
    return cache_dir / item.sha256[:2] / item.sha256 / item.file


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stat_facts(path: Path) -> dict[str, int]:
    info = path.stat()
    return {
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "ctime_ns": info.st_ctime_ns,
        "ino": info.st_ino,
        "dev": info.st_dev,
    }


def _stamp(path: Path, sha256: str) -> None:
    """Record that ``path`` was found to have ``sha256``, with the file's stat as it was then."""
    from ..paths import write_atomic

    try:
        write_atomic(_stamp_path(path), json.dumps({"sha256": sha256, **_stat_facts(path)}) + "\n")
    except OSError:
        pass  # no stamp: the next sync hashes the file again


def _stamped(path: Path, item: Wanted) -> bool:
    """True when ``path`` was checked against ``item``'s sha256 and is unchanged since: same size,
    mtime, ctime (which no write can leave as it was), inode and device. pip's hash-checking mode
    still hashes the file before installing anything, so a stamp saves our pass, not the check."""
    try:
        recorded = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
        now = _stat_facts(path)
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict) or recorded.get("sha256") != item.sha256:
        return False
    if item.size is not None and now["size"] != item.size:
        return False
    return all(recorded.get(key) == value for key, value in now.items())


def cached_files(wanted: Sequence[Wanted], cache_dir: Path) -> tuple[dict[str, Path], list[Wanted]]:
    """The files already in the cache and checked (by name), and the items still to fetch or check.
    Reads no file's content: a sync whose files are all here opens no connection and hashes nothing."""
    paths: dict[str, Path] = {}
    missing: list[Wanted] = []
    for item in wanted:
        target = cache_path(cache_dir, item)
        if _stamped(target, item):
            paths[item.name] = target
        else:
            missing.append(item)
    return paths, missing


def fetch_all(
    wanted: Sequence[Wanted], client: HttpClient, cache_dir: Path, reporter: Reporter | None = None
) -> dict[str, Path]:
    """Every file in the cache, its sha256 (and size) checked and stamped (:func:`cached_files`);
    one failure stops before any install."""
    from ..errors import NetworkError

    report = reporter or NullReporter()
    paths: dict[str, Path] = {}
    for item in wanted:
        target = cache_path(cache_dir, item)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            report.step(f"fetching {item.file}")
        try:
            client.download(item.url, target, sha256=item.sha256, size=item.size)
        except NetworkError as exc:
            raise LockError(
                f"{item.file}: {exc}; nothing was installed",
                hint=exc.hint
                or "a file whose hash differs from the lock is never installed: check the mirror, or lock again",
            ) from None
        if item.size is not None and target.stat().st_size != item.size:
            target.unlink()
            raise LockError(
                f"{item.file}: {target.stat().st_size if target.exists() else 'other'} bytes, the lock says {item.size}; nothing was installed",
                hint="the index serves another file than the one locked: lock again",
            )
        _stamp(target, item.sha256)
        paths[item.name] = target
    return paths


def sync_plan(
    env: Environment,
    to_install: Sequence[Wanted],
    paths: Mapping[str, Path],
    requirements_file: Path,
    *,
    imports: Sequence[str] = (),
) -> Plan:
    """The complete Plan the executor runs: one pip step over the locked files, hash-checked by pip
    too. ``--quiet``: pip's lines about local files say nothing sync does not say itself, and
    printing them costs pip 0.15 s (its rich console), as much as a small profile's install."""
    from ..plan import PipStep, Plan

    lines = [f"{paths[w.name].as_uri()} --hash=sha256:{w.sha256}\n" for w in to_install]
    requirements_file.write_text("".join(lines), encoding="utf-8")
    steps = (
        (
            PipStep(
                purpose="locked files",
                args=(
                    "--no-deps",
                    "--no-index",
                    "--require-hashes",
                    "--quiet",
                    "-r",
                    str(requirements_file),
                ),
            ),
        )
        if to_install
        else ()
    )
    return Plan(
        environment=env,
        items=(),
        pass_through=(),
        reasons=(),
        rejected=(),
        complete=True,
        steps=steps,
        imports=tuple(imports),
        skip_pip=None if to_install else "everything locked is installed",
    )


def remove_extras(
    python: str,
    names: Sequence[str],
    environ: Mapping[str, str],
    log_path: Path,
    reporter: Reporter | None = None,
) -> None:
    """``pip uninstall`` of ``names`` with the target's files stashed first: restored on failure."""
    from ..install.pip import TargetPip
    from ..install.stash import Stash, default_journal_dir, default_lock_dir, target_lock
    from ..install.transaction import TARGET_LOCK_SECONDS

    report = reporter or NullReporter()
    keep = [n for n in names if canonicalize_name(n) in KEEP]
    if keep:
        raise InstallError(
            f"refusing to remove {', '.join(keep)}", hint="these install everything else"
        )
    pip = TargetPip(python, environ=environ, log_path=log_path)
    with target_lock(python, default_lock_dir(), timeout=TARGET_LOCK_SECONDS, environ=environ):
        stash = Stash.begin(python, environ=environ, journal_dir=default_journal_dir(), only=names)
        try:
            report.step(f"removing {', '.join(names)}")
            started = time.monotonic()
            status, tail = pip.run(
                ["uninstall", "--yes", *names],
                on_line=lambda line: report.progress("pip", None, None, time.monotonic() - started),
            )
            if status != 0:
                raise InstallError(
                    f"pip uninstall failed: {' / '.join(tail[-3:])}",
                    hint=f"the environment was restored as it was; log: {log_path}",
                )
        except BaseException:
            outcome = stash.restore()
            if outcome.complete:
                stash.commit()
            raise
        stash.commit()
