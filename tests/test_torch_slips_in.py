"""A CPU torch that pip brings in where the plan names no torch, on a machine with NVIDIA GPUs,
is refused and the environment restored (user walk 2026-12-05 B2). It came as a dependency of a
package cuda-resolve passes through to pip (torchmetrics), or as a wheel path in a requirements
file, from the find-links folder many shared machines have (``PIP_FIND_LINKS``: ``+cpu``
satisfies ``torch<2.14`` and sorts above ``2.13.0``). Before, it was installed without a word,
and only a later ``doctor`` said so. Real pip, the CLI as users run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_support import make_cpu_torch, make_wheel

_H100 = {"CUDA_RESOLVE_DRIVER": "580.65.06", "CUDA_RESOLVE_CUDA_ARCH": "9.0"}


@pytest.fixture
def links(tmp_path: Path) -> Path:
    folder = tmp_path / "links"
    make_cpu_torch(folder)
    make_wheel(folder, "needs-torch", "1.0", files={"needs_torch.py": ""}, requires=["torch"])
    return folder


def _cuda_pip(python: Path, words: list[str], links: Path, machine: dict[str, str]) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "CUDA_RESOLVE_D"))}
    environ.update(machine, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links))
    done = subprocess.run(
        [sys.executable, "-m", "pip_plugin", "install", *words, "--python", str(python)],
        capture_output=True, text=True, timeout=300, check=False, env=environ,
    )  # fmt: skip
    return f"{done.returncode}\n{done.stderr}"


def _has_torch(python: Path) -> bool:
    return subprocess.run([str(python), "-c", "import torch"], check=False).returncode == 0


@pytest.mark.parametrize("how", ["dependency", "wheel path in -r"])
def test_a_cpu_torch_pip_brings_in_on_a_gpu_machine_is_undone(
    links: Path, tmp_path: Path, how: str
) -> None:
    python = copy_venv(tmp_path / "venv")
    if how == "dependency":
        words = ["needs-torch"]
    else:
        requirements = tmp_path / "r.txt"
        requirements.write_text(f"{next(links.glob('torch-*.whl'))}\n")
        words = ["-r", str(requirements)]
    said = _cuda_pip(python, words, links, _H100)
    status, text = said.split("\n", 1)
    flat = " ".join(text.split())
    assert status == "1", said
    assert "pip installed torch 2.13.0+cpu, a CPU build, on a machine with 1 NVIDIA GPU" in flat
    assert "torch-2.13.0+cpu" in flat.split("it came from", 1)[1]
    assert f"(cuda-pip install torch --python {python}), then run this command again" in flat
    assert not _has_torch(python)  # restored: no torch, no needs-torch


def test_without_a_gpu_the_cpu_torch_is_what_the_machine_can_use(
    links: Path, tmp_path: Path
) -> None:
    python = copy_venv(tmp_path / "venv")
    said = _cuda_pip(python, ["needs-torch", "--no-verify"], links, {})
    assert said.startswith("0\n"), said
    assert _has_torch(python)
