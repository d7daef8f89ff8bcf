"""``plan --json > plan.json`` that failed writes its error; applying that file says so.

Before, ``cuda-resolve apply plan.json`` answered ``format = 1: this cuda-resolve applies plan
format 2``, as if the file were a plan of an older cuda-resolve, when it held the reason the plan
failed (found walking the README as a user, helper H7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve.cli import main

NO_GPU = Path(__file__).parent / "data" / "profiles" / "cpu-ci-no-driver.toml"


@pytest.fixture
def failed_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, dict[str, object]]:
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    # A machine without a GPU: a source build has nothing to build for, so the plan fails.
    assert main(["plan", "pointnet2_ops", "--profile", str(NO_GPU), "--json"]) == 1
    written = capsys.readouterr().out
    document = json.loads(written)
    assert "error" in document and "format" not in document
    path = tmp_path / "plan.json"
    path.write_text(written, encoding="utf-8")
    return path, document


def test_apply_names_the_failed_plans_error(
    failed_plan: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, document = failed_plan
    assert main(["apply", str(path)]) == 2
    err = capsys.readouterr().err
    assert "holds the error of a `cuda-resolve plan` that failed, not a plan" in err
    assert str(document["error"]) in err
    assert f"hint: {document['hint']}" in err
    assert "format = 1" not in err


def test_apply_json_and_install_plan_say_the_same(
    failed_plan: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, document = failed_plan
    assert main(["apply", str(path), "--json"]) == 2
    answer = json.loads(capsys.readouterr().out)
    assert "not a plan" in answer["error"] and str(document["error"]) in answer["error"]
    assert main(["install", "--plan", str(path), "--dry-run"]) == 2
    assert "holds the error of a `cuda-resolve plan` that failed" in capsys.readouterr().err
