"""Completing a Plan: every build's spec and wheel key, every pip step's exact words, decided here.

:func:`complete_plan` is pure apart from reading the wheelhouse's entries: from the decision
(:func:`cuda_resolve.plan.make_plan`), the Environment, the index, the user's options and the
target's pip facts it derives each build's pre-flight
(:func:`~cuda_resolve.build.preflight.check_build`, refused in well under a second when impossible),
whether the wheelhouse already has a wheel that covers every GPU, ``MAX_JOBS``, the pip steps (the
torch family from the PyTorch index alone, the rest with the user's options, built wheels referenced
by key, ``--no-deps`` where every runtime requirement is installed), the trust options, and the
imports to check. The executor then does exactly this; ``--dry-run`` prints it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._frozen import replace
from ..build.buildenv import max_jobs, unsatisfied
from ..build.key import wheel_key
from ..build.preflight import check_build
from ..build.source import SourceIdentity, describe_source, source_identity
from ..build.spec import BuildSpec
from ..compat import marker_environment
from ..environment import Environment
from ..errors import UsageError
from ..index.model import Index, Recipe
from ..plan import PYPI_SIMPLE, PipStep, Plan, PlanItem, PlannedBuild
from .hashmode import REQUIRE_HASHES, refuse_unhashed, unhashed_before_build
from .options import InstallOptions
from .pip import PipFacts, trust_options
from .pipoptions import elsewhere_variables, names_requirements

if TYPE_CHECKING:
    from ..wheelhouse.store import Wheelhouse

__all__ = [
    "TORCH_FAMILY",
    "complete_plan",
    "installed_as_planned",
    "names_requirements",
    "options_for_torch_step",
]

TORCH_FAMILY = ("torch", "torchvision", "torchaudio")


def options_for_torch_step(pip_args: Sequence[str], *, keep_index: bool = False) -> list[str]:
    """The user's pip options that hold for the torch-family step too (``--proxy``, ``--target``,
    ``-c``, ``--no-cache-dir`` ...): all but those that name requirements or indexes (with
    ``keep_index``, torch from PyPI, the user's ``--index-url``/``--no-index`` stay)."""
    from .pipoptions import options_for_torch_step as in_any_spelling

    return in_any_spelling(pip_args, keep_index=keep_index)


def _recipe(index: Index, item: PlanItem) -> tuple[Recipe, str]:
    package = index.package(item.name)
    recipe = next((r for r in package.recipes if r.name == item.recipe), None) if package else None
    if package is None or recipe is None:
        raise UsageError(
            f"the plan builds {item.name} with recipe {item.recipe!r}, which the index "
            "does not have",
            hint="use the index the plan was made with (--index DIR), or make the plan again",
        )
    return recipe, package.import_name


def _torch_index_for(
    variant: str | None, index_url: str, options: InstallOptions
) -> tuple[str, str]:
    """(pip option, URL) for a torch-family wheel from the PyTorch index (or its mirror)."""
    if options.torch_index and variant:
        return options.torch_index_option, f"{options.torch_index}{variant}/"
    return "--index-url", index_url


#: A wheel's METADATA larger than this is not read (it is not a real one).
_METADATA_LIMIT = 1024 * 1024


def requires_dist(wheel: Path) -> list[str] | None:
    """The wheel's ``Requires-Dist`` lines; None when its metadata cannot be read."""
    import email.parser
    import zipfile  # only where a built wheel is read: plan's start-up imports none (issue 28)

    try:
        with zipfile.ZipFile(wheel) as archive:
            name = next(
                (
                    n
                    for n in archive.namelist()
                    if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
                ),
                None,
            )
            if name is None or archive.getinfo(name).file_size > _METADATA_LIMIT:
                return None
            text = archive.read(name).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile):
        return None
    return list(email.parser.HeaderParser().parsestr(text).get_all("Requires-Dist") or [])


def requirements_met(
    lines: Sequence[str] | None, installed: Mapping[str, str], env: Environment
) -> bool:
    """Every requirement in ``lines`` that applies to the target is installed at a fitting
    version."""
    return lines is not None and not unmet_requirements(lines, installed, env)


def unmet_requirements(
    lines: Sequence[str], installed: Mapping[str, str], env: Environment
) -> list[str]:
    """The requirements in ``lines`` that apply to the target and are not installed at a fitting
    version (one with extras or a URL counts as unmet: what it pulls in is pip's to resolve)."""
    markers = dict(marker_environment(env), extra="")
    unmet: list[str] = []
    applying: list[str] = []
    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            unmet.append(line)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(markers):
            continue
        if requirement.extras or requirement.url:
            unmet.append(line)
            continue
        applying.append(line)
    return [*unmet, *unsatisfied(applying, installed)]


