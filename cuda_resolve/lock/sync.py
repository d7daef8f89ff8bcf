"""``sync``: what a profile of a lock installs here, the drift from it, and installing exactly it.

No resolution happens here: the lock names every file. An installed distribution with the
locked name, version and local label counts as satisfied (its files' hashes are not re-read).
Every file to install is fetched (through the configured mirror, by rewriting the locked URL's
prefix) and its sha256 and size checked before anything is installed; then the executor runs
one pip step, in hash-checking mode with ``--no-deps --no-index`` over those files, with its
stash and undo: all or nothing. ``--exact`` then removes what the lock does not name, in a
second all-or-nothing step of its own (never pip, setuptools, wheel or cuda-resolve).
"""

from __future__ import annotations

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

if TYPE_CHECKING:  # `sync --check` imports none of the acting layers: it must answer within a second
    from ..net.client import HttpClient
    from ..plan import Plan

__all__ = ["KEEP", "Drift", "drift", "fetch_all", "remove_extras", "sync_plan"]

#: Never removed by ``--exact``: the tools that install.
KEEP = frozenset({"pip", "setuptools", "wheel", "cuda-resolve"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Drift:
    name: str
    state: str  # "ok", "missing", "other version", "other build", "not locked"
    locked: str | None
    installed: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "locked": self.locked, "installed": self.installed}


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
        found.extend(Drift(name=name, state="not locked", locked=None, installed=version)
                     for name, version in sorted(installed.items()) if name not in names and name not in KEEP)
    return found


def fetch_all(wanted: Sequence[Wanted], client: HttpClient, cache_dir: Path, reporter: Reporter | None = None) -> dict[str, Path]:
    """Every file in the cache, its sha256 (and size) checked; one failure stops before any install."""
    from ..errors import NetworkError

    report = reporter or NullReporter()
    paths: dict[str, Path] = {}
    for item in wanted:
        target = cache_dir / item.sha256[:2] / item.sha256 / item.file
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            report.step(f"fetching {item.file}")
        try:
            client.download(item.url, target, sha256=item.sha256, size=item.size)
        except NetworkError as exc:
            raise LockError(f"{item.file}: {exc}; nothing was installed",
                            hint=exc.hint or "a file whose hash differs from the lock is never installed: check the mirror, or lock again") from None
        if item.size is not None and target.stat().st_size != item.size:
            target.unlink()
            raise LockError(f"{item.file}: {target.stat().st_size if target.exists() else 'other'} bytes, the lock says {item.size}; nothing was installed",
                            hint="the index serves another file than the one locked: lock again")
        paths[item.name] = target
    return paths


def sync_plan(env: Environment, to_install: Sequence[Wanted], paths: Mapping[str, Path], requirements_file: Path, *,
              imports: Sequence[str] = ()) -> Plan:
    """The complete Plan the executor runs: one pip step over the locked files, hash-checked by pip too."""
    from ..plan import PipStep, Plan

    lines = [f"{paths[w.name].as_uri()} --hash=sha256:{w.sha256}\n" for w in to_install]
    requirements_file.write_text("".join(lines), encoding="utf-8")
    steps = (PipStep(purpose="locked files", args=("--no-deps", "--no-index", "--require-hashes", "-r", str(requirements_file))),) if to_install else ()
    return Plan(environment=env, items=(), pass_through=(), reasons=(), rejected=(), complete=True, steps=steps,
                imports=tuple(imports), skip_pip=None if to_install else "everything locked is installed")


def remove_extras(python: str, names: Sequence[str], environ: Mapping[str, str], log_path: Path, reporter: Reporter | None = None) -> None:
    """``pip uninstall`` of ``names`` with the target's files stashed first: restored on failure."""
    from ..install.pip import TargetPip
    from ..install.stash import Stash, default_journal_dir, default_lock_dir, target_lock
    from ..install.transaction import TARGET_LOCK_SECONDS

    report = reporter or NullReporter()
    keep = [n for n in names if canonicalize_name(n) in KEEP]
    if keep:
        raise InstallError(f"refusing to remove {', '.join(keep)}", hint="these install everything else")
    pip = TargetPip(python, environ=environ, log_path=log_path)
    with target_lock(python, default_lock_dir(), timeout=TARGET_LOCK_SECONDS, environ=environ):
        stash = Stash.begin(python, environ=environ, journal_dir=default_journal_dir())
        try:
            report.step(f"removing {', '.join(names)}")
            started = time.monotonic()
            status, tail = pip.run(["uninstall", "--yes", *names],
                                   on_line=lambda line: report.progress("pip", None, None, time.monotonic() - started))
            if status != 0:
                raise InstallError(f"pip uninstall failed: {' / '.join(tail[-3:])}", hint=f"the environment was restored as it was; log: {log_path}")
        except BaseException:
            outcome = stash.restore()
            if outcome.complete:
                stash.commit()
            raise
        stash.commit()
