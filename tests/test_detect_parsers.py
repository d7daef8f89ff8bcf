"""Pure parsers over recorded outputs (tests/data/recorded): no programs run, no files probed."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from cuda_resolve.detect import _target_probe
from cuda_resolve.detect._libcuda import format_uuid
from cuda_resolve.detect.compilers import parse_compiler_version
from cuda_resolve.detect.driver import parse_module_version, parse_proc_version
from cuda_resolve.detect.nvcc import parse_gpu_arch_list, parse_nvcc_version
from cuda_resolve.detect.nvidia_smi import parse_smi_gpus, parse_smi_header, smi_problem
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

RECORDED = Path(__file__).parent / "data" / "recorded"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text(encoding="utf-8")


def cc(text: str) -> ComputeCapability:
    return ComputeCapability.parse(text)


# -- nvidia-smi --------------------------------------------------------------------------------


def test_smi_header_h200() -> None:
    header = parse_smi_header(recorded("nvidia-smi/h200.txt"))
    assert header is not None
    assert header.driver_version == DriverVersion.parse("580.159.04")
    assert header.driver_version.text == "580.159.04"
    assert header.cuda == CudaVersion(13, 0)


def test_smi_header_mixed_gpus_driver_535() -> None:
    header = parse_smi_header(recorded("nvidia-smi/mixed.txt"))
    assert header is not None
    assert str(header.driver_version) == "535.104.05"
    assert header.cuda == CudaVersion(12, 2)


def test_smi_header_without_cuda_line_keeps_the_driver() -> None:
    header = parse_smi_header(recorded("nvidia-smi/driver-470-no-cuda-line.txt"))
    assert header is not None
    assert str(header.driver_version) == "470.82.01"
    assert header.cuda is None


@pytest.mark.parametrize(
    "name",
    ["nvidia-smi/no-devices.txt", "nvidia-smi/nvml-mismatch.txt", "nvidia-smi/no-driver.txt"],
)
def test_smi_header_absent_in_failure_texts(name: str) -> None:
    assert parse_smi_header(recorded(name)) is None


def test_smi_query_single_gpu() -> None:
    (gpu,) = parse_smi_gpus(recorded("nvidia-smi/h200-query.csv"))
    assert gpu.index == 0
    assert gpu.name == "NVIDIA H200"
    assert gpu.compute_capability == cc("9.0")
    assert gpu.uuid == "GPU-2f9c1d7e-8a41-5b3e-9c0d-6e7f8a9b0c1d"
    assert gpu.memory_mib == 143771


def test_smi_query_mixed_gpus_in_order() -> None:
    gpus = parse_smi_gpus(recorded("nvidia-smi/mixed-query.csv"))
    assert [g.name for g in gpus] == [
        "Tesla V100-SXM2-32GB",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA GeForce RTX 3090",
    ]
    assert [str(g.compute_capability) for g in gpus] == ["7.0", "8.0", "8.6"]
    assert [g.index for g in gpus] == [0, 1, 2]


def test_smi_query_with_units_and_not_available_fields() -> None:
    gpus = parse_smi_gpus(recorded("nvidia-smi/mixed-query-units.csv"))
    assert [g.memory_mib for g in gpus] == [32768, 40960, None]
    assert gpus[2].uuid is None
    assert gpus[2].compute_capability == cc("8.6")


@pytest.mark.parametrize(
    "name",
    [
        "nvidia-smi/no-devices.txt",
        "nvidia-smi/nvml-mismatch.txt",
        "nvidia-smi/old-no-compute-cap.txt",
    ],
)
def test_smi_query_failure_texts_list_no_gpu(name: str) -> None:
    assert parse_smi_gpus(recorded(name)) == ()


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("nvidia-smi/no-devices.txt", "No devices were found"),
        (
            "nvidia-smi/nvml-mismatch.txt",
            "Failed to initialize NVML: Driver/library version mismatch",
        ),
        (
            "nvidia-smi/no-driver.txt",
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        ),
        ("nvidia-smi/old-no-compute-cap.txt", 'Field "compute_cap" is not a valid field to query.'),
    ],
)
def test_smi_problem_names_the_failure(name: str, problem: str) -> None:
    found = smi_problem(recorded(name))
    assert found is not None
    assert found.startswith(problem)


def test_smi_problem_is_none_for_a_healthy_banner() -> None:
    assert smi_problem(recorded("nvidia-smi/h200.txt")) is None


# -- kernel module files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("proc/driver-version-580-open.txt", "580.159.04"),
        ("proc/driver-version-535.txt", "535.104.05"),
        ("proc/driver-version-aarch64.txt", "570.124.06"),
    ],
)
def test_proc_driver_version(name: str, version: str) -> None:
    parsed = parse_proc_version(recorded(name))
    assert parsed is not None
    assert parsed.text == version


def test_proc_driver_version_ignores_the_gcc_line() -> None:
    assert (
        parse_proc_version("GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n")
        is None
    )


def test_sys_module_version() -> None:
    parsed = parse_module_version(recorded("proc/sys-module-nvidia-version.txt"))
    assert parsed is not None
    assert parsed.text == "580.159.04"


@pytest.mark.parametrize("text", ["", "garbage\n", "13.0\n", "580.159.04 extra\n"])
def test_sys_module_version_rejects_other_text(text: str) -> None:
    assert parse_module_version(text) is None


# -- nvcc --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "version", "release"),
    [
        ("nvcc/version-10.2.txt", CudaVersion(10, 2), "10.2.89"),
        ("nvcc/version-11.8.txt", CudaVersion(11, 8), "11.8.89"),
        ("nvcc/version-12.4.txt", CudaVersion(12, 4), "12.4.131"),
        ("nvcc/version-13.0.txt", CudaVersion(13, 0), "13.0.88"),
    ],
)
def test_nvcc_version(name: str, version: CudaVersion, release: str) -> None:
    assert parse_nvcc_version(recorded(name)) == (version, release)


def test_nvcc_version_without_full_release() -> None:
    assert parse_nvcc_version("Cuda compilation tools, release 9.2\n") == (CudaVersion(9, 2), None)


def test_nvcc_version_of_something_else() -> None:
    assert parse_nvcc_version("bash: nvcc: command not found\n") is None


def test_list_gpu_arch_13_0_starts_at_turing_and_renames_101_to_110() -> None:
    archs = parse_gpu_arch_list(recorded("nvcc/list-gpu-arch-13.0.txt"))
    assert archs[0] == cc("7.5")
    assert [str(a) for a in archs] == [
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.8",
        "8.9",
        "9.0",
        "10.0",
        "10.3",
        "11.0",
        "12.0",
        "12.1",
    ]
    assert list(archs) == sorted(archs)  # nvcc prints 110 before 103; we sort


def test_list_gpu_arch_11_8_keeps_kepler() -> None:
    archs = parse_gpu_arch_list(recorded("nvcc/list-gpu-arch-11.8.txt"))
    assert archs[0] == cc("3.5") and archs[-1] == cc("9.0")
    assert len(archs) == 16


def test_list_gpu_arch_keeps_arch_specific_targets() -> None:
    archs = parse_gpu_arch_list(recorded("nvcc/list-gpu-arch-12.4.txt"))
    assert cc("9.0a") in archs and cc("9.0") in archs
    assert archs[0] == cc("5.0")


def test_list_gpu_arch_ignores_other_lines() -> None:
    assert parse_gpu_arch_list("nvcc fatal   : Unknown option '--list-gpu-arch'\nsm_80\n") == ()


# -- compilers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("compilers/gcc-12-debian.txt", ("gcc", "12.2.0")),
        ("compilers/gcc-8-rhel.txt", ("gcc", "8.5.0")),
        ("compilers/conda-gcc-13.txt", ("gcc", "13.3.0")),
        ("compilers/clang-17-ubuntu.txt", ("clang", "17.0.6")),
        ("compilers/apple-clang-15.txt", ("clang", "15.0.0")),
    ],
)
def test_compiler_version_banners(name: str, expected: tuple[str, str]) -> None:
    assert parse_compiler_version(recorded(name)) == expected


def test_compiler_version_of_a_non_compiler() -> None:
    assert parse_compiler_version("usage: something [-h]\n") is None


# -- torch files (parsed as text by the target probe) ------------------------------------------


def test_torch_version_py_cuda_build() -> None:
    fields = _target_probe.parse_version_py(recorded("torch/version-2.5.1-cu124.py.txt"))
    assert fields == {
        "__version__": "2.5.1+cu124",
        "cuda": "12.4",
        "git_version": "a8d6afb511a69687bbb2b7e88a3cf67917e1697e",
        "hip": None,
    }


def test_torch_version_py_cpu_build_from_a_real_wheel() -> None:
    fields = _target_probe.parse_version_py(recorded("torch/version-2.13.0-cpu.py.txt"))
    assert fields["__version__"] == "2.13.0+cpu"
    assert fields["cuda"] is None and fields["hip"] is None


def test_torch_version_py_without_annotations() -> None:
    fields = _target_probe.parse_version_py(recorded("torch/version-1.10.2-cu113.py.txt"))
    assert fields["__version__"] == "1.10.2+cu113" and fields["cuda"] == "11.3"


def test_torch_version_py_rocm_build() -> None:
    fields = _target_probe.parse_version_py(recorded("torch/version-2.4.1-rocm6.1.py.txt"))
    assert fields["hip"] == "6.1.40091-a8dbc0c19" and fields["cuda"] is None


def test_torch_cxx11_abi_from_cmake() -> None:
    assert _target_probe.parse_cxx11_abi(recorded("torch/TorchConfig-cxx11-0.cmake")) is False
    assert (
        _target_probe.parse_cxx11_abi('set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")') is True
    )
    assert (
        _target_probe.parse_cxx11_abi(recorded("torch/TorchConfig-2.13.0-no-abi-flag.cmake"))
        is None
    )
    assert _target_probe.parse_cxx11_abi('set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=")') is None


def test_target_probe_parses_as_python_3_7() -> None:
    """The probe runs under the target interpreter (the text sent: _dist_metadata's, then the
    probe's): no syntax newer than 3.7 may creep in, and it imports the standard library only
    (the one relative import is the in-process path to _dist_metadata, whose text comes first)."""
    from cuda_resolve.detect.target import _probe_source

    tree = ast.parse(_probe_source(), feature_version=(3, 7))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        and not (isinstance(node, ast.ImportFrom) and node.level)
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    relative = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level
    }
    assert "torch" not in imported
    assert imported <= {
        "sys",
        "json",
        "os",
        "re",
        "stat",
        "sysconfig",
        "site",
        "typing",
        "zipfile",
        "pkgutil",
    }  # stdlib only
    assert relative == {"_dist_metadata"}
    assert inspect.getsource(_target_probe) in _probe_source()


def test_libcuda_uuid_formatting() -> None:
    raw = bytes.fromhex("2f9c1d7e8a415b3e9c0d6e7f8a9b0c1d")
    assert format_uuid(raw) == "2f9c1d7e-8a41-5b3e-9c0d-6e7f8a9b0c1d"
