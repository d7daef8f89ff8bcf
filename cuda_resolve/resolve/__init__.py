"""Resolution: requests + Environment + Index -> the chosen builds, with reasons.

``resolve()`` is a pure function: it builds a :class:`~.candidates.Catalogue` (every rule
applied per candidate), runs resolvelib over it, and turns a conflict into
:class:`~cuda_resolve.errors.ResolutionImpossible` naming the facts that ruled each option out
and the way out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import resolvelib
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._frozen import frozen, replace
from ..compat import (
    UNKNOWN_MARKER_VARIABLES,
    driver_supports_cuda,
    format_arch_list,
    marker_environment,
    python_matches,
)
from ..environment import Environment
from ..errors import ResolutionImpossible, UsageError
from ..index.cuda import ArchEntry, parse_arch_list
from ..index.model import Index
from ..versions import CudaVersion
from .candidates import CATEGORIES, TORCH_FAMILY, Candidate, Catalogue, Options, Rejection, Req
from .provider import Provider

__all__ = [
    "Alternative",
    "Candidate",
    "Options",
    "Rejection",
    "Resolution",
    "applies",
    "parse_request",
    "resolve",
]


@frozen
class Alternative:
    """A build that would also have fit, and why the chosen one was preferred to it."""

    name: str
    label: str
    reason: str


@frozen(slots=False)
class Resolution:
    """The resolver's answer: the chosen candidates and the reasons others were ruled out."""

    chosen: tuple[Candidate, ...]  # install order: torch, its family, then extensions
    pass_through: tuple[str, ...]  # requests the index does not know, left to pip
    reasons: tuple[str, ...]
    rejected: tuple[Rejection, ...]  # alternatives ruled out, for --explain
    alternatives: tuple[Alternative, ...] = ()  # alternatives that fit but were less preferred
    extras: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (name, extras) as requested

    def get(self, name: str) -> Candidate | None:
        wanted = canonicalize_name(name)
        return next((c for c in self.chosen if c.name == wanted), None)

    def extras_of(self, name: str) -> tuple[str, ...]:
        wanted = canonicalize_name(name)
        return next((extras for key, extras in self.extras if key == wanted), ())


def applies(requirement: Requirement, text: str, env: Environment | None) -> bool:
    """Evaluate the requirement's marker against the target (not this process)."""
    if requirement.marker is None:
        return True
    marker = str(requirement.marker)
    unknown = [name for name in UNKNOWN_MARKER_VARIABLES if name in marker]
    if unknown:
        raise UsageError(
            f"requirement {text!r}: the marker uses {', '.join(unknown)}, which cuda-resolve "
            "cannot know for the target",
            hint="use sys_platform, platform_machine or python_version instead, or drop the marker",
        )
    if env is None:
        return True
    return requirement.marker.evaluate(marker_environment(env))


_ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz")


def _is_local_path(text: str) -> bool:
    """A path as pip takes one on its command line: a folder (``.``, ``./pkg``, ``/src/pkg``) or
    an archive file (``dist/pkg-1.0-py3-none-any.whl``). Decided from the words alone."""
    if "://" in text or not text.strip() or text != text.strip():
        return False
    return (
        text in (".", "..")
        or text.startswith(("./", "../", "/", "~"))
        or text.endswith(_ARCHIVE_SUFFIXES)
    )


