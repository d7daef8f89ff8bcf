"""The compatibility rules, as tables of cases from compat.md plus property tests.

Every expected value below can be checked by hand against shared/reference/compat.md:
driver minimums (1a/1b), arch lists (2), compilers (3a/3b), binary compatibility (5).
"""

from __future__ import annotations

import pytest
from _factories import FAMILIES, TOOLKITS, arch, archs, cc, cuda, driver, drv, gpu, make_index
from hypothesis import assume, given
from hypothesis import strategies as st

from cuda_resolve.compat import (
    JETSON_CAPABILITIES,
    arch_list_for_build,
    build_covers_gpu,
    compiler_within_toolkit,
    cuda_for_driver,
    driver_supports_cuda,
    format_arch_list,
    host_compiler_for,
    python_matches,
    toolkit_archs,
    toolkit_can_build,
    uncovered_gpus,
)
from cuda_resolve.environment import Compiler, Driver, Toolkit
from cuda_resolve.index.model import ArchEntry, Index, ToolkitFacts
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

INDEX = make_index()


def facts(version: str) -> ToolkitFacts:
    found = INDEX.toolkit(cuda(version))
    assert found is not None
    return found


def nvcc_archs(version: str) -> tuple[ComputeCapability, ...]:
    found = facts(version)
    return found.archs + found.specific_archs


# -- cuda_for_driver (compat.md 1b) -------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("535.104.05", "12.2"),  # 12.2 U2's driver; 12.3 needs 545.23.06
        ("535.54.03", "12.2"),  # exactly 12.2 GA
        ("535.54.02", "12.1"),  # one below 12.2 GA
        ("530.30.02", "12.1"),
        ("525.60.13", "12.0"),
        ("525.60.12", "11.8"),
        ("520.61.05", "11.8"),
        ("470.82.01", "11.4"),
        ("450.80.02", "11.0"),
        ("440.33", "10.2"),
        ("570.26", "12.8"),  # there is no CUDA 12.7
        ("570.124.06", "12.8"),
        ("575.51.03", "12.9"),
        ("580.65.06", "13.0"),
        ("580.159.04", "13.0"),  # the H200 of DESIGN.md
        ("590.44.01", "13.1"),
        ("595.45.04", "13.2"),
        ("610.43.02", "13.2"),  # newer than every toolkit known: the newest one
    ],
)
def test_cuda_for_driver(version: str, expected: str) -> None:
    assert cuda_for_driver(drv(version), INDEX) == cuda(expected)


def test_cuda_for_driver_older_than_every_toolkit() -> None:
    assert cuda_for_driver(drv("418.87.01"), INDEX) is None


def test_cuda_for_driver_windows_uses_windows_minimums() -> None:
    windows = ToolkitFacts(
        version=cuda("12.4"), driver_linux=drv("550.54.14"), driver_windows=drv("551.61")
    )
    index = make_index(toolkits=(windows,))
    assert cuda_for_driver(drv("551.61"), index, os="windows") == cuda("12.4")
    assert cuda_for_driver(drv("550.54.14"), index, os="windows") is None
    assert cuda_for_driver(drv("550.54.14"), index) == cuda("12.4")
    # a toolkit without a Windows driver row (13.x: N/A) is never the answer on Windows
    assert cuda_for_driver(drv("600.1"), INDEX, os="windows") is None


# -- driver_supports_cuda (compat.md 1a, 1b; S2) ------------------------------------------