def _planned_build(
    spec: BuildSpec,
    source: str,
    identity: SourceIdentity | None,
    wheelhouse: Wheelhouse | None,
    options: InstallOptions,
    env: Environment,
) -> tuple[PlannedBuild, Path | None]:
    """The build, and the wheelhouse file already holding a wheel for it (None: it will be built).

    Reuse by coverage: where the exact key is not there, a wheel of the same ABI (torch, variant,
    Python tag, platform, recipe) whose arch list covers every GPU here is used instead (exact
    SASS before lower-minor SASS before PTX, then fewer targets). Not when the user named the
    arch list: they build for other machines too. Then the lab's index server, where one is
    configured (wheelhouse/served.py): a fitting wheel it serves is downloaded into the
    wheelhouse; its notes (the server down) become the build's. ``identity``: the ``--source``
    tree's content, where it is not the pinned source (it goes into the key)."""
    key = wheel_key(spec, identity)
    if wheelhouse is None or options.rebuild:
        return PlannedBuild(spec=spec, key=key, source=source), None
    found = wheelhouse.lookup(key)
    if found is not None:
        return PlannedBuild(
            spec=spec,
            key=key,
            source=source,
            reused=f"the wheelhouse has this exact build ({found.path.name})",
        ), found.path
    capabilities = list(env.capabilities)
    if capabilities and not options.explicit_arch_list:
        covering = wheelhouse.find_covering(key.query(), capabilities)
        if covering is not None:
            stored, reason = covering
            return PlannedBuild(
                spec=spec, key=stored.key, source=source, reused=reason
            ), stored.path
    if (
        wheelhouse.served is not None
    ):  # the lab's index server: a fitting wheel is downloaded into the wheelhouse
        served = wheelhouse.served.fetch_into(
            wheelhouse, key, capabilities, exact_arch_list=options.explicit_arch_list
        )
        spec = replace(spec, notes=(*spec.notes, *served.notes)) if served.notes else spec
        if served.stored is not None:
            return PlannedBuild(
                spec=spec, key=served.stored.key, source=source, reused=served.reason
            ), served.stored.path
    return PlannedBuild(spec=spec, key=key, source=source), None


def _gpu_smoke(index: Index, name: str) -> str | None:
    """The GPU smoke test of the first of ``name``'s recipes that has one (None: none has)."""
    package = index.package(name)
    found = (
        next((r.smoke for r in package.recipes if r.smoke and r.smoke.gpu_script), None)
        if package
        else None
    )
    return found.gpu_script if found else None


def installed_as_planned(item: PlanItem, installed: Mapping[str, str]) -> bool:
    """``item`` is kept as installed, and the target still has it (torch's metadata may lack the
    local tag its version.py has: the release decides)."""
    if item.kind != "installed" or (found := installed.get(canonicalize_name(item.name))) is None:
        return False
    if item.name in TORCH_FAMILY:
        return found.split("+", 1)[0] == item.version.split("+", 1)[0]
    try:
        return Version(found) == Version(item.version)
    except InvalidVersion:
        return False


