"""What a channel can serve, decided without conda: match specs as records write them, the torch
an environment has, whether a channel build fits (driver, every GPU, the environment's torch),
and the CPU-torch veto. Records are shaped as conda-forge writes kaolin's and pytorch's."""

from __future__ import annotations

from pathlib import Path

import pytest
from _factories import driver, gpu, make_index

from cuda_resolve.conda.matchspec import parse_spec, version_matches
from cuda_resolve.conda.records import CondaRecord, TorchRecord, torch_record
from cuda_resolve.conda.serve import arch_list_of, best_fitting, build_fits, cuda_of, veto_cpu_torch
from cuda_resolve.environment import Environment, Machine, PythonInfo
from cuda_resolve.errors import UsageError
from cuda_resolve.versions import CudaVersion

INDEX = make_index()
CHANNEL_TORCH = TorchRecord(
    source="channel",
    version="2.9.1",
    build="cuda130_generic_py312_h1234567_300",
    cuda=CudaVersion(13, 0),
)
PIP_TORCH = TorchRecord(
    source="pip", version="2.9.1+cu130", build="pypi_0", cuda=CudaVersion(13, 0)
)


def _env(driver_version: str | None, *capabilities: str) -> Environment:
    return Environment(
        machine=Machine(),
        python=PythonInfo(version="3.12.3"),
        driver=driver(driver_version) if driver_version else None,
        gpus=tuple(gpu(c, index=i) for i, c in enumerate(capabilities)),
    )


def _kaolin(build: str = "cuda130_py312_h0_0", *depends: str) -> CondaRecord:
    return CondaRecord(
        name="kaolin",
        version="0.18.0",
        build=build,
        build_number=0,
        depends=depends
        or (
            "pytorch * cuda*",
            "pytorch >=2.9,<2.10",
            "cuda-version >=13.0,<14",
            "python >=3.12,<3.13.0a0",
        ),
    )


@pytest.mark.parametrize(
    "text, name, version, build",
    [
        ("pytorch 2.5.1 cuda126_py312_h1234_300", "pytorch", "2.5.1", "cuda126_py312_h1234_300"),
        ("python >=3.11,<3.12.0a0", "python", ">=3.11,<3.12.0a0", "*"),
        ("pytorch * cuda*", "pytorch", "*", "cuda*"),
        ("pytorch=2.5", "pytorch", "2.5.*", "*"),
        ("pytorch=2.5=cuda*", "pytorch", "2.5.*", "cuda*"),
        ("pointnet2_ops==3.0.0", "pointnet2_ops", "==3.0.0", "*"),
        ("pytorch[build=cuda*]", "pytorch", "*", "cuda*"),
        ("conda-forge::kaolin", "kaolin", "*", "*"),
        ("torch ==2.11.0+cu130 pypi_0", "torch", "==2.11.0+cu130", "pypi_0"),
        ("pytorch >= 2.5", "pytorch", ">=2.5", "*"),
    ],
)
def test_specs_parse_as_conda_writes_them(text: str, name: str, version: str, build: str) -> None:
    spec = parse_spec(text)
    assert (spec.name, spec.version, spec.build) == (name, version, build)


@pytest.mark.parametrize(
    "expression, version, expected",
    [
        (">=3.11,<3.12.0a0", "3.11.7", True),
        (">=3.11,<3.12.0a0", "3.12.0", False),
        ("2.5.*", "2.5.1", True),
        ("2.5.*", "2.50", False),
        ("==2.11.0+cu130", "2.11.0+cu130", True),
        ("==2.11.0+cu130", "2.11.0", False),
        (">=12", "13.0", True),
        ("<2|>=3", "2.5", False),
        ("<2|>=3", "3.1", True),
        ("!=2.5.1", "2.5.1", False),
        ("*", "anything", True),
    ],
)
def test_versions_match_as_conda_compares_them(
    expression: str, version: str, expected: bool
) -> None:
    assert version_matches(expression, version) is expected


def test_a_bad_spec_is_named() -> None:
    with pytest.raises(UsageError, match="'==='"):
        parse_spec("===")


def test_a_conda_forge_build_fits_a_matching_machine_and_torch() -> None:
    fit = build_fits(
        _kaolin(),
        _env("580.65.06", "9.0"),
        CHANNEL_TORCH,
        INDEX,
        toolkit_archs=INDEX.toolkit(CudaVersion(13, 0)).archs,
    )  # type: ignore[union-attr]
    assert fit.ok, fit.describe()
    assert any("taken as CUDA 13.0's full list" in reason for reason in fit.reasons)


