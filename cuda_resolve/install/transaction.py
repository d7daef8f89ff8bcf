"""Carrying out a complete Plan: check -> build -> install -> verify, undone on failure.

Shaped like conda's transactions. The Plan arrives complete (:func:`~.prepare.complete_plan`):
every build's spec and wheel key, every pip step's words, the trust options. :func:`execute`
decides nothing new: it checks that every index answers, builds every source build into the
wheelhouse (nothing is installed unless all of them succeed), keeps what pip will replace so it
can be put back, runs the target's pip through one :class:`~.pip.TargetPip`, and imports what it
installed. A pip failure, a failed import check or Ctrl-C restores the target.
:func:`planned_commands` gives the exact pip commands a run executes, which ``--dry-run`` prints.

The executor takes a Plan from anywhere: ``plan``, a plan file, a lockfile entry or a conda hook.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from .._bounded import run as _bounded_run
from .._frozen import field, frozen, replace
from .._wrap import counted
from ..environment import Environment
from ..errors import CudaResolveError, InstallError
from ..plan import PipStep, Plan, PlannedBuild
from ..reporting import NullReporter, Reporter
from .downloads import DownloadingPip, downloads_root
from .hashmode import REQUIRE_HASHES, built_wheel_requirement
from .options import InstallOptions
from .pip import (
    PipFacts,
    TargetPip,
    installed_distributions,
    pip_facts_and_distributions,
    refuse_externally_managed,
    trust_options,
)
from .pipoptions import options_for_torch_step
from .scratch import SCRATCH_PREFIX, remove_dead_scratch, run_scratch
from .stash import (
    Stash,
    default_journal_dir,
    default_lock_dir,
    target_lock,
    waiting_for,
)
from .uv import UvFailed, changes_target, installer_of

if TYPE_CHECKING:  # a plan without builds (a sync, a plain install) loads none of the build layer
    from ..build.builder import BuildResult
    from ..detect._run import Background
    from ..wheelhouse.key import WheelKey
    from ..wheelhouse.store import Wheelhouse
    from .uv import LocalStep, UvInstaller

__all__ = [
    "InstallOptions",
    "InstallResult",
    "Phases",
    "execute",
    "planned_commands",
    "predicted_wheel_path",
]

#: An index that does not answer within this is reported before anything is installed.
REACHABILITY_SECONDS = 15.0


@frozen
class InstallResult:
    plan: Plan
    builds: tuple[BuildResult, ...]
    changed: tuple[tuple[str, str | None, str | None], ...]  # (name, before, after)
    verified: tuple[str, ...]
    smoke: tuple[tuple[str, str], ...] = ()  # (package, its output's last line)
    notes: tuple[str, ...] = field(default_factory=tuple)
    timings: tuple[tuple[str, float], ...] = ()  # (phase, seconds) in the order they ran
    # The pip (and uv) commands that ran, as a dry run prints them: an install through the
    # download folder read its run's view where they name files/ (.downloads).
    pip_runs: tuple[tuple[str, ...], ...] = ()
    installers: tuple[str, ...] = ()  # which engine ran each of them: "pip" or "uv"
    #: What pip said it installed that the target's site-packages does not show ("six-1.17.0"):
    #: --target, --prefix, --root, --user or a PIP_* variable sent it elsewhere (user walk C4).
    elsewhere: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "builds": [
                {
                    "package": b.spec.package,
                    "wheel": str(b.wheel.path),
                    "sha256": b.wheel.sha256,
                    "cache_hit": b.cache_hit,
                    "seconds": round(b.seconds, 1),
                    "log": str(b.log) if b.log else None,
                }
                for b in self.builds
            ],
            "changed": [
                {"name": n, "before": before, "after": after} for n, before, after in self.changed
            ],
            "verified_imports": list(self.verified),
            "smoke": [{"package": p, "output": out} for p, out in self.smoke],
            "notes": list(self.notes),
            "timings": {phase: round(seconds, 2) for phase, seconds in self.timings},
            "pip_runs": [list(command) for command in self.pip_runs],
            "installers": list(self.installers),
            "installed_elsewhere": list(self.elsewhere),
        }


# -- the commands a plan runs ---------------------------------------------------------------


def predicted_wheel_path(wheelhouse: Wheelhouse, key: WheelKey) -> Path:
    """Where the wheelhouse keeps ``key``'s wheel once built (setuptools' file name, relabelled)."""
    name = canonicalize_name(key.package).replace("-", "_")
    return (
        wheelhouse.entry_dir(key)
        / f"{name}-{key.labelled_version}-{key.python_tag}-{key.python_tag}-{key.platform}.whl"
    )


def _pip_for(
    plan: Plan, python: str, environ: Mapping[str, str], log_path: Path, facts: PipFacts | None
) -> tuple[TargetPip, str | None]:
    trust = plan.trust
    note = plan.trust_note
    if trust is None:  # a plan made for another machine: the target's pip decides it here
        if facts is None:
            trust = ()
        else:
            words, note = trust_options(facts)
            trust = tuple(words)
    # Installs from the PyTorch index go through one download folder: the build overlay's torch
    # and the target's are downloaded once (issue 28; .downloads).
    pip = DownloadingPip(
        python, environ=environ, trust=trust, log_path=log_path, downloads=downloads_root()
    )
    return pip, note


def _step_commands(pip: TargetPip, step: PipStep, args: Sequence[str]) -> list[tuple[str, ...]]:
    """The exact pip commands ``step`` runs with ``args``: a ``pip download`` into the download
    folder first where its install goes through it (:class:`.downloads.DownloadingPip`)."""
    if isinstance(pip, DownloadingPip):
        commands = pip.commands(
            args, torch_index_only=step.torch_index_only, pypi_index=step.pypi_index
        )
        return [tuple(command) for command in commands]
    return [tuple(pip.install_command(args))]


#: In a dry run, where a wheel not built yet has its hash in a hash-checking-mode command.
UNBUILT_SHA256 = "<sha256 of the built wheel>"


def _step_args(
    step: PipStep, plan: Plan, wheels: Mapping[str, Path], hashes: Mapping[str, str]
) -> list[str]:
    """``step``'s words with its built wheels appended: their paths, or in hash-checking mode
    ``name @ file:///...whl#sha256=H`` references pip checks (``hashes`` by wheel-key digest)."""
    if REQUIRE_HASHES not in step.args:
        return [*step.args, *(str(wheels[digest]) for digest in step.built)]
    package = {b.key.digest: b.spec.package for b in plan.builds}
    return [
        *step.args,
        *(
            built_wheel_requirement(
                package[digest], wheels[digest], hashes.get(digest, UNBUILT_SHA256)
            )
            for digest in step.built
        ),
    ]


