"""doctor's fixes can be pasted and are true where they are read (issue 29).

A ``fix:`` that is a command stays on one line however narrow the console (``export`` alone on
a line runs nothing); a rebuild is suggested only where a toolkit here can target the GPUs, and
where none can the fix says so and names what would.
"""

from __future__ import annotations

from _factories import gpu

from cuda_resolve.doctor.checks import check_extension_kernels, check_extension_symbols
from cuda_resolve.doctor.findings import Finding
from cuda_resolve.doctor.render import finding_lines
from cuda_resolve.environment import (
    Environment,
    ExtensionBinary,
    Machine,
    PythonInfo,
    Toolkit,
    TorchInfo,
)
from cuda_resolve.index import default_index
from cuda_resolve.versions import CudaVersion

CPATH = (
    "/home/someone/.venv/lib/python3.11/site-packages/nvidia/cusparse/include:"
    "/home/someone/.venv/lib/python3.11/site-packages/nvidia/cublas/include"
)


def test_an_export_fix_is_one_line_at_any_width() -> None:
    finding = Finding(
        check="toolkit-headers",
        status="warn",
        title="CUDA headers",
        found="the toolkit lacks cusparse.h",
        fix=f"export CPATH={CPATH}  (cuda-resolve sets this for its own builds)",
    )
    for width in (40, 80, 200):
        lines = finding_lines(finding, width)
        (fix,) = [line for line in lines if "fix:" in line]
        assert fix.split("fix: ", 1)[1].startswith(f"export CPATH={CPATH}"), lines
    several = Finding(
        check="host-compiler",
        status="error",
        title="host compiler",
        found="gcc 14 is too new",
        fix="use gcc 12: export NVCC_CCBIN=g++-12 CC=gcc-12 CXX=g++-12 and `cuda-pip install "
        "--rebuild pointnet2_ops` afterwards",
    )
    lines = finding_lines(several, 40)
    assert any("export NVCC_CCBIN=g++-12 CC=gcc-12 CXX=g++-12" in line for line in lines), lines
    assert any("`cuda-pip install --rebuild pointnet2_ops`" in line for line in lines), lines


def _machine(
    toolkit: str, capability: str, *, extensions: tuple[ExtensionBinary, ...]
) -> Environment:
    return Environment(
        machine=Machine(),
        python=PythonInfo(version="3.11"),
        gpus=(gpu(capability, name="NVIDIA GeForce GTX 1080"),),
        toolkits=(Toolkit(version=CudaVersion.parse(toolkit), root=f"/usr/local/cuda-{toolkit}"),),
        torch=TorchInfo(version="2.14.1+cu130", cuda=CudaVersion.parse("13.0")),
        extensions=extensions,
    )


EXT = ExtensionBinary(
    path="/env/site-packages/pointnet2_ops/_ext.so",
    distribution="pointnet2_ops 3.0.0+pt2141cu130.sm80",
    needed=(),
    missing=(),
    sass=("sm_80",),
)


def test_no_rebuild_is_suggested_for_a_gpu_no_toolkit_here_can_target() -> None:
    index = default_index()
    (blocked,) = check_extension_kernels(_machine("13.0", "6.1", extensions=(EXT,)), index)
    assert blocked.status == "error" and blocked.fix is not None
    assert "--rebuild" not in blocked.fix, blocked.fix
    assert "nothing here can rebuild it" in blocked.fix
    assert "nvcc 13.0 cannot target 6.1" in blocked.fix
    assert "CUDA 1" in blocked.fix and "with a torch of the same CUDA major" in blocked.fix
    # A toolkit that can target the GPU: the rebuild is the fix.
    (fixable,) = check_extension_kernels(_machine("12.6", "6.1", extensions=(EXT,)), index)
    assert fixable.fix is not None and "cuda-pip install --rebuild pointnet2_ops" in fixable.fix


def test_symbol_fixes_do_not_suggest_a_rebuild_that_cannot_target_the_gpu() -> None:
    other = ExtensionBinary(
        path=EXT.path,
        distribution="pointnet2_ops 3.0.0+pt260cu126.sm61",
        needed=(),
        missing=(),
        sass=("sm_61",),
        missing_symbols=("_ZN2at4_ops3addE",),
    )
    index = default_index()
    (finding,) = check_extension_symbols(_machine("13.0", "6.1", extensions=(other,)), index)
    assert finding.fix is not None and "--rebuild" not in finding.fix
    assert "nothing here can rebuild it" in finding.fix and "torch==2.6.0" in finding.fix
    (finding,) = check_extension_symbols(_machine("12.6", "6.1", extensions=(other,)), index)
    assert finding.fix is not None and "`cuda-pip install --repair`" in finding.fix
