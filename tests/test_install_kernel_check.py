"""The install refuses, before pip runs, a wheel with no kernel for a GPU here (real nvcc
output)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _factories import gpu

from cuda_resolve.environment import Environment, Machine, PythonInfo
from cuda_resolve.errors import InstallError
from cuda_resolve.install.transaction import refuse_kernel_gaps

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(
    NVCC is None, reason="needs nvcc (CUDA toolkit) to compile a fat binary"
)

SOURCE = 'extern "C" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }\n'


def _wheel(tmp_path: Path, *gencode: str) -> Path:
    source = tmp_path / "k.cu"
    source.write_text(SOURCE, encoding="utf-8")
    library = tmp_path / "k.so"
    subprocess.run(
        [str(NVCC), "-shared", "-Xcompiler", "-fPIC", *gencode, "-o", str(library), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = tmp_path / "demo_ext-1.0+pt2141cu130.sm80-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(library, "demo_ext/_ext.cpython-311-x86_64-linux-gnu.so")
    return wheel


def _result(wheel: Path) -> Any:
    return SimpleNamespace(
        spec=SimpleNamespace(package="demo_ext"), wheel=SimpleNamespace(path=wheel)
    )


def _machine(*capabilities: str) -> Environment:
    return Environment(
        machine=Machine(),
        python=PythonInfo(version="3.11.7"),
        gpus=tuple(gpu(c, index=i) for i, c in enumerate(capabilities)),
    )


def test_a_wheel_without_a_kernel_for_a_gpu_here_is_refused(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "-gencode", "arch=compute_80,code=sm_80")
    assert refuse_kernel_gaps([_result(wheel)], _machine("8.0")) == []
    with pytest.raises(InstallError, match=r"has no kernel for compute capability 9\.0") as refused:
        refuse_kernel_gaps([_result(wheel)], _machine("8.0", "9.0"))
    assert "cuda-pip install --rebuild demo_ext" in (refused.value.hint or "")


def test_ptx_counts_and_an_unreadable_wheel_is_a_note(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "-gencode", "arch=compute_80,code=[sm_80,compute_80]")
    assert (
        refuse_kernel_gaps([_result(wheel)], _machine("9.0")) == []
    )  # the driver JIT-compiles the PTX
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"not a zip")
    [note] = refuse_kernel_gaps([_result(broken)], _machine("9.0"))
    assert "kernels not checked" in note