# (driver, CUDA of the build, strict, expected, a word the reason must contain)
DRIVER_CASES = [
    # 535: native 12.2; cu121 by backward compatibility, cu124/cu128 by minor-version compat
    ("535.104.05", "12.1", False, True, "supports CUDA <= 12.2"),
    ("535.104.05", "12.2", False, True, "supports CUDA <= 12.2"),
    ("535.104.05", "12.4", False, True, "minor-version compatibility"),
    ("535.104.05", "12.8", False, True, "minor-version compatibility"),
    ("535.104.05", "12.9", False, True, "minor-version compatibility"),
    ("535.104.05", "11.8", False, True, "supports CUDA <= 12.2"),
    ("535.104.05", "10.2", False, True, "supports CUDA <= 12.2"),
    ("535.104.05", "13.0", False, False, ">= 580"),
    ("535.104.05", "13.2", False, False, ">= 580"),
    ("535.104.05", "12.4", True, False, "550.54.14"),
    ("535.104.05", "12.2", True, True, "supports CUDA <= 12.2"),
    # 470: native 11.4; cu118 only through minor-version compatibility
    ("470.82.01", "11.4", False, True, "supports CUDA <= 11.4"),
    ("470.82.01", "11.8", False, True, "minor-version compatibility"),
    ("470.82.01", "11.8", True, False, "--strict-driver"),
    ("470.82.01", "11.3", True, True, "supports CUDA <= 11.4"),
    ("470.82.01", "12.1", False, False, ">= 525.60.13"),
    ("470.82.01", "10.2", False, True, "supports CUDA <= 11.4"),
    # the family minimum is exact
    ("450.80.02", "11.8", False, True, "minor-version compatibility"),
    ("450.51.06", "11.0", False, True, "supports CUDA <= 11.0"),
    ("450.51.06", "11.1", False, False, ">= 450.80.02"),
    ("525.60.13", "12.9", False, True, "minor-version compatibility"),
    ("525.60.12", "12.0", False, False, ">= 525.60.13"),
    # 580: native 13.0; 13.1 / 13.2 by minor-version compatibility, and everything older
    ("580.65.06", "13.0", False, True, "supports CUDA <= 13.0"),
    ("580.65.06", "13.1", False, True, "minor-version compatibility"),
    ("580.65.06", "13.2", False, True, "minor-version compatibility"),
    ("580.65.06", "13.2", True, False, "595.45.04"),
    ("580.65.06", "12.8", False, True, "supports CUDA <= 13.0"),
    ("580.65.06", "11.8", False, True, "supports CUDA <= 13.0"),
    ("580.65.06", "10.2", False, True, "supports CUDA <= 13.0"),
    ("595.45.04", "13.2", True, True, "supports CUDA <= 13.2"),
    # a newer toolkit's own driver is enough, even under strict
    ("550.54.14", "12.4", True, True, "supports CUDA <= 12.4"),
]


@pytest.mark.parametrize(("version", "build", "strict", "expected", "word"), DRIVER_CASES)
def test_driver_supports_cuda(
    version: str, build: str, strict: bool, expected: bool, word: str
) -> None:
    verdict = driver_supports_cuda(driver(version), cuda(build), INDEX, strict=strict)
    assert verdict.ok is expected
    assert bool(verdict) is expected
    assert word in verdict.reason


# Before CUDA 11 there is no minor-version compatibility: the toolkit's own driver is needed.
@pytest.mark.parametrize(
    ("version", "native", "expected"),
    [
        ("440.33", "10.2", True),
        ("440.64", "10.2", True),
        ("435.21", "10.1", False),
        ("418.87.01", "10.1", False),
    ],
)
def test_cu102_needs_440_33(version: str, native: str, expected: bool) -> None:
    for strict in (False, True):
        verdict = driver_supports_cuda(driver(version, native), cuda("10.2"), INDEX, strict=strict)
        assert verdict.ok is expected
        if not expected:
            assert "440.33" in verdict.reason
            assert "minor-version" not in verdict.reason


def test_no_driver_supports_nothing() -> None:
    verdict = driver_supports_cuda(None, cuda("11.8"), INDEX)
    assert not verdict
    assert "no" in verdict.reason and "driver" in verdict.reason


def test_unknown_family_has_no_minor_version_compatibility() -> None:
    verdict = driver_supports_cuda(driver("580.65.06"), cuda("14.0"), INDEX)
    assert not verdict
    assert "14.0" in verdict.reason


def test_driver_supports_cuda_windows_family_minimum() -> None:
    on_windows = Driver(version=drv("528.33"), cuda=cuda("12.0"))
    assert driver_supports_cuda(on_windows, cuda("12.4"), INDEX, os="windows")
    older = Driver(version=drv("527.41"), cuda=cuda("12.0"))
    verdict = driver_supports_cuda(older, cuda("12.4"), INDEX, os="windows")
    assert not verdict
    assert "528.33" in verdict.reason


_DRIVERS = st.builds(
    lambda major, minor, patch: DriverVersion.parse(f"{major}.{minor}.{patch:02d}"),
    st.integers(min_value=441, max_value=620),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=20),
)
_BUILD_CUDAS = st.sampled_from(
    [t.version for t in TOOLKITS] + [CudaVersion(12, 7), CudaVersion(14, 0)]
)