def test_an_old_driver_rules_a_build_out() -> None:
    fit = build_fits(
        _kaolin(),
        _env("535.104.05", "8.6"),
        CHANNEL_TORCH,
        INDEX,
        toolkit_archs=(gpu("8.6").compute_capability,),
    )
    assert not fit.ok
    assert any("CUDA 13.0 needs" in reason for reason in fit.reasons)


def test_a_channel_build_never_pairs_with_pips_torch() -> None:
    fit = build_fits(
        _kaolin(),
        _env("580.65.06", "9.0"),
        PIP_TORCH,
        INDEX,
        toolkit_archs=(gpu("9.0").compute_capability,),
    )
    assert not fit.ok
    assert any("needs pytorch from a channel" in reason for reason in fit.reasons)


def test_another_pytorch_version_rules_a_build_out() -> None:
    other = TorchRecord(
        source="channel",
        version="2.8.0",
        build="cuda129_generic_py312_h0_300",
        cuda=CudaVersion(12, 9),
    )
    fit = build_fits(
        _kaolin(),
        _env("580.65.06", "9.0"),
        other,
        INDEX,
        toolkit_archs=(gpu("9.0").compute_capability,),
    )
    assert not fit.ok and "pytorch >=2.9,<2.10" in fit.describe()


def test_our_build_string_states_the_arch_list_and_every_gpu_must_be_covered() -> None:
    ours = CondaRecord(
        name="pointnet2_ops",
        version="3.0.0",
        build="cp312_pt2910cu130_sm80_sm90ptx_h1a2b3c4d_0",
        depends=(PIP_TORCH.pin, "__cuda >=13"),
    )
    assert [str(entry) for entry in arch_list_of(ours) or ()] == ["8.0", "9.0+PTX"]
    assert cuda_of(ours) == CudaVersion(13, 0)
    assert build_fits(
        ours, _env("580.65.06", "8.6", "9.0"), PIP_TORCH, INDEX
    ).ok  # 8.0 SASS runs on 8.6
    blackwell = build_fits(ours, _env("580.65.06", "9.0", "12.0"), PIP_TORCH, INDEX)
    assert blackwell.ok  # PTX for 9.0 JIT-compiles on 12.0
    volta = build_fits(ours, _env("580.65.06", "7.0"), PIP_TORCH, INDEX)
    assert not volta.ok and any("no kernels for GPU (7.0)" in reason for reason in volta.reasons)


def test_a_build_stating_no_arch_list_is_taken_to_carry_its_cudas_archs() -> None:
    fit = build_fits(
        _kaolin(), _env("580.65.06", "9.0"), CHANNEL_TORCH, INDEX
    )  # the index's CUDA 13.0 facts
    assert fit.ok and any("taken as CUDA 13.0's full list" in reason for reason in fit.reasons)
    pascal = build_fits(
        _kaolin(), _env("580.65.06", "6.1"), CHANNEL_TORCH, INDEX
    )  # CUDA 13 dropped sm_61
    assert not pascal.ok and any("no kernels for GPU (6.1)" in reason for reason in pascal.reasons)
    unknown = build_fits(
        _kaolin("h0_0", "pytorch * cuda*"), _env("580.65.06", "9.0"), CHANNEL_TORCH, INDEX
    )
    assert not unknown.ok and any("states no arch list" in reason for reason in unknown.reasons)


def test_a_cuda_arch_constraint_is_read_as_a_minimum() -> None:
    record = CondaRecord(name="x", version="1", build="0", constrains=("__cuda_arch >=8.0",))
    assert [str(entry) for entry in arch_list_of(record) or ()] == ["8.0+PTX"]


def test_the_best_fitting_build_is_the_newest_then_the_highest_build_number() -> None:
    env = _env("580.65.06", "9.0")
    archs = (gpu("9.0").compute_capability,)
    builds = [
        CondaRecord(
            name="kaolin",
            version=v,
            build=f"cuda130_py312_h0_{n}",
            build_number=n,
            depends=("pytorch * cuda*",),
        )
        for v, n in (("0.17.0", 5), ("0.18.0", 1), ("0.18.0", 3))
    ]
    best = best_fitting(
        [build_fits(record, env, CHANNEL_TORCH, INDEX, toolkit_archs=archs) for record in builds]
    )
    assert best is not None and (best.record.version, best.record.build_number) == ("0.18.0", 3)
    assert best_fitting([]) is None


