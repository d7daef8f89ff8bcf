"""A target whose torch lives outside its own site-packages, seen through a ``.pth`` file (a
lab's venv over a shared environment's torch; the H200 image's torch so): the check that the
planned torch landed also reads the folder detection found torch in, not "no torch" (found on
the H200, 2026-12-04: every install into such a venv was refused and undone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _torch_env import copy_venv, standin_cuda_toolkit, standin_torch_wheel

DATA = Path(__file__).parent / "data"


def _shared_torch(folder: Path) -> Path:
    """``folder/site``: a stand-in torch 2.14.1 for CUDA 13.0 installed there by pip --target."""
    links = folder / "links"
    standin_torch_wheel(links)
    site = folder / "site"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "-q", "--no-index"),
            *("--find-links", str(links), "--target", str(site), "torch==2.14.1"),
        ],
        check=True,
        env=environ,
        timeout=120,
    )
    return site


def _site_packages(python: Path) -> Path:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def test_an_install_into_a_venv_over_a_shared_torch_keeps_it_and_passes(tmp_path: Path) -> None:
    shared = _shared_torch(tmp_path / "shared")
    python = copy_venv(tmp_path / "venv")
    (_site_packages(python) / "shared.pth").write_text(f"{shared}\n")
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    environ = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PIP_FIND_LINKS"}}
    environ.update(
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        CUDA_RESOLVE_CUDA_ARCH="",
        CUDA_RESOLVE_DRIVER="",
    )
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pip_plugin", "install", "quickext"),
            *("--index", str(DATA / "index" / "quickext")),
            *("--source", str(DATA / "packages" / "quickext")),
            *("--python", str(python), "--arch-list", "8.0", "--json"),
        ],
        capture_output=True,
        text=True,
        env=environ,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    changed = json.loads(done.stdout)["result"]["changed"]
    assert "quickext" in json.dumps(changed) and "torch" not in json.dumps(changed)
    assert not (_site_packages(python) / "torch").exists()  # the shared torch was kept