def planned_commands(
    plan: Plan,
    python: str,
    wheelhouse: Wheelhouse,
    *,
    trust: Sequence[str] | None = None,
    installer: str = "pip",
    environ: Mapping[str, str] | None = None,
) -> list[list[str]]:
    """The exact commands :func:`execute` runs for ``plan`` (built wheels at their wheelhouse
    paths): uv's for the all-local steps where ``installer`` runs uv there (:mod:`.uv`)."""
    pip = DownloadingPip(
        python,
        environ=dict(os.environ if environ is None else environ),
        trust=plan.trust if plan.trust is not None else tuple(trust or ()),
        log_path=Path(os.devnull),
        downloads=downloads_root(),
    )
    wheels = {b.key.digest: predicted_wheel_path(wheelhouse, b.key) for b in plan.builds}
    hashes = {
        b.key.digest: stored.sha256
        for b in plan.builds
        if (stored := wheelhouse.lookup(b.key)) is not None
    }
    uv = _uv_engine(installer, python, None, environ, Path(os.devnull))
    commands: list[list[str]] = []
    for number, step in enumerate(plan.steps, 1):
        local = _local_step(uv, step, plan, wheels, hashes)
        if uv is not None and local is not None:
            run_folder = Path(tempfile.gettempdir()) / f"{SCRATCH_PREFIX}RUN"
            commands.append(uv.command(uv.requirements_file(local, run_folder, number)))
        else:
            args = _step_args(step, plan, wheels, hashes)
            commands.extend(list(command) for command in _step_commands(pip, step, args))
    return commands


def _uv_engine(
    installer: str,
    python: str,
    prefix: str | None,
    environ: Mapping[str, str] | None,
    log_path: Path,
    notes: list[str] | None = None,
) -> UvInstaller | None:
    """uv for the all-local steps (``installer`` auto or uv, uv found), or None: pip."""
    from .uv import UvInstaller, uv_for

    base = dict(os.environ if environ is None else environ)
    found, why_not = uv_for(installer, base)
    if why_not is not None and notes is not None:
        notes.append(why_not)
    if found is None:
        return None
    where = prefix or str(Path(python).parent.parent)  # PREFIX/bin/python
    return UvInstaller(found, python, prefix=where, environ=base, log_path=log_path)


def _local_step(
    uv: UvInstaller | None,
    step: PipStep,
    plan: Plan,
    wheels: Mapping[str, Path],
    hashes: Mapping[str, str],
) -> LocalStep | None:
    """``step``'s local files (:func:`.uv.local_requirements`): what uv installs where it runs
    (``uv`` not None), else None for a step that resolves or names anything else."""
    from .uv import local_requirements

    package = {b.key.digest: b.spec.package for b in plan.builds}
    built = [
        (package[digest], wheels[digest], hashes.get(digest, UNBUILT_SHA256))
        for digest in step.built
        if digest in wheels
    ]
    return local_requirements(step, built)


# -- execute --------------------------------------------------------------------------------


