"""The index as frozen dataclasses: CUDA toolkit facts, torch builds, extension packages.

Parsed once from TOML by :mod:`cuda_resolve.index.load`; everything downstream (compatibility
rules, the resolver, doctor) reads these objects and never the TOML.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .._frozen import field, frozen
from ..versions import CudaVersion
from .cuda import ArchEntry, CudaFacts, CudaFamily, ToolkitFacts, parse_arch_entry, parse_arch_list

__all__ = [
    "ArchEntry",
    "CudaFamily",
    "ExtensionWheels",
    "Index",
    "Package",
    "Patch",
    "Recipe",
    "SmokeTest",
    "SourceArchive",
    "ToolkitFacts",
    "TorchRelease",
    "TorchVariant",
    "parse_arch_entry",
    "parse_arch_list",
]


@frozen
class TorchVariant:
    """One published build of one torch release: ``2.5.1+cu124``."""

    name: str  # "cu124" or "cpu"
    cuda: CudaVersion | None
    arch_list: tuple[ArchEntry, ...]  # empty for cpu, or unknown
    index_url: str  # the PyTorch wheel index for this variant
    pypi_default: bool = False  # the variant PyPI serves for linux x86_64
    verified: bool = True
    unverified: tuple[str, ...] = ()  # "exists" and/or "arch_list"; verified == (not unverified)


@frozen
class TorchRelease:
    """One torch release in the index: its variants, the Pythons it supports, its companions."""

    version: Version
    python: tuple[str, ...]  # "3.10", "3.13t"
    requires_python: SpecifierSet
    variants: tuple[TorchVariant, ...]
    torchvision: str | None = None
    torchaudio: str | None = None
    cxx11_abi: bool | None = None
    pypi_linux_aarch64: str | None = None  # the variant of PyPI's aarch64 wheel
    source: str = ""
    pypi_cuda_runtime: str | None = None  # CUDA runtime the PyPI wheel pins ("12.4.127", "bundled")
    unverified: tuple[str, ...] = ()  # release-level keys resting on secondary sources or inference
    notes: str = ""

    def variant(self, name: str) -> TorchVariant | None:
        return next((v for v in self.variants if v.name == name), None)


@frozen
class ExtensionWheels:
    """The prebuilt wheels of one release of an extension package."""

    version: Version
    python: tuple[str, ...]
    torch: tuple[tuple[str, tuple[str, ...]], ...]  # (torch base version, variants)
    platforms: tuple[str, ...] = ("linux_x86_64",)
    source: str = ""
    torch_python: tuple[tuple[str, tuple[str, ...]], ...] = ()  # per torch version, where != python
    torch_window: SpecifierSet = field(default_factory=SpecifierSet)  # the release's setup.py check
    unverified: tuple[str, ...] = ()  # "python", "torch", "torch[2.2.2]" ...
    notes: str = ""

    def variants_for(self, torch_version: str) -> tuple[str, ...]:
        return next((variants for tv, variants in self.torch if tv == torch_version), ())

    def python_for(self, torch_version: str) -> tuple[str, ...]:
        """The Python versions with a wheel for this torch version (empty if none)."""
        if not self.variants_for(torch_version):
            return ()
        return next((py for tv, py in self.torch_python if tv == torch_version), self.python)


@frozen
class Patch:
    """A literal text substitution applied to a fetched source tree before building."""

    file: str
    find: str
    replace: str
    reason: str
    count: int = 1  # how many occurrences must be found; a mismatch fails the build
    torch: SpecifierSet = field(
        default_factory=SpecifierSet
    )  # apply only for these torch; empty = always

    def applies_to(self, torch_version: str) -> bool:
        """Whether the patch is applied when building against ``torch_version`` (local label
        ignored)."""
        return self.torch.contains(Version(torch_version).base_version, prereleases=True)


@frozen
class SmokeTest:
    """What must work after an install: its imports, and a GPU script where a GPU exists."""

    imports: tuple[str, ...]  # modules that must import on any machine
    gpu_script: str | None = None  # Python run in a subprocess where a GPU exists
    description: str = ""


@frozen
class SourceArchive:
    """A recipe's source as one file (sdist, release tarball, zip), pinned by its sha256."""

    url: str  # https:// (plain http only to a loopback host)
    sha256: str  # 64 lower-case hex digits; checked before anything is unpacked
    #: The single top-level folder to remove: None = remove it when the archive has exactly one
    #: (GitHub's ``kaolin-0.18.0/``, an sdist's ``name-1.0/``); "" = keep the layout as it is.
    strip: str | None = None


