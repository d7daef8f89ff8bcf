"""DriverVersion, CudaVersion and ComputeCapability: parsing, ordering, error messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion, parse_dotted

# -- parse_dotted ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts"),
    [("12.2.140", (12, 2, 140)), (" 535.104.05 ", (535, 104, 5)), ("7", (7,)), ("0.0", (0, 0))],
)
def test_parse_dotted(text: str, parts: tuple[int, ...]) -> None:
    assert parse_dotted(text, what="thing") == parts


@pytest.mark.parametrize("text", ["", "abc", "1..2", "1.2.", ".1", "1.2a", "1,2", "-1.0", "1. 2"])
def test_parse_dotted_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="thing") as info:
        parse_dotted(text, what="thing")
    assert repr(text) in str(info.value)


# -- DriverVersion -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts", "major"),
    [
        ("535.104.05", (535, 104, 5), 535),
        ("580.159.04", (580, 159, 4), 580),
        ("470.82.01", (470, 82, 1), 470),
        ("552.44", (552, 44), 552),
        ("580", (580,), 580),
        ("  440.33\n", (440, 33), 440),
    ],
)
def test_driver_parse(text: str, parts: tuple[int, ...], major: int) -> None:
    version = DriverVersion.parse(text)
    assert version.parts == parts
    assert version.major == major
    assert str(version) == text.strip()  # zero padding is kept as printed


@pytest.mark.parametrize(
    "text", ["abc", "", "535.104.05-1", "r535", "12", "12.2", "13.0", "11.8.89"]
)
def test_driver_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="driver version"):
        DriverVersion.parse(text)


@pytest.mark.parametrize("text", ["12.2", "13.0", "9"])
def test_driver_parse_says_it_looks_like_cuda(text: str) -> None:
    """nvidia-smi's 'CUDA Version: 12.2' pasted as the driver version is the usual mistake."""
    with pytest.raises(ValueError, match="looks like a CUDA version"):
        DriverVersion.parse(text)


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("535.54.03", "535.104.05"),  # numeric, not lexicographic: 54 < 104
        ("470.82.01", "470.141.03"),
        ("525.60.13", "525.60.14"),
        ("580", "580.65.06"),  # a shorter prefix sorts first
        ("450.80.02", "452.39"),
        ("99999.1", "100000"),
    ],
)
def test_driver_ordering(lower: str, higher: str) -> None:
    assert DriverVersion.parse(lower) < DriverVersion.parse(higher)
    assert DriverVersion.parse(higher) > DriverVersion.parse(lower)


def test_driver_equality_ignores_spelling() -> None:
    assert DriverVersion.parse("535.104.05") == DriverVersion.parse("535.104.5")
    assert str(DriverVersion.parse("535.104.5")) == "535.104.5"


@given(
    st.lists(st.integers(min_value=0, max_value=999), min_size=1, max_size=4).filter(
        lambda p: p[0] >= 100
    )
)
def test_driver_parse_round_trip(parts: list[int]) -> None:
    text = ".".join(str(p) for p in parts)
    version = DriverVersion.parse(text)
    assert version.parts == tuple(parts)
    assert DriverVersion.parse(str(version)) == version


# -- CudaVersion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "major", "minor"),
    [
        ("12.4", 12, 4),
        ("12.4.1", 12, 4),
        ("12.4.131", 12, 4),
        ("V12.4.131", 12, 4),
        ("v11.8.89", 11, 8),
        ("cu124", 12, 4),
        ("CU118", 11, 8),
        ("cu130", 13, 0),
        ("cu102", 10, 2),
        ("cu92", 9, 2),
        (" 13.0 ", 13, 0),
    ],
)
def test_cuda_parse(text: str, major: int, minor: int) -> None:
    version = CudaVersion.parse(text)
    assert (version.major, version.minor) == (major, minor)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("12", "needs a minor part"),
        ("124", "needs a minor part"),
        ("abc", "not a dotted version"),
        ("", "not a dotted version"),
        ("12.x", "not a dotted version"),
        ("cu", "not a dotted version"),
        ("cpu", "not a dotted version"),
        ("12.10", "out of range"),
        ("535.104.05", "out of range"),
    ],
)
def test_cuda_parse_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        CudaVersion.parse(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(12080, "12.8"), (13000, "13.0"), (11040, "11.4"), (10020, "10.2"), (12020, "12.2")],
)
def test_cuda_from_driver_api(value: int, expected: str) -> None:
    assert str(CudaVersion.from_driver_api(value)) == expected


def test_cuda_variant_and_str() -> None:
    assert CudaVersion(12, 1).variant == "cu121"
    assert CudaVersion(13, 0).variant == "cu130"
    assert str(CudaVersion(11, 8)) == "11.8"


def test_cuda_ordering() -> None:
    ordered = ["10.2", "11.0", "11.8", "12.0", "12.1", "12.9", "13.0"]
    parsed = [CudaVersion.parse(text) for text in ordered]
    assert parsed == sorted(parsed)
    assert CudaVersion.parse("12.9") < CudaVersion.parse("13.0")
    assert CudaVersion.parse("12.4.1") == CudaVersion.parse("cu124")


@given(st.integers(min_value=1, max_value=99), st.integers(min_value=0, max_value=9))
def test_cuda_variant_round_trip(major: int, minor: int) -> None:
    version = CudaVersion(major, minor)
    assert CudaVersion.parse(str(version)) == version
    if major >= 10:
        assert CudaVersion.parse(version.variant) == version


# -- ComputeCapability -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "major", "minor", "suffix", "sm", "number"),
    [
        ("8.6", 8, 6, "", "sm_86", 86),
        ("9.0a", 9, 0, "a", "sm_90a", 90),
        ("sm_86", 8, 6, "", "sm_86", 86),
        ("SM_75", 7, 5, "", "sm_75", 75),
        ("compute_90", 9, 0, "", "sm_90", 90),
        ("sm_100a", 10, 0, "a", "sm_100a", 100),
        ("sm_120", 12, 0, "", "sm_120", 120),
        ("sm_121f", 12, 1, "f", "sm_121f", 121),
        ("10.3", 10, 3, "", "sm_103", 103),
        (" 6.1 ", 6, 1, "", "sm_61", 61),
    ],
)
def test_capability_parse(
    text: str, major: int, minor: int, suffix: str, sm: str, number: int
) -> None:
    cap = ComputeCapability.parse(text)
    assert (cap.major, cap.minor, cap.suffix) == (major, minor, suffix)
    assert cap.sm == sm
    assert cap.number == number


@pytest.mark.parametrize(
    "text", ["8.x", "8", "86", "sm_8", "sm86", "8.6b", "8.10", "", "sm_", "compute_", "8.6+PTX"]
)
def test_capability_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="compute capability") as info:
        ComputeCapability.parse(text)
    assert repr(text) in str(info.value)


def test_capability_ordering() -> None:
    texts = ["5.0", "6.1", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0", "12.1"]
    parsed = [ComputeCapability.parse(t) for t in texts]
    assert parsed == sorted(reversed(parsed))
    assert ComputeCapability.parse("9.0") < ComputeCapability.parse("9.0a")  # suffix sorts after
    assert ComputeCapability.parse("9.0a") < ComputeCapability.parse("10.0")


@given(
    st.integers(min_value=1, max_value=15),
    st.integers(min_value=0, max_value=9),
    st.sampled_from(["", "a", "f"]),
)
def test_capability_round_trips(major: int, minor: int, suffix: str) -> None:
    cap = ComputeCapability(major, minor, suffix)
    assert ComputeCapability.parse(str(cap)) == cap
    assert ComputeCapability.parse(cap.sm) == cap