#: Who set a URL that is the configured PyTorch mirror (:func:`_indexes_used` says it,
#: :func:`_check_reachable`'s hint is then about that mirror).
_CONFIGURED_MIRROR = "the [pytorch] url of cuda-resolve's config"


def _indexes_used(plan: Plan, pip: TargetPip, options: InstallOptions) -> dict[str, str]:
    """Every http(s) location the run will contact, with who named it: each pip step's own
    (the plan's curated pages, the PyTorch index) and what pip adds from its configuration
    files, ``PIP_*`` variables and the step's words (:func:`~.pipconfig.pip_indexes`, asked of
    the target's pip in the environment the step really gets); the user's indexes also where a
    build's overlay installs its build requirements. pip stopping on its own configuration is
    refused here, before anything is downloaded or built."""
    from .pipconfig import pip_indexes, urls_to_check

    found: dict[str, str] = {}
    asked: set[tuple[bool, tuple[str, ...]]] = set()

    def add(torch_index_only: bool, words: Sequence[str], what: str, pypi: bool = False) -> None:
        if (torch_index_only, tuple(words)) in asked:
            return
        asked.add((torch_index_only, tuple(words)))
        environ = pip.environ_for(torch_index_only=torch_index_only, pypi_index=pypi)
        indexes = pip_indexes(pip.python, environ, pip_args=words)
        if indexes.error:
            raise InstallError(
                f"pip would stop on its configuration before {what}: {indexes.error}; nothing "
                "was installed",
                hint="fix the file or variable it names (cuda-resolve doctor --network shows "
                "what pip reads)",
            )
        for url in urls_to_check(indexes):
            found.setdefault(url, f"{indexes.origin_of(url) or 'pip'}, for {what}")

    mirror = (options.torch_index or "").rstrip("/")
    for step in plan.steps:
        for url in step.checked_urls:
            # The configured PyTorch mirror is the config file's, not the plan's (walk C15).
            by = _CONFIGURED_MIRROR if mirror and url.startswith(mirror) else "the plan"
            found.setdefault(url, f"{by}, for {step.purpose}")
        if step.args == ("--no-deps",) and step.built:
            continue  # local wheel files alone, no dependency resolution: pip asks no index
        add(step.torch_index_only, step.args, step.purpose, step.pypi_index)
    if any(b.reused is None for b in plan.builds):
        # The build overlay installs setuptools, ninja and the like with the user's pip options.
        add(False, options_for_torch_step(options.pip_args), "the build requirements")
    return found


def _check_reachable(
    urls: Mapping[str, str], probe: Callable[[str], tuple[bool, str]], report: Reporter
) -> None:
    for url, origin in urls.items():
        report.step(f"checking that {url} answers")
        ok, detail = probe(url)
        if not ok:
            configured = origin.startswith(_CONFIGURED_MIRROR)
            raise InstallError(
                f"{url} did not answer: {detail} (set by {origin}); nothing was installed",
                hint="the configured mirror does not answer: check it (cuda-resolve mirror test), "
                "or choose another (cuda-resolve mirror set PRESET, or edit the file mirror show "
                "names)"
                if configured
                else "configure a mirror (cuda-resolve mirror set PRESET) and check it "
                "(cuda-resolve mirror test), or fix the proxy (cuda-resolve doctor --network)",
            )


def _installed_elsewhere(
    said: Sequence[str], changed: Sequence[tuple[str, str | None, str | None]]
) -> list[str]:
    """What pip said it installed (``six-1.17.0``) that the target's own list does not show
    changed: it went to the folder --target (or the like) named."""
    here = {canonicalize_name(name) for name, _, _ in changed}
    return [word for word in said if canonicalize_name(word.rsplit("-", 1)[0]) not in here]


def _diff(
    before: Mapping[str, str], after: Mapping[str, str]
) -> list[tuple[str, str | None, str | None]]:
    names = sorted(set(before) | set(after))
    return [(n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)]


#: How long an install waits for another one into the same target to finish.
TARGET_LOCK_SECONDS = 600.0


def _recover_pending(
    prefix: str, environ: Mapping[str, str], journal_dir: Path, report: Reporter
) -> list[str]:
    """A run killed while pip worked (SIGKILL, a power cut) left a journal: restore from it
    first. Returns what was put back, as the restore says it (empty: nothing was pending)."""
    from .stash import pending, recover

    restored: list[str] = []
    for journal in pending(journal_dir):
        if journal.prefix != prefix:
            continue
        report.step(
            f"an earlier install into {prefix} was interrupted: restoring what it changed first"
        )
        outcome = recover(journal, environ=environ)
        if not outcome.complete:
            raise InstallError(
                "an earlier interrupted install could not be fully undone: "
                + "; ".join(outcome.not_restored),
                hint="fix what is named, then run `cuda-resolve undo --last` (or reinstall those "
                "packages) before installing again",
            )
        if outcome.restored:
            report.step("restored: " + "; ".join(outcome.restored))
        restored.extend(outcome.restored)
    return restored