@frozen
class Recipe:
    """How to build a package from source against the target's torch.

    The source is ``archive`` when there is one (its hash is checked and it needs no git), else a
    clone of ``repository`` at ``revision``; a recipe has at least one of the two. ``--source
    DIR`` overrides both."""

    name: str  # recipe id, e.g. "kaolin-master-d52da9f"
    package: str
    version: Version  # the version the built wheel will carry
    repository: str | None = None  # git URL; None for an archive-only recipe
    revision: str | None = None  # pinned commit, given exactly when repository is
    archive: SourceArchive | None = None
    subdirectory: str = ""
    submodules: bool = False
    torch: SpecifierSet = field(default_factory=SpecifierSet)  # torch versions it builds against
    torch_window: SpecifierSet = field(default_factory=SpecifierSet)  # setup.py's own torch check
    python: SpecifierSet = field(default_factory=SpecifierSet)
    cuda_min: CudaVersion | None = None
    cuda_max: CudaVersion | None = None
    build_requires: tuple[str, ...] = ()
    #: The built wheel's own runtime requirements (its Requires-Dist), where the index records
    #: them: when every one is installed, the plan installs the wheel with --no-deps.
    requires: tuple[str, ...] | None = None
    env: tuple[tuple[str, str], ...] = ()
    patches: tuple[Patch, ...] = ()
    smoke: SmokeTest | None = None
    source: str = ""
    notes: str = ""
    unverified: tuple[str, ...] = ()


@frozen
class Package:
    """An extension package the index knows: its wheels, URL patterns and recipes."""

    name: str
    import_name: str
    description: str = ""
    find_links: str | None = None  # pattern with {torch}, {cuda_nodot}, {variant} ... (see .urls)
    wheel_url: str | None = None  # pattern with also {version}, {python_tag}, {abi_tag}, {platform}
    placeholder_versions: tuple[str, ...] = ()  # PyPI releases that are placeholders: never pick
    wheels: tuple[ExtensionWheels, ...] = ()
    recipes: tuple[Recipe, ...] = ()
    requires: tuple[str, ...] = ()  # runtime requirements the plan adds (e.g. torchvision)
    source: str = ""
    notes: str = ""


@frozen
class Index:
    """The curated index, parsed and checked once: toolkits, torch releases, packages."""

    toolkits: tuple[ToolkitFacts, ...]
    families: tuple[CudaFamily, ...]
    torch: tuple[TorchRelease, ...]
    packages: tuple[Package, ...]
    sources: tuple[tuple[str, str], ...] = ()  # citation key -> text
    origins: tuple[tuple[str, str], ...] = ()  # "torch 2.5.1" -> file it came from

    def toolkit(self, version: CudaVersion) -> ToolkitFacts | None:
        return next((t for t in self.toolkits if t.version == version), None)

    def family(self, major: int) -> CudaFamily | None:
        return next((f for f in self.families if f.major == major), None)

    def package(self, name: str) -> Package | None:
        from packaging.utils import canonicalize_name

        wanted = canonicalize_name(name)
        return next((p for p in self.packages if canonicalize_name(p.name) == wanted), None)

    def torch_release(self, version: str) -> TorchRelease | None:
        base = Version(Version(version).base_version)
        return next((r for r in self.torch if r.version == base), None)

    def torch_build_arch_list(
        self, version: str, variant: str
    ) -> tuple[str, tuple[ArchEntry, ...]] | None:
        """``("2.5.1+cu124", arch list)`` for a torch build the index knows an arch list of."""
        return self.cuda_facts().torch_build_arch_list(version, variant)  # one matching rule

    def cuda_facts(self) -> CudaFacts:
        """What describing a machine needs (``doctor``), without the package catalogue."""
        arch_lists = tuple(
            (str(release.version), variant.name, variant.arch_list)
            for release in self.torch
            for variant in release.variants
            if variant.arch_list
        )
        return CudaFacts(
            toolkits=self.toolkits, families=self.families, torch_arch_lists=arch_lists
        )

    def origin(self, key: str) -> str | None:
        return dict(self.origins).get(key)