def _driver_of(version: DriverVersion) -> Driver:
    supported = cuda_for_driver(version, INDEX)
    assert supported is not None  # every sampled driver is >= 440.33
    return Driver(version=version, cuda=supported)


@given(_DRIVERS, _DRIVERS, _BUILD_CUDAS, st.booleans())
def test_driver_support_is_monotonic(
    first: DriverVersion, second: DriverVersion, build: CudaVersion, strict: bool
) -> None:
    older, newer = sorted((first, second))
    if driver_supports_cuda(_driver_of(older), build, INDEX, strict=strict):
        assert driver_supports_cuda(_driver_of(newer), build, INDEX, strict=strict)


@given(_DRIVERS, _BUILD_CUDAS)
def test_strict_is_never_more_permissive(version: DriverVersion, build: CudaVersion) -> None:
    if driver_supports_cuda(_driver_of(version), build, INDEX, strict=True):
        assert driver_supports_cuda(_driver_of(version), build, INDEX, strict=False)


@given(_DRIVERS)
def test_driver_runs_its_own_cuda_and_everything_older(version: DriverVersion) -> None:
    own = _driver_of(version)
    for facts_ in TOOLKITS:
        if facts_.version <= own.cuda:
            assert driver_supports_cuda(own, facts_.version, INDEX, strict=True)


@given(_DRIVERS, _BUILD_CUDAS)
def test_minor_version_compatibility_is_the_family_minimum(
    version: DriverVersion, build: CudaVersion
) -> None:
    family = INDEX.family(build.major)
    assume(family is not None)
    assert family is not None
    supported = bool(driver_supports_cuda(_driver_of(version), build, INDEX))
    assert supported == (version >= family.min_driver_linux or build <= _driver_of(version).cuda)


# -- build_covers_gpu (compat.md 5) -------------------------------------------------------

PYPI_CU121 = "5.0;6.0;7.0;7.5;8.0;8.6;9.0"  # torch 2.1-2.5 cu121 (4b)
PYPI_CU130 = "7.5;8.0;8.6;9.0;10.0;12.0"  # torch 2.11-2.14 PyPI cu130, no PTX (4b, 4c)

COVER_CASES = [
    # SASS runs on the same major with a minor at or above it
    ("8.0", "8.0", True),
    ("8.0", "8.6", True),
    ("8.0", "8.9", True),
    ("8.0", "9.0", False),
    ("8.0", "7.5", False),
    ("8.6", "8.0", False),
    ("8.6", "8.9", True),
    ("12.0", "12.1", True),
    ("12.0", "13.0", False),
    ("10.0", "10.3", True),
    ("6.0", "6.1", True),
    # arch-specific targets run only on their exact capability
    ("9.0a", "9.0", True),
    ("9.0a", "10.0", False),
    ("9.0a+PTX", "10.0", False),
    ("10.0a", "10.3", False),
    ("12.0a", "12.1", False),
    # Jetson / Tegra parts run only code built for themselves
    ("8.7", "8.7", True),
    ("8.0;8.6", "8.7", False),
    ("8.6+PTX", "8.7", False),
    ("8.7", "8.9", False),
    ("7.2", "7.2", True),
    ("7.0", "7.2", False),
    ("7.2", "7.5", False),
    ("5.0;5.2", "5.3", False),
    ("6.0;6.1", "6.2", False),
    ("6.2", "6.1", False),
    # 10.0 code does not run on 10.1; 10.1 / 11.0 code only on themselves
    ("10.0", "10.1", False),
    ("10.1", "10.3", False),
    ("10.1", "10.1", True),
    ("11.0", "11.0", True),
    ("10.0;12.0", "11.0", False),
    # PTX is JIT-compiled on anything at or above it
    ("12.0+PTX", "12.1", True),
    ("12.0+PTX", "8.9", False),
    ("12.0+PTX", "13.0", True),
    ("9.0+PTX", "12.0", True),
    ("9.0+PTX", "9.0", True),
    ("8.6+PTX", "8.0", False),
    ("10.0+PTX", "11.0", True),
    ("7.2+PTX", "7.5", True),
    # real torch arch lists
    (PYPI_CU121, "6.1", True),
    (PYPI_CU121, "8.9", True),
    (PYPI_CU121, "12.0", False),
    (PYPI_CU121, "10.0", False),
    (PYPI_CU130, "6.1", False),  # the GTX 1080 Ti on a cu130 wheel: no kernel image
    (PYPI_CU130, "7.0", False),
    (PYPI_CU130, "8.9", True),
    (PYPI_CU130, "10.3", True),
    (PYPI_CU130, "12.1", True),
    (PYPI_CU130, "11.0", False),
    ("3.7;5.0;6.0;7.0", "7.5", True),  # torch 1.8-1.12 cu102: sm_70 SASS runs on Turing
    ("3.7;5.0;6.0;7.0", "8.0", False),
    ("3.7;5.0;6.0;7.0", "6.1", True),
    ("", "8.6", False),
]


