"""``cuda-resolve lock``: a Plan per profile, each profile's closure from pip, one document.

Every profile is decided by the same resolver as ``cuda-resolve plan`` (:func:`profile_plan`), so
a lock and a plan never disagree; a profile whose torch is installed locks that same build as a
wheel from its variant's index. Its pip steps (:func:`~cuda_resolve.install.prepare.complete_plan`)
are then resolved by pip for the profile's Python and platform (:mod:`.closure`), every file's
facts read from the index (:mod:`.files`), and the profiles merged: one entry per (name, version),
marked with the profiles that install it where not all do.

A source build the wheelhouse lacks is built first (:func:`build_missing`) by ``cuda-resolve
build REQ... --profile FILE --python PY`` (the caller's ``builder``), with an interpreter of the
profile's Python holding the profile's torch build (:func:`build_interpreter`): the build then
decides the same wheel key as the lock's plan, and the lock names the wheel it made.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from .._frozen import frozen, replace
from .._wrap import counted
from ..compat import format_arch_list
from ..config import Config
from ..detect.host import machine_facts
from ..errors import LockError, ResolutionImpossible
from ..index.model import Index
from ..net.pages import file_name
from ..plan import Plan, PlanItem, PlannedBuild
from ..reporting import NullReporter, Reporter
from ..resolve import Options, Resolution
from ..wheelhouse.store import Wheelhouse
from .closure import (
    BuiltFile,
    PipAnswers,
    ResolvedFile,
    check_interpreter,
    find_interpreter,
    interpreter_candidates,
    pip_closure,
)
from .document import LockDocument, LockedFile, LockedPackage, ProfileRecord
from .files import FileFinder
from .profiles import LockProfile, refuse_clashes
from .read import ReadLock

__all__ = [
    "Builder",
    "LockRequest",
    "build_interpreter",
    "build_missing",
    "build_words",
    "make_lock",
    "profile_plan",
    "profile_record",
    "unbuilt",
]

#: Builds ``profile``'s source builds into the wheelhouse with the interpreter given (``cuda-resolve
#: build REQ... --profile FILE --python PY``); raises a CudaResolveError when the build fails.
Builder = Callable[["LockProfile", str], None]


@frozen
class LockRequest:
    requests: tuple[str, ...]
    profiles: tuple[LockProfile, ...]
    index_url: str = "https://pypi.org/simple"
    python_for: Mapping[str, str] | None = None  # profile name -> interpreter
    wheelhouse_url: str | None = (
        None  # where the wheelhouse's folder is served (source builds are locked there)
    )
    skip_unfit: bool = False
    options: Options | None = None
    #: --source folders the builds read: (package, folder), package "*" for every build
    sources: tuple[tuple[str, Path], ...] = ()


def _installed_as_wheel(plan: Plan, resolution: Resolution) -> Plan:
    """An installed torch (or family member) locked as that same build, a wheel from its variant's
    index, or PyPI's file where the installed one is (pip's version has no local label)."""
    from ..plan import PYPI_SIMPLE
    from ..torch_identity import identity_of

    torch = plan.environment.torch
    # pip's versions: a torch from PyPI (no local label in its metadata) is PyPI's file, whatever
    # its version.py says ("2.15.0+cu132"): torch==2.15.0+cu132 is not on PyPI (issue 27).
    identity = identity_of(torch) if torch is not None else None
    pip_versions = {
        "torch": identity.pip_version if identity else None,
        "torchvision": torch.torchvision if torch else None,
        "torchaudio": torch.torchaudio if torch else None,
    }
    items: list[PlanItem] = []
    for item in plan.items:
        candidate = resolution.get(item.name)
        variant = candidate.torch_variant if candidate is not None else None
        pip_version = pip_versions.get(item.name)
        if item.kind == "installed" and identity is not None and identity.source == "pypi":
            if pip_version and "+" not in pip_version:
                item = PlanItem(
                    name=item.name,
                    version=pip_version,
                    kind="wheel",
                    variant=item.variant,
                    requirement=f"{item.name}=={pip_version}",
                    index=PYPI_SIMPLE,
                )
        if item.kind == "installed" and variant is not None:
            version = (
                item.version
                if "+" in item.version or not item.variant
                else f"{item.version}+{item.variant}"
            )
            item = PlanItem(
                name=item.name,
                version=item.version,
                kind="wheel",
                variant=item.variant,
                requirement=f"{item.name}=={version}",
                index=variant.index_url,
            )
        items.append(item)
    return replace(plan, items=tuple(items))


def profile_plan(
    profile: LockProfile,
    requests: Sequence[str],
    index: Index,
    options: Options,
    config: Config,
    wheelhouse: Wheelhouse | None = None,
) -> tuple[Plan, Resolution]:
    """The complete Plan ``cuda-resolve plan REQ... --profile FILE`` makes, with an installed
    torch as a wheel."""
    from ..install.options import InstallOptions
    from ..install.prepare import complete_plan
    from ..plan import make_plan
    from ..resolve import resolve

    # A lock names files: an installed extension build the machine happens to hold
    # (resolve.installed) is no file, so the lock plans the build (found in the wheelhouse) as if it
    # were not there.
    resolution = resolve(list(requests), profile.environment, index, replace(options, rebuild=True))
    plan = _installed_as_wheel(make_plan(resolution, profile.environment), resolution)
    install_options = InstallOptions(
        torch_index=config.pytorch.url if config.pytorch else None,
        torch_index_option=config.pytorch.pip_option if config.pytorch else "--index-url",
    )
    plan = complete_plan(
        plan,
        profile.environment,
        index,
        install_options,
        pip=None,
        installed=None,
        wheelhouse=wheelhouse,
    )
    return plan, resolution


def built_files(
    plan: Plan,
    profile: LockProfile,
    wheelhouse: Wheelhouse,
    wheelhouse_url: str | None,
    *,
    index_url: str | None = None,
    finder: FileFinder | None = None,
) -> dict[str, BuiltFile]:
    """Each source build of ``plan`` as the wheelhouse holds it, at its served URL: under
    ``wheelhouse_url`` where the wheelhouse folder itself is served, else where the lab's index
    server (``index_url``, the config's ``wheelhouse_url``) lists the same file (same sha256); an
    error saying what to build, publish or serve when neither holds."""
    from urllib.parse import quote

    found: dict[str, BuiltFile] = {}
    for build in plan.builds:
        stored = wheelhouse.lookup(build.key)
        if stored is None:
            raise LockError(
                f"profile {profile.name}: {build.spec.package} {build.key.labelled_version} is "
                f"built from source and the wheelhouse ({wheelhouse.root}) has no wheel for it",
                hint=f"build it for that profile first: cuda-resolve build {build.spec.package} "
                f"--profile {profile.source} (a login node can: nvcc needs no GPU), "
                "then lock again",
            )
        if wheelhouse_url is not None:
            relative = stored.path.resolve().relative_to(wheelhouse.root.resolve())
            url = (
                wheelhouse_url.rstrip("/") + "/" + "/".join(quote(part) for part in relative.parts)
            )
        elif index_url is not None and finder is not None:
            listed = finder.locate(index_url, canonicalize_name(build.key.package), stored.filename)
            if listed is None or (listed[1] is not None and listed[1] != stored.sha256):
                what = "does not list" if listed is None else "lists another file under the name of"
                raise LockError(
                    f"profile {profile.name}: the lab's index {index_url} {what} {stored.filename}",
                    hint="publish it (cuda-resolve wheelhouse publish), or serve the wheelhouse "
                    "folder and give --wheelhouse-url URL",
                )
            url = listed[0]
        else:
            raise LockError(
                f"profile {profile.name}: {build.spec.package} is locked from the wheelhouse, and "
                "no URL serves it",
                hint="publish the wheelhouse to the lab's index (wheelhouse_url in the config; "
                "cuda-resolve wheelhouse publish), "
                "or serve its folder (any static server; cuda-resolve wheelhouse path) and give "
                "--wheelhouse-url URL",
            )
        found[build.key.digest] = BuiltFile(
            path=stored.path, url=url, sha256=stored.sha256, size=stored.size
        )
    return found


def unbuilt(plan: Plan, wheelhouse: Wheelhouse) -> tuple[PlannedBuild, ...]:
    """The source builds of ``plan`` the wheelhouse has no wheel for."""
    return tuple(build for build in plan.builds if wheelhouse.lookup(build.key) is None)


def build_words(
    profile: LockProfile, requests: Sequence[str], interpreter: str | None, torch: str | None = None
) -> list[str]:
    """``build REQ... --profile FILE --python PY``: the build that makes ``profile``'s wheels
    (the words after ``cuda-resolve``); ``this`` is the machine itself, so no ``--profile``.
    Without ``interpreter`` a placeholder says what it must be (``torch``: the build it holds)."""
    words = ["build", *requests]
    if profile.source != "this":
        words += ["--profile", profile.source]
    placeholder = f"PYTHON{profile.environment.python.short_version}" + (
        f"-WITH-TORCH-{torch}" if torch else ""
    )
    return [*words, "--python", interpreter or placeholder]


def _torch_install(build: PlannedBuild) -> str:
    """``pip install torch==2.14.1+cu126 --index-url URL``: the torch ``build`` is against, from
    the index that serves it (none: PyPI's default build; user walk C6 read "the cu132 index")."""
    spec = build.spec
    words = ["pip", "install", spec.torch_requirement or f"torch=={spec.torch_version}"]
    if spec.torch_index:
        words += [spec.torch_index_option or "--index-url", spec.torch_index]
    return shlex.join(words)


def _torch_wanted(builds: Sequence[PlannedBuild]) -> str:
    spec = builds[0].spec
    return f"{spec.torch_version}+{spec.variant}"


def build_interpreter(
    profile: LockProfile,
    builds: Sequence[PlannedBuild],
    given: str | None,
    environ: Mapping[str, str],
) -> tuple[str | None, str]:
    """An interpreter that can build ``builds`` for ``profile``: the profile's Python minor, with
    the torch build they are built against installed (so ``cuda-resolve build --python`` keeps it
    and decides the lock's wheel key). ``given`` (``--python-for``) is the only one tried when
    given; else this one, pyenv's, ``pythonX.Y`` on PATH, uv's. (the interpreter, what was found
    instead: a line for the error when there is none)."""
    from ..detect.target import probe_target
    from ..errors import CudaResolveError

    minor = profile.environment.python.short_version
    spec = builds[0].spec
    if given:
        candidates = [given]
    else:
        own = profile.environment.python.executable if profile.source == "this" else None
        candidates = list(
            dict.fromkeys([*([own] if own else []), *interpreter_candidates(minor, environ)])
        )
    seen: list[str] = []
    for candidate in candidates:
        try:
            facts = probe_target(candidate, environ=environ, timeout=60, extension_names=())
        except CudaResolveError as exc:
            seen.append(f"{candidate} ({exc})")
            continue
        if facts.python.short_version != minor:
            seen.append(f"{candidate} (Python {facts.python.version})")
            continue
        torch = facts.torch
        if torch is None:
            seen.append(f"{candidate} (Python {facts.python.version}, no torch)")
            continue
        from ..torch_identity import identity_of

        variant = identity_of(torch).variant or "cpu"  # one reading of the build
        if torch.base_version != spec.torch_version or variant != spec.variant:
            seen.append(f"{candidate} (torch {torch.base_version}+{variant})")
            continue
        return candidate, ""
    return None, ("found " + ", ".join(seen)) if seen else f"no Python {minor} was found"


def _refuse_unpinned_sources(
    builds: Sequence[PlannedBuild], request: LockRequest, environ: Mapping[str, str]
) -> None:
    """A lock names wheels that anyone reinstalls by hash and rebuilds from the pinned source:
    a ``--source`` folder that is not that source (a plain copy, edited files) is refused before
    anything is built. Its build would be its own wheel, which the lock's profiles never name."""
    from ..build.source import source_identity
    from ..install.options import source_folder

    checked: set[tuple[str, Path]] = set()  # each profile may miss the same build: read once
    for build in builds:
        folder = source_folder(request.sources, build.spec.package)
        recipe = build.spec.recipe
        if folder is None or (recipe.name, folder) in checked:
            continue
        checked.add((recipe.name, folder))
        identity = source_identity(recipe, folder, environ)
        if identity is None:
            continue
        pinned = (
            f"a checkout of {recipe.repository} at {recipe.revision} with no changes"
            if recipe.revision
            else "no --source (the recipe's archive, checked by sha256)"
        )
        raise LockError(
            f"--source {folder} {identity.why}: a lock names builds of the pinned source, "
            "which anyone can rebuild, so it cannot build from this folder; nothing was built",
            hint=f"give {pinned}; to install this folder's build without a lock: cuda-pip "
            f"install {build.spec.package} --source {folder}",
        )


def build_missing(
    planned: Sequence[tuple[LockProfile, Plan, Resolution]],
    request: LockRequest,
    index: Index,
    options: Options,
    config: Config,
    wheelhouse: Wheelhouse,
    *,
    builder: Builder | None,
    environ: Mapping[str, str],
    report: Reporter,
) -> tuple[list[tuple[LockProfile, Plan, Resolution]], list[str]]:
    """Each profile's plan with every source build in the wheelhouse: what is missing is built
    (``builder``) and the profile planned again, so the lock names the wheel made. Interpreters
    are found for every profile before anything is built; a profile without one (or of another
    OS or CPU architecture) fails the lock naming what it lacks, or with ``skip_unfit`` is left
    out (the second value: why). ``builder=None`` (``lock --no-build``) fails with the build
    commands to run instead."""
    needs = [
        (profile, plan, resolution, missing)
        for profile, plan, resolution in planned
        if (missing := unbuilt(plan, wheelhouse))
    ]
    if not needs:
        return list(planned), []
    _refuse_unpinned_sources([b for *_, missing in needs for b in missing], request, environ)
    if builder is None:
        lines = [
            f"profile {profile.name}: "
            + ", ".join(f"{b.spec.package} {b.key.labelled_version}" for b in missing)
            for profile, _, _, missing in needs
        ]
        commands = [
            "cuda-resolve "
            + shlex.join(
                build_words(
                    profile,
                    request.requests,
                    (request.python_for or {}).get(profile.name),
                    _torch_wanted(missing),
                )
            )
            for profile, _, _, missing in needs
        ]
        raise LockError(
            f"the wheelhouse ({wheelhouse.root}) has no wheel for these source builds: "
            + "; ".join(lines),
            hint="build them first, each with an interpreter of the profile's Python and torch (a "
            "login node can: nvcc needs no GPU), "
            "then lock again (lock without --no-build builds them itself where it has an "
            "interpreter for each profile: --python-for NAME=PATH): " + " ; ".join(commands),
        )
    # Profiles are read in detection's spelling (amd64 is x86_64): the two compare as they are.
    this_machine = machine_facts(platform=None, machine=None, glibc=None)
    here = (this_machine.os, this_machine.arch)
    chosen: dict[str, str] = {}
    lacking: dict[str, str] = {}
    for profile, _, _, missing in needs:
        machine = profile.environment.machine
        what = ", ".join(f"{b.spec.package} {b.key.labelled_version}" for b in missing)
        if (machine.os, machine.arch) != here:
            words = build_words(profile, request.requests, None, _torch_wanted(missing))
            lacking[profile.name] = (
                f"profile {profile.name} ({machine.os} {machine.arch}) needs {what} built, "
                f"and this machine ({here[0]} {here[1]}) cannot build for it: build on a "
                f"{machine.os} {machine.arch} machine "
                f"(cuda-resolve {shlex.join(words)}) "
                "into the wheelhouse, then lock again"
            )
            continue
        given = (request.python_for or {}).get(profile.name)
        interpreter, found = build_interpreter(profile, missing, given, environ)
        if interpreter is None:
            minor = profile.environment.python.short_version
            lacking[profile.name] = (
                f"profile {profile.name} needs {what} built, which needs Python {minor} with "
                f"torch {_torch_wanted(missing)} "
                f"installed; {found}: give one with --python-for {profile.name}=PATH "
                f"(a venv of Python {minor} where `{_torch_install(missing[0])}` was run)"
            )
            continue
        chosen[profile.name] = interpreter
    skipped = []
    if lacking:
        if not request.skip_unfit:
            raise LockError(
                "; ".join(lacking.values()),
                hint="give each such profile an interpreter (--python-for NAME=PATH), build its "
                "wheels elsewhere (lock --no-build prints the commands), or leave it out "
                "(--skip-unfit)",
            )
        for name, line in lacking.items():
            skipped.append(f"{name}: {line}")
            report.note(f"profile {name} left out: {line}")
    done: list[tuple[LockProfile, Plan, Resolution]] = []
    for profile, plan, resolution in planned:
        if profile.name in lacking:
            continue
        interpreter = chosen.get(profile.name)
        if interpreter is None:
            done.append((profile, plan, resolution))
            continue
        missing = unbuilt(plan, wheelhouse)
        report.step(
            f"profile {profile.name}: building "
            f"{', '.join(b.spec.package + ' ' + b.key.labelled_version for b in missing)} "
            f"with {interpreter}: cuda-resolve "
            f"{shlex.join(build_words(profile, request.requests, interpreter))}"
        )
        builder(profile, interpreter)
        plan, resolution = profile_plan(
            profile, request.requests, index, options, config, wheelhouse
        )
        still = unbuilt(plan, wheelhouse)
        if still:
            raise LockError(
                f"profile {profile.name}: the build with {interpreter} made no wheel for "
                + ", ".join(f"{b.spec.package} {b.key.labelled_version}" for b in still)
                + " (it decided another build: its torch or Python is not the profile's)",
                hint="run it to see what it decides: cuda-resolve "
                + shlex.join([*build_words(profile, request.requests, interpreter), "--dry-run"]),
            )
        for build in plan.builds:
            stored = wheelhouse.lookup(build.key)
            if stored is not None:
                report.step(
                    f"profile {profile.name}: {stored.path.name} (sha256 {stored.sha256[:16]}...)"
                )
        done.append((profile, plan, resolution))
    return done, skipped


def profile_record(
    profile: LockProfile, plan: Plan, resolution: Resolution, interpreter: str
) -> ProfileRecord:
    env = profile.environment
    torch = resolution.get("torch")
    variant = torch.torch_variant if torch is not None else None
    torch_item = next((i for i in plan.items if i.name == "torch"), None)
    torch_version = None
    if torch_item is not None:
        torch_version = (torch_item.requirement or "").partition("==")[2] or torch_item.version
    toolkit = env.primary_toolkit
    return ProfileRecord(
        name=profile.name,
        source=profile.source,
        digest=profile.digest,
        python=env.python.short_version,
        os=env.machine.os,
        arch=env.machine.arch,
        glibc=env.machine.glibc,
        driver=str(env.driver.version) if env.driver else None,
        driver_cuda=str(env.driver.cuda) if env.driver else None,
        gpus=tuple(f"{g.name} ({g.compute_capability})" for g in env.gpus),
        capabilities=tuple(str(c) for c in env.capabilities),
        torch=torch_version,
        torch_cuda=str(variant.cuda) if variant and variant.cuda else None,
        torch_arch_list=format_arch_list(variant.arch_list)
        if variant and variant.arch_list
        else None,
        toolkit=str(toolkit.version) if toolkit else None,
        decision=tuple(
            f"{(i.requirement or i.name + '==' + i.version).split('[')[0]} ({i.kind})"
            for i in plan.items
        )
        + tuple(f"{text} (pip)" for text in plan.pass_through),
        interpreter="{}.{}".format(*env.python.version_tuple),
        builds=tuple(_build_line(build) for build in plan.builds),
    )


def _build_line(build: PlannedBuild) -> str:
    """One source build as the lock records it: what was built, from what, for which ABI."""
    recipe = build.spec.recipe
    source = (
        f"{recipe.repository}@{recipe.revision}"
        if recipe.repository
        else (recipe.archive.url if recipe.archive else "?")
    )
    import hashlib

    # A patch's digest: its file, what it finds and what it puts there, so an edited patch shows.
    patches = (
        ",".join(
            f"{p.file}:{hashlib.sha256(f'{p.file}|{p.find}|{p.replace}'.encode()).hexdigest()[:12]}"
            for p in recipe.patches
        )
        or "none"
    )
    return (
        f"{build.spec.package} {build.key.labelled_version}: recipe {recipe.name} ({source}; "
        # The key's arch list: the wheel locked (a reused one may cover more GPUs than asked).
        f"patches {patches}); arch list {build.key.arch_list}; key {build.key.digest}"
    )


def _canonical_from(config: Config) -> Callable[[str], str]:
    """The canonical URL of a file fetched through a configured mirror (the rewrite run
    backwards)."""

    def canonical(url: str) -> str:
        # An index URL may lack the rule's final "/" (pip was given https://mirror/simple).
        slashed = url if url.endswith("/") else f"{url}/"
        best = None
        for rule in config.rewrites:
            if slashed.startswith(rule.mirror) and (
                best is None or len(rule.mirror) > len(best.mirror)
            ):
                best = rule
        if best is None:
            return url
        found = best.canonical + slashed[len(best.mirror) :]
        return found if url.endswith("/") else found[:-1]

    return canonical


def make_lock(
    request: LockRequest,
    index: Index,
    config: Config,
    *,
    finder: FileFinder,
    environ: Mapping[str, str],
    wheelhouse: Wheelhouse | None = None,
    reporter: Reporter | None = None,
    created_by: str = "cuda-resolve",
    answers: PipAnswers | None = None,
    keep: ReadLock | None = None,
    builder: Builder | None = None,
) -> tuple[LockDocument, tuple[str, ...]]:
    """The lock document, and the profiles left out (``skip_unfit``) with the reason for each.

    Source builds the wheelhouse lacks are made with ``builder`` first (:func:`build_missing`);
    without one the lock fails with the build commands to run.

    With ``keep`` (``lock --profile X --update``), the profiles of that lock not given here are
    carried over as they are: their files and facts, so their entries stay byte-identical."""
    from .. import __version__

    report = reporter or NullReporter()
    profiles = list(request.profiles)
    refuse_clashes(profiles)
    for name, interpreter in (request.python_for or {}).items():  # said before any work
        check_interpreter(interpreter, f"--python-for {name}", environ)
    if not profiles:
        raise LockError(
            "a lock needs at least one profile",
            hint="--profile FILE (from `cuda-resolve detect --save-profile FILE`), or "
            "--profile this",
        )
    options = request.options or Options()
    records: list[ProfileRecord] = []
    per_profile: dict[str, list[ResolvedFile]] = {}
    skipped: list[str] = []
    memo = answers or PipAnswers(None)
    planned: list[tuple[LockProfile, Plan, Resolution]] = []
    unfit: list[str] = []  # the files of the profiles left out for which nothing fits
    for profile in profiles:
        report.step(f"profile {profile.name}: resolving {' '.join(request.requests)}")
        try:
            plan, resolution = profile_plan(
                profile, request.requests, index, options, config, wheelhouse
            )
        except ResolutionImpossible as exc:
            if request.skip_unfit:
                skipped.append(f"{profile.name}: {exc}")
                unfit.append(profile.source)
                report.note(f"profile {profile.name} left out: {exc}")
                continue
            raise ResolutionImpossible(
                f"profile {profile.name} ({profile.source}): {exc}",
                hint=exc.hint,
                reasons=exc.reasons,
            ) from None
        planned.append((profile, plan, resolution))
    if wheelhouse is not None:
        planned, unbuildable = build_missing(
            planned,
            request,
            index,
            options,
            config,
            wheelhouse,
            builder=builder,
            environ=environ,
            report=report,
        )
        skipped.extend(unbuildable)
    with tempfile.TemporaryDirectory(prefix="cuda-resolve-lock-") as scratch:
        for profile, plan, resolution in planned:
            given = (request.python_for or {}).get(profile.name)
            python = find_interpreter(profile.environment.python.version, given, environ)
            if python is None:
                raise LockError(
                    f"profile {profile.name} needs a Python "
                    f"{profile.environment.python.short_version} to resolve its closure, and none "
                    "was found here",
                    hint=f"--python-for {profile.name}=PATH (or install one: pyenv install "
                    f"{profile.environment.python.short_version}, uv python install "
                    f"{profile.environment.python.short_version})",
                )
            report.step(
                f"profile {profile.name}: pip resolves the closure for Python "
                f"{profile.environment.python.short_version} ({python})"
            )
            per_profile[profile.name] = pip_closure(
                plan,
                profile.environment,
                pip_python=python,
                # Through the configured mirror (`mirror set` writes one for PyPI), as files
                # are fetched; the lock keeps the canonical URLs.
                index_url=config.rewrite(f"{request.index_url}/").rstrip("/"),
                environ=environ,
                scratch=Path(scratch),
                name=profile.name,
                memo=memo,
                built=built_files(
                    plan,
                    profile,
                    wheelhouse,
                    request.wheelhouse_url,
                    index_url=config.wheelhouse_url,
                    finder=finder,
                )
                if plan.builds and wheelhouse
                else None,
            )
            records.append(profile_record(profile, plan, resolution, python))
    if keep is not None:
        if tuple(keep.requests) != tuple(request.requests):
            raise LockError(
                f"{keep.origin} was made for {' '.join(keep.requests)}, not "
                f"{' '.join(request.requests)}",
                hint="--update relocks profiles for the lock's own requests; to change them, lock "
                "every profile again",
            )
        relocked = {p.name for p in profiles}
        for name, record in sorted(keep.profiles.items()):
            if name not in relocked:
                records.append(record)
                per_profile[name] = _kept_files(keep, name)
    if not records:
        import shlex

        explain = shlex.join(
            ["cuda-resolve", "plan", *request.requests, "--profile", unfit[0], "--explain"]
            if unfit and unfit[0] != "this"
            else ["cuda-resolve", "plan", *request.requests, "--explain"]
        )
        raise LockError(
            "no profile fits: " + "; ".join(skipped),
            hint=f"see each profile's reason; `{explain}` says more",
        )
    finder.canonical = _canonical_from(config)
    packages = _merge(per_profile, finder, report)
    document = LockDocument(
        profiles=tuple(sorted(records, key=lambda r: r.name)),
        packages=packages,
        requests=request.requests,
        created_by=created_by,
        resolver=f"cuda-resolve {__version__}",
        index_url=request.index_url,
    )
    return document, tuple(skipped)


def _merge(
    per_profile: Mapping[str, list[ResolvedFile]], finder: FileFinder, report: Reporter
) -> tuple[LockedPackage, ...]:
    """One package per (name, version): the profiles that install it, all its files."""
    grouped: dict[tuple[str, str], dict[str, object]] = {}
    # Profiles in name order, the first to name a file wins: the order of --profile never shows.
    for profile, files in sorted(per_profile.items()):
        for resolved in files:
            entry = grouped.setdefault(
                (resolved.name, resolved.version),
                {"profiles": set(), "files": {}, "index": None, "requested": False},
            )
            entry["profiles"].add(profile)  # type: ignore[attr-defined]
            known = entry["files"].get(file_name(resolved.url))  # type: ignore[attr-defined]
            if known is None:
                entry["files"][file_name(resolved.url)] = resolved  # type: ignore[index]
            elif known.url != resolved.url or known.sha256 != resolved.sha256:
                # A page that lists no hash leaves pip's report without one: the index's JSON
                # or the file itself decides whether the two are one file (issue 25).
                first, second = (
                    f.sha256
                    or finder.facts(f.url, project=f.name, index=f.index, sha256=None).sha256
                    for f in (known, resolved)
                )
                if first != second:
                    raise LockError(
                        f"{file_name(resolved.url)} differs between {known.url} and "
                        f"{resolved.url} (sha256 {first} vs {second})",
                        hint="two indexes serve different files under one name: lock the "
                        "profiles from one index, or remove one copy",
                    )
            entry["index"] = entry["index"] or resolved.index
            entry["requested"] = bool(entry["requested"]) or resolved.requested
    packages: list[LockedPackage] = []
    for (name, version), entry in sorted(grouped.items()):
        wheels = []
        for resolved in entry["files"].values():  # type: ignore[attr-defined]
            facts = finder.facts(
                resolved.url,
                project=name,
                index=resolved.index,
                sha256=resolved.sha256,
                size=resolved.size,
            )
            wheels.append(
                LockedFile(
                    name=file_name(facts.url), url=facts.url, size=facts.size, sha256=facts.sha256
                )
            )
        index_url = entry["index"]
        packages.append(
            LockedPackage(
                name=name,
                version=version,
                profiles=tuple(sorted(entry["profiles"])),  # type: ignore[call-overload]
                index=finder.canonical(index_url) if isinstance(index_url, str) else None,
                wheels=tuple(sorted(wheels, key=lambda w: w.name)),
                requested=bool(entry["requested"]),
            )
        )
    report.step(f"{counted(len(packages), 'package')} locked")
    return tuple(packages)


def _kept_files(lock: ReadLock, profile: str) -> list[ResolvedFile]:
    """What ``profile`` installs in an existing lock, as the closure would have named it."""
    from packaging.markers import Marker

    found = []
    for package in lock.pylock.packages:
        marker: Marker | None = package.marker
        if marker is not None and f"'{profile}' in extras" not in _our_marker_terms(marker):
            continue
        tool = (package.tool or {}).get("cuda-resolve", {})
        for wheel in package.wheels or ():
            sha = (wheel.hashes or {}).get("sha256")
            if wheel.url is None or not sha or wheel.size is None:
                raise LockError(
                    f"{lock.origin}: {package.name} {package.version}: a wheel without url, size "
                    "or sha256 cannot be kept",
                    hint="lock every profile again (without --update)",
                )
            found.append(
                ResolvedFile(
                    name=str(package.name),
                    version=str(package.version),
                    url=wheel.url,
                    sha256=str(sha),
                    requested=bool(tool.get("requested")) if isinstance(tool, dict) else False,
                    index=package.index,
                    size=wheel.size,
                )
            )
    return found


def _our_marker_terms(marker: object) -> set[str]:
    """The ``'NAME' in extras`` terms of a marker this module wrote (``extras_marker``'s form)."""
    text = str(marker).replace('"', "'")
    return {term.strip() for term in text.split(" or ")}