def _restored(exc: BaseException, stash: Stash, report: Reporter) -> bool:
    """Undo what pip changed; the error then says what was restored and what could not be.
    True when the target is as it was."""
    from .._signals import deferred_interrupts

    try:
        with deferred_interrupts(
            report.note
        ):  # a second Ctrl-C or SIGTERM: the restore finishes first
            outcome = stash.restore()
    except CudaResolveError as problem:
        outcome_text = (
            f"the environment could not be restored: {problem}; run `cuda-resolve undo --last`"
        )
        report.note(outcome_text)
        if isinstance(exc, CudaResolveError):
            exc.hint = outcome_text
        return False
    if outcome.restored:
        report.step("restored: " + "; ".join(outcome.restored))
    if outcome.not_restored:
        text = "could not restore: " + "; ".join(outcome.not_restored)
        report.note(text)
        if isinstance(exc, CudaResolveError):
            exc.hint = f"{text}; run `cuda-resolve undo --last` after fixing it"
    if outcome.complete:
        stash.commit()
    return outcome.complete


#: The import check and a smoke test each end within this.
_CHECK_SECONDS = 600
#: How long a killed check's thread may take to see its interpreter gone.
_KILLED_CHECK_SECONDS = 10.0


def _run_check(
    python: str, args: Sequence[str], environ: Mapping[str, str], what: str
) -> tuple[int | None, list[str]]:
    """(exit status, output lines) of the target running ``args``; status None when it was cut
    off."""
    done = _bounded_run([python, *args], timeout=_CHECK_SECONDS, env=environ, cwd="/")
    if done is None:
        return None, [f"{python} could not be started for the {what}"]
    if done.returncode is None:
        return None, [f"the {what} took longer than {_CHECK_SECONDS} s or wrote too much"]
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()