@pytest.mark.parametrize(("arch_list", "capability", "expected"), COVER_CASES)
def test_build_covers_gpu(arch_list: str, capability: str, expected: bool) -> None:
    assert build_covers_gpu(arch(arch_list), cc(capability)) is expected


def test_every_gpu_must_be_covered() -> None:
    """A V100 + H100 box rules out torch 2.11 cu128, which dropped sm_70 (4b)."""
    v100, h100 = gpu("7.0", "Tesla V100-SXM2-32GB", 0), gpu("9.0", "NVIDIA H100 80GB HBM3", 1)
    cu128_211 = arch("7.5;8.0;8.6;9.0;10.0;12.0")
    assert uncovered_gpus(cu128_211, [v100, h100]) == [v100]
    assert uncovered_gpus(arch(PYPI_CU121), [v100, h100]) == []
    assert uncovered_gpus(arch(""), [v100, h100]) == [v100, h100]


def test_format_arch_list() -> None:
    assert format_arch_list(arch("7.5;8.6;9.0+PTX")) == "7.5;8.6;9.0+PTX"
    assert format_arch_list(arch("9.0a;12.0+PTX")) == "9.0a;12.0+PTX"
    assert format_arch_list(()) == ""


_CAPABILITIES = st.sampled_from(
    [
        cc(t)
        for t in (
            "3.5 3.7 5.0 5.2 5.3 6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.1 10.3 "
            "11.0 12.0 12.1 13.0"
        ).split()
    ]
)
_ENTRIES = st.builds(
    lambda cap, ptx, specific: ArchEntry(
        ComputeCapability(cap.major, cap.minor, "a" if specific else ""), ptx
    ),
    _CAPABILITIES,
    st.booleans(),
    st.booleans(),
)


@given(_CAPABILITIES, st.lists(_ENTRIES, max_size=6), st.booleans())
def test_a_gpus_own_sass_always_covers_it(
    capability: ComputeCapability, others: list[ArchEntry], ptx: bool
) -> None:
    assert build_covers_gpu([*others, ArchEntry(capability, ptx)], capability)


@given(st.lists(_ENTRIES, max_size=6), st.lists(_ENTRIES, max_size=3), _CAPABILITIES)
def test_more_entries_never_cover_less(
    base: list[ArchEntry], extra: list[ArchEntry], capability: ComputeCapability
) -> None:
    if build_covers_gpu(base, capability):
        assert build_covers_gpu(base + extra, capability)


@given(_CAPABILITIES, _CAPABILITIES)
def test_ptx_covers_every_non_jetson_gpu_at_or_above_it(
    entry: ComputeCapability, capability: ComputeCapability
) -> None:
    covered = build_covers_gpu([ArchEntry(entry, ptx=True)], capability)
    if capability not in JETSON_CAPABILITIES:
        assert covered == (entry <= capability)
    else:
        assert covered == (entry == capability)


@given(_CAPABILITIES, _CAPABILITIES)
def test_sass_never_runs_on_another_major_or_an_older_gpu(
    entry: ComputeCapability, capability: ComputeCapability
) -> None:
    if build_covers_gpu([ArchEntry(entry)], capability):
        assert entry.major == capability.major
        assert entry.minor <= capability.minor


# -- toolkits: what nvcc can target (compat.md 2) -----------------------------------------


