"""WheelKey: checked fields, the PEP 440 local label, a digest that covers every field and never
drifts, and errors that name the field and value."""

from __future__ import annotations

from typing import Any

import pytest
from packaging.version import Version

from cuda_resolve.wheelhouse import WheelhouseError, WheelKey, canonical_arch_list

BASE: dict[str, str] = {
    "package": "pointnet2_ops",
    "version": "3.0.0",
    "torch": "2.14.1",
    "variant": "cu130",
    "python_tag": "cp311",
    "platform": "linux_x86_64",
    "arch_list": "8.6;9.0+PTX",
    "recipe_digest": "ab" * 32,
}


def key(**changes: str) -> WheelKey:
    return WheelKey(**{**BASE, **changes})


@pytest.mark.parametrize(
    ("changes", "label"),
    [
        ({}, "pt2141cu130.sm86.sm90ptx.rabababab"),
        ({"torch": "2.1.0", "variant": "cu121", "arch_list": "7.0"}, "pt210cu121.sm70.rabababab"),
        ({"variant": "cpu", "arch_list": ""}, "pt2141cpu.rabababab"),
        ({"arch_list": "10.0a;12.0+PTX"}, "pt2141cu130.sm100a.sm120ptx.rabababab"),
        ({"torch": "2.15.0.dev20260101"}, "pt2150dev20260101cu130.sm86.sm90ptx.rabababab"),
        (
            {"torch": "2.15.0rc1", "variant": "rocm6.2", "arch_list": ""},
            "pt2150rc1rocm62.rabababab",
        ),
    ],
)
def test_local_label_is_pyg_style_and_valid_pep440(changes: dict[str, str], label: str) -> None:
    made = key(**changes)
    assert made.local_label == label
    parsed = Version(made.labelled_version)
    assert parsed.local == label  # already in normal form: pip shows exactly this
    assert str(parsed) == made.labelled_version


def test_values_are_normalized() -> None:
    made = key(version="3.0", torch="2.14.1", arch_list="9.0+ptx 8.6,8.6", recipe_digest="AB" * 32)
    assert (
        made.version == "3.0"
        and made.arch_list == "8.6;9.0+PTX"
        and made.recipe_digest == "ab" * 32
    )
    assert canonical_arch_list("9.0 9.0+PTX 7.5") == "7.5;9.0+PTX"
    assert key(version="03.00.0").version == "3.0.0"


def test_digest_is_stable_and_covers_every_field() -> None:
    # A recorded value: changing the digest's input would orphan every existing wheelhouse entry.
    assert key().digest == "bda9ee8030dbb902"
    assert key(package="Pointnet2-Ops").digest == key().digest  # canonical names
    assert key(arch_list="9.0+PTX;8.6").digest == key().digest
    others = {
        "version": "3.0.1",
        "torch": "2.14.0",
        "variant": "cu129",
        "python_tag": "cp312",
        "platform": "linux_aarch64",
        "arch_list": "8.6;9.0",
        "recipe_digest": "cd" * 32,
    }
    digests = {key(**{field: value}).digest for field, value in others.items()}
    assert len(digests) == len(others) and key().digest not in digests


def test_json_round_trip() -> None:
    made = key()
    assert WheelKey.from_json(made.to_json(), origin="entry.json") == made
    assert list(made.to_json()) == list(BASE)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("a string", "expected a table"),
        ({k: v for k, v in BASE.items() if k != "torch"}, "wheel key torch = None: missing"),
        ({**BASE, "cuda": "13.0"}, "wheel key cuda = '13.0': not a field"),
        ({**BASE, "size": 3}, "wheel key size = 3: not a field"),
        ({**BASE, "version": 3}, "wheel key version = 3: expected a string"),
        ({**BASE, "torch": "2.14.1+cu130"}, "wheel key torch = '2.14.1+cu130': has a local label"),
        ({**BASE, "torch": "latest"}, "wheel key torch = 'latest': not a PEP 440 version"),
        (
            {**BASE, "arch_list": "8.6;sm86x"},
            "wheel key arch_list = '8.6;sm86x': compute capability 'sm86x'",
        ),
        ({**BASE, "variant": "cpu"}, "a cpu build has no CUDA arch list"),
        ({**BASE, "arch_list": ""}, "a cu130 build always has an arch list"),
        ({**BASE, "variant": "CU 130"}, "wheel key variant = 'CU 130'"),
        ({**BASE, "python_tag": "3.11"}, "wheel key python_tag = '3.11'"),
        ({**BASE, "platform": "linux-x86_64"}, "wheel key platform = 'linux-x86_64'"),
        (
            {**BASE, "recipe_digest": "xyz"},
            "wheel key recipe_digest = 'xyz': expected a hex sha256",
        ),
        ({**BASE, "package": "-bad-"}, "wheel key package = '-bad-'"),
    ],
)
def test_from_json_errors_name_the_origin_field_and_value(data: Any, expected: str) -> None:
    with pytest.raises(WheelhouseError) as caught:
        WheelKey.from_json(data, origin="/nfs/wheels/x/entry.json: key")
    assert caught.value.message.startswith("/nfs/wheels/x/entry.json: key: ")
    assert expected in caught.value.message
    assert caught.value.hint


def test_constructor_checks_too() -> None:
    with pytest.raises(WheelhouseError, match="has a local label") as caught:
        key(torch="2.14.1+cu130")
    assert "'2.14.1'" in (caught.value.hint or "")
