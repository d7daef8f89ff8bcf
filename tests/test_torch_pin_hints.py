"""Asking for another torch than the one installed, or one the index does not know, says so and
how to go on; it used to be "nothing fits this machine" with "see --explain", and --explain
listed nothing (user walk 2026-12-05 B3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve.cli import main

PROFILE = Path(__file__).parent / "data" / "profiles" / "rtx3090-torch21cu121-nvcc118.toml"


def _plan(words: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    status = main(["plan", *words, "--profile", str(PROFILE), "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_another_torch_than_the_installed_one_names_both_and_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, said = _plan(["torch==2.0.1"], capsys)
    assert status == 1
    error = str(said["error"])
    assert "torch 2.1.0+cu121 is installed here and torch==2.0.1 asks for another" in error
    assert "--allow-torch-change" in str(said["hint"])
    assert said["reasons"]  # --explain has something to show
    status, followed = _plan(["torch==2.0.1", "--allow-torch-change"], capsys)
    assert status == 0, followed


def test_a_torch_release_the_index_does_not_know_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for words in (["torch==2.99"], ["torch==2.99", "--allow-torch-change"]):
        status, said = _plan(words, capsys)
        assert status == 1
        assert "torch==2.99: no torch release the index knows matches it" in str(said["error"])
        assert "cuda-resolve index refresh torch" in str(said["hint"])


def test_torchvision_beside_a_cpu_torch_on_a_gpu_machine_names_the_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pairing was blamed ("no release pairs with any torch that fits") where the installed
    CPU torch, ruled out, is what to change (user walk 2026-12-05 B7)."""
    text = PROFILE.read_text()
    cpu = text.split("[torch]")[0] + '[torch]\nversion = "2.1.0+cpu"\n'
    profile = tmp_path / "cpu-torch.toml"
    profile.write_text(cpu)
    status = main(["plan", "torchvision", "--profile", str(profile), "--json"])
    said = json.loads(capsys.readouterr().out)
    assert status == 1
    assert "installed torch 2.1.0+cpu: a CPU build" in said["error"], said
    assert "--allow-torch-change" in said["hint"]
    assert main(["plan", "torchvision", "--profile", str(profile), "--allow-torch-change"]) == 0
