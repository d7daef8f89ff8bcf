"""A build's overlay takes PyPI's torch from where the target's torch step takes it: the user's
PyPI index (or mirror) alone. It named pypi.org itself (past the user's mirror) or, with a
``[pytorch] url`` configured, that mirror's variant index: on the H200 a first install then
downloaded torch and its CUDA wheels twice, 9.4 GB for 4.7 GB of files (docs/evidence/
h200-speed-2026-12-05.md). Checked on the plan a dry run carries out (issue 28)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_support import StaticIndex, make_wheel, serve


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="a build is planned only with an nvcc")
def test_the_overlay_asks_the_users_pypi_index_for_pypis_torch(tmp_path: Path) -> None:
    index = StaticIndex(tmp_path / "index")
    index.add(
        make_wheel(
            tmp_path / "built",
            "torch",
            "2.11.0",
            tag="cp311-cp311-manylinux_2_28_x86_64",
            files={"torch/version.py": "__version__ = '2.11.0+cu130'\ncuda = '13.0'\n"},
        )
    )
    config = tmp_path / "config.toml"
    with serve(index.root) as url:
        config.write_text(f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n')
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        environ.update(
            PIP_INDEX_URL=f"{url}/simple/",
            CUDA_RESOLVE_CONFIG=str(config),
            CUDA_RESOLVE_DRIVER="580.65.06",
            CUDA_RESOLVE_CUDA_ARCH="9.0",
        )
        python = copy_venv(tmp_path / "venv")
        done = subprocess.run(
            [sys.executable, "-m", "pip_plugin", "install", "torch==2.11.0", "pointnet2_ops",
             "--python", str(python), "--arch-list", "9.0", "--dry-run", "--json"],
            capture_output=True, text=True, timeout=300, check=False, env=environ,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    plan = json.loads(done.stdout)["plan"]
    [torch] = [item for item in plan["install"] if item["name"] == "torch"]
    assert torch["index"] == "https://pypi.org/simple"  # PyPI's default build of 2.11.0: cu130
    [build] = plan["builds"]
    assert build["torch_requirement"] == "torch==2.11.0"
    assert build["torch_index"] is None, build["torch_index"]  # the user's PyPI index alone
