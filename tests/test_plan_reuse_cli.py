"""`plan` names the wheelhouse wheel it reuses by coverage, and why (text and JSON)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_wheelhouse import make_wheel

from cuda_resolve.wheelhouse.key import WheelKey
from cuda_resolve.wheelhouse.store import Wheelhouse

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-detected-2026-12-02.toml"


def _plan(house: Path, *words: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CUDA_RESOLVE_WHEELHOUSE=str(house), COLUMNS="200")
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "plan",
            "pointnet2_ops",
            "--profile",
            str(PROFILE),
            *words,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_a_wheel_built_for_more_gpus_is_named_by_plan_and_not_built(tmp_path: Path) -> None:
    house = tmp_path / "house"
    first = _plan(house, "--json")
    if first.returncode != 0 and "toolkit" in first.stderr:
        pytest.skip(f"no CUDA toolkit here: {first.stderr.strip()}")
    assert first.returncode == 0, first.stderr
    [build] = json.loads(first.stdout)["builds"]
    assert build["reused"] is None and build["wheel_key"]["arch_list"] == "9.0"
    # A lab built it for its A100 and H200 nodes: 8.0;9.0 covers this H200 profile.
    key = dataclasses.replace(
        WheelKey.from_json(build["wheel_key"], origin="plan"), arch_list="8.0;9.0"
    )
    built = make_wheel(
        tmp_path / "built",
        name="pointnet2_ops",
        version=key.version,
        tag=f"{key.python_tag}-{key.python_tag}-{key.platform}",
    )
    Wheelhouse(house).publish(key, built, strip_debug=False)

    again = _plan(house, "--json")
    assert again.returncode == 0, again.stderr
    [build] = json.loads(again.stdout)["builds"]
    assert build["wheel_key"]["arch_list"] == "8.0;9.0"
    assert "covers every GPU here (9.0: sm_90 exact)" in build["reused"]
    text = _plan(house)
    assert text.returncode == 0, text.stderr
    assert f"wheelhouse: {key.labelled_version}" in text.stdout
    assert (
        "pointnet2_ops: reused, not built:" in text.stdout
        and "covers every GPU here" in text.stdout
    )
