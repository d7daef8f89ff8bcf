"""A ``--source`` the plan would never read is refused (exit 2), before anything is fetched.

Before, ``cuda-pip install pointnet2_ops --source pointnet2=~/src/Pointnet2_PyTorch`` (a name
the plan does not hold) was silently dropped and the recipe's repository cloned instead (on an
air-gapped machine: a clone failure that says nothing of the typo); and one unnamed folder with
two source builds in the plan was handed to both (found walking the README as a user, H7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_resolve.cli import main

H200 = Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "400")  # a long temporary path stays on one line
    source = tmp_path / "Pointnet2_PyTorch"
    source.mkdir()
    (source / "setup.py").write_text("raise SystemExit('never run')\n", encoding="utf-8")
    return source


def _build(*args: str) -> list[str]:
    return ["build", *args, "--profile", str(H200), "--dry-run"]


def test_a_name_the_plan_does_not_hold_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_build("pointnet2_ops", "--source", f"pointnet2={folder}")) == 2
    err = capsys.readouterr().err
    assert f"error: --source pointnet2={folder}: the plan has no package called 'pointnet2'" in err
    assert f"hint: name the package it is the source of: --source pointnet2_ops={folder}" in err


def test_one_unnamed_folder_for_two_builds_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_build("pointnet2_ops", "kaolin", "--source", str(folder))) == 2
    err = capsys.readouterr().err
    assert "names no package, and the plan builds 2 (kaolin, pointnet2_ops)" in err
    assert "--source kaolin=DIR --source pointnet2_ops=DIR" in err


@pytest.mark.parametrize("given", ["pointnet2-ops={}", "Pointnet2_Ops={}", "{}"])
def test_a_source_the_plan_reads_is_taken(
    folder: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    assert main(_build("pointnet2_ops", "--source", given.format(folder))) == 0
    assert f"source: --source {folder}" in capsys.readouterr().out


def test_cuda_pip_install_refuses_it_too(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The install path (decide, then the check, before pre-flight, pins or the network)."""
    args = ["install", "pointnet2_ops", "--arch-list", "8.0", "--dry-run"]
    assert main([*args, "--source", f"kaolin={folder}"]) == 2
    assert "the plan has no package called 'kaolin'" in capsys.readouterr().err


def test_a_package_the_plan_does_not_build_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch (a prebuilt wheel here) is in the plan, but nothing is built for it: the folder
    would not be read (review H9: the check accepted any name the plan holds)."""
    args = ["install", "torch", "pointnet2_ops", "--arch-list", "8.0", "--dry-run"]
    assert main([*args, "--source", f"torch={folder}"]) == 2
    err = capsys.readouterr().err
    assert f"error: --source torch={folder}: the plan installs the prebuilt torch " in err, err
    assert "builds nothing from source for it" in err
    assert f"hint: drop --source torch={folder}" in err
