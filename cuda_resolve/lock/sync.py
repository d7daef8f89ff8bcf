"""``sync``: install exactly what a profile of a lock holds, or report the drift from it.

:func:`sync` is the one entry point (as :func:`cuda_resolve.install.run.run` is for installing):
the CLI parses arguments into a :class:`SyncRequest`, supplies a reporter and renders the
:class:`SyncResult`. No resolution happens here: the lock names every file. An installed
distribution with the locked name, version and local label counts as satisfied (its files'
hashes are not re-read). Every file to install is fetched and checked first
(:mod:`.wheelcache`); then the executor runs one pip step, in hash-checking mode with
``--no-deps --no-index`` over those files, with its stash and undo: all or nothing. ``--exact``
then removes what the lock does not name, in a second all-or-nothing step of its own, never the
installers nor, where the target holds cuda-resolve, the tool and what it needs to run
(:mod:`.drift`). ``--check`` imports none of the acting layers: it must answer within a second.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from .._frozen import frozen
from ..environment import Environment
from ..errors import CudaResolveError, InstallError
from ..reporting import NullReporter, Reporter
from .drift import KEEP, Drift, Kept
from .select import Wanted

if TYPE_CHECKING:
    from ..install.pip import PipFacts
    from ..install.stash import RestoreReport, Stash
    from ..install.transaction import InstallResult
    from ..plan import Plan
    from .read import ReadLock

__all__ = [
    "SATISFIED_NOTE",
    "SyncRequest",
    "SyncResult",
    "remove_extras",
    "restore_summary",
    "sync",
    "sync_plan",
]

#: What ``--check`` (and its JSON) says about how "installed" is decided.
SATISFIED_NOTE = (
    "an installed package with the locked name, version and local label counts as installed; "
    "its files' hashes were not re-read"
)


@frozen
class SyncRequest:
    lock: Path
    name: str = "auto"  # a profile of the lock, or "auto": the one that fits this machine
    python: str | None = None  # the target (None: the install target rule)
    check: bool = False  # change nothing; report the drift
    exact: bool = False  # also remove what the lock does not name
    dry_run: bool = False  # say what would change and the pip commands; change nothing
    installer: str = "auto"  # the engine of the locked files: auto (uv where found), uv or pip
    verify: bool = True  # import torch and the curated extensions after installing them


@frozen
class SyncResult:
    request: SyncRequest
    profile: str
    target: str  # the target's interpreter
    notes: tuple[str, ...]  # the lock's notes
    packages: tuple[Drift, ...]
    to_install: tuple[Wanted, ...]
    to_remove: tuple[str, ...]
    kept: tuple[Kept, ...] = ()  # with --exact: not locked, left in place, and why
    pip_runs: tuple[tuple[str, ...], ...] = ()  # planned (a dry run) or run
    installers: tuple[str, ...] = ()  # which engine runs each of them: "pip" or "uv"
    timings: tuple[tuple[str, float], ...] = ()  # (phase, seconds) of a run, in order
    verified: tuple[str, ...] = ()  # the modules a run imported after installing

    @property
    def import_check(self) -> str:
        """What became of the import check after installing: "passed" (the modules in
        ``verified`` imported), "skipped (--no-verify)", or "not needed" (nothing that imports
        was installed, or nothing was)."""
        if self.verified:
            return "passed"
        if not self.request.verify and self.to_install:
            return "skipped (--no-verify)"
        return "not needed"

    @property
    def drifted(self) -> tuple[Drift, ...]:
        return tuple(d for d in self.packages if d.state != "ok")

    def to_json(self) -> dict[str, Any]:
        request = self.request
        document: dict[str, Any] = {
            "lock": str(request.lock),
            "profile": self.profile,
            "target": self.target,
            "notes": list(self.notes),
            "packages": [d.to_json() for d in self.packages],
        }
        if request.exact:
            document["kept"] = [k.to_json() for k in self.kept]
        installing = [w.name + "==" + w.version for w in self.to_install]
        if request.check:
            document.update({"drift": bool(self.drifted), "note": SATISFIED_NOTE})
        elif request.dry_run:
            document.update(
                {
                    "install": installing,
                    "remove": list(self.to_remove),
                    "pip_runs": [list(c) for c in self.pip_runs],
                    "installers": list(self.installers),
                    "dry_run": True,
                }
            )
        else:
            document.update(
                {
                    "installed": installing,
                    "removed": list(self.to_remove),
                    "pip_runs": [list(c) for c in self.pip_runs],
                    "installers": list(self.installers),
                    "timings": {phase: round(seconds, 2) for phase, seconds in self.timings},
                    "verified_imports": list(self.verified),
                    "import_check": self.import_check,
                }
            )
        return document


def sync(
    request: SyncRequest,
    *,
    reporter: Reporter | None = None,
    environ: Mapping[str, str] | None = None,
) -> SyncResult:
    """Check ``request.lock``'s profile against the target, or make the target match it (see
    the module). Raises the project's errors; a failed change is undone before it is raised."""
    started = time.monotonic()
    state = _Target.read(request, dict(os.environ if environ is None else environ))
    decided = state.decide()
    if request.check:
        return decided
    return _Act(state, decided, reporter or NullReporter(), started).run()