def _verify_imports(python: str, modules: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """None when every module imports in a fresh interpreter, else which did not and why
    (:mod:`.verify`)."""
    from .verify import verify_imports

    failure = verify_imports(python, modules, environ, timeout=_CHECK_SECONDS)
    return None if failure is None else str(failure)


def _start_import_check(
    python: str, plan: Plan, environ: Mapping[str, str], phases: Phases, report: Reporter
) -> Background[str | None]:
    """:func:`_verify_imports` of ``plan``'s modules, started in a thread (timed as the phase
    "import check"); its ``result()`` is the verdict."""
    from ..detect._run import Background

    report.step(f"checking imports: {', '.join(plan.imports)}")

    def check() -> str | None:
        with phases.timed("import check"):
            return _verify_imports(python, plan.imports, environ)

    return Background(check)


@contextmanager
def _while_checking(check: Background[str | None] | None) -> Iterator[None]:
    """While ``check`` runs in its thread: an error, Ctrl-C, SIGTERM or SIGHUP kill its
    interpreter (its verdict no longer matters: the target is about to be restored), as they
    kill a program the main thread waits on (:func:`~cuda_resolve._bounded.kill_all`), and wait
    for its thread to end, so nothing reads the target while it is restored."""
    try:
        yield
    except BaseException:
        if check is not None:
            from .._bounded import kill_all

            kill_all()
            check.wait(_KILLED_CHECK_SECONDS)
        raise


def _run_smoke(python: str, script: str, environ: Mapping[str, str]) -> tuple[bool, str]:
    status, lines = _run_check(python, ["-c", script], environ, "smoke test")
    last = lines[-1] if lines else ""
    if status == 255:
        return False, f"a CUDA kernel failed (exit 255): {last}"
    return status == 0, last or f"exit {status}"


class Phases:
    """Seconds spent per phase, so a slow install says where its time went (and the bench can
    tell)."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self._seconds[name] = self._seconds.get(name, 0.0) + time.monotonic() - started

    def items(self) -> tuple[tuple[str, float], ...]:
        return tuple(self._seconds.items())


def refuse_kernel_gaps(results: Sequence[BuildResult], env: Environment) -> list[str]:
    """Refuse, before pip installs anything, a wheel that has no kernel for a GPU here: it would
    import, then fail at its first kernel with "no kernel image is available for execution on the
    device" (its fat binaries' SASS and PTX, read by :func:`~cuda_resolve.fatbin.kernel_gaps`
    with the resolver's coverage rule). A wheel whose device code cannot be read is a note."""
    import zipfile

    from ..fatbin import kernel_gaps

    notes: list[str] = []
    capabilities = tuple(gpu.compute_capability for gpu in env.gpus)
    for result in results:
        try:
            gaps = kernel_gaps(result.wheel.path, capabilities)
        except (
            ValueError,
            OSError,
            zipfile.BadZipFile,
        ) as exc:  # FatbinError, ElfError: ValueErrors naming the file
            notes.append(
                f"{result.wheel.path.name}: its device code could not be read ({exc}): "
                "kernels not checked"
            )
            continue
        if gaps:
            missing = ", ".join(sorted({str(gap.capability) for gap in gaps}))
            raise InstallError(
                f"{result.spec.package}: the wheel {result.wheel.path.name} has no kernel for "
                f"compute capability {missing} "
                f"of this machine ({gaps[0].describe()}); nothing was installed",
                hint=f"build it for this machine: cuda-pip install --rebuild {result.spec.package} "
                f"(or give an --arch-list that includes {missing})",
            )
    return notes


def _build_all(
    plan: Plan,
    wheelhouse: Wheelhouse,
    options: InstallOptions,
    pip: TargetPip,
    before: Mapping[str, str],
    environ: Mapping[str, str],
    report: Reporter,
    phases: Phases,
) -> list[BuildResult]:
    results: list[BuildResult] = []
    for planned in plan.builds:
        with phases.timed(f"build {planned.spec.package}"):
            results.append(_build_one(planned, wheelhouse, options, pip, before, environ, report))
    return results


def _build_one(
    planned: PlannedBuild,
    wheelhouse: Wheelhouse,
    options: InstallOptions,
    pip: TargetPip,
    before: Mapping[str, str],
    environ: Mapping[str, str],
    report: Reporter,
) -> BuildResult:
    from ..build.builder import build

    reuses_other_build = (
        planned.reused is not None and planned.key.arch_list != planned.spec.arch_list
    )
    if reuses_other_build and wheelhouse.lookup(planned.key) is None:
        # The plan reuses a wheel built for more GPUs; it is gone (pruned, another machine's plan).
        raise InstallError(
            f"the plan reuses {planned.spec.package} {planned.key.labelled_version} from the "
            "wheelhouse, which no longer has it",
            hint="make the plan again (it will build for this machine), or copy that "
            "wheelhouse entry here",
        )
    return build(
        planned.spec,
        wheelhouse,
        source_dir=options.source_for(planned.spec.package),
        installed=before,
        environ=environ,
        reporter=report,
        rebuild=options.rebuild and planned.reused is None,
        pip=pip,
        key=planned.key,
        pip_options=options_for_torch_step(options.pip_args),
    )


def execute(
    plan: Plan,
    env: Environment,
    *,
    wheelhouse: Wheelhouse | None,
    options: InstallOptions,
    probe: Callable[[str], tuple[bool, str]] | None = None,
    environ: Mapping[str, str] | None = None,
    reporter: Reporter | None = None,
    log_path: Path,
    probed: tuple[PipFacts, Mapping[str, str]] | None = None,
) -> InstallResult:
    """Carry out the complete ``plan`` in ``env``'s target; see the module's docstring.
    ``probed``: what :func:`~.pip.pip_facts_and_distributions` answered for the target moments
    ago (``sync`` reads it to decide what to install): then it is not asked again. ``wheelhouse``
    None: the default one, loaded only when the plan builds. A step uv could not install
    (:mod:`.uv`: a Python it does not support, a cache it cannot write) is undone like any
    failure, then the whole run is made again with pip, and a note says so."""
    import functools

    once = functools.partial(
        _execute_once,
        plan,
        env,
        wheelhouse=wheelhouse,
        probe=probe,
        environ=environ,
        reporter=reporter,
        log_path=log_path,
    )
    try:
        return once(options=options, probed=probed)
    except UvFailed as failed:
        if not failed.restored:
            raise
        note = (
            f"uv could not install the local files ({failed.message}); the environment was "
            f"restored and pip installs them (log: {log_path})"
        )
        (reporter or NullReporter()).note(note)
        again = once(options=replace(options, installer="pip"), probed=None)
        return replace(again, notes=(note, *again.notes))


def _execute_once(
    plan: Plan,
    env: Environment,
    *,
    wheelhouse: Wheelhouse | None,
    options: InstallOptions,
    probe: Callable[[str], tuple[bool, str]] | None = None,
    environ: Mapping[str, str] | None = None,
    reporter: Reporter | None = None,
    log_path: Path,
    probed: tuple[PipFacts, Mapping[str, str]] | None = None,
) -> InstallResult:
    if not plan.complete:
        raise InstallError(
            "the plan is not complete (no builds or pip steps decided)",
            hint="complete it with cuda_resolve.install.prepare.complete_plan before executing it",
        )
    report = reporter or NullReporter()
    phases = Phases()
    base = dict(os.environ if environ is None else environ)
    python = env.python.executable or sys.executable
    if probed is None:
        with phases.timed("target probe"):
            probed = pip_facts_and_distributions(python, base)
    facts, before = probed
    refuse_externally_managed(python, facts, options.pip_args, base, requests=plan.requests())
    pip, trust_note = _pip_for(plan, python, base, log_path, facts)
    pip.on_note = report.note  # a background process ended because it held pip's output open
    notes: list[str] = []
    elsewhere: list[str] = []  # what pip installed outside the target (--target ...)
    if probe is not None:
        with phases.timed("index check"):
            _check_reachable(_indexes_used(plan, pip, options), probe, report)
    if wheelhouse is None and plan.builds:
        from ..wheelhouse.store import Wheelhouse

        wheelhouse = Wheelhouse.default()
    results = (
        _build_all(plan, wheelhouse, options, pip, before, base, report, phases)
        if wheelhouse is not None
        else []
    )
    if env.gpus and results:
        with phases.timed("kernel check"):
            notes.extend(refuse_kernel_gaps(results, env))
    # The builds never touch the target, so the snapshot taken before them still holds.
    if plan.skip_pip is not None:
        notes.append(plan.skip_pip)
        # Nothing changes, so nothing needs undoing: the GPU tests run on what is installed.
        kept_smoke = _smoke_tests(plan, env, python, options, base, report, phases, notes, log_path)
        return InstallResult(
            plan=plan,
            builds=tuple(results),
            changed=(),
            verified=(),
            smoke=tuple(kept_smoke),
            notes=tuple(notes),
            timings=phases.items(),
        )
    if trust_note:
        notes.append(trust_note)
    uv = _uv_engine(options.installer, python, facts.real_prefix, base, log_path, notes)
    report.step(f"installing into {python}")
    with target_lock(
        python,
        default_lock_dir(),
        timeout=TARGET_LOCK_SECONDS,
        environ=base,
        prefix=facts.real_prefix,
        on_wait=lambda holder: report.step(waiting_for(python, holder)),
    ) as prefix:
        recovered = _recover_pending(prefix, base, default_journal_dir(), report)
        if recovered:
            # What this run changes is told against the environment as the restore left it.
            notes.append(
                "an earlier install into this environment was interrupted; undone first: "
                + "; ".join(recovered)
            )
            before = installed_distributions(python, base)
        with phases.timed("stash"):
            stash = Stash.begin(
                python, environ=base, journal_dir=default_journal_dir(), only=options.replaces
            )
        try:
            changed, verified, smoke_results, ran = _install_and_check(
                plan,
                env,
                pip,
                options,
                results,
                before,
                base,
                log_path,
                report,
                phases,
                notes,
                uv,
                trust_note,
                elsewhere,
            )
        except BaseException as exc:
            if _restored(exc, stash, report) and isinstance(exc, UvFailed):
                exc.restored = True  # as it was: pip may install instead
            raise
        stash.commit()
    return InstallResult(
        plan=plan,
        builds=tuple(results),
        changed=tuple(changed),
        verified=tuple(verified),
        smoke=tuple(smoke_results),
        notes=tuple(notes),
        timings=phases.items(),
        pip_runs=tuple(ran),
        installers=tuple(installer_of(command) for command in ran),
        elsewhere=tuple(elsewhere),
    )


#: pip's words when it could not verify an index's certificate (its retries log them as
#: warnings; the failure that follows only says no version was found).
_TLS_UNVERIFIED = ("CERTIFICATE_VERIFY_FAILED", "SSLCertVerificationError")


def _pip_failed(
    purpose: str, tail: Sequence[str], log_path: Path, trust_note: str | None
) -> InstallError:
    """The error for a pip step that failed: pip's own ERROR lines; where pip could not verify
    TLS, that first, with the trust note's fix (pip's own CA bundle on this network) as the
    hint, since pip then reports only "no matching distribution"."""
    detail = [line for line in tail if line.startswith("ERROR")] or list(tail[-3:])
    said = " / ".join(d.strip() for d in detail)
    restored = f"the environment was restored as it was; full log: {log_path}"
    from .pip_hashes import describe, hash_mismatches

    refused = hash_mismatches(tail)
    if refused:
        return InstallError(
            f"pip install ({purpose}) failed: a file pip fetched is not the one pinned: "
            + "; ".join(describe(m) for m in refused),
            hint="the hash comes from the plan, the lock or your requirements: where one was "
            "edited, make it again; otherwise the index now serves another file than when it was "
            f"made (a mirror out of step, or an upload replaced): ask its keeper; {restored}",
        )
    try:
        with open(log_path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 256 * 1024))
            logged = log.read().decode("utf-8", "replace")
    except OSError:
        logged = ""
    if not any(word in text for word in _TLS_UNVERIFIED for text in (logged, *tail)):
        return InstallError(f"pip install ({purpose}) failed: {said}", hint=restored)
    fix = trust_note or (
        "pip could not verify the index's certificate with its CA bundle: point PIP_CERT at "
        "this network's CA bundle, or upgrade pip (python -m pip install -U pip: pip 24.2 and "
        "later use the system trust store); cuda-resolve doctor --network shows what answers"
    )
    return InstallError(
        f"pip install ({purpose}) failed: pip could not verify the TLS certificate of the index "
        f"(CERTIFICATE_VERIFY_FAILED), so it found nothing to install: {said}",
        hint=f"{fix}; {restored}",
    )


