"""The profile `cuda-resolve detect --save-profile` wrote on the real H200 (2026-12-02,
docs/evidence/h200-2026-12-02.md): it loads, doctor finds nothing wrong, and plan builds what has no
wheel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve.cli import main

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-detected-2026-12-02.toml"


def test_doctor_on_the_detected_h200_is_healthy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--profile", str(PROFILE), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    statuses = {f["check"]: f["status"] for f in report["findings"]}
    assert (
        statuses["driver"] == "ok"
        and statuses["torch-arch"] == "ok"
        and statuses["nvcc-vs-torch"] == "ok"
    )
    assert report["environment"]["gpu"][0]["compute_capability"] == "9.0"
    assert report["environment"]["driver"]["version"] == "580.159.04"


def test_plan_on_the_detected_h200_keeps_torch_and_builds_for_sm90(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "kaolin", "pointnet2_ops", "--profile", str(PROFILE), "--json"]) == 0
    items = {i["name"]: i for i in json.loads(capsys.readouterr().out)["install"]}
    assert items["torch"]["kind"] == "installed" and items["torch"]["version"] == "2.11.0+cu130"
    assert items["kaolin"]["kind"] == "build" and items["kaolin"]["arch_list"] == "9.0"
    assert items["pointnet2_ops"]["kind"] == "build" and items["pointnet2_ops"]["toolkit"] == "13.0"