def complete_plan(
    plan: Plan,
    env: Environment,
    index: Index,
    options: InstallOptions,
    *,
    pip: PipFacts | None,
    installed: Mapping[str, str] | None,
    wheelhouse: Wheelhouse | None = None,
    capacity: tuple[int, int | None] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Plan:
    """``plan`` with everything the executor needs decided.

    ``pip`` and ``installed`` are the target's pip facts and distributions (None for a plan
    made for another machine: trust options are then decided when applied, and no step leaves
    out pip's dependency resolution). ``capacity`` (cores, available bytes) decides ``MAX_JOBS``;
    ``environ`` supplies the user's own ``MAX_JOBS``."""
    parts = _Completion(
        plan,
        env,
        index,
        options,
        wheelhouse=wheelhouse,
        capacity=capacity,
        user_jobs=(environ or {}).get("MAX_JOBS", "").strip(),
        environ=os.environ if environ is None else environ,
    )
    for item in plan.items:
        parts.add(item)
    steps = parts.torch_steps()
    parts.main_requirements.extend(plan.pass_through)
    if options.hash_mode is not None:
        parts.check_hashes(options.hash_mode, installed)
    # pip told to install elsewhere (PIP_TARGET ...): what the target has says nothing of that
    # folder, so pip runs, as a plain `pip install` would.
    skip_pip = parts.last_step(steps, installed, elsewhere=bool(elsewhere_variables(environ or {})))
    if options.hash_mode is not None:  # pip checks every file of every step, dependencies included
        steps = [replace(step, args=(REQUIRE_HASHES, *step.args)) for step in steps]
    imports = parts.imports
    if any(i.name == "torch" for i in plan.items):
        imports.insert(0, "torch")
    trust: tuple[str, ...] | None = None
    trust_note = None
    if pip is not None:
        words, trust_note = trust_options(pip)
        trust = tuple(words)
    items, reasons = plan.items, plan.reasons
    if options.ptx:  # the decision's arch list gains +PTX only here, where the build is decided
        built = {canonicalize_name(b.spec.package): b.spec.arch_list for b in parts.builds}
        items = tuple(
            replace(item, arch_list=built[canonicalize_name(item.name)])
            if item.kind == "build" and canonicalize_name(item.name) in built
            else item
            for item in items
        )
        reasons = (
            *reasons,
            *(
                f"{build.spec.package}: --ptx: TORCH_CUDA_ARCH_LIST={build.spec.arch_list} (PTX "
                "for the highest architecture: newer GPUs compile it when it first runs)"
                for build in parts.builds
            ),
        )
    return replace(
        plan,
        items=items,
        reasons=reasons,
        complete=True,
        builds=tuple(parts.builds),
        steps=tuple(steps),
        imports=tuple(dict.fromkeys(imports)),
        smoke=tuple(parts.smoke),
        notes=tuple(dict.fromkeys(note for b in parts.builds for note in b.spec.notes)),
        pip_version=str(pip.version) if pip else None,
        trust=trust,
        trust_note=trust_note,
        skip_pip=skip_pip,
    )


_ALL_INSTALLED = "every planned package is installed at the planned version: pip is not run"


def _own_build_note(
    recipe: Recipe, source_dir: Path | None, identity: SourceIdentity, planned: PlannedBuild
) -> str:
    """Why a ``--source`` build is its own wheel, not the pinned one, and how to get that."""
    pinned = (
        f"a clean checkout of {recipe.revision[:12]} builds and reuses the pinned one"
        if recipe.revision
        else "without --source, the recipe's archive builds and reuses the pinned one"
    )
    return (
        f"--source {source_dir} {identity.why}: it is built and kept as its own wheel "
        f"({planned.key.labelled_version}), never reused as {recipe.name}'s pinned build; "
        f"{pinned}"
    )


class _Completion:
    """What :func:`complete_plan` gathers item by item (the builds, the requirements of each
    pip step, the imports and GPU tests to run after), then the steps made from it."""

    def __init__(
        self,
        plan: Plan,
        env: Environment,
        index: Index,
        options: InstallOptions,
        *,
        wheelhouse: Wheelhouse | None,
        capacity: tuple[int, int | None] | None,
        user_jobs: str,
        environ: Mapping[str, str],
    ) -> None:
        self.plan, self.env, self.index, self.options = plan, env, index, options
        self.wheelhouse, self.capacity, self.user_jobs = wheelhouse, capacity, user_jobs
        self.environ = environ  # git's, for a --source checkout
        self.torch_item = next((i for i in plan.items if i.name == "torch"), None)
        self.builds: list[PlannedBuild] = []
        self.reused_files: dict[str, Path] = {}
        self.runtime: dict[str, tuple[str, ...] | None] = {}  # a build's runtime requirements
        self.imports: list[str] = []
        self.smoke: list[tuple[str, str]] = []
        self.from_torch_index: list[PlanItem] = []
        self.from_pypi: list[PlanItem] = []
        self.main_requirements: list[str] = []
        self.checked: list[str] = []

    # -- item by item ----------------------------------------------------------------------

    def add(self, item: PlanItem) -> None:
        if item.kind == "build":
            self._add_build(item)
        elif item.kind == "installed":
            self._add_installed(item)
        elif item.name in TORCH_FAMILY:
            if item.index and item.index.rstrip("/") != PYPI_SIMPLE:
                self.from_torch_index.append(item)
            else:
                self.from_pypi.append(item)
        else:
            self._add_other(item)

    def _add_build(self, item: PlanItem) -> None:
        recipe, import_name = _recipe(self.index, item)
        spec = self._spec(item, recipe, import_name)
        source_dir = self.options.source_for(item.name)
        identity = source_identity(recipe, source_dir, self.environ)
        planned, reused_file = _planned_build(
            spec,
            describe_source(recipe, source_dir),
            identity,
            self.wheelhouse,
            self.options,
            self.env,
        )
        if identity is not None:
            planned = replace(
                planned,
                spec=replace(
                    planned.spec,
                    notes=(
                        *planned.spec.notes,
                        _own_build_note(recipe, source_dir, identity, planned),
                    ),
                ),
            )
        self.builds.append(planned)
        if reused_file is not None:
            self.reused_files[planned.key.digest] = reused_file
            lines = requires_dist(reused_file)
            self.runtime[planned.key.digest] = tuple(lines) if lines is not None else None
        else:
            self.runtime[planned.key.digest] = recipe.requires
        if recipe.smoke:
            self.imports.extend(recipe.smoke.imports)
            if recipe.smoke.gpu_script:
                self.smoke.append((item.name, recipe.smoke.gpu_script))
        else:
            self.imports.append(import_name)

    def _spec(self, item: PlanItem, recipe: Recipe, import_name: str) -> BuildSpec:
        """The build's pre-flight, with its torch index and ``MAX_JOBS`` decided."""
        torch_item = self.torch_item
        spec = check_build(
            item,
            recipe,
            self.env,
            self.index,
            import_name=import_name,
            torch_item=torch_item if torch_item and torch_item.kind == "wheel" else None,
            ptx=self.options.ptx,
        )
        if spec.torch_requirement and spec.torch_index:
            option, url = _torch_index_for(spec.variant, spec.torch_index, self.options)
            spec = replace(spec, torch_index=url, torch_index_option=option)
            self.checked.append(url)
        if self.user_jobs.isdigit() and int(self.user_jobs) > 0:
            # The user's word wins: the machine may be shared.
            spec = replace(spec, max_jobs=int(self.user_jobs))
        elif self.capacity is not None:
            spec = replace(spec, max_jobs=max_jobs(*self.capacity))
        return spec

    def _add_installed(self, item: PlanItem) -> None:
        if item.name in TORCH_FAMILY:
            # Hold what is installed where it is: pip must not move torch to satisfy a
            # dependency.
            self.main_requirements.append(f"{item.name}=={item.version.split('+', 1)[0]}")
        else:
            # An installed extension build that fits is kept as it is: nothing asks pip to
            # move it; --smoke still runs its GPU test.
            kept_smoke = _gpu_smoke(self.index, item.name)
            if kept_smoke:
                self.smoke.append((item.name, kept_smoke))

    def _add_other(self, item: PlanItem) -> None:
        package = self.index.package(item.name)
        requirements = self.main_requirements
        if item.url:
            requirements.append(f"{item.name} @ {item.url}")
            self.checked.append(item.url)
        elif item.find_links:
            requirements.append(item.requirement or f"{item.name}=={item.version}")
            requirements.extend(["--find-links", item.find_links])
            self.checked.append(item.find_links)
        else:
            requirements.append(item.requirement or f"{item.name}=={item.version}")
        self.imports.append(package.import_name if package else item.name.replace("-", "_"))
        wheel_smoke = _gpu_smoke(self.index, item.name)
        if wheel_smoke:
            self.smoke.append((item.name, wheel_smoke))

    # -- the steps -------------------------------------------------------------------------

    def torch_steps(self) -> list[PipStep]:
        """The torch family's steps, first: from the PyTorch index, or from PyPI."""
        steps: list[PipStep] = []
        options, from_torch_index, from_pypi = self.options, self.from_torch_index, self.from_pypi
        if from_torch_index:
            option, url = _torch_index_for(
                from_torch_index[0].variant, from_torch_index[0].index or "", options
            )
            requirements = [i.requirement or f"{i.name}=={i.version}" for i in from_torch_index]
            # Only the torch family is asked of the PyTorch index (it also carries their
            # dependencies); no other name goes there, so no other package can be taken from it.
            steps.append(
                PipStep(
                    purpose=f"torch family from {url}",
                    args=(*options_for_torch_step(options.pip_args), option, url, *requirements),
                    checked_urls=(url,),
                    torch_index_only=True,
                )
            )
            # Later steps keep them where this step put them.
            self.main_requirements = [*requirements, *self.main_requirements]
        if from_pypi:
            # From the user's PyPI index (or mirror) alone: a folder of CPU wheels in find-links
            # would win, as "2.15.0+cpu" satisfies "==2.15.0" (issue 27).
            requirements = [i.requirement or f"{i.name}=={i.version}" for i in from_pypi]
            steps.append(
                PipStep(
                    purpose="torch family from PyPI (or the configured mirror of it)",
                    args=(
                        *options_for_torch_step(options.pip_args, keep_index=True),
                        *requirements,
                    ),
                    torch_index_only=True,
                    pypi_index=True,
                )
            )
            # Later steps keep these very files: "===" matches the version as written, so pip
            # (with -U and find-links) cannot swap in a "+cpu" build of the same release there.
            self.main_requirements = [
                *(f"{i.name}==={i.version}" for i in from_pypi),
                *self.main_requirements,
            ]
        return steps

    def check_hashes(self, hash_mode: str, installed: Mapping[str, str] | None) -> None:
        """Hash-checking mode: refuse now what would be installed without a hash. Without the
        target's distributions (a plan for another machine) what a build needs is checked when
        the plan is applied; the rest is known now."""
        unmet = (
            {
                b.key.digest: [
                    *unmet_requirements(self.runtime[b.key.digest] or (), installed, self.env),
                    *(
                        unsatisfied(b.spec.build_requires, installed)
                        if b.key.digest not in self.reused_files
                        else ()
                    ),
                ]
                for b in self.builds
            }
            if installed is not None
            else {}
        )
        refuse_unhashed(
            hash_mode, unhashed_before_build(self.plan, self.builds, unmet, TORCH_FAMILY)
        )

    def last_step(
        self, steps: list[PipStep], installed: Mapping[str, str] | None, *, elsewhere: bool = False
    ) -> str | None:
        """Append the step of everything but the torch family to ``steps`` (or fold its checked
        URLs into the first step when it has nothing to install); or say why pip is not run
        (never when ``elsewhere``: pip's variables send the install to another folder)."""
        digests = tuple(b.key.digest for b in self.builds)
        if (
            installed is not None
            and not elsewhere
            and (self._nothing_to_change(installed) or self._built_and_installed(installed))
        ):
            return _ALL_INSTALLED
        if (
            self._only_built()
            and installed is not None
            and all(requirements_met(self.runtime[d], installed, self.env) for d in digests)
        ):
            # Everything the wheels need is installed: pip need not resolve torch's whole
            # dependency tree again, nor check every installed package for conflicts (seconds
            # in a big env).
            steps.append(
                PipStep(
                    purpose="built wheels (their requirements are installed)",
                    args=("--no-deps",),
                    built=digests,
                )
            )
        elif self._has_work() or not (self.from_torch_index or self.from_pypi):
            steps.append(
                PipStep(
                    purpose="extensions and the rest",
                    args=(*self.options.pip_args, *self.main_requirements),
                    built=digests,
                    checked_urls=tuple(self.checked),
                )
            )
        elif self.checked:
            steps[0] = replace(steps[0], checked_urls=(*steps[0].checked_urls, *self.checked))
        return None

    def _nothing_to_change(self, installed: Mapping[str, str]) -> bool:
        """Nothing is built or passed to pip, and every item is installed as planned."""
        plan = self.plan
        return bool(
            plan.items
            and not self.builds
            and not plan.pass_through
            and not self.options.pip_args
            and all(installed_as_planned(item, installed) for item in plan.items)
        )

    def _built_and_installed(self, installed: Mapping[str, str]) -> bool:
        """Only builds, each reused from the wheelhouse and installed at its labelled version."""
        return (
            self._only_built()
            and len(self.reused_files) == len(self.builds)
            and all(
                installed.get(canonicalize_name(b.spec.package)) == b.key.labelled_version
                for b in self.builds
            )
        )

    def _only_built(self) -> bool:
        plan = self.plan
        return (
            bool(self.builds)
            and not plan.pass_through
            and not self.options.pip_args
            and not self.from_torch_index
            and not self.from_pypi
            and all(item.kind in ("installed", "build") for item in plan.items)
        )

    def _has_work(self) -> bool:
        """Something for the last step to install besides the torch family."""
        plan = self.plan
        return bool(
            self.builds
            or plan.pass_through
            or any(i.kind == "wheel" and i.name not in TORCH_FAMILY for i in plan.items)
            or names_requirements(self.options.pip_args)
        )