def _install_and_check(
    plan: Plan,
    env: Environment,
    pip: TargetPip,
    options: InstallOptions,
    results: Sequence[BuildResult],
    before: Mapping[str, str],
    base: Mapping[str, str],
    log_path: Path,
    report: Reporter,
    phases: Phases,
    notes: list[str],
    uv: UvInstaller | None = None,
    trust_note: str | None = None,
    elsewhere: list[str] | None = None,
) -> tuple[
    list[tuple[str, str | None, str | None]],
    list[str],
    list[tuple[str, str]],
    list[tuple[str, ...]],
]:
    python = pip.python
    wheels = {b.key.digest: r.wheel.path for b, r in zip(plan.builds, results, strict=True)}
    hashes = {b.key.digest: r.wheel.sha256 for b, r in zip(plan.builds, results, strict=True)}
    started = time.monotonic()
    ran: list[tuple[str, ...]] = []
    wheel_lines: list[str] = []  # pip's lines naming a wheel file: which file it took
    changes = any(not r.cache_hit for r in results)  # certainly changes the target

    said_installed: list[str] = []  # pip's "Successfully installed six-1.17.0 ..."

    def on_line(line: str) -> None:
        if ".whl" in line and len(wheel_lines) < 1000:
            wheel_lines.append(line)
        if line.startswith("Successfully installed ") and len(said_installed) < 10_000:
            said_installed.extend(line.split()[2:])
        if line.strip().startswith(("Downloading ", "Using cached ")):  # sizes (issue 28)
            report.step(f"pip: {line.strip()}")
        report.progress("pip", None, None, time.monotonic() - started)

    def on_uv_line(line: str) -> None:
        report.progress("uv", None, None, time.monotonic() - started)

    # pip's temporary files (and those of a source build pip runs) go in a folder of this run,
    # removed however the run ends: a signal gives pip no time to clean up after itself.
    # Each step's time is the phase of the engine that ran it: "uv install" or "pip install".
    # A killed run's folder is removed here: pip may have left a gigabyte download in it.
    for folder in remove_dead_scratch():
        report.step(f"removed {folder}, the temporary folder of an install that was killed")
    with run_scratch() as scratch_path:
        scratch = str(scratch_path)
        inside = {"TMPDIR": scratch, "TEMP": scratch, "TMP": scratch}
        for number, step in enumerate(plan.steps, 1):
            local = _local_step(uv, step, plan, wheels, hashes)
            changes = changes or (local is not None and changes_target(local, before))
            if uv is not None and local is not None:  # local files, hash-checked: uv links them
                requirements = uv.requirements_file(local, Path(scratch), number)
                ran.append(tuple(uv.command(requirements)))
                with phases.timed("uv install"):
                    _run_uv(uv, local, requirements, inside, on_uv_line, step.purpose, log_path)
                continue
            args = _step_args(step, plan, wheels, hashes)
            ran.extend(_step_commands(pip, step, args))  # a download first: .downloads
            with phases.timed("pip install"):
                status, tail = pip.install(
                    args,
                    torch_index_only=step.torch_index_only,
                    pypi_index=step.pypi_index,
                    environ=inside,
                    on_line=on_line,
                )
            if status != 0:
                raise _pip_failed(step.purpose, tail, log_path, trust_note)
    # The import check (a real import of what was installed, in one fresh interpreter) starts
    # now where the run certainly changed the target, and the rest of the checks run meanwhile.
    check = options.verify and bool(plan.imports)
    early = _start_import_check(python, plan, base, phases, report) if check and changes else None
    with _while_checking(early):
        with phases.timed("installed list"):
            after = installed_distributions(python, base)
        _check_torch_landed(plan, env, options, wheel_lines, log_path, notes)
        _check_unplanned_torch(plan, env, python, before, after, wheel_lines, log_path)
    changed = _diff(before, after)
    if elsewhere is not None:
        elsewhere.extend(_installed_elsewhere(said_installed, changed))
    verified: list[str] = []
    if check:
        if early is None and not changed and all(r.cache_hit for r in results):
            notes.append("nothing changed in the environment: import check skipped")
        else:
            running = early or _start_import_check(python, plan, base, phases, report)
            with _while_checking(running):
                failure = running.result()
            if failure is not None:
                raise InstallError(
                    f"installed, but the import check failed: {failure}",
                    hint=f"the environment was restored as it was; full log: {log_path}",
                )
            verified = list(plan.imports)
    smoke_results = _smoke_tests(
        plan,
        env,
        python,
        options,
        base,
        report,
        phases,
        notes,
        log_path,
        restored="the environment was restored as it was; ",
    )
    return changed, verified, smoke_results, ran


