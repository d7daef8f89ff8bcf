"""Resolution: requests + Environment + Index -> the chosen builds, with reasons.

``resolve()`` is a pure function: it builds a :class:`~.candidates.Catalogue` (every rule
applied per candidate), runs resolvelib over it, and turns a conflict into
:class:`~cuda_resolve.errors.ResolutionImpossible` naming the facts that ruled each option out
and the way out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import resolvelib
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..compat import driver_supports_cuda, format_arch_list
from ..environment import Environment
from ..errors import ResolutionImpossible, UsageError
from ..index.model import Index
from ..versions import CudaVersion
from .candidates import TORCH_FAMILY, Candidate, Catalogue, Options, Rejection, Req
from .provider import Provider

__all__ = ["Candidate", "Options", "Rejection", "Resolution", "parse_request", "resolve"]


@dataclass(frozen=True, kw_only=True)
class Resolution:
    chosen: tuple[Candidate, ...]  # install order: torch, its family, then extensions
    pass_through: tuple[str, ...]  # requests the index does not know, left to pip
    reasons: tuple[str, ...]
    rejected: tuple[Rejection, ...]  # alternatives ruled out, for --explain

    def get(self, name: str) -> Candidate | None:
        wanted = canonicalize_name(name)
        return next((c for c in self.chosen if c.name == wanted), None)


def parse_request(texts: Sequence[str], index: Index) -> tuple[list[Req], list[str]]:
    """Split user requests into known requirements and pass-through strings."""
    known: list[Req] = []
    passed: list[str] = []
    for text in texts:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0]
            raise UsageError(f"requirement {text!r} is not valid: {reason}", hint="write it as pip would, e.g. 'kaolin==0.18.0' or 'torch>=2.1'") from None
        name = canonicalize_name(requirement.name)
        package = index.package(name)
        if name not in TORCH_FAMILY and package is None:
            passed.append(text)
            continue
        if package is not None:
            for placeholder in package.placeholder_versions:
                if requirement.specifier and requirement.specifier.contains(placeholder, prereleases=True) and all(
                    not requirement.specifier.contains(str(w.version), prereleases=True) for w in package.wheels
                ) and all(not requirement.specifier.contains(str(r.version), prereleases=True) for r in package.recipes):
                    raise ResolutionImpossible(
                        f"{name} {placeholder} is a placeholder on PyPI, not a real release: importing it raises ImportError",
                        hint=f"ask for a real release (`cuda-resolve index show {name}` lists them), or just '{name}'",
                    )
        specifier, variant = _split_local(requirement.specifier, text)
        known.append(Req(name=name, specifier=specifier, variant=variant, origin="requested"))
    return known, passed


def _split_local(specifier: SpecifierSet, text: str) -> tuple[SpecifierSet, str | None]:
    """``==2.5.1+cu124`` becomes (``==2.5.1``, ``cu124``): the local tag is the variant."""
    variant: str | None = None
    kept = []
    for spec in specifier:
        if "+" in spec.version and spec.operator in ("==", "==="):
            base, local = spec.version.split("+", 1)
            if variant is not None and variant != local:
                raise UsageError(f"requirement {text!r} names two variants", hint="name one, e.g. torch==2.5.1+cu124")
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
    requirements, passed = parse_request(requests, index)
    catalogue = Catalogue(env, index, options)
    if requirements:
        # torchvision / torchaudio installed beside torch stay paired with whatever torch is chosen.
        asked = {req.name for req in requirements}
        for name in ("torchvision", "torchaudio"):
            if name not in asked and catalogue.installed_companion(name):
                requirements.append(Req(name=name, origin=f"installed {name}"))
    if not requirements:
        return Resolution(chosen=(), pass_through=tuple(passed), reasons=_pass_reasons(passed), rejected=())
    resolver: resolvelib.Resolver[Req, Candidate, str] = resolvelib.Resolver(Provider(catalogue), resolvelib.BaseReporter())
    try:
        result = resolver.resolve(requirements, max_rounds=2000)
    except resolvelib.ResolutionImpossible as exc:
        raise _conflict(exc, catalogue, requirements) from None
    except resolvelib.ResolutionTooDeep:
        raise ResolutionImpossible("the resolver gave up after too many rounds", hint="pin versions, e.g. 'torch==2.5.1'") from None
    chosen = _install_order(list(result.mapping.values()))
    names = {c.name for c in chosen} | {r.name for r in requirements}
    rejected = tuple(r for r in catalogue.rejections if r.name in names)
    reasons = tuple(_reason(c, chosen, env, index, catalogue) for c in chosen) + _pass_reasons(passed)
    return Resolution(chosen=tuple(chosen), pass_through=tuple(passed), reasons=reasons, rejected=rejected)


def _install_order(chosen: list[Candidate]) -> list[Candidate]:
    rank = {"torch": 0, "torchvision": 1, "torchaudio": 1}
    return sorted(chosen, key=lambda c: (rank.get(c.name, 2), c.name))


def _pass_reasons(passed: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"{text}: not in the index; passed to pip as an ordinary requirement" for text in passed)


def _driver_needed(cuda: CudaVersion, index: Index) -> str:
    family = index.family(cuda.major) if cuda.major >= 11 else None
    facts = index.toolkit(cuda)
    if family is not None:
        return f"driver >= {family.min_driver_linux} by minor-version compatibility"
    if facts is not None and facts.driver_linux is not None:
        return f"driver >= {facts.driver_linux}"
    return f"a driver for CUDA {cuda}"


def _newer_unconfirmed(candidate: Candidate, catalogue: Catalogue) -> list[str]:
    """Viable torch builds newer than the chosen one whose existence the index could not confirm."""
    return [
        other.label
        for other in catalogue.candidates("torch")
        if other.kind == "wheel" and other.torch_variant is not None
        and "exists" in other.torch_variant.unverified and other.base_version > candidate.base_version
    ]


def _reason(candidate: Candidate, chosen: list[Candidate], env: Environment, index: Index, catalogue: Catalogue) -> str:
    gpus = ", ".join(f"{gpu.name} ({gpu.compute_capability})" for gpu in env.gpus) or "no GPU"
    if candidate.kind == "installed":
        return f"{candidate.label}: already installed and fits this machine ({gpus}): kept"
    if candidate.name == "torch":
        dependents = [c for c in chosen if c.name != "torch" and c.kind == "wheel" and c.torch_version is not None]
        if dependents:
            why = f"pinned by {dependents[0].label}"
        else:
            unconfirmed = _newer_unconfirmed(candidate, catalogue)
            why = "newest release that fits"
            if unconfirmed:
                shown = ", ".join(sorted(set(unconfirmed), reverse=True)[:3])
                why = f"newest confirmed release that fits (the index cannot confirm that {shown}{' ...' if len(unconfirmed) > 3 else ''} were published; pin one to take it)"
        if candidate.cuda is None:
            return f"{candidate.label}: {why}; CPU build ({gpus})"
        if env.driver:
            driver = driver_supports_cuda(env.driver, candidate.cuda, index).reason
        elif env.gpus:
            driver = f"no driver known here: the machines it runs on need one for CUDA {candidate.cuda} ({_driver_needed(candidate.cuda, index)})"
        else:
            driver = "no driver here: the CUDA build also runs on the CPU"
        arch = format_arch_list(candidate.arch_list)
        return f"{candidate.label}: {why}; {driver}; kernels for {arch} cover {gpus}"
    if candidate.name in ("torchvision", "torchaudio"):
        return f"{candidate.label}: the release paired with torch {candidate.pairs_with}+{candidate.variant}"
    if candidate.kind == "wheel":
        return f"{candidate.label}: a prebuilt wheel matching torch {candidate.torch_version}+{candidate.variant} and Python {env.python.short_version}"
    torch = next((c for c in chosen if c.name == "torch"), None)
    against = f" against {torch.label}" if torch else ""
    toolkit = candidate.toolkit
    tk = (f"nvcc {toolkit.version} ({toolkit.root})" if toolkit.root else f"nvcc {toolkit.version}") if toolkit else "nvcc"
    wheels = "no published wheel fits" if candidate.package and candidate.package.wheels else "no published wheels"
    name = candidate.package.name if candidate.package else candidate.name
    return f"{name} {candidate.version}: {wheels}; source build{against} with {tk}, TORCH_CUDA_ARCH_LIST={format_arch_list(candidate.arch_list)} (recipe {candidate.recipe.name if candidate.recipe else '?'})"


_RELEVANCE = {category: rank for rank, category in enumerate(
    ("installed", "driver", "gpu", "toolkit", "compiler", "python", "platform", "other", "cpu")
)}


def _label_in(label: str, request: Req) -> bool:
    """Does the build a rejection label names ("torch 2.5.1+cu124") match the request?"""
    for token in label.split():
        try:
            version = Version(token)
        except InvalidVersion:
            continue
        if request.variant is not None and version.local not in (None, request.variant):
            return False
        return not request.specifier or request.specifier.contains(version.base_version, prereleases=True)
    return True


_HINTS = (
    ("pass --allow-torch-change", "rerun with --allow-torch-change to let cuda-resolve replace the installed torch"),
    ("supports CUDA <=", "upgrade the NVIDIA driver (`cuda-resolve doctor` shows the version), or pin an older torch"),
    ("no kernels for", "this GPU needs a build whose arch list covers it: pin an older torch whose variants include it, or build from source"),
    ("Python", "use a Python version the builds support (see --explain), or let it build from source where a recipe exists"),
    ("cannot target", "install a CUDA toolkit that can target this GPU, with a torch of the same CUDA major"),
    ("no CUDA toolkit", "install a CUDA toolkit (nvcc) whose major matches torch's CUDA, then retry; wheels need none"),
    ("gcc", "install a gcc within the toolkit's range and point NVCC_CCBIN/CC/CXX at it"),
    ("--arch-list", "pass --arch-list with the compute capabilities of the machines you build for"),
)


def _conflict(exc: resolvelib.ResolutionImpossible[Req, Candidate], catalogue: Catalogue, requested: list[Req]) -> ResolutionImpossible:
    involved: list[str] = []
    for cause in exc.causes:
        for name in (cause.requirement.name, cause.parent.name if cause.parent else None):
            if name and name not in involved:
                involved.append(name)
    for req in requested:
        if req.name not in involved:
            involved.append(req.name)
    reasons: list[str] = []
    installed = catalogue.installed_torch
    torch_candidates = catalogue.candidates("torch")
    locked = installed is not None and [c.kind for c in torch_candidates] == ["installed"]
    for name in involved:
        if locked and installed is not None and name not in TORCH_FAMILY and any(
            c.kind == "wheel" for c in catalogue.candidates(name)
        ):
            reasons.append(
                f"{name}: no published wheel for the installed {installed.label}; pass --allow-torch-change to switch torch"
            )
        asked = next((req for req in requested if req.name == name), None)
        relevant = [r for r in catalogue.rejected(name) if asked is None or _label_in(r.label, asked)]
        # The rule that says most about the request first: a driver or GPU fact before a CPU build's.
        relevant.sort(key=lambda r: _RELEVANCE.get(r.category, len(_RELEVANCE)))
        reasons.extend(r.reason for r in relevant)
    def shown_name(requirement: Req) -> str:
        package = catalogue.index.package(requirement.name)
        text = str(requirement)
        return package.name + text[len(requirement.name):] if package is not None else text

    demands = sorted({shown_name(cause.requirement) + (f" (from {cause.parent.label})" if cause.parent else "") for cause in exc.causes})
    shown = ", ".join(demands[:3]) + (f" and {len(demands) - 3} more" if len(demands) > 3 else "")
    message = "nothing fits this machine for " + shown
    if reasons:
        message += ": " + reasons[0]
    # Hints in the order of the reasons they answer: the leading fact's way out comes first.
    hints = [text for reason in reasons for key, text in _HINTS if key in reason]
    hint = "; or ".join(list(dict.fromkeys(hints))[:2]) if hints else "see --explain for what ruled each option out"
    return ResolutionImpossible(message, hint=hint, reasons=tuple(dict.fromkeys(reasons)))
