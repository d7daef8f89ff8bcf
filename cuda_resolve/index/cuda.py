"""The CUDA facts of the index: toolkits, driver families and torch builds' arch lists.

What describing a machine needs (``doctor``, the driver probes). A :class:`CudaFacts` is cached
beside the parsed index (:func:`cuda_resolve.index.load.load_cuda_facts`) and holds versions
only, so reading it creates none of the package catalogue's classes and imports no
``packaging.specifiers``: every command pays for what it reads, and ``doctor`` reads little.
:class:`~cuda_resolve.index.model.Index` answers the same questions (:class:`CudaFactsSource`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol

from .._frozen import frozen
from ..versions import ComputeCapability, CudaVersion, DriverVersion

if TYPE_CHECKING:
    from packaging.version import Version

__all__ = [
    "ArchEntry",
    "CudaFacts",
    "CudaFactsSource",
    "CudaFamily",
    "ToolkitFacts",
    "parse_arch_entry",
    "parse_arch_list",
]


@frozen(kw_only=False, order=True)
class ArchEntry:
    """One TORCH_CUDA_ARCH_LIST entry: SASS for ``capability`` and, with ``ptx``, PTX too."""

    capability: ComputeCapability
    ptx: bool = False

    def __str__(self) -> str:
        return f"{self.capability}{'+PTX' if self.ptx else ''}"


def parse_arch_entry(text: str) -> ArchEntry:
    """``8.6`` / ``9.0a`` / ``12.0+PTX`` -> ArchEntry; ValueError on anything else."""
    cleaned = text.strip()
    ptx = cleaned.upper().endswith("+PTX")
    if ptx:
        cleaned = cleaned[: -len("+PTX")]
    return ArchEntry(ComputeCapability.parse(cleaned), ptx)


def parse_arch_list(text: str) -> tuple[ArchEntry, ...]:
    """``"7.5;8.6 9.0+PTX"`` -> entries in the order written; separators ``;``, ``,`` or
    whitespace, as TORCH_CUDA_ARCH_LIST accepts. ValueError names an entry that is not one."""
    return tuple(parse_arch_entry(word) for word in re.split(r"[;,\s]+", text.strip()) if word)


@frozen
class CudaFamily:
    """Minor-version compatibility of one CUDA major family (CUDA 11 onward)."""

    major: int
    min_driver_linux: DriverVersion
    min_driver_windows: DriverVersion | None = None
    source: str = ""
    unverified: tuple[str, ...] = ()  # keys whose values rest on secondary sources
    notes: str = ""


@frozen
class ToolkitFacts:
    """One CUDA toolkit release as the index records it: driver minimums, archs, host compilers."""

    version: CudaVersion
    driver_linux: DriverVersion | None = None  # the toolkit's own (GA) driver: full feature set
    driver_windows: DriverVersion | None = None
    archs: tuple[ComputeCapability, ...] = ()  # SASS targets nvcc accepts (sm_XY)
    specific_archs: tuple[ComputeCapability, ...] = ()  # 9.0a, 10.0f ...
    gcc_max: int | None = None  # newest gcc major nvcc accepts
    clang_max: int | None = None
    torch_gcc_max_exclusive: int | None = None  # torch.utils.cpp_extension's bound
    torch_clang_max_exclusive: int | None = None  # torch.utils.cpp_extension's clang bound
    source: str = ""
    unverified: tuple[str, ...] = ()  # keys whose values rest on secondary sources
    notes: str = ""


class CudaFactsSource(Protocol):
    """What the machine checks read: the index, or its CUDA facts alone."""

    @property
    def toolkits(self) -> tuple[ToolkitFacts, ...]: ...

    @property
    def families(self) -> tuple[CudaFamily, ...]: ...

    def toolkit(self, version: CudaVersion) -> ToolkitFacts | None: ...

    def family(self, major: int) -> CudaFamily | None: ...

    def torch_build_arch_list(
        self, version: str, variant: str
    ) -> tuple[str, tuple[ArchEntry, ...]] | None: ...


@frozen
class CudaFacts:
    """The index's toolkits and CUDA families, and each torch build's arch list as
    ``(release version, variant name, arch list)``; made by ``Index.cuda_facts()``."""

    toolkits: tuple[ToolkitFacts, ...]
    families: tuple[CudaFamily, ...]
    torch_arch_lists: tuple[tuple[Version, str, tuple[ArchEntry, ...]], ...] = ()

    def toolkit(self, version: CudaVersion) -> ToolkitFacts | None:
        return next((t for t in self.toolkits if t.version == version), None)

    def family(self, major: int) -> CudaFamily | None:
        return next((f for f in self.families if f.major == major), None)

    def torch_build_arch_list(
        self, version: str, variant: str
    ) -> tuple[str, tuple[ArchEntry, ...]] | None:
        """As ``Index.torch_build_arch_list``: the release is matched on its base version."""
        from packaging.version import Version

        base = Version(Version(version).base_version)
        for release, name, entries in self.torch_arch_lists:
            if release == base and name == variant:
                return f"{release}+{name}", entries
        return None
