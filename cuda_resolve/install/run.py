"""The one entry point of installing: :func:`run` (and :func:`build_only` for ``cuda-resolve
build``).

``cuda-pip install``, ``cuda-resolve install``, a plan file, a lockfile's ``sync`` and the conda
plugin all call :func:`run` with an :class:`InstallRequest` and callbacks (the reporter, the
confirmation prompt, the index probe); it decides, completes and executes the Plan and returns
an :class:`~.transaction.InstallResult`. Entry points only parse, supply callbacks and render.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .._frozen import field, frozen, replace
from ..environment import Environment
from ..errors import UsageError
from ..index.model import Index
from ..plan import Plan
from ..reporting import NullReporter, Reporter
from .options import InstallOptions
from .reqfile import FileRequirement

if TYPE_CHECKING:
    from ..build.builder import BuildResult
    from ..resolve import Options as ResolveOptions
    from ..wheelhouse.store import Wheelhouse
    from .pins import ReadPage
    from .transaction import InstallResult

__all__ = [
    "InstallBackend",
    "InstallRequest",
    "build_only",
    "check_names",
    "checked_hash_mode",
    "complete_for_target",
    "decide",
    "run",
]


class InstallBackend(Protocol):
    """Carries out a complete plan in place of pip (:func:`.transaction.execute`), with its own
    undo: :class:`cuda_resolve.conda.backend.CondaChannelBackend` installs through conda's
    transaction."""

    name: str

    def execute(
        self,
        plan: Plan,
        env: Environment,
        *,
        index: Index,
        options: InstallOptions,
        wheelhouse: Wheelhouse | None = None,
        reporter: Reporter | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> InstallResult: ...


@frozen
class InstallRequest:
    """What the user asked to install, and the options that shape the decision."""

    requirements: tuple[str, ...] = ()
    file_requirements: tuple[
        FileRequirement, ...
    ] = ()  # inside -r/-c files (pip still reads the files)
    file_notes: tuple[str, ...] = ()  # what was left unread in them
    resolve: ResolveOptions | None = None
    accept_names: tuple[str, ...] = ()
    keep_stale: tuple[str, ...] = ()  # extensions left built for a torch the plan replaces
    plan: Plan | None = None  # a complete plan written earlier: applied after checking its facts
    dry_run: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)


def _curated_name(index: Index) -> Callable[[str], str | None]:
    """``text -> canonical name`` for requirements cuda-resolve decides (torch's family or a
    package it indexes), None for the rest (and for what is not a requirement at all)."""
    from .prepare import TORCH_FAMILY

    def curated(text: str) -> str | None:
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement:
            return None
        return name if name in TORCH_FAMILY or index.package(name) is not None else None

    return curated


def check_names(
    requirements: Sequence[str],
    index: Index,
    accepted: Sequence[str],
    *,
    confirm: Callable[[str], bool] | None,
) -> None:
    """Refuse a name pip would get (a pass-through request, a line of a ``-r`` file) that is one
    edit away from a curated package, unless the user confirms it (``confirm`` None: no prompt)."""
    from .names import edit_distance_at_most_one, near_miss, requirement_name

    curated = [package.name for package in index.packages]
    ok = {canonicalize_name(name) for name in accepted}
    for text in requirements:
        name = requirement_name(text)
        if name is None or canonicalize_name(name) in ok:
            continue
        meant = near_miss(name, curated)
        if meant is None:
            continue
        if confirm is not None and confirm(
            f"'{name}' is not {meant}, which cuda-resolve curates; a look-alike name on a public "
            f"index can be a typosquatted package. Install '{name}' from your index anyway? [y/N] "
        ):
            continue
        close = edit_distance_at_most_one(canonicalize_name(name), canonicalize_name(meant))
        raise UsageError(
            f"{name!r} is {'one letter away from' if close else 'a look-alike of'} {meant!r}: did "
            f"you mean {meant}?",
            hint=f"to install {meant}: cuda-pip install {meant}; to install {name!r} as written: "
            f"add --accept-name {name}",
        )


def check_sources(plan: Plan, options: InstallOptions) -> None:
    """Refuse a ``--source`` the plan would never read: ``NAME=DIR`` for a package the plan does
    not hold (a typo, another package's name: the recipe's source would be fetched instead,
    silently) or does not build (a prebuilt wheel, torch, an installed build kept), and a bare
    ``DIR`` when the plan builds more than one package (each build would be handed that one
    folder)."""
    items = plan.items
    planned = {canonicalize_name(item.name): item for item in items}
    builds = sorted({item.name for item in items if item.kind == "build"})
    for name, folder in options.source_dirs:
        if name == "*":
            if len(builds) > 1:
                raise UsageError(
                    f"--source {folder}: names no package, and the plan builds {len(builds)} "
                    f"({', '.join(builds)}), which would all be built from it",
                    hint="say which package it is the source of: "
                    + " ".join(f"--source {b}=DIR" for b in builds),
                )
            continue
        taken = planned.get(canonicalize_name(name))
        if taken is not None and taken.kind != "build":
            how = "keeps the installed" if taken.kind == "installed" else "installs the prebuilt"
            raise UsageError(
                f"--source {name}={folder}: the plan {how} {taken.name} {taken.version} and "
                "builds nothing from source for it, so that folder would not be read",
                hint=f"drop --source {name}={folder}",
            )
        if taken is None:
            raise UsageError(
                f"--source {name}={folder}: the plan has no package called {name!r}, so nothing "
                "would be built from that folder",
                hint=(
                    f"name the package it is the source of: --source {builds[0]}={folder}"
                    if len(builds) == 1
                    else f"name one of the packages the plan builds ({', '.join(builds)})"
                    if builds
                    else "drop --source: this plan builds nothing from source"
                ),
            )


def decide(
    request: InstallRequest,
    env: Environment,
    index: Index,
    *,
    reporter: Reporter,
    install: bool,
    confirm: Callable[[str], bool] | None,
) -> Plan:
    """The decision for ``request`` (the requirements, and those read from -r/-c files): the one
    ``cuda-pip install``, ``cuda-resolve build`` and ``cuda-resolve plan`` make. ``install``: the
    names pip would get are checked for look-alikes of curated packages (``confirm`` None:
    a look-alike is refused), as for an install; ``plan`` asks it too, so that it never prints a
    command cuda-pip refuses."""
    from ..plan import make_plan
    from ..resolve import Options, applies, resolve
    from .reqfile import select_requests

    from_files = select_requests(
        request.file_requirements,
        request.requirements,
        curated=_curated_name(index),
        applies=lambda requirement: applies(requirement, str(requirement), env),
    )
    for line in (*from_files.said, *request.file_notes):
        reporter.step(line)
    requests = [*request.requirements, *from_files.requests]
    options = request.resolve or Options()
    plan = make_plan(resolve(requests, env, index, options), env)
    # A torch replaced: the extensions built for the old one are carried along (issue 27).
    from .stale import carry_extensions

    plan = carry_extensions(
        plan,
        env,
        index,
        replan=lambda extra: make_plan(resolve([*requests, *extra], env, index, options), env),
        keep_stale=request.keep_stale,
    )
    if install:
        check_names(
            [*plan.pass_through, *from_files.unchecked],
            index,
            request.accept_names,
            confirm=confirm,
        )
    return plan


def checked_hash_mode(
    pip_args: Sequence[str], env: Environment, request: InstallRequest, environ: Mapping[str, str]
) -> str | None:
    """Where pip's hash-checking mode comes from (None: off), after refusing what pip would do
    without verifying TLS. pip's options are read wherever pip reads them: the command line,
    -r/-c files, its configuration and ``PIP_*`` (:func:`.pipoptions.pip_settings`). A plan
    written earlier is honoured in the mode it was made in, and refused in another."""
    from .hashmode import REQUIRE_HASHES, refuse_unhashed, unhashed_file_lines
    from .pipoptions import pip_settings, refuse_disabled_verification

    settings = pip_settings(
        pip_args,
        python=env.python.executable if env.source == "detected" else None,
        environ=environ,
    )
    refuse_disabled_verification(settings)
    if request.plan is not None:
        made_in_mode = any(REQUIRE_HASHES in step.args for step in request.plan.steps)
        if settings.hash_mode is not None and request.plan.steps and not made_in_mode:
            raise UsageError(
                f"pip's hash-checking mode is on ({settings.hash_mode}), and this plan was "
                "made without it",
                hint="make the plan again with the same pip options and settings, then apply it",
            )
        return settings.hash_mode or ("the plan's --require-hashes" if made_in_mode else None)
    if settings.hash_mode is not None:
        refuse_unhashed(settings.hash_mode, unhashed_file_lines(request.file_requirements))
    return settings.hash_mode


def complete_for_target(
    plan: Plan,
    env: Environment,
    index: Index,
    options: InstallOptions,
    *,
    wheelhouse: Wheelhouse | None,
    environ: Mapping[str, str],
    probe_target: bool = True,
    remembered: bool = False,
) -> Plan:
    """``plan`` completed for ``env``'s target (its pip facts and distributions read once;
    ``remembered``: as remembered on disk while nothing they depend on changed, for ``plan``,
    which installs nothing: :func:`.pip.pip_facts_and_distributions`)."""
    from ..build.buildenv import machine_capacity
    from .pip import pip_facts_and_distributions, refuse_externally_managed
    from .prepare import complete_plan

    facts = installed = None
    python = env.python.executable
    if probe_target and python is not None and env.source == "detected":
        facts, installed = pip_facts_and_distributions(python, environ, remembered=remembered)
        refuse_externally_managed(
            python, facts, options.pip_args, environ, requests=plan.requests()
        )
    return complete_plan(
        plan,
        env,
        index,
        options,
        pip=facts,
        installed=installed,
        wheelhouse=wheelhouse,
        capacity=machine_capacity(),
        environ=environ,
    )


def run(
    request: InstallRequest,
    environment: Environment,
    index: Index,
    options: InstallOptions,
    *,
    reporter: Reporter | None = None,
    confirm: Callable[[str], bool] | None = None,
    probe: Callable[[str], tuple[bool, str]] | None = None,
    read_page: ReadPage | None = None,
    wheelhouse: Wheelhouse | None = None,
    environ: Mapping[str, str] | None = None,
    backend: InstallBackend | None = None,
) -> InstallResult:
    """Decide (or take ``request.plan``), complete and carry out the install; see the module doc.
    ``backend`` carries the complete plan out instead of the target's pip (the target's pip is
    then not probed; a dry run returns the plan alone).

    ``read_page`` reads an index page (the network): with it, the plan's wheels are pinned to
    exact files and hashes first (:func:`.pins.pin_plan`), for a dry run too, so both print the
    same commands. With ``request.dry_run`` nothing is built or installed: the result holds the
    complete plan and, in ``pip_runs``, the exact pip commands a run would execute."""
    from ..paths import new_log_path
    from ..wheelhouse.store import Wheelhouse
    from .apply import check_plan_facts
    from .transaction import InstallResult, Phases, execute, planned_commands

    report = reporter or NullReporter()
    base = dict(os.environ if environ is None else environ)
    house = wheelhouse or Wheelhouse.default()
    for (
        note
    ) in house.notes:  # a shared wheelhouse this process cannot write: builds go to the user's own
        report.note(note)
    phases = Phases()
    hash_mode = checked_hash_mode(options.pip_args, environment, request, base)
    if hash_mode is not None:
        options = replace(options, hash_mode=hash_mode)
    probed = None
    if request.plan is not None:
        with phases.timed("plan check"):
            plan = check_plan_facts(request.plan, environment)
            check_sources(plan, options)
            if plan.skip_pip is not None and backend is None:
                # Made where everything was installed: that must hold here, or the run would
                # install nothing and say so. The answer is the executor's target probe too.
                from .apply import check_skipped_pip
                from .pip import pip_facts_and_distributions

                python = environment.python.executable or "python3"
                probed = pip_facts_and_distributions(python, base)
                check_skipped_pip(plan, probed[1])
        if (
            hash_mode is not None
        ):  # made in the mode, maybe for another machine: what it fetches unhashed
            from .hashmode import refuse_unhashed, unhashed_before_build
            from .prepare import TORCH_FAMILY

            refuse_unhashed(hash_mode, unhashed_before_build(plan, plan.builds, {}, TORCH_FAMILY))
    else:
        with phases.timed("plan"):
            plan = decide(
                request, environment, index, reporter=report, install=True, confirm=confirm
            )
        check_sources(plan, options)
        with phases.timed("pre-flight"):
            plan = complete_for_target(
                plan,
                environment,
                index,
                options,
                wheelhouse=house,
                environ=base,
                probe_target=backend is None,
            )
    python = environment.python.executable or "python3"
    if read_page is not None:
        with phases.timed("pin"):
            plan = _pinned(plan, environment, read_page, base)
    if hash_mode is not None:
        from .hashmode import refuse_unhashed, unhashed_wheels

        refuse_unhashed(hash_mode, unhashed_wheels(plan))
    if backend is not None:
        if request.dry_run:
            return InstallResult(
                plan=plan,
                builds=(),
                changed=(),
                verified=(),
                notes=plan.notes,
                timings=phases.items(),
            )
        done = backend.execute(
            plan,
            environment,
            index=index,
            options=options,
            wheelhouse=house,
            reporter=report,
            environ=base,
        )
        return replace(done, timings=(*phases.items(), *done.timings))
    if request.dry_run:
        commands = planned_commands(plan, python, house, installer=options.installer, environ=base)
        return InstallResult(
            plan=plan,
            builds=(),
            changed=(),
            verified=(),
            notes=plan.notes,
            timings=phases.items(),
            pip_runs=tuple(tuple(c) for c in commands),
        )
    result = execute(
        plan,
        environment,
        wheelhouse=house,
        options=options,
        probe=probe,
        environ=base,
        reporter=report,
        log_path=new_log_path("install"),
        probed=probed,
    )
    return replace(result, timings=(*phases.items(), *result.timings))


def _pinned(
    plan: Plan, environment: Environment, read_page: ReadPage, environ: Mapping[str, str]
) -> Plan:
    from ..plan import PYPI_SIMPLE
    from .pins import pin_plan

    pypi = PYPI_SIMPLE
    python = environment.python.executable
    if python and any(
        item.kind == "wheel" and (item.index or "").rstrip("/") == PYPI_SIMPLE
        for item in plan.items
    ):
        from .pipconfig import pip_indexes

        pypi = pip_indexes(
            python, environ
        ).index_url  # the user's mirror of PyPI, where pip will look
    return pin_plan(plan, environment, read_page, pypi_index=pypi)


def build_only(
    request: InstallRequest,
    environment: Environment,
    index: Index,
    options: InstallOptions,
    *,
    reporter: Reporter | None = None,
    wheelhouse: Wheelhouse | None = None,
    environ: Mapping[str, str] | None = None,
    check_source_names: bool = True,
) -> tuple[Plan, list[BuildResult]]:
    """``cuda-resolve build``: the plan's source builds into the wheelhouse; nothing is installed.
    With ``request.dry_run`` the plan is completed (pre-flight) and nothing is compiled.
    ``check_source_names``: refuse a ``--source`` the plan would not read (:func:`check_sources`;
    off where the folders come from standing settings, as conda's, not from this command)."""
    from ..build.builder import build
    from .downloads import DownloadingPip, downloads_root
    from .pip import pip_facts_and_distributions, trust_options
    from .prepare import complete_plan, options_for_torch_step

    report = reporter or NullReporter()
    base = dict(os.environ if environ is None else environ)
    from ..build.buildenv import machine_capacity
    from ..paths import new_log_path
    from ..wheelhouse.store import Wheelhouse

    house = wheelhouse or Wheelhouse.default()
    for note in house.notes:
        report.note(note)
    plan = request.plan or decide(
        request, environment, index, reporter=report, install=False, confirm=None
    )
    if check_source_names:
        check_sources(plan, options)
    if not plan.complete:
        plan = complete_plan(
            plan,
            environment,
            index,
            options,
            pip=None,
            installed=None,
            wheelhouse=house,
            capacity=machine_capacity(),
            environ=base,
        )
    if request.dry_run or not plan.builds:
        return plan, []
    python = plan.builds[0].spec.python
    # The same runner an install uses: the target's pip with its trust-store options.
    facts, installed = pip_facts_and_distributions(python, base)
    trust, trust_note = trust_options(facts)
    if trust_note:
        report.note(trust_note)
    # The overlay's torch goes through the download folder, as in an install (issue 28).
    pip = DownloadingPip(
        python,
        environ=base,
        trust=trust,
        log_path=new_log_path("build-overlay"),
        downloads=downloads_root(),
    )
    results = [
        build(
            b.spec,
            house,
            source_dir=options.source_for(b.spec.package),
            installed=installed,
            reporter=report,
            rebuild=options.rebuild,
            environ=base,
            pip=pip,
            key=b.key,
            pip_options=options_for_torch_step(options.pip_args),
        )
        for b in plan.builds
    ]
    return plan, results
