"""Reuse by coverage: a wheel built for more GPUs is found wherever its arch list covers every GPU
of the machine (compat.build_covers_gpu's rule), the best one first, and never one of another ABI,
one that misses a GPU, or one whose bytes changed.

Wheels are tiny pure-Python fakes (tests/test_wheelhouse.py's make_wheel) published into a
wheelhouse under tmp_path; the arch list lives only in the key, which is all coverage reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_wheelhouse import PLATFORM, PYTHON_TAG, make_key, make_wheel

from cuda_resolve.compat import build_covers_gpu
from cuda_resolve.index.cuda import parse_arch_list
from cuda_resolve.versions import ComputeCapability
from cuda_resolve.wheelhouse import (
    KeyQuery,
    StoredWheel,
    Wheelhouse,
    WheelhouseError,
    WheelKey,
    best_covering,
    covers,
    rank_covering,
)


def caps(text: str) -> tuple[ComputeCapability, ...]:
    """``"8.0 8.9"`` -> the machine's GPU capabilities."""
    return tuple(ComputeCapability.parse(word) for word in text.split())


QUERY = make_key().query()


@pytest.fixture
def house(tmp_path: Path) -> Wheelhouse:
    return Wheelhouse(tmp_path / "house")


def publish(house: Wheelhouse, tmp_path: Path, arch_list: str, **changes: str) -> StoredWheel:
    key = make_key(arch_list=arch_list, **changes)
    tag = f"{key.python_tag}-{key.python_tag}-{key.platform}"
    built = make_wheel(tmp_path / "built" / key.digest, tag=tag)
    return house.publish(key, built, strip_debug=False)


def in_memory(arch_list: str, **changes: str) -> StoredWheel:
    """An entry whose file does not exist: best_covering/rank_covering must not need it."""
    key = make_key(arch_list=arch_list, **changes)
    return StoredWheel(
        key=key,
        path=Path("/nonexistent") / key.digest / "x.whl",
        sha256="0" * 64,
        size=1,
        created="2026-12-01T00:00:00Z",
    )


# -- the key without its arch list ----------------------------------------------------------------


def test_a_query_is_the_key_less_its_arch_list_checked_the_same_way() -> None:
    key = make_key(package="Demo.Ext", recipe_digest="AB" * 32)
    query = key.query()
    assert query.with_arch_list(key.arch_list) == key
    assert query.recipe_digest == "ab" * 32 and not hasattr(query, "arch_list")
    assert query.matches(
        make_key(arch_list="7.0", recipe_digest="ab" * 32)
    )  # package canonicalized
    assert not query.matches(make_key(arch_list="7.0"))  # another recipe digest
    with pytest.raises(WheelhouseError, match="torch"):
        KeyQuery(
            package="x",
            version="1.0",
            torch="2.14.1+cu130",
            variant="cu130",
            python_tag="cp311",
            platform="linux_x86_64",
            recipe_digest="ab" * 32,
        )


# -- covers(): compat's rule, ranked ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch_list", "machine", "kind", "described"),
    [
        ("8.0;8.9", "8.0", "exact", "8.0: sm_80 exact"),
        ("8.0;8.9", "8.0 8.9", "exact", "8.0: sm_80 exact; 8.9: sm_89 exact"),
        ("8.0;8.9", "9.0", None, ""),  # no PTX: nothing runs on Hopper
        ("8.0+PTX", "9.0", "ptx", "9.0: compute_80 PTX"),
        ("8.0", "8.6", "sass", "8.6: sm_80 (same major, lower minor)"),
        ("8.0;8.6", "8.9", "sass", "8.9: sm_86 (same major"),  # the closest SASS is the one loaded
        ("8.0+PTX", "8.6", "sass", "8.6: sm_80"),  # SASS of the major beats JIT of the same entry
        ("8.6;8.7+PTX", "8.9", "sass", "8.9: sm_86"),  # SASS beats a higher entry's PTX
        ("8.0+PTX;9.0", "9.0", "exact", "9.0: sm_90 exact"),
        ("9.0a", "9.0", "exact", "9.0: sm_90a exact"),
        ("9.0a", "10.0", None, ""),
        ("9.0a", "8.9", None, ""),
        ("8.0;8.6", "8.7", None, ""),  # Jetson Orin: only its own capability
        ("8.7", "8.7", "exact", "8.7: sm_87 exact"),
        ("8.0", "8.0 9.0", None, ""),  # one GPU missed is a miss
        ("8.0;8.9", "", None, ""),  # no GPU: reuse only by the exact key
    ],
)
def test_covers_follows_compat_and_says_how(
    arch_list: str, machine: str, kind: str | None, described: str
) -> None:
    coverage = covers(arch_list, caps(machine))
    if kind is None:
        assert coverage is None
        return
    assert coverage is not None and coverage.kind == kind
    assert described in coverage.describe()


