"""doctor's fix for a CPU torch on a GPU machine is a cuda-pip command that names the target it
looked at: pasted, it plans for that venv, not for the tool's own (user walk 2026-12-05 B5: the
fix was `cuda-resolve plan torch --allow-torch-change`, which dropped --python)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from _torch_env import copy_venv
from test_lock_support import make_cpu_torch

_H100 = {"CUDA_RESOLVE_DRIVER": "580.65.06", "CUDA_RESOLVE_CUDA_ARCH": "9.0"}


def test_the_cpu_torch_fix_names_the_target_and_pasted_plans_for_it(tmp_path: Path) -> None:
    links = tmp_path / "links"
    make_cpu_torch(links)
    python = copy_venv(tmp_path / "venv")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | _H100
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--find-links",
         str(links), "torch==2.13.0+cpu"],
        check=True, timeout=120, env=environ,
    )  # fmt: skip
    doctor = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "doctor", "--python", str(python), "--json"],
        capture_output=True, text=True, timeout=120, check=False, env=environ,
    )  # fmt: skip
    [finding] = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "torch-build"]
    assert finding["status"] == "error"
    command = finding["fix"].split("`")[1]
    assert command == f"cuda-pip install torch --allow-torch-change --python {python}"
    pasted = subprocess.run(
        [sys.executable, "-m", "pip_plugin", *shlex.split(command)[1:], "--dry-run", "--json"],
        capture_output=True, text=True, timeout=300, check=False, env=environ,
    )  # fmt: skip
    # It decides for that venv (PyPI may not answer here: then it says so, for that venv too).
    said = json.loads(pasted.stdout)
    assert said.get("target") == str(python) or str(python) in said.get("error", ""), said