class _Target:
    """The facts one sync decides from: the lock, the target's Environment and its packages."""

    __slots__ = ("closure", "env", "environ", "installed", "lock", "probed", "python", "request")

    def __init__(
        self,
        request: SyncRequest,
        environ: dict[str, str],
        lock: ReadLock,
        env: Environment,
        python: str,
        probed: tuple[PipFacts, dict[str, str]],
    ) -> None:
        self.request = request
        self.environ = environ
        self.lock = lock
        self.env = env
        self.python = python
        self.probed = probed
        self.installed = probed[1]
        self.closure: frozenset[str] = frozenset()

    @classmethod
    def read(cls, request: SyncRequest, environ: dict[str, str]) -> _Target:
        from ..detect import detect_environment
        from ..detect._run import Background
        from ..install.pip import pip_facts_and_distributions
        from ..install.target import choose_target, is_running_interpreter
        from .read import read_lock

        _load_for_workers()
        # Three waits at once: the lock is read and validated while the target's interpreter
        # answers twice (its facts for the profile, its installed distributions). Plain
        # threads: importing concurrent.futures costs more than the overlap saves.
        lock_job = Background(lambda: read_lock(request.lock))
        choice = choose_target(request.python)
        installed_job = Background(lambda: pip_facts_and_distributions(choice.python, environ))
        try:
            # The running interpreter is read in process (see install.target).
            in_process = choice.how != "--python" and is_running_interpreter(choice.python)
            env = detect_environment(python=None if in_process else choice.python)
        finally:
            lock = lock_job.result()  # a lock that cannot be read is the first thing to say
        probed = installed_job.result()
        return cls(request, environ, lock, env, env.python.executable or choice.python, probed)

    def decide(self) -> SyncResult:
        from ..index import default_cuda_facts
        from .drift import drift, kept_by_exact
        from .select import choose_profile, named_profile_notes, wanted_files

        request = self.request
        facts = default_cuda_facts()
        profile = choose_profile(self.lock, self.env, facts, request.name)
        forced = named_profile_notes(self.lock, self.env, facts, request.name, profile)
        wanted = wanted_files(self.lock, profile, self.env)
        if not (request.check or request.exact):
            _refuse_stale_extensions(self.env, wanted)
        if request.exact:
            self.closure = self._tool_closure()
        installed = _as_torch_names_it(self.env, self.installed, wanted)
        report = drift(wanted, installed, exact=request.exact, keep=self.closure)
        return SyncResult(
            request=request,
            profile=profile,
            target=self.python,
            notes=(*self.lock.notes, *forced),
            packages=tuple(report),
            to_install=tuple(w for w, d in zip(wanted, report, strict=False) if d.state != "ok"),
            to_remove=tuple(d.name for d in report if d.state == "not locked"),
            kept=tuple(kept_by_exact(wanted, installed, self.closure)) if request.exact else (),
        )

    def _tool_closure(self) -> frozenset[str]:
        """What cuda-resolve needs to run in the target, where the target holds it (one more
        start of the target's interpreter, only then)."""
        from ..compat import marker_environment
        from .drift import TOOL, target_requirements, tool_closure

        if TOOL not in self.installed:
            return frozenset()
        requires = target_requirements(self.python, self.environ)
        return tool_closure(requires, marker_environment(self.env))