@pytest.mark.parametrize(
    ("toolkit", "arch_list", "expected", "rejected"),
    [
        ("13.0", "6.1", False, "6.1"),
        ("13.0", "7.0;7.5", False, "7.0"),
        ("13.0", "7.5;8.6;9.0+PTX", True, ""),
        ("13.0", "11.0;12.1", True, ""),
        ("13.0", "10.1", False, "10.1"),  # renamed 11.0 in 13.0
        ("12.8", "10.1;12.0", True, ""),
        ("12.8", "10.3", False, "10.3"),  # arrives in 12.9
        ("12.9", "10.3;12.1", True, ""),
        ("12.0", "9.0a", True, ""),
        ("11.8", "9.0a", False, "9.0a"),
        ("11.8", "8.9;9.0", True, ""),
        ("11.7", "8.9", False, "8.9"),
        ("12.0", "3.7", False, "3.7"),  # Kepler leaves in 12.0
        ("11.8", "3.7;8.6", True, ""),
        ("11.3", "8.6", True, ""),  # 11.1 already targets 8.6 (the kaolin guide is wrong)
        ("11.3", "8.7", False, "8.7"),
        ("11.0", "8.6", False, "8.6"),
        ("10.2", "8.0", False, "8.0"),
        ("12.8", "12.0a+PTX", True, ""),
    ],
)
def test_toolkit_can_build(toolkit: str, arch_list: str, expected: bool, rejected: str) -> None:
    verdict = toolkit_can_build(nvcc_archs(toolkit), arch(arch_list), version=cuda(toolkit))
    assert verdict.ok is expected
    if rejected:
        assert f"cannot target {rejected}" in verdict.reason
        assert f"nvcc {toolkit}" in verdict.reason


def test_toolkit_can_build_with_unknown_archs_rejects_everything() -> None:
    verdict = toolkit_can_build((), arch("8.6"), version=cuda("12.1"))
    assert not verdict
    assert "8.6" in verdict.reason


def test_toolkit_archs_prefers_what_nvcc_said() -> None:
    said = archs("80 86")
    assert toolkit_archs(Toolkit(version=cuda("12.1"), gpu_archs=said), facts("12.1")) == said
    assert toolkit_archs(Toolkit(version=cuda("12.1")), facts("12.1")) == facts(
        "12.1"
    ).archs + archs("90a")
    assert toolkit_archs(Toolkit(version=cuda("12.7")), None) == ()
    assert toolkit_archs(None, facts("11.8")) == facts("11.8").archs


# -- host compiler (compat.md 3a, 3b) -----------------------------------------------------


@pytest.mark.parametrize(
    ("gcc", "toolkit", "expected", "word"),
    [
        ("14.2.0", "12.2", False, "gcc <= 12"),
        ("13.3.0", "12.2", False, "gcc <= 12"),
        ("12.3.0", "12.2", True, "within"),
        ("12", "12.2", True, "within"),
        ("14", "12.2", False, "gcc <= 12"),
        ("13.1", "12.3", False, "gcc <= 12"),  # torch allows 13 here, nvcc does not
        ("13.2", "12.4", True, "within"),
        ("14.1", "12.4", False, "gcc <= 13"),
        ("14.2", "12.8", True, "within"),
        ("15.1", "12.8", False, "gcc <= 14"),
        ("15.1", "13.0", True, "within"),
        ("16.1", "13.0", False, "gcc <= 15"),
        ("11.4.0", "11.8", True, "within"),
        ("12.1", "11.8", False, "gcc <= 11"),
        ("9.4.0", "11.0", True, "within"),
        ("10.2", "11.0", False, "gcc <= 9"),
    ],
)
def test_compiler_within_toolkit(gcc: str, toolkit: str, expected: bool, word: str) -> None:
    verdict = compiler_within_toolkit(gcc, facts(toolkit))
    assert verdict.ok is expected
    assert word in verdict.reason
    assert gcc in verdict.reason


def test_compiler_torch_bound_applies_when_nvcc_has_none() -> None:
    only_torch = ToolkitFacts(version=cuda("12.1"), torch_gcc_max_exclusive=13)
    verdict = compiler_within_toolkit("13.1", only_torch)
    assert not verdict
    assert "cpp_extension" in verdict.reason
    assert compiler_within_toolkit("12.9", only_torch)


@pytest.mark.parametrize("gcc", [None, "", "gcc-12", "unknown"])
def test_compiler_unknown_version_is_not_an_error(gcc: str | None) -> None:
    assert compiler_within_toolkit(gcc, facts("12.2"))


def test_compiler_without_facts_is_not_an_error() -> None:
    verdict = compiler_within_toolkit("14.2", None)
    assert verdict
    assert "no facts" in verdict.reason


