"""Test helpers: an in-memory Index built from the cited facts in shared/reference/compat.md.

The compatibility and doctor tests must not depend on the shipped index (another team owns it
and it changes); they build their own from the reference tables, so each expected answer here
can be checked against compat.md by hand. Sections cited: 1a/1b (driver minimums), 2 (arch
lists), 3a/3b (host compilers), 4b (torch arch lists).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cuda_resolve.environment import Driver, Gpu
from cuda_resolve.index.model import (
    ArchEntry,
    CudaFamily,
    Index,
    ToolkitFacts,
    TorchRelease,
    TorchVariant,
    parse_arch_entry,
)
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

__all__ = [
    "FAMILIES",
    "TOOLKITS",
    "arch",
    "archs",
    "cc",
    "cuda",
    "driver",
    "drv",
    "gpu",
    "make_index",
]


def cc(text: str) -> ComputeCapability:
    return ComputeCapability.parse(text)


def cuda(text: str) -> CudaVersion:
    return CudaVersion.parse(text)


def drv(text: str) -> DriverVersion:
    return DriverVersion.parse(text)


def arch(text: str) -> tuple[ArchEntry, ...]:
    """``"8.0;8.6;9.0+PTX"`` -> ArchEntry tuple (TORCH_CUDA_ARCH_LIST notation)."""
    return tuple(parse_arch_entry(part) for part in text.split(";") if part)


def archs(numbers: str) -> tuple[ComputeCapability, ...]:
    """``"75 80 86"`` (nvcc sm numbers, compat.md section 2) -> capabilities."""
    return tuple(cc(f"sm_{number}") for number in numbers.split())


def gpu(capability: str, name: str = "GPU", index: int = 0) -> Gpu:
    return Gpu(index=index, name=name, compute_capability=cc(capability))


# compat.md section 2.
_SM_10_2 = "30 32 35 37 50 52 53 60 61 62 70 72 75"
_SM_11_0 = "35 37 50 52 53 60 61 62 70 72 75 80"
_SM_11_1 = _SM_11_0 + " 86"
_SM_11_4 = _SM_11_1 + " 87"
_SM_11_8 = _SM_11_4 + " 89 90"
_SM_12_0 = "50 52 53 60 61 62 70 72 75 80 86 87 89 90"
_SM_12_8 = _SM_12_0 + " 100 101 120"
_SM_12_9 = _SM_12_8 + " 103 121"
_SM_13_0 = "75 80 86 87 88 89 90 100 103 110 120 121"

# (version, linux GA driver (1b), SASS list (2), arch-specific (2), max gcc (3a), torch bound (3b))
_TOOLKIT_ROWS: tuple[tuple[str, str, str, str, int | None, int | None], ...] = (
    ("10.2", "440.33", _SM_10_2, "", 8, None),
    ("11.0", "450.51.05", _SM_11_0, "", 9, 10),
    ("11.1", "455.23", _SM_11_1, "", 10, 11),
    ("11.2", "460.27.03", _SM_11_1, "", 10, 11),
    ("11.3", "465.19.01", _SM_11_1, "", 10, 11),
    ("11.4", "470.42.01", _SM_11_4, "", 11, 12),
    ("11.5", "495.29.05", _SM_11_4, "", 11, 12),
    ("11.6", "510.39.01", _SM_11_4, "", 11, 12),
    ("11.7", "515.43.04", _SM_11_4, "", 11, 12),
    ("11.8", "520.61.05", _SM_11_8, "", 11, None),
    ("12.0", "525.60.13", _SM_12_0, "90a", 12, 13),
    ("12.1", "530.30.02", _SM_12_0, "90a", 12, 13),
    ("12.2", "535.54.03", _SM_12_0, "90a", 12, 13),
    ("12.3", "545.23.06", _SM_12_0, "90a", 12, 14),
    ("12.4", "550.54.14", _SM_12_0, "90a", 13, 14),
    ("12.5", "555.42.02", _SM_12_0, "90a", 13, 14),
    ("12.6", "560.28.03", _SM_12_0, "90a", 13, 14),
    ("12.8", "570.26", _SM_12_8, "90a 100a 101a 120a", 14, 15),
    (
        "12.9",
        "575.51.03",
        _SM_12_9,
        "90a 100a 100f 101a 101f 103a 103f 120a 120f 121a 121f",
        14,
        15,
    ),
    (
        "13.0",
        "580.65.06",
        _SM_13_0,
        "90a 100a 100f 103a 103f 110a 110f 120a 120f 121a 121f",
        15,
        16,
    ),
    (
        "13.1",
        "590.44.01",
        _SM_13_0,
        "90a 100a 100f 103a 103f 110a 110f 120a 120f 121a 121f",
        15,
        None,
    ),
    (
        "13.2",
        "595.45.04",
        _SM_13_0,
        "90a 100a 100f 103a 103f 110a 110f 120a 120f 121a 121f",
        15,
        None,
    ),
)

TOOLKITS: tuple[ToolkitFacts, ...] = tuple(
    ToolkitFacts(
        version=cuda(version),
        driver_linux=drv(linux),
        archs=tuple(sorted(archs(sass))),
        specific_archs=tuple(sorted(archs(specific))) if specific else (),
        gcc_max=gcc_max,
        torch_gcc_max_exclusive=torch_bound,
        source="compat.md 1b, 2, 3a, 3b",
    )
    for version, linux, sass, specific, gcc_max, torch_bound in _TOOLKIT_ROWS
)

# compat.md section 1a.
FAMILIES: tuple[CudaFamily, ...] = (
    CudaFamily(major=11, min_driver_linux=drv("450.80.02"), min_driver_windows=drv("452.39")),
    CudaFamily(major=12, min_driver_linux=drv("525.60.13"), min_driver_windows=drv("528.33")),
    CudaFamily(major=13, min_driver_linux=drv("580")),
)

_WHL = "https://download.pytorch.org/whl/"


def _variant(name: str, arch_list: str, *, pypi: bool = False) -> TorchVariant:
    return TorchVariant(
        name=name,
        cuda=None if name == "cpu" else cuda(name),
        arch_list=arch(arch_list),
        index_url=_WHL + name,
        pypi_default=pypi,
    )


# compat.md section 4b (a few releases, enough for the doctor scenarios).
_TORCH: tuple[TorchRelease, ...] = (
    TorchRelease(
        version=Version("2.1.0"),
        python=("3.8", "3.9", "3.10", "3.11"),
        requires_python=SpecifierSet(">=3.8.0"),
        variants=(
            _variant("cpu", ""),
            _variant("cu118", "5.0;6.0;7.0;7.5;8.0;8.6;3.7;9.0"),
            _variant("cu121", "5.0;6.0;7.0;7.5;8.0;8.6;9.0", pypi=True),
        ),
    ),
    TorchRelease(
        version=Version("2.8.0"),
        python=("3.9", "3.10", "3.11", "3.12", "3.13"),
        requires_python=SpecifierSet(">=3.9.0"),
        variants=(
            _variant("cpu", ""),
            _variant("cu126", "5.0;6.0;7.0;7.5;8.0;8.6;9.0"),
            _variant("cu128", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", pypi=True),
            _variant("cu129", "7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"),
        ),
    ),
    TorchRelease(
        version=Version("2.11.0"),
        python=("3.10", "3.11", "3.12", "3.13", "3.14"),
        requires_python=SpecifierSet(">=3.10"),
        variants=(
            _variant("cpu", ""),
            _variant("cu126", "5.0;6.0;7.0;7.5;8.0;8.6;9.0"),
            _variant("cu128", "7.5;8.0;8.6;9.0;10.0;12.0"),
            _variant("cu130", "7.5;8.0;8.6;9.0;10.0;12.0", pypi=True),
        ),
    ),
)


def make_index(
    *,
    toolkits: tuple[ToolkitFacts, ...] = TOOLKITS,
    families: tuple[CudaFamily, ...] = FAMILIES,
    torch: tuple[TorchRelease, ...] = _TORCH,
) -> Index:
    return Index(toolkits=toolkits, families=families, torch=torch, packages=())


def driver(version: str, supported: str | None = None, *, index: Index | None = None) -> Driver:
    """A Driver whose supported CUDA is derived from the toolkit table unless given."""
    from cuda_resolve.compat import cuda_for_driver

    parsed = drv(version)
    if supported is not None:
        return Driver(version=parsed, cuda=cuda(supported))
    derived = cuda_for_driver(parsed, index or make_index())
    assert derived is not None, f"no CUDA for driver {version} in the test index"
    return Driver(version=parsed, cuda=derived)