def _refuse_curated_file(text: str, index: Index) -> None:
    """A local file of torch or a package the index knows is refused, as a direct URL to one is:
    cuda-resolve cannot check that file against torch, the driver and the GPUs."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    base = text.rstrip("/").rsplit("/", 1)[-1]
    try:
        name = (
            parse_wheel_filename(base)[0]
            if base.endswith(".whl")
            else parse_sdist_filename(base)[0]
        )
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return  # a folder, or a file named otherwise: pip reads what it holds
    package = index.package(name)
    if name not in TORCH_FAMILY and package is None:
        return
    shown = package.name if package is not None else name
    raise UsageError(
        f"{text!r} is a file of {shown}, which cuda-resolve chooses itself: it cannot check that "
        "file against torch, the driver and the GPUs",
        hint=f"drop it to let cuda-resolve pick a matching build (`cuda-resolve plan {shown}`), "
        "or install that file with pip directly",
    )


def parse_request(
    texts: Sequence[str], index: Index, env: Environment | None = None
) -> tuple[list[Req], list[str], list[str]]:
    """Split user requests into known requirements, pass-through strings and skipped requests.

    Environment markers are evaluated against ``env`` (the target's Python and platform): a
    request whose marker is false is skipped and said so. A direct URL (``kaolin @ https://...``)
    on a package the index knows is refused: cuda-resolve cannot vouch for the file's ABI, and
    replacing it with the index's choice would silently ignore it. Extras are kept.
    """
    known: list[Req] = []
    passed: list[str] = []
    skipped: list[str] = []
    for text in texts:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            if _is_local_path(text):
                _refuse_curated_file(text, index)
                passed.append(text)  # a wheel, an archive or a project folder: pip's to read
                continue
            reason = str(exc).splitlines()[0]
            raise UsageError(
                f"requirement {text!r} is not valid: {reason}",
                hint="write it as pip would, e.g. 'kaolin==0.18.0', 'torch>=2.1' or a path "
                "('./dist/pkg-1.0-py3-none-any.whl', '.')",
            ) from None
        if not applies(requirement, text, env):
            skipped.append(text)
            continue
        name = canonicalize_name(requirement.name)
        package = index.package(name)
        if name not in TORCH_FAMILY and package is None:
            passed.append(text)
            continue
        if requirement.url:
            shown = package.name if package is not None else requirement.name
            raise UsageError(
                f"requirement {text!r} names a direct URL for {shown}, which cuda-resolve chooses "
                "itself: it cannot check that file against torch, the driver and the GPUs",
                hint="drop '@ URL' to let cuda-resolve pick a matching build (`cuda-resolve plan "
                f"{shown}`), or install that file with pip directly",
            )
        if package is not None:
            for placeholder in package.placeholder_versions:
                if (
                    requirement.specifier
                    and requirement.specifier.contains(placeholder, prereleases=True)
                    and all(
                        not requirement.specifier.contains(str(w.version), prereleases=True)
                        for w in package.wheels
                    )
                    and all(
                        not requirement.specifier.contains(str(r.version), prereleases=True)
                        for r in package.recipes
                    )
                ):
                    raise ResolutionImpossible(
                        f"{name} {placeholder} is a placeholder on PyPI, not a real release: "
                        "importing it raises ImportError",
                        hint=f"ask for a real release (`cuda-resolve index show {name}` lists "
                        f"them), or just '{name}'",
                    )
        specifier, variant = _split_local(requirement.specifier, text)
        known.append(
            Req(
                name=name,
                specifier=specifier,
                variant=variant,
                origin="requested",
                extras=tuple(sorted(requirement.extras)),
            )
        )
    return known, passed, skipped


def _split_local(specifier: SpecifierSet, text: str) -> tuple[SpecifierSet, str | None]:
    """``==2.5.1+cu124`` becomes (``==2.5.1``, ``cu124``): the local tag is the variant."""
    variant: str | None = None
    kept = []
    for spec in specifier:
        if "+" in spec.version and spec.operator in ("==", "==="):
            base, local = spec.version.split("+", 1)
            if variant is not None and variant != local:
                raise UsageError(
                    f"requirement {text!r} names two variants",
                    hint="name one, e.g. torch==2.5.1+cu124",
                )
            variant = local
            kept.append(f"=={base}")
        else:
            kept.append(str(spec))
    return SpecifierSet(",".join(kept)), variant


def resolve(
    requests: Sequence[str],
    env: Environment,
    index: Index,
    options: Options | None = None,
) -> Resolution:
    options = options or Options()
    requirements, passed, skipped = parse_request(requests, index, env)
    catalogue = Catalogue(env, index, options)
    notes = _pass_reasons(passed) + _skip_reasons(skipped, env)
    if requirements:
        # torchvision / torchaudio installed beside torch stay paired with whatever torch is chosen.
        asked = {req.name for req in requirements}
        for name in ("torchvision", "torchaudio"):
            if name not in asked and catalogue.installed_companion(name):
                requirements.append(Req(name=name, origin=f"installed {name}"))
    if not requirements:
        return Resolution(chosen=(), pass_through=tuple(passed), reasons=notes, rejected=())
    try:
        chosen = _fewest_builds(catalogue, requirements, _solve(catalogue, requirements))
    except resolvelib.ResolutionImpossible as exc:
        raise _conflict(exc, catalogue, requirements) from None
    except resolvelib.ResolutionTooDeep:
        raise ResolutionImpossible(
            "the resolver gave up after too many rounds", hint="pin versions, e.g. 'torch==2.5.1'"
        ) from None
    extras = tuple((req.name, req.extras) for req in requirements if req.extras)
    for candidate in chosen:
        wanted = next((e for name, e in extras if name == candidate.name), ())
        if wanted and candidate.kind == "build":
            raise UsageError(
                f"{candidate.label} is built from source, and extras [{','.join(wanted)}] of a "
                "source build are not installed by cuda-resolve",
                hint="ask for "
                f"'{candidate.package.name if candidate.package else candidate.name}' and install "
                "the extra's requirements with pip afterwards",
            )
    names = {c.name for c in chosen} | {r.name for r in requirements}
    rejected = tuple(r for r in catalogue.rejections if r.name in names)
    allowed = _asked(requirements)
    reasons = tuple(_reason(c, chosen, env, index, catalogue, allowed) for c in chosen) + notes
    return Resolution(
        chosen=tuple(chosen),
        pass_through=tuple(passed),
        reasons=reasons,
        rejected=rejected,
        alternatives=_alternatives(chosen, catalogue, allowed),
        extras=extras,
    )


def _solve(catalogue: Catalogue, requirements: Sequence[Req]) -> list[Candidate]:
    resolver: resolvelib.Resolver[Req, Candidate, str] = resolvelib.Resolver(
        Provider(catalogue), resolvelib.BaseReporter()
    )
    result = resolver.resolve(requirements, max_rounds=2000)
    return _install_order(list(result.mapping.values()))


def _builds(chosen: Sequence[Candidate]) -> int:
    return sum(1 for c in chosen if c.kind == "build")


def _fewest_builds(
    catalogue: Catalogue, requirements: Sequence[Req], chosen: list[Candidate]
) -> list[Candidate]:
    """Source builds cost minutes each: where a chosen build's package also has wheels that fit
    here, try the set again with that package as a wheel, and keep whichever set builds less.

    Resolvelib picks one package at a time, so a newest-first wheel of one package can lead it
    to a torch that forces another package's build (a CUDA 11-only toolkit, kaolin + pointnet2_ops).
    Keeping an installed torch still comes first: a retry that would replace it is not taken.
    """
    best = chosen
    keeps_installed = any(c.name == "torch" and c.kind == "installed" for c in chosen)
    for candidate in chosen:
        if candidate.kind != "build" or not any(
            c.kind == "wheel" for c in catalogue.candidates(candidate.name)
        ):
            continue
        if all(c.name != candidate.name or c.kind == "wheel" for c in best):
            continue  # an earlier retry already made it a wheel
        extra = Req(name=candidate.name, wheel_only=True, origin="fewer source builds")
        try:
            retry = _solve(catalogue, [*requirements, extra])
        except (resolvelib.ResolutionImpossible, resolvelib.ResolutionTooDeep):
            continue
        if keeps_installed and not any(c.name == "torch" and c.kind == "installed" for c in retry):
            continue
        if _builds(retry) < _builds(best):
            best = retry
    return best


def _install_order(chosen: list[Candidate]) -> list[Candidate]:
    rank = {"torch": 0, "torchvision": 1, "torchaudio": 1}
    return sorted(chosen, key=lambda c: (rank.get(c.name, 2), c.name))


def _pass_reasons(passed: Sequence[str]) -> tuple[str, ...]:
    return tuple(
        f"{text}: not in the index; passed to pip as an ordinary requirement" for text in passed
    )


def _skip_reasons(skipped: Sequence[str], env: Environment) -> tuple[str, ...]:
    facts = marker_environment(env)
    where = (
        f"{facts['sys_platform']} {facts['platform_machine']}, Python "
        f"{facts['python_full_version']}"
    )
    return tuple(
        f"{text}: skipped, its marker is false for the target ({where})" for text in skipped
    )


def _driver_needed(cuda: CudaVersion, index: Index) -> str:
    family = index.family(cuda.major) if cuda.major >= 11 else None
    facts = index.toolkit(cuda)
    if family is not None:
        return f"driver >= {family.min_driver_linux} by minor-version compatibility"
    if facts is not None and facts.driver_linux is not None:
        return f"driver >= {facts.driver_linux}"
    return f"a driver for CUDA {cuda}"


def _asked(requirements: Sequence[Req]) -> Callable[[Candidate], bool]:
    """Whether a candidate is one the user's requests allow (a pin, a range, a variant): the
    others are never an alternative, whatever else fits (walk B12)."""
    by_name: dict[str, list[Req]] = {}
    for req in requirements:
        by_name.setdefault(canonicalize_name(req.name), []).append(req)

    def allowed(candidate: Candidate) -> bool:
        return all(Catalogue.satisfies(req, candidate) for req in by_name.get(candidate.name, ()))

    return allowed


def _newer_unconfirmed(
    candidate: Candidate, catalogue: Catalogue, asked: Callable[[Candidate], bool]
) -> list[str]:
    """Viable torch builds newer than the chosen one, allowed by the requests, whose existence
    the index could not confirm."""
    return [
        other.label
        for other in catalogue.candidates("torch")
        if other.kind == "wheel"
        and other.torch_variant is not None
        and "exists" in other.torch_variant.unverified
        and other.base_version > candidate.base_version
        and asked(other)
    ]


def _build_reason(candidate: Candidate, chosen: Sequence[Candidate], catalogue: Catalogue) -> str:
    """Why a package with published wheels is built anyway: the true reason, not a guess."""
    package = candidate.package
    if package is None or not package.wheels:
        return "no published wheels"
    if not any(c.kind == "wheel" for c in catalogue.candidates(candidate.name)):
        return "no published wheel runs here (--explain lists what ruled each out)"
    torch = next((c for c in chosen if c.name == "torch"), None)
    if torch is None:
        return "no published wheel fits"
    if torch.kind == "installed":
        if catalogue.options.allow_torch_change:
            return (
                f"no published wheel for the installed {torch.label}, and keeping the installed "
                "torch comes before wheels"
            )
        return (
            f"no published wheel for the installed {torch.label} (--allow-torch-change lets a "
            "torch with one replace it)"
        )
    return (
        f"no published wheel for {torch.label}, and no torch that has one fits the rest "
        "of the request"
    )


def _reason(
    candidate: Candidate,
    chosen: list[Candidate],
    env: Environment,
    index: Index,
    catalogue: Catalogue,
    asked: Callable[[Candidate], bool],
) -> str:
    gpus = ", ".join(f"{gpu.name} ({gpu.compute_capability})" for gpu in env.gpus) or "no GPU"
    if candidate.kind == "installed":
        if candidate.note:  # an installed extension build: what its label says, and why that fits
            return candidate.note
        return f"{candidate.label}: already installed and fits this machine ({gpus}): kept"
    if candidate.name == "torch":
        dependents = [
            c
            for c in chosen
            if c.name != "torch" and c.kind == "wheel" and c.torch_version is not None
        ]
        builds = [c for c in chosen if c.kind == "build" and c.toolkit is not None]
        if dependents:
            why = f"pinned by {dependents[0].label}"
        else:
            unconfirmed = _newer_unconfirmed(candidate, catalogue, asked)
            why = "newest release that fits"
            if unconfirmed:
                shown = ", ".join(sorted(set(unconfirmed), reverse=True)[:3])
                why = (
                    "newest confirmed release that fits (the index cannot confirm that "
                    f"{shown}{' ...' if len(unconfirmed) > 3 else ''} were published; pin "
                    "one to take it)"
                )
            if builds and builds[0].toolkit is not None:
                why += (
                    f" with CUDA {builds[0].toolkit.version.major}.x, the major of nvcc "
                    f"{builds[0].toolkit.version} that builds "
                    f"{builds[0].package.name if builds[0].package else builds[0].name}"
                )
        if candidate.cuda is None:
            return f"{candidate.label}: {why}; CPU build ({gpus})"
        if env.driver:
            driver = driver_supports_cuda(env.driver, candidate.cuda, index).reason
        elif env.gpus:
            driver = (
                "no driver known here: the machines it runs on need one for CUDA "
                f"{candidate.cuda} ({_driver_needed(candidate.cuda, index)})"
            )
        else:
            driver = "no driver here: the CUDA build also runs on the CPU"
        arch = format_arch_list(candidate.arch_list)
        if env.gpus:
            return f"{candidate.label}: {why}; {driver}; kernels for {arch} cover {gpus}"
        targets = catalogue.options.arch_list  # no GPU here: not "cover no GPU" (walk C15)
        also = f"; the builds target --arch-list {format_arch_list(targets)}" if targets else ""
        return f"{candidate.label}: {why}; {driver}; kernels for {arch} (no GPU here{also})"
    if candidate.name in ("torchvision", "torchaudio"):
        return (
            f"{candidate.label}: the release paired with torch "
            f"{candidate.pairs_with}+{candidate.variant}"
        )
    if candidate.kind == "wheel":
        return (
            f"{candidate.label}: a prebuilt wheel matching torch "
            f"{candidate.torch_version}+{candidate.variant} and Python {env.python.short_version}"
        )
    torch = next((c for c in chosen if c.name == "torch"), None)
    against = f" against {torch.label}" if torch else ""
    toolkit = candidate.toolkit
    tk = (
        (f"nvcc {toolkit.version} ({toolkit.root})" if toolkit.root else f"nvcc {toolkit.version}")
        if toolkit
        else "nvcc"
    )
    name = candidate.package.name if candidate.package else candidate.name
    why = _build_reason(candidate, chosen, catalogue)
    return (
        f"{name} {candidate.version}: {why}; source build{against} with {tk}, "
        f"TORCH_CUDA_ARCH_LIST={format_arch_list(candidate.arch_list)} (recipe "
        f"{candidate.recipe.name if candidate.recipe else '?'})"
    )


# -- the alternatives that also fit ------------------------------------------------------------


def _conflicts_with(
    alternative: Candidate, chosen: Sequence[Candidate], catalogue: Catalogue
) -> str | None:
    """Which chosen build rules ``alternative`` out (a requirement it does not satisfy).

    Extensions are asked first: torchvision only follows torch, the extension is the reason."""
    for other in sorted(chosen, key=lambda c: c.name in TORCH_FAMILY):
        if other.name == alternative.name:
            continue
        for dependency in catalogue.dependencies(other):
            if dependency.name == alternative.name and not Catalogue.satisfies(
                dependency, alternative
            ):
                return f"{other.label} needs {dependency}"
    for dependency in catalogue.dependencies(alternative):
        picked = next((c for c in chosen if c.name == dependency.name), None)
        if picked is not None and not Catalogue.satisfies(dependency, picked):
            return f"it needs {dependency}, and the plan has {picked.label}"
    return None


def _less_preferred(alternative: Candidate, winner: Candidate) -> str:
    if winner.kind == "installed":
        return "the installed build fits, and keeping it comes first"
    if winner.kind == "wheel" and alternative.kind == "build":
        return "a source build; a published wheel is preferred"
    if alternative.base_version < winner.base_version:
        return f"an older release than {winner.version}"
    variant = alternative.torch_variant
    if variant is not None and "exists" in variant.unverified:
        return "the index cannot confirm it was published"
    if (
        alternative.torch_version is not None
        and winner.torch_version is not None
        and alternative.torch_version < winner.torch_version
    ):
        return f"built for an older torch than {winner.torch_version}"
    if alternative.cuda is not None and winner.cuda is not None and alternative.cuda < winner.cuda:
        return f"CUDA {alternative.cuda} is lower than {winner.cuda}"
    if alternative.cuda is None and winner.cuda is not None:
        return "a CPU build"
    return "ranked lower by the preferences (installed, wheel, newer, confirmed, higher CUDA)"


def _alternatives(
    chosen: Sequence[Candidate],
    catalogue: Catalogue,
    asked: Callable[[Candidate], bool],
    *,
    per_package: int = 3,
) -> tuple[Alternative, ...]:
    """For each chosen build, the next few that also fit here and that the requests allow, and
    why each lost."""
    found: list[Alternative] = []
    for winner in chosen:
        if winner.name in ("torchvision", "torchaudio"):
            continue  # they follow torch: torch's alternatives say it all
        preferred, lower = 0, 0
        seen = {winner.label}
        ahead = (
            True  # candidates come in preference order: those before the winner lost to a conflict
        )
        for alternative in catalogue.candidates(winner.name):
            if alternative is winner:
                ahead = False
                continue
            if alternative.label in seen or not asked(alternative):
                continue
            seen.add(alternative.label)
            conflict = _conflicts_with(alternative, chosen, catalogue)
            if ahead and conflict and preferred < per_package:
                preferred += 1
                reason = f"preferred, but ruled out by the rest of the plan: {conflict}"
            elif not ahead and not conflict and lower < per_package:
                lower += 1
                reason = f"less preferred: {_less_preferred(alternative, winner)}"
            else:
                continue
            found.append(
                Alternative(
                    name=winner.name,
                    label=alternative.label,
                    reason=f"{alternative.label}: {reason}",
                )
            )
    return tuple(found)


# -- conflicts ---------------------------------------------------------------------------------

_RELEVANCE = {category: rank for rank, category in enumerate(CATEGORIES)}


def _label_in(label: str, request: Req) -> bool:
    """Does the build a rejection label names ("torch 2.5.1+cu124") match the request?"""
    for token in label.split():
        try:
            version = Version(token)
        except InvalidVersion:
            continue
        if request.variant is not None and version.local not in (None, request.variant):
            return False
        return not request.specifier or request.specifier.contains(
            version.base_version, prereleases=True
        )
    return True


def _hint(rejection: Rejection, catalogue: Catalogue) -> str:
    """The way out of the conflict this rejection leads, from its kind and facts."""
    fact = rejection.fact
    kind = rejection.kind
    if kind == "torch-release-unknown":
        return (
            "ask for a release the index knows (cuda-resolve index show torch lists them), or read "
            "newer releases into it: cuda-resolve index refresh torch"
        )
    if kind == "installed-unfit":
        return (
            "rerun with --allow-torch-change to let cuda-resolve replace the installed "
            f"{fact('torch') or 'torch'}"
        )
    if kind == "installed-torch-window":
        fits = fact("fits")
        if not fits:
            return (
                f"no torch release in the index fits {fact('package')}'s recipes on this Python; "
                "see --explain"
            )
        return (
            f"install a torch {fact('package')}'s recipes accept first (cuda-pip install "
            f"torch=={fits}), or rerun with "
            f"--allow-torch-change to let cuda-resolve replace the installed {fact('torch')}"
        )
    if kind == "installed-no-wheel":
        return (
            f"rerun with --allow-torch-change to switch to a torch that {fact('package')} "
            "publishes wheels for"
        )
    if kind == "driver-cuda":
        return (
            f"upgrade the NVIDIA driver (driver {fact('driver')} runs CUDA <= "
            f"{fact('driver_cuda')}), or ask for a torch release with a build for CUDA <= "
            f"{fact('driver_cuda')}"
        )
    if kind == "toolkit-driver":
        driver_cuda = fact("driver_cuda") or ""
        major = driver_cuda.split(".")[0]
        return (
            f"install a CUDA {major}.x toolkit (driver {fact('driver')} runs CUDA <= "
            f"{driver_cuda}), or upgrade the NVIDIA driver to one that runs CUDA {fact('toolkit')}"
        )
    if kind == "gpu-kernels":
        if catalogue.options.arch_list is not None and rejection.name not in TORCH_FAMILY:
            return f"add compute capability {fact('gpus')} to --arch-list"
        return (
            f"compute capability {fact('gpus')} needs a build whose arch list covers it: ask for "
            "a torch release whose variants include it, or build from source"
        )
    if kind == "toolkit-missing":
        return (
            "install a CUDA toolkit (nvcc) whose major matches torch's CUDA, then retry; "
            "wheels need none"
        )
    if kind == "toolkit-target":
        return (
            f"install a CUDA toolkit whose nvcc can target {fact('gpus')}, with a torch of the "
            "same CUDA major"
        )
    if kind == "toolkit-archs-unknown":
        return (
            "run `cuda-resolve detect` where nvcc can be asked for its architectures, or "
            "pass --arch-list"
        )
    if kind == "toolkit-recipe-range":
        return (
            "install a CUDA toolkit in the recipe's range "
            f"({fact('cuda_min') or ''}..{fact('cuda_max') or ''})"
        )
    if kind == "compiler-range":
        bound = f"gcc <= {fact('gcc_max')}" if fact("gcc_max") else "a gcc"
        return f"install {bound} (CUDA {fact('toolkit')}'s range) and point NVCC_CCBIN/CC/CXX at it"
    if kind == "python":
        return (
            f"use a Python the builds support ({(fact('supported') or '').replace(',', ', ')}), "
            "or let it build from source where a recipe exists"
        )
    if kind == "platform":
        return (
            f"these builds are not published for {fact('os')} {fact('arch')}: plan for a machine "
            "of a published platform with --profile"
        )
    if kind == "arch-list-needed":
        return _ARCH_LIST_HINT
    if kind == "arch-list-unknown":
        return (
            "ask for a torch build whose arch list the index knows (`cuda-resolve index "
            "show torch`)"
        )
    if kind == "no-torch-pair":
        return f"ask for a torch release that has a paired {rejection.name}"
    if kind == "cpu-build":
        return (
            "a GPU machine needs a CUDA build: see --explain for why each CUDA build was ruled out"
        )
    return "see --explain for what ruled each option out"


def _toolkit_major_conflict(name: str, catalogue: Catalogue, torch: Candidate) -> Rejection | None:
    """A build needs a toolkit of torch's CUDA major, and every toolkit here has another major."""
    builds = [c for c in catalogue.candidates(name) if c.kind == "build" and c.toolkit is not None]
    if (
        not builds
        or torch.cuda is None
        or any(
            c.toolkit is not None and c.toolkit.version.major == torch.cuda.major for c in builds
        )
    ):
        return None
    toolkits = sorted({str(c.toolkit.version) for c in builds if c.toolkit is not None})
    shown = catalogue.index.package(name)
    package = shown.name if shown else name
    only = "the only toolkit here is" if len(toolkits) == 1 else "the toolkits here are"
    return Rejection(
        name,
        f"{package} source build",
        f"{package} must be built with a CUDA toolkit of torch's CUDA major: the installed "
        f"{torch.label} is CUDA {torch.cuda.major}, "
        f"and {only} nvcc {', '.join(toolkits)}",
        "toolkit-torch-major",
        (
            ("package", package),
            ("torch", torch.label),
            ("torch_major", str(torch.cuda.major)),
            ("toolkits", ",".join(toolkits)),
        ),
    )


def _torch_window_conflict(name: str, catalogue: Catalogue, torch: Candidate) -> Rejection | None:
    """Every recipe of ``name`` builds against other torch releases than the kept one: the torch
    window is the obstacle (not the Python of wheels made for older torch releases)."""
    builds = [
        c for c in catalogue.candidates(name) if c.kind == "build" and c.torch_spec is not None
    ]
    if not builds or any(
        c.torch_spec is not None and c.torch_spec.contains(torch.base_version, prereleases=True)
        for c in builds
    ):
        return None
    package = catalogue.index.package(name)
    shown = package.name if package else name
    windows = dict.fromkeys(
        f"{c.torch_spec} ({c.recipe.name if c.recipe else c.label})" for c in builds
    )
    python = catalogue.env.python
    fitting = sorted(
        (
            r.version
            for r in catalogue.index.torch
            if any(
                c.torch_spec is not None and c.torch_spec.contains(r.version, prereleases=True)
                for c in builds
            )
            and python_matches(r.python, python.version, free_threaded=python.abi_tag.endswith("t"))
        ),
        reverse=True,
    )
    return Rejection(
        name,
        f"{shown} source build",
        f"{shown}'s recipes build against torch {', '.join(windows)}, and the installed "
        f"{torch.label} is outside "
        f"{'that window' if len(windows) == 1 else 'each window'}",
        "installed-torch-window",
        (("package", shown), ("torch", torch.label), ("fits", str(fitting[0]) if fitting else "")),
    )


def _conflict(
    exc: resolvelib.ResolutionImpossible[Req, Candidate], catalogue: Catalogue, requested: list[Req]
) -> ResolutionImpossible:
    involved: list[str] = []
    for cause in exc.causes:
        for name in (cause.requirement.name, cause.parent.name if cause.parent else None):
            if name and name not in involved:
                involved.append(name)
    for req in requested:
        if req.name not in involved:
            involved.append(req.name)
    installed = catalogue.installed_torch
    torch_candidates = catalogue.candidates("torch")
    locked = installed is not None and [c.kind for c in torch_candidates] == ["installed"]
    leading: list[Rejection] = []  # conflicts between packages, found from the structure
    ruled_out: list[Rejection] = []  # the per-candidate facts, most telling first
    for req in requested:
        if req.name == "torch" and not any(
            req.specifier.contains(release.version, prereleases=True)
            for release in catalogue.index.torch
        ):
            newest = max(release.version for release in catalogue.index.torch)
            leading.append(
                Rejection(
                    "torch",
                    str(req),
                    f"{req}: no torch release the index knows matches it (the newest it knows: "
                    f"{newest})",
                    "torch-release-unknown",
                    (("requested", str(req)),),
                )
            )
    if not catalogue.options.allow_torch_change and any(
        name in TORCH_FAMILY and name != "torch" for name in involved
    ):
        # torchvision or torchaudio asked for where the installed torch (a CPU build on a GPU
        # machine, say) was ruled out: that, not the pairing, is what to change.
        leading.extend(r for r in catalogue.rejected("torch") if r.kind == "installed-unfit")
    if locked and installed is not None:
        # A torch requirement the installed torch does not meet: nothing else was a candidate,
        # so nothing was ruled out, and "nothing fits" alone would send the user in a circle.
        for req in requested:
            if req.name == "torch" and not Catalogue.satisfies(req, installed):
                leading.append(
                    Rejection(
                        "torch",
                        installed.label,
                        f"{installed.label} is installed here and {req} asks for another",
                        "installed-unfit",
                        (("torch", installed.label),),
                    )
                )
    for name in involved:
        if name in TORCH_FAMILY:
            continue
        if locked and installed is not None:
            major = _toolkit_major_conflict(name, catalogue, installed)
            if major is not None:
                leading.append(major)
                continue
            window = _torch_window_conflict(name, catalogue, installed)
            if window is not None:
                leading.append(window)
                continue
            if any(c.kind == "wheel" for c in catalogue.candidates(name)) and not any(
                c.kind == "build" for c in catalogue.candidates(name)
            ):
                package = catalogue.index.package(name)
                shown = package.name if package else name
                leading.append(
                    Rejection(
                        name,
                        f"{shown} wheels",
                        f"{shown}: no published wheel for the installed {installed.label}; pass "
                        "--allow-torch-change to switch torch",
                        "installed-no-wheel",
                        (("package", shown), ("torch", installed.label)),
                    )
                )
    for name in involved:
        asked = next((req for req in requested if req.name == name), None)
        relevant = [
            r for r in catalogue.rejected(name) if asked is None or _label_in(r.label, asked)
        ]
        relevant.sort(key=lambda r: _RELEVANCE.get(r.category, len(_RELEVANCE)))
        ruled_out.extend(relevant)
    # The package that has no candidate left leads: its facts explain the conflict. Among its
    # facts, the most telling category first (a driver or GPU fact before a CPU build's).
    empty = [
        name
        for name in involved
        if not any(
            all(Catalogue.satisfies(req, c) for req in requested if req.name == name)
            for c in catalogue.candidates(name)
        )
    ]
    ranked = sorted(
        ruled_out, key=lambda r: (r.name not in empty, _RELEVANCE.get(r.category, len(_RELEVANCE)))
    )
    ordered = _first_way_out(leading + ranked, catalogue, requested)

    def shown_name(requirement: Req) -> str:
        package = catalogue.index.package(requirement.name)
        text = str(requirement)
        return package.name + text[len(requirement.name) :] if package is not None else text

    demands = sorted(
        {
            shown_name(cause.requirement)
            + (f" (from {cause.parent.label})" if cause.parent else "")
            for cause in exc.causes
        }
    )
    shown = ", ".join(demands[:3]) + (f" and {len(demands) - 3} more" if len(demands) > 3 else "")
    message = "nothing fits this machine for " + shown
    if ordered:
        message += ": " + ordered[0].reason
    hint = (
        _hint(ordered[0], catalogue) if ordered else "see --explain for what ruled each option out"
    )
    if ordered and ordered[0].kind == "toolkit-torch-major":
        hint = _major_hint(ordered[0], catalogue, requested)
    elif ordered and ordered[0].kind in _TORCH_CHANGE_HINTS:
        hint = _torch_change_hint(hint, catalogue, requested)
    return ResolutionImpossible(
        message, hint=hint, reasons=tuple(dict.fromkeys(r.reason for r in ordered))
    )


#: Leading rejections whose hint is "rerun with --allow-torch-change".
_TORCH_CHANGE_HINTS = ("installed-unfit", "installed-no-wheel")
#: The arch list a GPU-less machine is asked for in the hint's example ("e.g. 8.6").
_EXAMPLE_ARCH_LIST = "8.6"
_ARCH_LIST_HINT = (
    "pass --arch-list with the compute capabilities of the machines you build for (e.g. "
    f"{_EXAMPLE_ARCH_LIST}): there is no GPU here to build for"
)


def _followed(
    catalogue: Catalogue,
    *,
    allow_torch_change: bool | None = None,
    arch_list: tuple[ArchEntry, ...] | None = None,
) -> Catalogue:
    """The catalogue as it is once a hint's options are followed."""
    options = catalogue.options
    if allow_torch_change is not None:
        options = replace(options, allow_torch_change=allow_torch_change)
    if arch_list is not None:
        options = replace(options, arch_list=arch_list)
    return Catalogue(catalogue.env, catalogue.index, options)


def _fits(catalogue: Catalogue, requested: Sequence[Req]) -> bool:
    try:
        _solve(catalogue, requested)
    except (resolvelib.ResolutionImpossible, resolvelib.ResolutionTooDeep):
        return False
    return True


def _example_arch_list() -> tuple[ArchEntry, ...]:
    return parse_arch_list(_EXAMPLE_ARCH_LIST)


def _first_way_out(
    ordered: list[Rejection], catalogue: Catalogue, requested: Sequence[Req]
) -> list[Rejection]:
    """Lead with the rejection whose way out works: on a machine with no GPU, where --arch-list
    alone makes the request fit, "no GPU to build for" leads (its hint, --arch-list, is the way
    out; --allow-torch-change or another Python would lead into a wall)."""
    needed = next((r for r in ordered if r.kind == "arch-list-needed"), None)
    if (
        needed is None
        or ordered[0] is needed
        or catalogue.options.arch_list is not None
        or catalogue.env.gpus
        or not _fits(_followed(catalogue, arch_list=_example_arch_list()), requested)
    ):
        return ordered
    return [needed, *(r for r in ordered if r is not needed)]


def _torch_change_hint(hint: str, catalogue: Catalogue, requested: Sequence[Req]) -> str:
    """``hint`` (rerun with --allow-torch-change) where following it makes the request fit; where
    it fits only with --arch-list too (no GPU here), both; else ``hint`` and what stops it next."""
    if catalogue.options.allow_torch_change:
        return hint
    changed = _followed(catalogue, allow_torch_change=True)
    try:
        _solve(changed, requested)
    except resolvelib.ResolutionTooDeep:
        return hint
    except resolvelib.ResolutionImpossible as exc:
        if (
            catalogue.options.arch_list is None
            and not catalogue.env.gpus
            and _fits(_followed(changed, arch_list=_example_arch_list()), requested)
        ):
            return (
                "rerun with --allow-torch-change and --arch-list (the compute capabilities of the "
                f"machines you build for, e.g. {_EXAMPLE_ARCH_LIST}): there is no GPU here to "
                "build for"
            )
        then = _conflict(exc, changed, list(requested)).hint
        return f"{hint}; then {then}" if then else hint
    return hint


def _major_hint(rejection: Rejection, catalogue: Catalogue, requested: list[Req]) -> str:
    """Both ways out: a toolkit of torch's major, or (where one fits) a torch of the toolkit's
    major."""
    toolkits = rejection.fact("toolkits") or ""
    first = (
        f"install a CUDA {rejection.fact('torch_major')}.x toolkit to build against the installed "
        f"{rejection.fact('torch')}"
    )
    if catalogue.options.allow_torch_change:
        return first
    changed = Catalogue(
        catalogue.env, catalogue.index, replace(catalogue.options, allow_torch_change=True)
    )
    try:
        result = _solve(changed, requested)
    except (resolvelib.ResolutionImpossible, resolvelib.ResolutionTooDeep):
        return first
    torch = next((c for c in result if c.name == "torch"), None)
    if torch is None:
        return first
    return (
        f"{first}, or rerun with --allow-torch-change to switch to {torch.label}, which nvcc "
        f"{toolkits.replace(',', ', ')} can build against"
    )