# -- arch_list_for_build ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "toolkit", "expected", "impossible"),
    [
        ("8.6", "11.8", "8.6", ""),
        ("8.6 8.6", "11.8", "8.6", ""),
        ("8.6 8.9", "11.7", "8.6", ""),  # 8.9 runs 8.6 SASS; 11.7 has no 8.9
        ("9.0", "11.7", "8.6+PTX", ""),  # newer than everything 11.7 knows: PTX
        ("7.0 9.0", "12.1", "7.0;9.0", ""),
        ("7.5 8.0 8.6 8.9 9.0", "12.4", "7.5;8.0;8.6;8.9;9.0", ""),
        ("6.1", "13.0", "", "6.1"),  # 13.0 starts at Turing
        ("6.1 8.6", "13.0", "8.6", "6.1"),
        ("10.3", "12.8", "10.0", ""),  # 10.1 code would not run on 10.3
        ("10.3", "12.9", "10.3", ""),
        ("12.1", "12.8", "12.0", ""),
        ("12.0", "12.6", "9.0+PTX", ""),
        ("9.0 12.0", "12.6", "9.0+PTX", ""),  # one entry carries both
        ("8.7", "11.3", "", "8.7"),  # a Jetson part needs its own target
        ("8.7", "11.4", "8.7", ""),
        ("8.7 8.6", "13.0", "8.6;8.7", ""),
        ("10.1", "13.0", "10.0+PTX", ""),  # 10.0 SASS does not run on 10.1; its PTX does
        ("11.0", "13.0", "11.0", ""),
        ("3.5", "12.0", "", "3.5"),
        ("3.0", "11.0", "", "3.0"),
        ("", "12.1", "", ""),
    ],
)
def test_arch_list_for_build(gpus: str, toolkit: str, expected: str, impossible: str) -> None:
    entries, missing = arch_list_for_build([cc(g) for g in gpus.split()], nvcc_archs(toolkit))
    assert format_arch_list(entries) == expected
    assert missing == tuple(cc(g) for g in impossible.split())


_TOOLKIT_FACTS = st.sampled_from(TOOLKITS)


@given(st.lists(_CAPABILITIES, max_size=5), _TOOLKIT_FACTS)
def test_arch_list_for_build_covers_what_it_does_not_call_impossible(
    capabilities: list[ComputeCapability], toolkit: ToolkitFacts
) -> None:
    accepted = toolkit.archs + toolkit.specific_archs
    entries, impossible = arch_list_for_build(capabilities, accepted)
    for capability in capabilities:
        if capability in impossible:
            continue
        assert build_covers_gpu(entries, capability), (capability, format_arch_list(entries))
    assert set(impossible) <= set(capabilities)
    # every entry is an architecture this nvcc accepts
    assert toolkit_can_build(accepted, entries, version=toolkit.version)
    assert all(not entry.capability.suffix for entry in entries)
    assert len({entry.capability for entry in entries}) == len(entries)


@given(st.lists(_CAPABILITIES, max_size=5), _TOOLKIT_FACTS)
def test_arch_list_for_build_calls_nothing_impossible_that_some_target_covers(
    capabilities: list[ComputeCapability], toolkit: ToolkitFacts
) -> None:
    _, impossible = arch_list_for_build(capabilities, toolkit.archs + toolkit.specific_archs)
    for capability in impossible:
        for target in toolkit.archs:
            assert not build_covers_gpu([ArchEntry(target, ptx=True)], capability), (
                capability,
                target,
            )


def test_families_in_the_test_index_match_compat_md() -> None:
    """Guards the factory itself: 1a's family minimums."""
    assert [(f.major, str(f.min_driver_linux)) for f in FAMILIES] == [
        (11, "450.80.02"),
        (12, "525.60.13"),
        (13, "580"),
    ]


# -- python_matches -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("supported", "version", "free_threaded", "expected"),
    [
        (("3.10", "3.11"), "3.10.12", False, True),
        (("3.10", "3.11"), "3.12.1", False, False),
        (("3.13", "3.13t"), "3.13.0", True, True),
        (("3.13",), "3.13.0", True, False),
        (("3.9",), "3.9", False, True),
    ],
)
def test_python_matches(
    supported: tuple[str, ...], version: str, free_threaded: bool, expected: bool
) -> None:
    assert python_matches(supported, version, free_threaded=free_threaded) is expected