def _refuse_stale_extensions(env: Environment, wanted: Sequence[Wanted]) -> None:
    """A lock whose torch replaces the installed build would leave the extensions built for the
    old one installed, broken at their next import (issue 27): refused, unless the lock names
    them too or ``--exact`` removes what it does not name."""
    from ..index import default_index
    from ..install.stale import stale_extensions
    from ..torch_identity import identity_of

    torch = next((w for w in wanted if w.name == "torch"), None)
    if torch is None or env.torch is None:
        return
    installed = identity_of(env.torch)
    release, _, label = torch.version.partition("+")
    if release == installed.release and (not label or label == installed.variant):
        return
    stale = stale_extensions(env, default_index(), planned=[w.name for w in wanted])
    if stale:
        names = ", ".join(s.name for s in stale)
        raise InstallError(
            f"the lock's torch {torch.version} replaces the installed torch {installed.label}, "
            f"and {names} (built for {installed.label}) would stay installed: at the next import "
            "they fail with 'undefined symbol'; nothing was installed",
            hint="lock them too (add them to the lock's requirements), or sync --exact, which "
            "removes what the lock does not name",
        )


def _as_torch_names_it(
    env: Environment, installed: dict[str, str], wanted: Sequence[Wanted]
) -> dict[str, str]:
    """The installed torch by pip's version (PyPI's file: 2.11.0, as a lock of it names it),
    or by its build (2.11.0+cu130, torch_identity) where the lock names that same build by its
    label, the PyTorch index's file: the build is there, nothing is fetched again."""
    from ..torch_identity import identity_of
    from ..versions import same_version

    locked = next((w.version for w in wanted if w.name == "torch"), None)
    if env.torch is None or locked is None or "+" not in locked or "torch" not in installed:
        return installed
    identity = identity_of(env.torch)
    if identity.pip_version not in (None, installed["torch"]):
        return installed  # the probe read another torch than pip's: pip's answer stands
    if same_version(locked, identity.label):
        return {**installed, "torch": identity.label}
    return installed


