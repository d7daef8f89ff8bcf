"""Pre-flight: every refusal names the fact and the fix, and happens before anything compiles."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from _factories import archs, gpu

from cuda_resolve.build.buildenv import overlay_include_dirs
from cuda_resolve.build.preflight import PreflightError, check_build
from cuda_resolve.environment import (
    Compiler,
    Environment,
    Machine,
    NvidiaWheel,
    PythonInfo,
    Toolkit,
    TorchInfo,
)
from cuda_resolve.errors import BuildError
from cuda_resolve.index import default_index
from cuda_resolve.index.model import Recipe
from cuda_resolve.plan import PlanItem
from cuda_resolve.versions import ComputeCapability, CudaVersion

INDEX = default_index()
RECIPE: Recipe = INDEX.package("pointnet2_ops").recipes[0]  # type: ignore[union-attr]

TOOLKIT_13 = Toolkit(
    version=CudaVersion(13, 0),
    root="/usr/local/cuda-13.0",
    nvcc="/usr/local/cuda-13.0/bin/nvcc",
    gpu_archs=archs("75 80 86 87 88 89 90 100 103 110 120 121"),
)


def _env(**changes: object) -> Environment:
    env = Environment(
        machine=Machine(glibc="2.36"),
        python=PythonInfo(version="3.12.3", executable="/envs/t/bin/python"),
        gpus=(gpu("9.0", "NVIDIA H200"),),
        toolkits=(TOOLKIT_13,),
        compiler=Compiler(
            gcc="13.3.0", gxx="13.3.0", nvcc_host="/usr/bin/g++", nvcc_host_version="13.3.0"
        ),
        torch=TorchInfo(version="2.11.0+cu130", cuda=CudaVersion(13, 0)),
    )
    return replace(env, **changes)  # type: ignore[arg-type]


def _item(**changes: object) -> PlanItem:
    item = PlanItem(
        name="pointnet2_ops",
        version="3.0.0",
        kind="build",
        variant="cu130",
        recipe=RECIPE.name,
        arch_list="9.0",
        toolkit="13.0",
        toolkit_root="/usr/local/cuda-13.0",
        torch="2.11.0+cu130",
    )
    return replace(item, **changes)  # type: ignore[arg-type]


def test_a_buildable_request_gives_the_variables_the_build_needs() -> None:
    spec = check_build(_item(), RECIPE, _env(), INDEX)
    variables = dict(spec.variables)
    assert variables["CUDA_HOME"] == "/usr/local/cuda-13.0"  # the real root, not a wrapper's folder
    assert variables["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert spec.torch_requirement is None  # the installed torch is the one built against
    assert spec.python == "/envs/t/bin/python"


def test_ptx_goes_on_the_highest_architecture() -> None:
    spec = check_build(_item(arch_list="8.6;9.0"), RECIPE, _env(), INDEX, ptx=True)
    assert spec.arch_list == "8.6;9.0+PTX"


def test_cpu_torch_is_refused_with_the_way_out() -> None:
    with pytest.raises(PreflightError, match=r"cpu build.*needs a CUDA build") as info:
        check_build(_item(variant="cpu", torch="2.11.0+cpu"), RECIPE, _env(), INDEX)
    assert "--allow-torch-change" in (info.value.hint or "")


def test_nvcc_major_must_match_torch_cuda_major() -> None:
    old = Toolkit(
        version=CudaVersion(12, 4),
        root="/usr/local/cuda-12.4",
        nvcc="/usr/local/cuda-12.4/bin/nvcc",
        gpu_archs=archs("50 60 70 75 80 86 89 90"),
    )
    with pytest.raises(
        PreflightError, match=r"nvcc 12.4 .* torch 2.11.0\+cu130 \(CUDA 13.0\) differ in CUDA major"
    ) as info:
        check_build(
            _item(toolkit="12.4", toolkit_root="/usr/local/cuda-12.4"),
            RECIPE,
            _env(toolkits=(old,)),
            INDEX,
        )
    assert "CUDA 13.x toolkit" in (info.value.hint or "") and "--allow-torch-change" in (
        info.value.hint or ""
    )


def test_an_architecture_the_toolkit_cannot_target_is_refused() -> None:
    with pytest.raises(PreflightError, match=r"nvcc 13.0 cannot target 3.7"):
        check_build(_item(arch_list="3.7;9.0"), RECIPE, _env(), INDEX)


def test_a_missing_toolkit_is_refused() -> None:
    with pytest.raises(PreflightError, match="toolkit the plan chose"):
        check_build(_item(), RECIPE, _env(toolkits=()), INDEX)


def test_compiler_too_new_switches_to_an_installed_compatible_one() -> None:
    facts = INDEX.toolkit(CudaVersion(13, 0))
    assert facts is not None and facts.gcc_max is not None
    too_new = str(facts.gcc_max + 1)
    compiler = Compiler(
        gcc=f"{too_new}.1.0",
        gxx=f"{too_new}.1.0",
        nvcc_host_version=f"{too_new}.1.0",
        other_gcc=("12.3.0",),
    )
    spec = check_build(_item(), RECIPE, _env(compiler=compiler), INDEX)
    assert dict(spec.variables)["CXX"] == "g++-12"
    assert dict(spec.variables)["NVCC_CCBIN"] == "g++-12"
    assert any("gcc-12" in note for note in spec.notes)


def test_compiler_too_new_without_an_alternative_says_what_to_install() -> None:
    facts = INDEX.toolkit(CudaVersion(13, 0))
    assert facts is not None and facts.gcc_max is not None
    too_new = str(facts.gcc_max + 1)
    compiler = Compiler(
        gcc=f"{too_new}.1.0", gxx=f"{too_new}.1.0", nvcc_host_version=f"{too_new}.1.0"
    )
    with pytest.raises(PreflightError, match="no other installed gcc is in range") as info:
        check_build(_item(), RECIPE, _env(compiler=compiler), INDEX)
    assert "install gcc/g++" in (info.value.hint or "")


def test_headers_missing_from_the_toolkit_come_from_torchs_nvidia_wheels() -> None:
    minimal = replace(TOOLKIT_13, missing_headers=("cusparse.h",))
    torch = TorchInfo(
        version="2.11.0+cu130",
        cuda=CudaVersion(13, 0),
        nvidia_wheels=(
            NvidiaWheel(
                name="nvidia-cusparse", version="12.6", include_dir="/site/nvidia/cu13/include"
            ),
        ),
    )
    spec = check_build(
        _item(),
        RECIPE,
        _env(toolkits=(minimal,), torch=torch),
        INDEX,
        exists=lambda path: path == "/site/nvidia/cu13/include/cusparse.h",
    )
    assert spec.include_dirs == ("/site/nvidia/cu13/include",)
    with pytest.raises(PreflightError, match=r"lacks cusparse.h"):
        check_build(
            _item(),
            RECIPE,
            _env(toolkits=(minimal,), torch=torch),
            INDEX,
            exists=lambda path: False,
        )


def test_a_torch_to_be_installed_goes_into_the_overlay_not_the_target() -> None:
    torch_item = PlanItem(
        name="torch",
        version="2.11.0",
        kind="wheel",
        variant="cu130",
        requirement="torch==2.11.0+cu130",
        index="https://download.pytorch.org/whl/cu130",
    )
    spec = check_build(_item(), RECIPE, _env(torch=None), INDEX, torch_item=torch_item)
    assert spec.torch_requirement == "torch==2.11.0+cu130"
    assert spec.torch_index == "https://download.pytorch.org/whl/cu130"


def test_preflight_is_fast() -> None:
    started = time.perf_counter()
    for _ in range(50):
        check_build(_item(), RECIPE, _env(), INDEX)
    assert (time.perf_counter() - started) / 50 < 0.05


def test_recipe_environment_variables_are_set() -> None:
    kaolin = INDEX.package("kaolin")
    assert kaolin is not None
    recipe = next(r for r in kaolin.recipes if dict(r.env).get("IGNORE_TORCH_VER"))
    spec = check_build(_item(name="kaolin", recipe=recipe.name), recipe, _env(), INDEX)
    variables = dict(spec.variables)
    assert variables["FORCE_CUDA"] == "1" and variables["IGNORE_TORCH_VER"] == "1"
    assert ComputeCapability.parse(variables["TORCH_CUDA_ARCH_LIST"]) == ComputeCapability(9, 0)


def test_headers_for_a_torch_still_to_be_installed_are_looked_for_in_the_overlay(
    tmp_path: Path,
) -> None:
    minimal = replace(TOOLKIT_13, missing_headers=("cusparse.h",))
    torch_item = PlanItem(
        name="torch",
        version="2.11.0",
        kind="wheel",
        variant="cu130",
        requirement="torch==2.11.0+cu130",
    )
    spec = check_build(
        _item(),
        RECIPE,
        _env(toolkits=(minimal,), torch=None),
        INDEX,
        torch_item=torch_item,
        exists=lambda path: False,
    )
    assert spec.missing_headers == ("cusparse.h",) and spec.include_dirs == ()
    include = tmp_path / "nvidia" / "cu13" / "include"
    include.mkdir(parents=True)
    with pytest.raises(BuildError, match="brought no nvidia-\\* wheel"):
        overlay_include_dirs(tmp_path, spec.missing_headers)
    (include / "cusparse.h").write_text("")
    assert overlay_include_dirs(tmp_path, spec.missing_headers) == [str(include)]