@pytest.mark.parametrize(
    "arch_list",
    ["5.3", "6.1", "7.0+PTX", "8.0", "8.6;9.0+PTX", "9.0a", "10.0", "10.1", "12.0+PTX", "8.7"],
)
@pytest.mark.parametrize(
    "gpu",
    ["5.3", "6.1", "7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "11.0", "12.0"],
)
def test_covers_agrees_with_compat_on_every_pair(arch_list: str, gpu: str) -> None:
    """Not a second rule: covers() says yes exactly where build_covers_gpu does."""
    expected = build_covers_gpu(parse_arch_list(arch_list), ComputeCapability.parse(gpu))
    assert (covers(arch_list, caps(gpu)) is not None) == expected


# -- the ranking ----------------------------------------------------------------------------------


def test_ranking_puts_exact_before_lower_minor_before_ptx_then_fewer_targets_then_text() -> None:
    machine = caps("8.0 8.6")
    entries = [
        in_memory("7.0+PTX"),  # ptx, ptx (2 targets: the smallest wheel, still last)
        in_memory("8.0+PTX"),  # exact, sass
        in_memory("8.0"),  # exact, sass (fewer targets than 8.0+PTX)
        in_memory("8.0;8.6;8.9"),  # exact, exact (3 targets)
        in_memory("8.6;8.0"),  # exact, exact (2 targets)
        in_memory("7.5+PTX;8.6"),  # ptx, exact: one GPU on PTX ranks below any all-SASS wheel
        in_memory("8.0;8.6", torch="2.14.0"),  # another ABI: never ranked
        in_memory("8.6"),  # misses 8.0: never ranked
    ]
    ranked = [entry.key.arch_list for entry, _ in rank_covering(reversed(entries), QUERY, machine)]
    assert ranked == ["8.0;8.6", "8.0;8.6;8.9", "8.0", "8.0+PTX", "7.5+PTX;8.6", "7.0+PTX"]
    best = best_covering(entries, QUERY, machine)
    assert best is not None and best[0].key.arch_list == "8.0;8.6" and best[1].kind == "exact"


def test_the_worst_gpu_decides_first() -> None:
    """Lower-minor SASS on both GPUs beats exact SASS on one and PTX on the other."""
    machine = caps("8.6 8.9")
    entries = [in_memory("7.0+PTX;8.9"), in_memory("8.0")]
    ranked = [
        (entry.key.arch_list, coverage.kind)
        for entry, coverage in rank_covering(entries, QUERY, machine)
    ]
    assert ranked == [("8.0", "sass"), ("7.0+PTX;8.9", "ptx")]


def test_ties_of_kind_and_size_are_broken_by_the_arch_list_text() -> None:
    machine = caps("8.0")
    entries = [in_memory("8.0;9.0"), in_memory("8.0;8.6")]
    for order in (entries, entries[::-1]):
        ranked = [entry.key.arch_list for entry, _ in rank_covering(order, QUERY, machine)]
        assert ranked == ["8.0;8.6", "8.0;9.0"]


def test_best_covering_needs_no_wheel_file() -> None:
    best = best_covering([in_memory("8.0;8.9")], QUERY, caps("8.9"))
    assert best is not None and not best[0].path.exists()
    assert best_covering([in_memory("8.0;8.9")], QUERY, ()) is None
    assert best_covering([], QUERY, caps("8.0")) is None


# -- Wheelhouse.find_covering ---------------------------------------------------------------------


def test_a_wheel_for_more_gpus_is_found_where_it_covers_every_gpu(
    house: Wheelhouse, tmp_path: Path
) -> None:
    assert house.find_covering(QUERY, caps("8.0")) is None  # no wheelhouse folder yet
    entry = publish(house, tmp_path, "8.0;8.9")
    assert house.lookup(make_key(arch_list="8.0")) is None  # the exact key still misses
    found = house.find_covering(QUERY, caps("8.0"))
    assert found is not None
    assert found == (
        entry,
        f"demo_ext 1.0+pt2141cu130.sm80.sm89.{entry.key.recipe_word} in the wheelhouse covers "
        "every GPU here (8.0: sm_80 exact)",
    )
    found = house.find_covering(QUERY, caps("8.9 8.0 8.0"))
    assert (
        found is not None
        and found[0] == entry
        and found[1].endswith("(8.0: sm_80 exact; 8.9: sm_89 exact)")
    )
    assert house.find_covering(QUERY, caps("9.0")) is None
    assert house.find_covering(QUERY, caps("8.0 9.0")) is None
    assert house.find_covering(QUERY, ()) is None
    found = house.find_covering(make_key(package="Demo.Ext").query(), caps("8.0"))
    assert found is not None and found[0] == entry


def test_ptx_is_found_for_a_newer_gpu_but_an_exact_wheel_wins(
    house: Wheelhouse, tmp_path: Path
) -> None:
    ptx = publish(house, tmp_path, "8.0+PTX")
    found = house.find_covering(QUERY, caps("9.0"))
    assert found is not None and found[0] == ptx and "9.0: compute_80 PTX" in found[1]
    exact = publish(house, tmp_path, "9.0")
    found = house.find_covering(QUERY, caps("9.0"))
    assert found is not None and found[0] == exact and "9.0: sm_90 exact" in found[1]


def test_lower_minor_sass_is_found_but_the_exact_minor_wins(
    house: Wheelhouse, tmp_path: Path
) -> None:
    lower = publish(house, tmp_path, "8.0")
    found = house.find_covering(QUERY, caps("8.6"))
    assert (
        found is not None
        and found[0] == lower
        and "8.6: sm_80 (same major, lower minor)" in found[1]
    )
    exact = publish(house, tmp_path, "8.6")
    found = house.find_covering(QUERY, caps("8.6"))
    assert found is not None and found[0] == exact


def test_of_two_exact_wheels_the_one_with_fewer_archs_wins(
    house: Wheelhouse, tmp_path: Path
) -> None:
    publish(house, tmp_path, "8.0;8.6;8.9;9.0")
    small = publish(house, tmp_path, "8.0;8.9")
    found = house.find_covering(QUERY, caps("8.0 8.9"))
    assert found is not None and found[0] == small


def test_an_arch_specific_wheel_only_on_exactly_its_capability(
    house: Wheelhouse, tmp_path: Path
) -> None:
    entry = publish(house, tmp_path, "9.0a")
    found = house.find_covering(QUERY, caps("9.0"))
    assert found is not None and found[0] == entry
    for machine in ("8.9", "10.0", "12.0", "9.0 10.0"):
        assert house.find_covering(QUERY, caps(machine)) is None, machine


@pytest.mark.parametrize(
    "changes",
    [
        {"torch": "2.14.0"},
        {"variant": "cu129"},
        {"python_tag": "cp399"},
        {"platform": "linux_aarch64"},
        {"recipe_digest": "0" * 64},
        {"version": "1.1"},
    ],
    ids=lambda changes: next(iter(changes)),
)
def test_a_wheel_of_another_abi_is_never_returned(
    house: Wheelhouse, tmp_path: Path, changes: dict[str, str]
) -> None:
    if "version" in changes:
        key = make_key(arch_list="8.0", **changes)
        other = house.publish(
            key, make_wheel(tmp_path / "other", version=changes["version"]), strip_debug=False
        )
    else:
        other = publish(house, tmp_path, "8.0", **changes)  # exact SASS: would rank first
    assert other.key.query() != QUERY
    assert house.find_covering(QUERY, caps("8.0")) is None
    ours = publish(house, tmp_path, "7.0+PTX")  # the only one of our ABI: PTX, still chosen
    found = house.find_covering(QUERY, caps("8.0"))
    assert found is not None and found[0] == ours
    assert house.find_covering(other.key.query(), caps("8.0")) == (
        other,
        f"demo_ext {other.version} in the wheelhouse covers every GPU here (8.0: sm_80 exact)",
    )


def test_the_defaults_match_this_interpreter() -> None:
    """The ABI tests above change python_tag/platform away from these; make sure they differ."""
    assert PYTHON_TAG != "cp399" and PLATFORM != "linux_aarch64"


def test_a_tampered_wheel_is_passed_over(house: Wheelhouse, tmp_path: Path) -> None:
    best = publish(house, tmp_path, "8.0")
    data = bytearray(best.path.read_bytes())
    data[100] ^= 0x01  # same size, other bytes: only the sha256 tells
    best.path.write_bytes(bytes(data))
    assert house.find_covering(QUERY, caps("8.0")) is None
    fallback = publish(house, tmp_path, "8.0;9.0+PTX")
    found = house.find_covering(QUERY, caps("8.0"))
    assert found is not None and found[0] == fallback
    best.path.unlink()  # a missing file is passed over too
    found = house.find_covering(QUERY, caps("8.0"))
    assert found is not None and found[0] == fallback


def test_find_covering_ranks_like_the_pure_helper(house: Wheelhouse, tmp_path: Path) -> None:
    for arch_list in ("7.0+PTX", "8.0", "8.0;8.6", "8.6;9.0", "8.9"):
        publish(house, tmp_path, arch_list)
    machine = caps("8.6")
    pure = best_covering(house.entries(), QUERY, machine)
    found = house.find_covering(QUERY, machine)
    assert pure is not None and found is not None and found[0] == pure[0]
    assert found[0].key.arch_list == "8.0;8.6"  # two targets, exact; 8.6;9.0 ties and loses on text
    assert isinstance(found[0].key, WheelKey)