class _Act:
    """Installing (or saying what would be installed): needs the acting layers."""

    __slots__ = ("decided", "report", "started", "state")

    def __init__(
        self, state: _Target, decided: SyncResult, report: Reporter, started: float
    ) -> None:
        self.state = state
        self.decided = decided
        self.report = report
        self.started = started  # when sync began: its timings start there

    def run(self) -> SyncResult:
        import tempfile

        from ..config import load_config

        if self.state.request.dry_run:
            return self._planned()
        config = load_config()
        with tempfile.TemporaryDirectory(prefix="cuda-resolve-sync-") as scratch:
            requirements = Path(scratch) / "locked.txt"
            return self._changed(requirements, config)

    def _planned(self) -> SyncResult:
        """The commands a sync would run. Their -r file is kept (in the cache, named by its
        content), naming the cached files by path and, for pip, the others by the lock's URL (as
        the mirror serves it), so that a printed pip command still runs after sync has exited."""
        import hashlib

        from .._frozen import replace
        from ..config import load_config
        from ..install.transaction import planned_commands
        from ..install.uv import installer_of
        from ..paths import cache_root
        from ..redaction import url_without_userinfo
        from ..wheelhouse.store import Wheelhouse
        from .wheelcache import cache_path, local_copy

        state, to_install = self.state, self.decided.to_install
        paths = {w.name: cache_path(cache_root() / "lock-wheels", w) for w in to_install}
        cached = {name for name, path in paths.items() if path.is_file()}
        # Not cached yet, but on this machine (a download folder, the wheelhouse): a sync takes
        # it from there, downloading nothing; pip's command names it there.
        local = {
            w.name: found
            for w in to_install
            if w.name not in cached and (found := local_copy(w)) is not None
        }
        config = load_config()  # the mirror a sync would fetch from; never a password in a file
        where = {
            w.name: paths[w.name].as_uri()
            if w.name in cached
            else local[w.name].as_uri()
            if w.name in local
            else url_without_userinfo(config.rewrite(w.url))
            for w in to_install
        }
        named = sorted((w.name, where[w.name], w.sha256) for w in to_install)
        digest = hashlib.sha256(repr(named).encode()).hexdigest()[:16]
        requirements = cache_root() / "sync-dry-run" / f"locked-{digest}.txt"
        requirements.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # The commands as a run makes them (its files fetched into the cache first), then, where
        # pip runs them, the -r file names what is not cached yet by URL: pip fetches it. uv runs
        # offline over cached files only: with files still to fetch, its command would fail
        # pasted, so pip's (which fetches them) is the one shown, and a note says why.
        uncached = sorted(paths.keys() - cached)
        to_fetch = [name for name in uncached if name not in local]
        installer = "pip" if uncached else state.request.installer
        plan = sync_plan(state.env, to_install, paths, requirements)
        commands = planned_commands(
            plan, state.python, Wheelhouse.default(), installer=installer, environ=state.environ
        )
        installers = tuple(installer_of(c) for c in commands)
        notes = self.decided.notes
        if local:
            places = sorted({str(path.parent) for path in local.values()})
            notes = (
                *notes,
                f"{len(local)} file(s) are on this machine already ({', '.join(sorted(local))}, "
                f"in {', '.join(places)}): a sync takes them from there, their sha256 checked, "
                "and downloads nothing for them",
            )
        if uncached and state.request.installer != "pip":
            fetched = (
                f"{len(to_fetch)} file(s) are not in the cache yet ({', '.join(to_fetch)}): a "
                "sync fetches them first"
                if to_fetch
                else "a sync copies them into its cache first"
            )
            notes = (
                *notes,
                f"{fetched} and then may install with uv, offline; pip's command is shown, which "
                "reads each file where it is now (fetching what is not here) and runs as printed",
            )
        if all(installer == "pip" for installer in installers):
            sync_plan(state.env, to_install, paths, requirements, locations=where)
        return replace(
            self.decided,
            pip_runs=tuple(tuple(c) for c in commands),
            installers=installers,
            notes=notes,
        )

    def _changed(self, requirements: Path, config: Any) -> SyncResult:
        from .._frozen import replace
        from ..paths import new_log_path

        state, decided = self.state, self.decided
        timings = [("read and decide", time.monotonic() - self.started)]
        if decided.to_remove:
            self.report.step(
                f"--exact: will remove {', '.join(decided.to_remove)} after installing"
            )
        started = time.monotonic()
        paths = self._fetched(config)
        timings.append(("fetch", time.monotonic() - started))
        plan = sync_plan(
            state.env,
            decided.to_install,
            paths,
            requirements,
            imports=_imports_of(decided.to_install),
        )
        installed = self._install(plan) if plan.steps else None
        if installed is not None:
            timings.extend(installed.timings)
        if decided.to_remove:
            started = time.monotonic()
            remove_extras(
                state.python,
                decided.to_remove,
                state.environ,
                new_log_path("sync-remove"),
                self.report,
                keep=state.closure,
            )
            timings.append(("remove", time.monotonic() - started))
        if installed is None:
            return replace(decided, timings=tuple(timings))
        return replace(
            decided,
            pip_runs=installed.pip_runs,
            installers=installed.installers,
            timings=tuple(timings),
            verified=installed.verified,
        )

    def _fetched(self, config: Any) -> dict[str, Path]:
        from ..paths import cache_root
        from .wheelcache import LockedFileMismatch, cached_files, fetch_all

        cache_dir = cache_root() / "lock-wheels"
        paths, missing = cached_files(self.decided.to_install, cache_dir)
        if missing:  # the HTTP layer (requests and all) is loaded only when something is fetched
            from ..net.factory import client_from_config

            try:
                with client_from_config(config) as client:
                    paths.update(fetch_all(missing, client, cache_dir, self.report))
            except LockedFileMismatch as exc:
                if self.state.lock.packages_edited:
                    exc.hint = (
                        f"{self.state.lock.origin} was changed after cuda-resolve wrote it, so "
                        "the hash or size it now holds may be the edit, not the server's fault: "
                        "lock again, or restore the file"
                    )
                raise
        return paths

    def _install(self, plan: Plan) -> InstallResult:
        """One --no-deps run over the locked files (uv's where it is found, else pip's): only
        those names can change. After it, the torch and curated extensions it installed must
        import (else it is undone), unless the request says not to check."""
        from ..install.options import InstallOptions
        from ..install.transaction import execute
        from ..paths import new_log_path

        state = self.state
        return execute(
            plan,
            state.env,
            wheelhouse=None,
            options=InstallOptions(
                replaces=tuple(w.name for w in self.decided.to_install),
                installer=state.request.installer,
                verify=state.request.verify,
            ),
            environ=state.environ,
            reporter=self.report,
            log_path=new_log_path("sync"),
            probed=state.probed,
        )