def _run_uv(
    uv: UvInstaller,
    local: LocalStep,
    requirements: Path,
    environ: Mapping[str, str],
    on_line: Callable[[str], None],
    purpose: str,
    log_path: Path,
) -> None:
    """One all-local step through uv; its failure is a :class:`.uv.UvFailed` (the executor
    restores the target, then pip installs)."""
    _, status, tail = uv.install(local, requirements, environ=environ, on_line=on_line)
    if status != 0:
        detail = [line for line in tail if line.startswith(("error", "  cause"))] or tail[-3:]
        raise UvFailed(
            f"uv pip install ({purpose}) failed: {' / '.join(d.strip() for d in detail)}",
            hint=f"the environment was restored as it was; full log: {log_path}",
        )


#: pip options that install somewhere else than the target's site-packages.
_ELSEWHERE = frozenset({"--target", "--prefix", "--root"})


def _check_torch_landed(
    plan: Plan,
    env: Environment,
    options: InstallOptions,
    pip_lines: Sequence[str],
    log_path: Path,
    notes: list[str],
) -> None:
    """Refuse (the caller restores the environment) a torch other than the planned build: a CPU
    build, another variant or release, read from its files (:func:`.verify.torch_mismatch`)."""
    from ..torch_identity import read_installed_torch
    from .pipoptions import find_options
    from .verify import planned_torch, torch_mismatch, torch_supplier

    planned = planned_torch(plan.items)
    if planned is None or not env.python.site_packages:
        return
    if any(f.option.name in _ELSEWHERE for f in find_options(options.pip_args, lenient=True)):
        notes.append("pip installs outside the target's site-packages: torch's build not checked")
        return
    # The target's own site folders first (where pip installs, and import looks first), then the
    # folder detection found its torch in: a .pth file, system site-packages or PYTHONPATH can
    # put it outside them (a lab's venv over a shared torch).
    found_in = (os.path.dirname(env.torch.location),) if env.torch and env.torch.location else ()
    landed = read_installed_torch([*env.python.site_packages, *found_in])
    problem = torch_mismatch(planned, landed)
    if problem is None:
        return
    source = f"; it came from {torch_supplier(landed, pip_lines)}" if landed is not None else ""
    raise InstallError(
        f"{problem}{source}",
        hint="the environment was restored as it was; a folder of wheels in PIP_FIND_LINKS or "
        "pip's find-links/extra-index-url settings, or a mirror serving another build, is the "
        f"usual cause: check them (cuda-resolve doctor --network); full log: {log_path}",
    )


