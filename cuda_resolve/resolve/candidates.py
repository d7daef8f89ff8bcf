"""Candidates and requirements for the resolver, and the catalogue that generates them.

The :class:`Catalogue` is built once from (Environment, Index, options). It applies every
per-candidate rule (Python, platform, driver, GPU coverage, toolkit, compiler) up front, keeps
the viable candidates in preference order, and records for every rejected one the fact that
ruled it out — the material of ``--explain`` and of conflict messages. The resolvelib provider
only matches candidates against requirements; it does no I/O and applies no machine rules.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cached_property, lru_cache
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._frozen import field, frozen
from ..compat import (
    arch_list_for_build,
    driver_supports_cuda,
    format_arch_list,
    host_compiler_for,
    python_matches,
    toolkit_archs,
    toolkit_can_build,
    torch_arch_list,
    uncovered_gpus,
)
from ..environment import Environment, Toolkit
from ..index.model import (
    ArchEntry,
    ExtensionWheels,
    Index,
    Package,
    Recipe,
    TorchRelease,
    TorchVariant,
)
from ..versions import CudaVersion

__all__ = ["CATEGORIES", "TORCH_FAMILY", "Candidate", "Catalogue", "Options", "Rejection", "Req"]

Kind = Literal["wheel", "build", "installed"]

#: Packages whose builds are published per torch release and CUDA variant, paired with torch.
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")


@frozen
class Options:
    """What the user allowed the resolver: a torch change, a strict driver, an arch list."""

    allow_torch_change: bool = False
    strict_driver: bool = False
    arch_list: tuple[ArchEntry, ...] | None = None  # override for source builds
    # an installed extension build is never kept (--rebuild, `cuda-resolve build`, a lock)
    rebuild: bool = False
    #: `cuda-resolve build --arch-list`: the wheel is for other machines, so the GPUs here need
    #: not be covered by the arch list (an install still needs them covered).
    for_other_machines: bool = False


@frozen(slots=False)
class Candidate:
    """One way to satisfy a package: an installed build, a published wheel or a source build."""

    name: str  # canonical name
    version: Version
    kind: Kind
    variant: str | None = None  # torch family: its variant; extensions: the torch variant built for
    cuda: CudaVersion | None = None
    torch_version: Version | None = None  # extension wheels: the exact torch they were built for
    torch_spec: SpecifierSet | None = None  # builds: the torch versions the recipe builds against
    toolkit: Toolkit | None = None  # builds: the toolkit to use
    arch_list: tuple[ArchEntry, ...] = ()
    recipe: Recipe | None = None
    release: TorchRelease | None = None
    torch_variant: TorchVariant | None = None
    package: Package | None = None
    wheels: ExtensionWheels | None = None
    pairs_with: Version | None = None  # torchvision/torchaudio: the torch release they pair with
    requires: tuple[str, ...] = ()
    note: str = ""

    @cached_property
    def base_version(self) -> Version:
        return _base(self.version)

    @property
    def label(self) -> str:
        if self.name in TORCH_FAMILY or self.kind == "installed":
            local = f"+{self.variant}" if self.variant and "+" not in str(self.version) else ""
            return f"{self.name} {self.version}{local}"
        if self.kind == "build":
            tk = f" with nvcc {self.toolkit.version}" if self.toolkit else ""
            return f"{self.name} {self.version} (source build{tk})"
        return f"{self.name} {self.version} wheel for torch {self.torch_version}+{self.variant}"


@frozen(slots=False)
class Req:
    """A requirement on one package, possibly pinned to a torch variant or CUDA major."""

    name: str
    specifier: SpecifierSet = field(default_factory=SpecifierSet)
    variant: str | None = None
    cuda_major: int | None = None
    cuda_build: bool = False  # requires a CUDA (not CPU) build
    wheel_only: bool = False  # a published wheel, not a source build
    origin: str = "requested"
    extras: tuple[str, ...] = ()  # as requested; carried to pip, never resolved here

    def __str__(self) -> str:
        parts = [f"{self.name}{self.specifier}"]
        if self.variant:
            parts.append(f"+{self.variant}")
        if self.cuda_major is not None:
            parts.append(f" (CUDA {self.cuda_major}.x build)")
        elif self.cuda_build:
            parts.append(" (CUDA build)")
        return "".join(parts)


#: Rejection categories (the ``category`` of ``plan --explain --json``), most telling first: the
#: order in which a conflict presents the facts that ruled its options out.
CATEGORIES = (
    "installed",
    "driver",
    "gpu",
    "toolkit",
    "compiler",
    "python",
    "platform",
    "other",
    "cpu",
)

#: The rule each rejection records (its ``kind``) and the category it belongs to. Conflict
#: messages, hints and ``--explain`` groups are derived from the kind and the facts, never from
#: the wording of the reason.
RULES: dict[str, str] = {
    "installed-unfit": "installed",  # the installed torch does not run here, and may not change
    "installed-no-wheel": "installed",  # an extension publishes no wheel for the kept torch
    # every recipe builds against other torch releases than the kept one
    "installed-torch-window": "installed",
    "driver-cuda": "driver",  # the driver cannot run this build's CUDA
    "toolkit-driver": "driver",  # the driver cannot run code the only toolkits compile
    "gpu-kernels": "gpu",  # the build has no kernels for a GPU here
    "toolkit-missing": "toolkit",
    "toolkit-target": "toolkit",  # nvcc cannot target a GPU (or an --arch-list entry)
    "toolkit-archs-unknown": "toolkit",
    "toolkit-recipe-range": "toolkit",  # the recipe's CUDA range excludes the toolkit
    "toolkit-torch-major": "toolkit",  # the toolkits' CUDA majors differ from every torch's
    "compiler-range": "compiler",
    "python": "python",
    "platform": "platform",
    "cpu-build": "cpu",
    "arch-list-needed": "other",  # no GPU here and no --arch-list
    "arch-list-unknown": "other",  # the index does not know the build's arch list
    "no-torch-pair": "other",
    # An installed build of an extension that is not kept; "other": the builds that follow
    # explain a conflict better than the build they replace.
    "installed-build-torch": "other",  # its label names another torch than the installed one
    "installed-build-gpu": "other",  # its arch list misses a GPU here
    "installed-build-unknown": "other",  # its version carries no build label
    "installed-build-ignored": "other",  # --rebuild or --arch-list: a new build is asked for
}


@frozen(kw_only=False)
class Rejection:
    """One alternative ruled out: which, the sentence the user reads, and the rule with its
    facts."""

    name: str
    label: str
    reason: str
    kind: str = "other"  # a key of RULES
    facts: tuple[tuple[str, str], ...] = ()

    @property
    def category(self) -> str:
        return RULES.get(self.kind, "other")

    def fact(self, key: str) -> str | None:
        return next((value for name, value in self.facts if name == key), None)


def _python_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.rstrip("t").split("."))


def _base(version: str | Version) -> Version:
    return Version(Version(str(version)).base_version)


@lru_cache(maxsize=4096)
def _specifier_allows(spec: SpecifierSet, version: Version) -> bool:
    return spec.contains(_base(version), prereleases=True)


class Catalogue:
    """Every viable candidate for every package, in preference order, plus the rejections."""

    def __init__(self, env: Environment, index: Index, options: Options) -> None:
        self.env = env
        self.index = index
        self.options = options
        self.rejections: list[Rejection] = []
        self._by_name: dict[str, list[Candidate]] = defaultdict(list)
        self._torch_candidates()
        self._family_candidates()

    # -- public ---------------------------------------------------------------------------
    def candidates(self, name: str) -> list[Candidate]:
        name = canonicalize_name(name)
        if name not in self._by_name and name not in TORCH_FAMILY:
            package = self.index.package(name)
            if package is not None:
                self._package_candidates(package)
        return self._by_name.get(name, [])

    def rejected(self, name: str) -> list[Rejection]:
        wanted = canonicalize_name(name)
        return [r for r in self.rejections if r.name == wanted]

    def knows(self, name: str) -> bool:
        return canonicalize_name(name) in TORCH_FAMILY or self.index.package(name) is not None

    def reject(self, name: str, label: str, reason: str, kind: str, **facts: object) -> None:
        if kind not in RULES:
            raise ValueError(f"unknown rejection kind {kind!r}")
        pairs = tuple((key, str(value)) for key, value in facts.items() if value is not None)
        self.rejections.append(Rejection(canonicalize_name(name), label, reason, kind, pairs))

    # -- torch ----------------------------------------------------------------------------
    @property
    def installed_torch(self) -> Candidate | None:
        torch = self.env.torch
        if torch is None:
            return None
        try:
            version = Version(torch.version)
        except InvalidVersion:
            return None
        from ..torch_identity import identity_of

        # One reading of the build (torch_identity): version.py's label, else its CUDA.
        variant = identity_of(torch).variant or "cpu"
        release = self.index.torch_release(torch.version)
        return Candidate(
            name="torch",
            version=version,
            kind="installed",
            variant=variant,
            cuda=torch.cuda,
            release=release,
            torch_variant=release.variant(variant) if release else None,
        )

    def installed_companion(self, name: str) -> str | None:
        """The installed torchvision / torchaudio version, if any."""
        torch = self.env.torch
        if torch is None:
            return None
        return (
            torch.torchvision
            if name == "torchvision"
            else torch.torchaudio
            if name == "torchaudio"
            else None
        )

    def _torch_runs_here(
        self, label: str, cuda: CudaVersion | None, arch: tuple[ArchEntry, ...] | None
    ) -> tuple[str, str, dict[str, object]] | None:
        """None when a torch build with this CUDA and arch list runs on every GPU here; else
        (why not, the rule's kind, its facts)."""
        env = self.env
        if cuda is None:
            if env.gpus:
                return f"{label}: a CPU build on a machine with NVIDIA GPUs", "cpu-build", {}
            return None
        if not env.gpus and env.driver is None:
            return None  # a CPU-only machine: CUDA builds run there on the CPU
        # GPUs without a driver: a machine-class profile or a login node given
        # CUDA_RESOLVE_CUDA_ARCH. The driver is unknown, not absent: judge the GPUs and say which
        # driver the plan needs.
        if env.driver is not None:
            verdict = driver_supports_cuda(
                env.driver, cuda, self.index, strict=self.options.strict_driver, os=env.machine.os
            )
            if not verdict:
                return (
                    f"{label}: {verdict.reason}",
                    "driver-cuda",
                    {
                        "driver": env.driver.version,
                        "driver_cuda": env.driver.cuda,
                        "cuda": cuda,
                    },
                )
        if arch is None:
            return f"{label}: its arch list is not known to the index", "arch-list-unknown", {}
        missing = uncovered_gpus(arch, env.gpus)
        if missing:
            names = ", ".join(f"{gpu.name} ({gpu.compute_capability})" for gpu in missing)
            return (
                f"{label}: no kernels for {names} (it has {format_arch_list(arch) or 'none'})",
                "gpu-kernels",
                {
                    "gpus": ";".join(str(gpu.compute_capability) for gpu in missing),
                    "arch_list": format_arch_list(arch),
                },
            )
        return None

    def _torch_candidates(self) -> None:
        env = self.env
        installed = self.installed_torch
        if installed is not None:
            arch, _ = torch_arch_list(env, self.index)
            label = f"installed torch {installed.version}"
            if installed.cuda is None:
                arch = ()
            elif arch is None:
                # A torch the index does not know (a source or nightly build): trust it is fine for
                # its own machine rather than refuse to keep it; doctor reports the unknown list.
                arch = tuple(ArchEntry(gpu.compute_capability) for gpu in env.gpus)
            problem = self._torch_runs_here(label, installed.cuda, arch)
            if problem:
                reason, kind, facts = problem
                if self.options.allow_torch_change:
                    self.reject("torch", installed.label, reason, kind, **facts)
                else:
                    self.reject(
                        "torch",
                        installed.label,
                        reason + "; pass --allow-torch-change to replace it",
                        "installed-unfit",
                        torch=installed.label,
                        because=kind,
                        **facts,
                    )
            else:
                self._by_name["torch"].append(installed)
            if not self.options.allow_torch_change:
                return
        python = env.python
        free_threaded = python.abi_tag.endswith("t")
        ordered: list[tuple[tuple[int, ...], Candidate]] = []
        for release in self.index.torch:
            label_base = f"torch {release.version}"
            if not python_matches(release.python, python.version, free_threaded=free_threaded):
                self.reject(
                    "torch",
                    label_base,
                    f"{label_base}: no wheels for Python {python.short_version} (has "
                    f"{', '.join(release.python)})",
                    "python",
                    python=python.short_version,
                    supported=",".join(release.python),
                )
                continue
            for variant in release.variants:
                label = f"torch {release.version}+{variant.name}"
                if not self._variant_on_platform(release, variant):
                    self.reject(
                        "torch",
                        label,
                        f"{label}: not published for {env.machine.os} {env.machine.arch}",
                        "platform",
                        os=env.machine.os,
                        arch=env.machine.arch,
                    )
                    continue
                problem = self._torch_runs_here(
                    label,
                    variant.cuda,
                    variant.arch_list if variant.arch_list or variant.cuda is None else None,
                )
                if problem:
                    reason, kind, facts = problem
                    self.reject("torch", label, reason, kind, **facts)
                    continue
                if (
                    installed is not None
                    and _base(installed.version) == release.version
                    and installed.variant == variant.name
                ):
                    continue  # the installed build itself is already the first candidate
                candidate = Candidate(
                    name="torch",
                    version=release.version,
                    kind="wheel",
                    variant=variant.name,
                    cuda=variant.cuda,
                    release=release,
                    torch_variant=variant,
                    arch_list=variant.arch_list,
                )
                ordered.append((self._variant_rank(release, variant), candidate))
        ordered.sort(key=lambda item: item[0], reverse=True)
        self._by_name["torch"].extend(candidate for _, candidate in ordered)

    def _variant_on_platform(self, release: TorchRelease, variant: TorchVariant) -> bool:
        machine = self.env.machine
        if machine.os == "linux" and machine.arch == "aarch64":
            return variant.name in ("cpu", release.pypi_linux_aarch64)
        if machine.os == "darwin":
            return variant.name == "cpu"
        return machine.arch == "x86_64"

    def _variant_rank(self, release: TorchRelease, variant: TorchVariant) -> tuple[int, ...]:
        """Larger is preferred: newer release, then (with GPUs) higher CUDA; CPU builds first
        without GPUs."""
        has_gpu = bool(self.env.gpus)
        cuda = variant.cuda
        cuda_rank = (cuda.major * 100 + cuda.minor) if cuda else 0
        # A build whose existence the index could not confirm comes after every confirmed one:
        # planning an install of a wheel that was never published fails late. PyTorch publishes
        # a CPU build of every release, so "cpu" counts as confirmed.
        confirmed = 1 if cuda is None or "exists" not in variant.unverified else 0
        if has_gpu:
            return (confirmed, *release.version.release, cuda_rank)
        cpu_first = 1 if cuda is None else 0
        return (cpu_first, confirmed, *release.version.release, cuda_rank)

    def _family_candidates(self) -> None:
        """torchvision / torchaudio: one candidate per viable torch candidate, paired by release."""
        for torch in self._by_name.get("torch", []):
            release = torch.release
            if release is None:
                continue
            for name, version in (
                ("torchvision", release.torchvision),
                ("torchaudio", release.torchaudio),
            ):
                if not version:
                    continue
                installed = self.installed_companion(name)
                kept = (
                    torch.kind == "installed"
                    and installed is not None
                    and _base(installed) == _base(version)
                )
                self._by_name[name].append(
                    Candidate(
                        name=name,
                        version=Version(installed if kept and installed else version),
                        kind="installed" if kept else "wheel",
                        variant=torch.variant,
                        cuda=torch.cuda,
                        pairs_with=_base(torch.version),
                        release=release,
                    )
                )
        for name in ("torchvision", "torchaudio"):
            if not self._by_name.get(name):
                self.reject(
                    name,
                    name,
                    f"{name}: no release pairs with any torch that fits this machine",
                    "no-torch-pair",
                )

    # -- extension packages ----------------------------------------------------------------
    def _installed_build(self, package: Package) -> Candidate | None:
        """The installed build of ``package``, when it is kept (see :mod:`.installed`); else the
        rejection that says why not is recorded."""
        from .installed import Refused, judge_installed

        name = canonicalize_name(package.name)
        found = next(
            (e for e in self.env.installed_extensions if canonicalize_name(e.name) == name), None
        )
        if found is None:
            return None
        torch = self.installed_torch
        pinned = (
            (_base(torch.version), torch.variant) if torch is not None and torch.variant else None
        )
        verdict = judge_installed(
            found,
            torch=pinned,
            gpus=self.env.gpus,
            arch_list_given=self.options.arch_list is not None,
            rebuild=self.options.rebuild,
            releases=self.index.torch,
        )
        if isinstance(verdict, Refused):
            self.reject(
                package.name,
                f"installed {found.name} {found.version}",
                verdict.reason,
                verdict.kind,
                **dict(verdict.facts),
            )
            return None
        assert torch is not None and pinned is not None  # kept only for the installed torch
        return Candidate(
            name=name,
            version=Version(found.version),
            kind="installed",
            variant=pinned[1],
            cuda=torch.cuda,
            torch_version=pinned[0],
            arch_list=verdict.arch_list,
            package=package,
            requires=package.requires,
            note=verdict.reason,
        )

    def _package_candidates(self, package: Package) -> None:
        name = canonicalize_name(package.name)
        installed_build = self._installed_build(package)
        ranked: list[tuple[tuple[int, ...], Candidate]] = []
        installed = self.installed_torch
        keeps_installed = installed is not None
        for wheels in package.wheels:
            for candidate in self._wheel_candidates(package, wheels):
                matches_installed = (
                    keeps_installed
                    and installed is not None
                    and _base(installed.version) == candidate.torch_version
                    and installed.variant == candidate.variant
                )
                rank = (
                    int(matches_installed),
                    1,
                    *wheels.version.release,
                    *(candidate.torch_version.release if candidate.torch_version else ()),
                    self._cuda_rank(candidate.variant),
                )
                ranked.append((rank, candidate))
        for recipe in package.recipes:
            for candidate in self._build_candidates(package, recipe):
                matches_installed = (
                    keeps_installed
                    and installed is not None
                    and candidate.torch_spec is not None
                    and _specifier_allows(candidate.torch_spec, installed.version)
                    and installed.cuda is not None
                )
                rank = (int(matches_installed), 0, *recipe.version.release, 0, 0, 0, 0)
                ranked.append((rank, candidate))
        ranked.sort(key=lambda item: item[0], reverse=True)
        # The installed build that fits comes first, as the installed torch does.
        self._by_name[name] = [
            *([installed_build] if installed_build else []),
            *(candidate for _, candidate in ranked),
        ]

    @staticmethod
    def _cuda_rank(variant: str | None) -> int:
        if not variant or not variant.startswith("cu"):
            return 0
        try:
            cuda = CudaVersion.parse(variant)
        except ValueError:
            return 0
        return cuda.major * 100 + cuda.minor

    def _wheel_candidates(self, package: Package, wheels: ExtensionWheels) -> list[Candidate]:
        env = self.env
        label = f"{package.name} {wheels.version} wheels"
        supported = {
            py for torch_version, _ in wheels.torch for py in wheels.python_for(torch_version)
        }
        if not python_matches(supported, env.python.version):
            self.reject(
                package.name,
                label,
                f"{label}: built for Python {', '.join(sorted(supported, key=_python_key))}, not "
                f"{env.python.short_version}",
                "python",
                python=env.python.short_version,
                supported=",".join(sorted(supported, key=_python_key)),
            )
            return []
        platforms = set(env.platform_tags())
        if not platforms.intersection(wheels.platforms):
            self.reject(
                package.name,
                label,
                f"{label}: published for {', '.join(wheels.platforms)} only",
                "platform",
                os=env.machine.os,
                arch=env.machine.arch,
            )
            return []
        found: list[Candidate] = []
        for torch_version, variants in wheels.torch:
            if not python_matches(wheels.python_for(torch_version), env.python.version):
                self.reject(
                    package.name,
                    f"{label} for torch {torch_version}",
                    f"{label} for torch {torch_version}: no wheel for Python "
                    f"{env.python.short_version}",
                    "python",
                    python=env.python.short_version,
                    supported=",".join(wheels.python_for(torch_version)),
                )
                continue
            for variant in variants:
                found.append(
                    Candidate(
                        name=canonicalize_name(package.name),
                        version=wheels.version,
                        kind="wheel",
                        variant=variant,
                        torch_version=Version(torch_version),
                        package=package,
                        wheels=wheels,
                        requires=package.requires,
                    )
                )
        return found

    def _build_candidates(self, package: Package, recipe: Recipe) -> list[Candidate]:
        env = self.env
        label = f"{package.name} {recipe.version} source build ({recipe.name})"
        if recipe.python and not recipe.python.contains(env.python.version, prereleases=True):
            self.reject(
                package.name,
                label,
                f"{label}: recipe supports Python {recipe.python}, not {env.python.version}",
                "python",
                python=env.python.short_version,
                supported=recipe.python,
            )
            return []
        if not env.toolkits:
            self.reject(
                package.name,
                label,
                f"{label}: no CUDA toolkit (nvcc) found to build with",
                "toolkit-missing",
            )
            return []
        found: list[Candidate] = []
        for toolkit in env.toolkits:
            tk_label = f"{label} with nvcc {toolkit.version}"
            if (recipe.cuda_min and toolkit.version < recipe.cuda_min) or (
                recipe.cuda_max and toolkit.version > recipe.cuda_max
            ):
                self.reject(
                    package.name,
                    tk_label,
                    f"{tk_label}: recipe needs CUDA "
                    f"{recipe.cuda_min or ''}..{recipe.cuda_max or ''}",
                    "toolkit-recipe-range",
                    toolkit=toolkit.version,
                    cuda_min=recipe.cuda_min,
                    cuda_max=recipe.cuda_max,
                )
                continue
            facts = self.index.toolkit(toolkit.version)
            archs = toolkit_archs(toolkit, facts)
            arch_list = self.options.arch_list
            if arch_list is None:
                if not env.gpus:
                    self.reject(
                        package.name,
                        tk_label,
                        f"{tk_label}: no GPU to build for; pass --arch-list (e.g. 8.6) to build "
                        "for other machines",
                        "arch-list-needed",
                        toolkit=toolkit.version,
                    )
                    continue
                if not archs:
                    self.reject(
                        package.name,
                        tk_label,
                        f"{tk_label}: the architectures this nvcc accepts are unknown",
                        "toolkit-archs-unknown",
                        toolkit=toolkit.version,
                    )
                    continue
                arch_list, impossible = arch_list_for_build(env.capabilities, archs)
                if impossible:
                    self.reject(
                        package.name,
                        tk_label,
                        f"{tk_label}: nvcc {toolkit.version} cannot target compute capability "
                        f"{', '.join(str(c) for c in impossible)} (lowest it accepts: "
                        f"{min(archs)})",
                        "toolkit-target",
                        toolkit=toolkit.version,
                        gpus=";".join(str(c) for c in impossible),
                    )
                    continue
            elif archs:
                verdict = toolkit_can_build(archs, arch_list, version=toolkit.version)
                if not verdict:
                    self.reject(
                        package.name,
                        tk_label,
                        f"{tk_label}: {verdict.reason}",
                        "toolkit-target",
                        toolkit=toolkit.version,
                        gpus=format_arch_list(arch_list),
                    )
                    continue
            if env.gpus and not (
                self.options.for_other_machines and self.options.arch_list is not None
            ):
                missing = uncovered_gpus(arch_list, env.gpus)
                if missing:
                    self.reject(
                        package.name,
                        tk_label,
                        f"{tk_label}: arch list {format_arch_list(arch_list)} has no kernels for "
                        f"{', '.join(str(g.compute_capability) for g in missing)}",
                        "gpu-kernels",
                        gpus=";".join(str(g.compute_capability) for g in missing),
                        arch_list=format_arch_list(arch_list),
                    )
                    continue
            compiler, switch_to = host_compiler_for(env.compiler, facts)
            if not compiler and switch_to is None:
                self.reject(
                    package.name,
                    tk_label,
                    f"{tk_label}: {compiler.reason}",
                    "compiler-range",
                    toolkit=toolkit.version,
                    gcc=env.compiler.nvcc_host_version or env.compiler.gcc,
                    gcc_max=facts.gcc_max if facts else None,
                )
                continue
            if env.driver is not None and not driver_supports_cuda(
                env.driver, toolkit.version, self.index, os=env.machine.os
            ):
                # Code nvcc compiles must run on this driver; a build for other machines
                # (--arch-list) may still be wanted.
                if self.options.arch_list is None:
                    self.reject(
                        package.name,
                        tk_label,
                        f"{tk_label}: driver {env.driver.version} cannot run CUDA "
                        f"{toolkit.version} code",
                        "toolkit-driver",
                        driver=env.driver.version,
                        driver_cuda=env.driver.cuda,
                        toolkit=toolkit.version,
                    )
                    continue
            found.append(
                Candidate(
                    name=canonicalize_name(package.name),
                    version=recipe.version,
                    kind="build",
                    torch_spec=recipe.torch,
                    toolkit=toolkit,
                    arch_list=arch_list,
                    recipe=recipe,
                    package=package,
                    requires=package.requires,
                    cuda=toolkit.version,
                )
            )
        return found

    # -- matching -------------------------------------------------------------------------
    @staticmethod
    def satisfies(req: Req, candidate: Candidate) -> bool:
        if canonicalize_name(req.name) != candidate.name:
            return False
        if req.specifier and not _specifier_allows(req.specifier, candidate.base_version):
            return False
        if req.variant is not None and candidate.variant != req.variant:
            return False
        if req.cuda_build and candidate.cuda is None:
            return False
        if req.wheel_only and candidate.kind == "build":
            return False
        return not (
            req.cuda_major is not None
            and (candidate.cuda is None or candidate.cuda.major != req.cuda_major)
        )

    def dependencies(self, candidate: Candidate) -> list[Req]:
        deps: list[Req] = []
        origin = candidate.label
        if candidate.name in ("torchvision", "torchaudio") and candidate.pairs_with is not None:
            deps.append(
                Req(
                    name="torch",
                    specifier=SpecifierSet(f"=={candidate.pairs_with}"),
                    variant=candidate.variant,
                    origin=origin,
                )
            )
        elif candidate.kind in ("wheel", "installed") and candidate.torch_version is not None:
            deps.append(
                Req(
                    name="torch",
                    specifier=SpecifierSet(f"=={candidate.torch_version}"),
                    variant=candidate.variant,
                    origin=origin,
                )
            )
        elif candidate.kind == "build" and candidate.toolkit is not None:
            deps.append(
                Req(
                    name="torch",
                    specifier=candidate.torch_spec or SpecifierSet(),
                    cuda_major=candidate.toolkit.version.major,
                    origin=origin,
                )
            )
        for requirement in candidate.requires:
            deps.append(Req(name=canonicalize_name(requirement), origin=origin))
        return deps