def test_a_cpu_pytorch_is_vetoed_only_on_a_gpu_machine() -> None:
    cpu = CondaRecord(name="pytorch", version="2.9.1", build="cpu_generic_py312_h0_0")
    cuda_build = CondaRecord(name="pytorch", version="2.9.1", build="cuda130_generic_py312_h0_300")
    reason = veto_cpu_torch(_env("580.65.06", "9.0"), [cpu])
    assert reason is not None and "CPU-only" in reason and "GPU (9.0)" in reason
    assert veto_cpu_torch(_env("580.65.06", "9.0"), [cuda_build]) is None
    assert veto_cpu_torch(_env(None), [cpu]) is None


def test_the_environments_torch_is_the_channels_pytorch_first_then_pips(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    (site / "torch-2.9.1+cu130.dist-info").mkdir(parents=True)
    (site / "torch-2.9.1+cu130.dist-info" / "INSTALLER").write_text("pip\n")
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(
        "__version__ = '2.9.1+cu130'\ncuda: Optional[str] = '13.0'\n"
    )
    assert torch_record(tmp_path) == PIP_TORCH
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "pytorch-2.9.1-cuda130_generic_py312_h1234567_300.json").write_text(
        '{"name": "pytorch", "version": "2.9.1", "build": "cuda130_generic_py312_h1234567_300", '
        '"build_number": 300, "depends": []}'
    )
    assert torch_record(tmp_path) == CHANNEL_TORCH
    # A torch dist-info that conda installed belongs to the channel's pytorch, not to pip.
    (site / "torch-2.9.1+cu130.dist-info" / "INSTALLER").write_text("conda\n")
    (meta / "pytorch-2.9.1-cuda130_generic_py312_h1234567_300.json").unlink()
    assert torch_record(tmp_path) is None


def test_a_damaged_record_is_named(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "x-1-0.json").write_text(
        '{"name": "x", "version": "1", "build": "0", "depends": "not a list"}'
    )
    with pytest.raises(UsageError, match=r"x-1-0\.json: depends must be a list of strings"):
        torch_record(tmp_path)


def test_building_into_the_channel_needs_a_cuda_torch_in_the_environment(tmp_path: Path) -> None:
    from cuda_resolve.conda.channel import LocalChannel
    from cuda_resolve.conda.convert import build_into_channel
    from cuda_resolve.install.options import InstallOptions

    channel = LocalChannel(tmp_path / "channel")
    with pytest.raises(UsageError, match="has none") as no_torch:
        build_into_channel(
            ["pointnet2_ops"], tmp_path, channel=channel, index=INDEX, options=InstallOptions()
        )
    assert "conda install -p" in (no_torch.value.hint or "")
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    (site / "torch-2.9.1+cpu.dist-info").mkdir(parents=True)
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(
        "__version__ = '2.9.1+cpu'\ncuda: Optional[str] = None\n"
    )
    with pytest.raises(UsageError, match="CPU-only"):
        build_into_channel(
            ["pointnet2_ops"], tmp_path, channel=channel, index=INDEX, options=InstallOptions()
        )
    assert not channel.root.exists()


def test_a_channel_pytorch_over_pips_torch_is_vetoed_while_builds_pin_it() -> None:
    from cuda_resolve.conda.serve import veto_torch_swap

    pytorch = CondaRecord(name="pytorch", version="2.9.1", build="cuda130_generic_py312_h0_300")
    built = CondaRecord(
        name="pointnet2_ops",
        version="3.0.0",
        build="cp312_pt291cu130_sm90_h0_0",
        depends=(PIP_TORCH.pin, "__cuda >=13"),
    )
    reason = veto_torch_swap([pytorch], [built], PIP_TORCH)
    assert reason is not None and "pointnet2_ops" in reason and "pip's torch 2.9.1+cu130" in reason
    assert veto_torch_swap([pytorch], [], PIP_TORCH) is None  # nothing pinned to pip's torch
    assert (
        veto_torch_swap([pytorch], [built], CHANNEL_TORCH) is None
    )  # the torch is conda's already
    assert (
        veto_torch_swap([pytorch, built], [built], PIP_TORCH) is None
    )  # the package is replaced in the same solve
    assert veto_torch_swap([built], [built], PIP_TORCH) is None
