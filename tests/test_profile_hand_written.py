"""A profile's hand-written entries: ``name = "a100"`` (lock's profile name) and ``[slurm]``.

Found walking docs/lockfiles.md and docs/cluster.md as a user (H7):

- a profile with ``name = "a100"`` at the top, as docs/lockfiles.md offers, was refused by
  ``plan``, ``build`` and ``detect --profile`` (``name: unknown key``);
- ``detect --save-profile FILE`` again over a node class's file (what docs/lockfiles.md says
  to do when a node's driver changes) dropped its ``name`` and ``[slurm] sbatch`` list, so the
  next ``lock --update`` knew the class under another name and ``build --slurm`` lost its
  partition."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_resolve.cli import main
from cuda_resolve.lock.profiles import load_lock_profile
from cuda_resolve.profile import load_profile, load_sbatch_resources

HAND = 'name = "a100-nodes"\n'
SLURM = '\n[slurm]\nsbatch = ["--partition=a100", "--cpus-per-task=8"]\n'


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "8.0")
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "580.65.06")
    return tmp_path


def _saved(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["detect", "--save-profile", str(path)]) == 0
    return capsys.readouterr().out


def test_a_named_profile_is_read_by_plan(machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = machine / "a100.toml"
    _saved(path, capsys)
    path.write_text(HAND + path.read_text(encoding="utf-8") + SLURM, encoding="utf-8")
    load_profile(path)
    assert main(["plan", "torch", "--profile", str(path)]) == 0, capsys.readouterr().err
    path.write_text(path.read_text(encoding="utf-8").replace(HAND, "name = 5\n"))
    assert main(["plan", "torch", "--profile", str(path)]) == 2
    assert "name = 5: expected a string" in capsys.readouterr().err


def test_saving_again_keeps_the_name_and_the_slurm_options(
    machine: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = machine / "a100.toml"
    _saved(path, capsys)
    path.write_text(HAND + path.read_text(encoding="utf-8") + SLURM, encoding="utf-8")
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "590.44.01")  # the node's driver changed
    out = _saved(path, capsys)
    assert "kept its name = 'a100-nodes' and [slurm]" in out
    driver = load_profile(path).driver
    assert driver is not None and str(driver.version) == "590.44.01"  # the new facts
    assert path.read_text(encoding="utf-8").count('name = "a100-nodes"') == 1
    assert load_lock_profile(str(path)).name == "a100-nodes"
    assert load_sbatch_resources(path) == ("--partition=a100", "--cpus-per-task=8")


def test_a_file_that_is_no_profile_is_simply_replaced(
    machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = machine / "a100.toml"
    path.write_text("this is not TOML [", encoding="utf-8")
    out = _saved(path, capsys)
    assert "kept" not in out
    assert load_lock_profile(str(path)).name == "a100"  # the file's stem
    assert load_sbatch_resources(path) == ()