# -- the same rules over the shipped index -------------------------------------------------


@pytest.fixture(scope="module")
def shipped() -> Index:
    from cuda_resolve.index import default_index

    return default_index()


def test_shipped_index_agrees_with_compat_md(shipped: Index) -> None:
    """The test index and the shipped one must tell the same story where both have a fact."""
    for expected in TOOLKITS:
        actual = shipped.toolkit(expected.version)
        assert actual is not None, expected.version
        assert actual.driver_linux == expected.driver_linux, expected.version
        assert set(actual.archs) == set(expected.archs), expected.version
        assert set(actual.specific_archs) == set(expected.specific_archs), expected.version
        assert actual.gcc_max == expected.gcc_max, expected.version
        assert actual.torch_gcc_max_exclusive == expected.torch_gcc_max_exclusive, expected.version
    for family in FAMILIES:
        actual_family = shipped.family(family.major)
        assert actual_family is not None
        # 13.x: compat.md says ">= 580"; the shipped index may use the 13.0 GA driver 580.65.06
        allowed = {family.min_driver_linux} | ({drv("580.65.06")} if family.major == 13 else set())
        assert actual_family.min_driver_linux in allowed, family.major


@pytest.mark.parametrize(("version", "build", "strict", "expected", "word"), DRIVER_CASES)
def test_driver_supports_cuda_with_the_shipped_index(
    shipped: Index, version: str, build: str, strict: bool, expected: bool, word: str
) -> None:
    verdict = driver_supports_cuda(
        driver(version, index=shipped), cuda(build), shipped, strict=strict
    )
    assert verdict.ok is expected
    assert word in verdict.reason


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("535.104.05", "12.2"),
        ("470.82.01", "11.4"),
        ("580.159.04", "13.0"),
        ("440.33", "10.2"),
        ("595.45.04", "13.2"),
    ],
)
def test_cuda_for_driver_with_the_shipped_index(
    shipped: Index, version: str, expected: str
) -> None:
    assert cuda_for_driver(drv(version), shipped) == cuda(expected)


@given(st.lists(_CAPABILITIES, max_size=5), st.data())
def test_arch_list_for_build_over_shipped_toolkits(
    shipped: Index, capabilities: list[ComputeCapability], data: st.DataObject
) -> None:
    toolkit = data.draw(st.sampled_from(shipped.toolkits))
    accepted = toolkit.archs + toolkit.specific_archs
    entries, impossible = arch_list_for_build(capabilities, accepted)
    assert all(build_covers_gpu(entries, c) for c in capabilities if c not in impossible)
    assert toolkit_can_build(accepted, entries, version=toolkit.version)


def test_pypi_torch_builds_of_the_shipped_index_cover_what_compat_md_says(shipped: Index) -> None:
    """4b: 2.11 cu130 has no kernels for Pascal; 2.1 cu121 has sm_60 SASS, which runs on 6.1."""
    release = shipped.torch_release("2.11.0")
    assert release is not None
    cu130 = release.variant("cu130")
    assert cu130 is not None
    assert not build_covers_gpu(cu130.arch_list, cc("6.1"))
    assert build_covers_gpu(cu130.arch_list, cc("8.9"))
    old = shipped.torch_release("2.1.0")
    assert old is not None
    cu121 = old.variant("cu121")
    assert cu121 is not None
    assert build_covers_gpu(cu121.arch_list, cc("6.1"))
    assert not build_covers_gpu(cu121.arch_list, cc("12.0"))


def test_host_compiler_for_switches_to_the_newest_installed_gcc_in_range() -> None:
    facts = next(t for t in TOOLKITS if t.gcc_max is not None)
    assert facts.gcc_max is not None
    too_new, fits, older = (
        f"{facts.gcc_max + 1}.1.0",
        f"{facts.gcc_max}.2.0",
        f"{facts.gcc_max - 1}.4.0",
    )
    verdict, switch_to = host_compiler_for(
        Compiler(gcc=too_new, other_gcc=(older, "gcc-9", fits)), facts
    )
    assert not verdict.ok and switch_to == fits
    assert host_compiler_for(Compiler(gcc=too_new, other_gcc=("gcc-9",)), facts) == (verdict, None)
    ok, none = host_compiler_for(Compiler(gcc=fits, other_gcc=(older,)), facts)
    assert ok.ok and none is None
