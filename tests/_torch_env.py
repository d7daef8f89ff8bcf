"""The torch environment the slow end-to-end tests share: PyPI's CUDA build of torch, installed
once per session by cuda-pip itself (test_install_e2e and test_install_interrupt both use it;
conftest.py registers the fixture so that pytest makes it once, not once per module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["_cli", "_venv", "torch_python"]


def _cli(*args: str, env: dict[str, str] | None = None, module: str = "cuda_resolve", timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          env=env if env is not None else dict(os.environ), timeout=timeout, check=False)


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin" / "python"


@pytest.fixture(scope="session")
def torch_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with PyPI's CUDA build of torch 2.14.1, installed through cuda-pip itself."""
    python = _venv(tmp_path_factory.mktemp("torch-env") / "venv")
    # The overrides describe an H200 on driver 580 (CI has no GPU); --strict-driver keeps the
    # choice on CUDA 13.0, the variant PyPI serves: the real path through the default index.
    env = dict(os.environ, CUDA_RESOLVE_DRIVER="580.65.06", CUDA_RESOLVE_CUDA_ARCH="9.0",
               CUDA_RESOLVE_CONFIG=str(tmp_path_factory.mktemp("cfg") / "none.toml"))
    done = _cli("install", "torch==2.14.1", "--strict-driver", "--python", str(python), "--json", module="pip_plugin", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [i["requirement"] for i in report["plan"]["install"]] == ["torch==2.14.1"]
    assert report["plan"]["install"][0]["index"] == "https://pypi.org/simple"
    assert "torch" in report["result"]["verified_imports"]
    return python
