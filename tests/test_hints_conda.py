"""conda's refusals speak conda (issue 29): ``conda install pointnet2_ops`` takes none of
cuda-resolve's options, so on a machine with no GPU the plugin's plan names the plugin's
setting and ``CONDA_OVERRIDE_CUDA_ARCH``, never ``--arch-list``; and following it gets past the
refusal. No conda needed: the plan is the conda-agnostic ``channel_plan``, on a profile with its
GPUs taken away and a stand-in CUDA 13.0 toolkit.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from _torch_env import standin_cuda_toolkit

from cuda_resolve.conda.convert import channel_plan, in_conda_words
from cuda_resolve.conda.records import TorchRecord
from cuda_resolve.environment import Environment, Toolkit
from cuda_resolve.errors import CudaResolveError, ResolutionImpossible, UsageError
from cuda_resolve.index import default_index
from cuda_resolve.install.options import InstallOptions
from cuda_resolve.profile import load_profile
from cuda_resolve.versions import CudaVersion

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"


def _no_gpu(tmp_path: Path) -> tuple[Environment, TorchRecord]:
    toolkit = standin_cuda_toolkit(tmp_path / "cuda-13.0")
    env = load_profile(PROFILE)
    env = dataclasses.replace(
        env,
        gpus=(),
        toolkits=(
            Toolkit(
                version=CudaVersion.parse("13.0"),
                root=str(toolkit),
                nvcc=str(toolkit / "bin" / "nvcc"),
                found_via="CUDA_HOME",
            ),
        ),
    )
    assert env.torch is not None
    torch = TorchRecord(
        source="pip", version=env.torch.version, build="pypi_0", cuda=env.torch.cuda
    )
    return env, torch


def test_no_gpu_in_conda_names_the_plugin_setting_and_it_gets_further(tmp_path: Path) -> None:
    env, torch = _no_gpu(tmp_path)
    index = default_index()
    with pytest.raises(ResolutionImpossible) as refused:
        channel_plan(["pointnet2_ops"], env, torch, index, InstallOptions(), environ={})
    said = f"{refused.value.message}\n{refused.value.hint}"
    assert "--arch-list" not in said, said
    assert "plugins.cuda_resolve_arch_list" in said and "CONDA_OVERRIDE_CUDA_ARCH" in said
    # Follow it: the plugin's setting, as its hint writes it.
    match = re.search(r"plugins\.cuda_resolve_arch_list '([^']+)'", refused.value.hint or "")
    assert match is not None, refused.value.hint
    plan = channel_plan(
        ["pointnet2_ops"],
        env,
        torch,
        index,
        InstallOptions(explicit_arch_list=True),
        arch_list=match.group(1),
        environ={},
    )
    assert [item.name for item in plan.items if item.kind == "build"] == ["pointnet2_ops"]


def test_conda_cuda_arch_override_is_the_other_way_out(tmp_path: Path) -> None:
    """CONDA_OVERRIDE_CUDA_ARCH=8.6, the hint's one-command way: detection then sees an 8.6 GPU
    (conda's meaning), and the same plan fits."""
    from cuda_resolve.detect.overrides import apply_overrides, read_overrides

    env, torch = _no_gpu(tmp_path)
    match = re.search(r"CONDA_OVERRIDE_CUDA_ARCH=(\S+)", _refusal(env, torch).hint or "")
    assert match is not None
    overrides = read_overrides({"CONDA_OVERRIDE_CUDA_ARCH": match.group(1)})
    driver, gpus, _ = apply_overrides(overrides, env.driver, env.gpus)
    assert gpus
    overridden = dataclasses.replace(env, driver=driver, gpus=gpus)
    plan = channel_plan(
        ["pointnet2_ops"], overridden, torch, default_index(), InstallOptions(), environ={}
    )
    assert [item.name for item in plan.items if item.kind == "build"] == ["pointnet2_ops"]


def _refusal(env: Environment, torch: TorchRecord) -> CudaResolveError:
    with pytest.raises(ResolutionImpossible) as refused:
        channel_plan(["pointnet2_ops"], env, torch, default_index(), InstallOptions(), environ={})
    return refused.value


def test_other_errors_pass_through_and_the_class_is_kept() -> None:
    plain = UsageError("something else", hint="check the spelling")
    assert in_conda_words(plain, ["kaolin"]) is plain
    torch = ResolutionImpossible(
        "kaolin: no published wheel for the installed torch 2.1.0+cpu",
        hint="rerun with --allow-torch-change to switch to a torch that kaolin "
        "publishes wheels for",
    )
    converted = in_conda_words(torch, ["kaolin"])
    assert isinstance(converted, ResolutionImpossible) and converted.exit_code == torch.exit_code
    assert converted.hint is not None and converted.hint.startswith(
        "`conda cuda plan kaolin --allow-torch-change`"
    )


def test_a_build_that_cannot_fetch_its_source_names_the_plugins_sources_setting() -> None:
    from cuda_resolve.errors import BuildError

    fetch = BuildError(
        "pointnet2_ops: git clone https://github.com/x/y failed",
        hint="check the network (cuda-resolve doctor --network), or pass --source DIR",
    )
    converted = in_conda_words(fetch, ["pointnet2_ops"])
    assert isinstance(converted, BuildError) and converted.message == fetch.message
    assert converted.hint is not None and "--source" not in converted.hint
    assert "`conda config --set plugins.cuda_resolve_sources.pointnet2_ops DIR`" in converted.hint


def test_the_one_command_way_names_the_packages(tmp_path: Path) -> None:
    env, torch = _no_gpu(tmp_path)
    hint = _refusal(env, torch).hint or ""
    assert (
        "`CONDA_OVERRIDE_CUDA_ARCH=8.6 conda install pointnet2_ops`" in hint and "..." not in hint
    )