def _load_for_workers() -> None:
    """Load what the worker threads run, here in the main thread: a module imported by two
    threads at once can be met half-initialised where imports are circular."""
    import contextlib
    import encodings.utf_8_sig  # noqa: F401 - how a lock's text is decoded

    from .. import _bounded, _toml  # noqa: F401

    with contextlib.suppress(ImportError):  # read_lock says which packaging is needed
        import packaging.pylock  # noqa: F401


def _imports_of(installed: Sequence[Wanted]) -> tuple[str, ...]:
    """The modules to import after a sync: torch and the extensions the index curates."""
    from ..index import default_index

    index = default_index()
    found: list[str] = []
    for wanted in installed:
        package = index.package(wanted.name)
        if wanted.name == "torch":
            found.append("torch")
        elif package is not None:
            found.append(package.import_name)
    return tuple(dict.fromkeys(found))


def sync_plan(
    env: Environment,
    to_install: Sequence[Wanted],
    paths: Mapping[str, Path],
    requirements_file: Path,
    *,
    imports: Sequence[str] = (),
    locations: Mapping[str, str] | None = None,
) -> Plan:
    """The complete Plan the executor runs: one pip step over the locked files, hash-checked by pip
    too. ``--quiet``: pip's lines about local files say nothing sync does not say itself, and
    printing them costs pip 0.15 s (its rich console), as much as a small profile's install."""
    from ..plan import PipStep, Plan

    where = locations or {w.name: paths[w.name].as_uri() for w in to_install}
    lines = [f"{where[w.name]} --hash=sha256:{w.sha256}\n" for w in to_install]
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
    *,
    keep: Iterable[str] = (),
) -> None:
    """``pip uninstall`` of ``names`` with the target's files stashed first: restored on
    failure, and the error then says what the restore put back and what it could not."""
    from ..install.pip import TargetPip
    from ..install.stash import (
        Stash,
        default_journal_dir,
        default_lock_dir,
        target_lock,
        waiting_for,
    )
    from ..install.transaction import TARGET_LOCK_SECONDS

    report = reporter or NullReporter()
    never = KEEP | set(keep)
    refused = [n for n in names if canonicalize_name(n) in never]
    if refused:
        raise InstallError(
            f"refusing to remove {', '.join(refused)}",
            hint="these install everything else, or cuda-resolve needs them to run",
        )
    pip = TargetPip(python, environ=environ, log_path=log_path)
    with target_lock(
        python,
        default_lock_dir(),
        timeout=TARGET_LOCK_SECONDS,
        environ=environ,
        on_wait=lambda holder: report.step(waiting_for(python, holder)),
    ):
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
                    f"pip uninstall failed: {' / '.join(tail[-3:])}", hint=f"log: {log_path}"
                )
        except BaseException as exc:
            _restore(exc, stash, report, log_path)
            raise
        stash.commit()


def _restore(exc: BaseException, stash: Stash, report: Reporter, log_path: Path) -> None:
    """Put back what the failed removal changed; ``exc``'s hint then says what the restore
    really did (:func:`restore_summary`)."""
    from .._signals import deferred_interrupts

    try:
        with deferred_interrupts(report.note):  # a second Ctrl-C or SIGTERM: the restore ends
            outcome = stash.restore()
    except CudaResolveError as problem:
        said = f"the environment could not be restored: {problem}; run `cuda-resolve undo --last`"
    else:
        said = restore_summary(outcome)
        if outcome.complete:
            stash.commit()
    report.note(said)
    if isinstance(exc, CudaResolveError):
        exc.hint = f"{said}; log: {log_path}"


def restore_summary(outcome: RestoreReport) -> str:
    """One sentence from a restore's real result: what was put back, what was not."""
    parts = []
    if outcome.restored:
        parts.append("restored: " + "; ".join(outcome.restored))
    if outcome.not_restored:
        kept = f" (the stash is kept at {outcome.kept})" if outcome.kept else ""
        parts.append(
            "NOT restored: "
            + "; ".join(outcome.not_restored)
            + f"{kept}; run `cuda-resolve undo --last` after fixing it"
        )
    if not parts:
        return "nothing had been removed: the environment is as it was"
    return "; ".join(parts)