def _check_unplanned_torch(
    plan: Plan,
    env: Environment,
    python: str,
    before: Mapping[str, str],
    after: Mapping[str, str],
    pip_lines: Sequence[str],
    log_path: Path,
) -> None:
    """Refuse (the caller restores the environment) a CPU torch that pip brought in on a machine
    with NVIDIA GPUs where the plan names no torch: as a dependency (torchmetrics), through a
    constraint, or as a wheel path in a requirements file, from the user's find-links. A planned
    torch is checked by :func:`_check_torch_landed`."""
    from ..torch_identity import read_installed_torch
    from .verify import planned_torch, torch_supplier

    if not env.gpus or planned_torch(plan.items) is not None or not env.python.site_packages:
        return
    if after.get("torch") is None or after.get("torch") == before.get("torch"):
        return
    landed = read_installed_torch(list(env.python.site_packages))
    if landed is None or landed.variant != "cpu":
        return
    was = f" in place of torch {before['torch']}" if before.get("torch") else ""
    target = shlex.quote(python)
    raise InstallError(
        f"pip installed torch {landed.label}, a CPU build, on a machine with "
        f"{counted(len(env.gpus), 'NVIDIA GPU')}{was}: it came from "
        f"{torch_supplier(landed, pip_lines)}",
        hint="the environment was restored as it was; a folder of wheels in PIP_FIND_LINKS or "
        "pip's find-links settings is the usual cause. Install a CUDA torch first "
        f"(cuda-pip install torch --python {target}), then run this command again; full log: "
        f"{log_path}",
    )


def _smoke_tests(
    plan: Plan,
    env: Environment,
    python: str,
    options: InstallOptions,
    base: Mapping[str, str],
    report: Reporter,
    phases: Phases,
    notes: list[str],
    log_path: Path,
    *,
    restored: str = "",
) -> list[tuple[str, str]]:
    """With ``--smoke``, each planned package's GPU test, in order; the first failure raises."""
    results: list[tuple[str, str]] = []
    if not options.smoke:
        return results
    if not env.gpus:
        notes.append("--smoke: no GPU here, the GPU smoke tests were not run")
        return results
    for package, script in plan.smoke:
        report.step(f"running {package}'s smoke test on the GPU")
        with phases.timed("smoke test"):
            ok, output = _run_smoke(python, script, base)
        if not ok:
            raise InstallError(
                f"{package}'s smoke test failed: {output}",
                hint=f"{restored}if the GPU is busy or missing, install without --smoke; "
                f"log: {log_path}",
            )
        results.append((package, output))
    return results
