"""Override variables: each one, empty values, precedence, and bad values as usage errors.

Probed facts come from a fake root and a fake nvidia-smi reporting the H200 (driver
580.159.04, CUDA 13.0, one GPU of capability 9.0). Where an override needs the index
(driver → CUDA), the lookup is replaced so that the shipped index is not under test here.
"""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from cuda_resolve.detect import detect_environment, overrides
from cuda_resolve.detect.overrides import apply_overrides, read_overrides
from cuda_resolve.environment import Driver, Environment, Gpu
from cuda_resolve.errors import UsageError
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

RECORDED = Path(__file__).parent / "data" / "recorded"
SYSTEM_PATH = "/usr/bin:/bin"


def h200_machine(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "root"
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/version").write_text("580.159.04\n")
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        '#!/bin/sh\ncase "$1" in\n'
        f"  --query-gpu=*) cat '{RECORDED / 'nvidia-smi/h200-query.csv'}';;\n"
        f"  *) cat '{RECORDED / 'nvidia-smi/h200.txt'}';;\nesac\n"
    )
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    return root, {"PATH": f"{smi.parent}:{SYSTEM_PATH}"}


def detect(tmp_path: Path, **variables: str) -> Environment:
    root, environ = h200_machine(tmp_path)
    return detect_environment(
        root=root, environ={**environ, **variables}, cache_dir=tmp_path / "cache"
    )


@pytest.fixture
def index_maps_driver_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index says 535.104.05 supports CUDA 12.2 and nothing else."""

    def lookup(version: DriverVersion) -> CudaVersion | None:
        return CudaVersion(12, 2) if version.text == "535.104.05" else None

    monkeypatch.setattr(overrides, "cuda_for_driver_version", lookup)


def test_no_overrides_keeps_the_probes(tmp_path: Path) -> None:
    env = detect(tmp_path)
    assert (
        env.driver is not None
        and env.driver.version.text == "580.159.04"
        and env.driver.cuda == CudaVersion(13, 0)
    )
    assert [str(g.compute_capability) for g in env.gpus] == ["9.0"]
    assert env.notes == ()


def test_cuda_resolve_driver_with_conda_cuda(tmp_path: Path) -> None:
    env = detect(tmp_path, CUDA_RESOLVE_DRIVER="535.104.05", CONDA_OVERRIDE_CUDA="12.2")
    assert env.driver == Driver(
        version=DriverVersion.parse("535.104.05"),
        cuda=CudaVersion(12, 2),
        source="CUDA_RESOLVE_DRIVER",
    )
    assert len(env.gpus) == 1  # the GPUs are still the probed ones


@pytest.mark.usefixtures("index_maps_driver_to")
def test_cuda_resolve_driver_derives_cuda_from_the_index(tmp_path: Path) -> None:
    env = detect(tmp_path, CUDA_RESOLVE_DRIVER="535.104.05")
    assert env.driver is not None and env.driver.cuda == CudaVersion(12, 2)


@pytest.mark.usefixtures("index_maps_driver_to")
def test_cuda_resolve_driver_the_index_does_not_know(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match=r"CUDA_RESOLVE_DRIVER=999\.1: cannot tell which CUDA"
    ) as raised:
        detect(tmp_path, CUDA_RESOLVE_DRIVER="999.1")
    assert raised.value.hint is not None and "CONDA_OVERRIDE_CUDA" in raised.value.hint


@pytest.mark.usefixtures("index_maps_driver_to")
def test_cuda_resolve_driver_beats_an_empty_conda_cuda(tmp_path: Path) -> None:
    env = detect(tmp_path, CUDA_RESOLVE_DRIVER="535.104.05", CONDA_OVERRIDE_CUDA="")
    assert env.driver is not None and env.driver.version.text == "535.104.05"


def test_empty_cuda_resolve_driver_means_no_driver_and_no_gpu(tmp_path: Path) -> None:
    env = detect(tmp_path, CUDA_RESOLVE_DRIVER="")
    assert env.driver is None and env.gpus == ()
    assert env.notes == (
        "CUDA_RESOLVE_DRIVER is set but empty: treating this machine as having no NVIDIA driver",
    )


def test_conda_override_cuda_replaces_the_drivers_cuda(tmp_path: Path) -> None:
    env = detect(tmp_path, CONDA_OVERRIDE_CUDA="12.4")
    assert env.driver == Driver(
        version=DriverVersion.parse("580.159.04"),
        cuda=CudaVersion(12, 4),
        source="sysfs+nvidia-smi+CONDA_OVERRIDE_CUDA",
    )


def test_empty_conda_override_cuda_means_no_driver(tmp_path: Path) -> None:
    env = detect(tmp_path, CONDA_OVERRIDE_CUDA="")
    assert env.driver is None and env.gpus == ()


def test_conda_override_cuda_without_a_probed_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        overrides, "_lowest_driver_for", lambda cuda: DriverVersion.parse("550.54.14")
    )
    driver, gpus, notes = apply_overrides(read_overrides({"CONDA_OVERRIDE_CUDA": "12.4"}), None, ())
    assert driver == Driver(
        version=DriverVersion.parse("550.54.14"),
        cuda=CudaVersion(12, 4),
        source="CONDA_OVERRIDE_CUDA",
    )
    assert gpus == ()
    assert notes == (
        "CONDA_OVERRIDE_CUDA=12.4 with no driver found: assuming CUDA 12.4's own driver 550.54.14",
    )
    monkeypatch.setattr(overrides, "_lowest_driver_for", lambda cuda: None)
    with pytest.raises(UsageError, match=r"CONDA_OVERRIDE_CUDA=12\.4: no driver was found here"):
        apply_overrides(read_overrides({"CONDA_OVERRIDE_CUDA": "12.4"}), None, ())


def test_cuda_arch_list_synthesises_gpus_when_counts_differ(tmp_path: Path) -> None:
    env = detect(tmp_path, CUDA_RESOLVE_CUDA_ARCH="8.0, 8.6")
    assert [(g.index, g.name, str(g.compute_capability)) for g in env.gpus] == [
        (0, "GPU from CUDA_RESOLVE_CUDA_ARCH", "8.0"),
        (1, "GPU from CUDA_RESOLVE_CUDA_ARCH", "8.6"),
    ]
    assert env.lowest_capability == ComputeCapability(8, 0)
    assert env.notes == ("GPUs taken from CUDA_RESOLVE_CUDA_ARCH=8.0,8.6 (1 probed)",)


def test_cuda_arch_list_replaces_capabilities_when_counts_match(tmp_path: Path) -> None:
    env = detect(tmp_path, CUDA_RESOLVE_CUDA_ARCH="sm_86")
    (gpu,) = env.gpus
    assert (gpu.name, gpu.uuid, gpu.compute_capability) == (
        "NVIDIA H200",
        "GPU-2f9c1d7e-8a41-5b3e-9c0d-6e7f8a9b0c1d",
        ComputeCapability(8, 6),
    )


def test_cuda_arch_list_without_any_driver_keeps_the_gpus() -> None:
    """A GPU-less build host compiling for its compute nodes: capabilities, no driver."""
    driver, gpus, _ = apply_overrides(
        read_overrides({"CUDA_RESOLVE_CUDA_ARCH": "9.0", "CONDA_OVERRIDE_CUDA": ""}), None, ()
    )
    assert driver is None
    assert [str(g.compute_capability) for g in gpus] == ["9.0"]


def test_empty_cuda_arch_list_means_no_gpu(tmp_path: Path) -> None:
    env = detect(tmp_path, CUDA_RESOLVE_CUDA_ARCH="")
    assert env.gpus == () and env.driver is not None


def test_conda_override_cuda_arch_is_the_lowest_for_every_gpu(tmp_path: Path) -> None:
    env = detect(tmp_path, CONDA_OVERRIDE_CUDA_ARCH="7.5")
    (gpu,) = env.gpus
    assert gpu.name == "NVIDIA H200" and gpu.compute_capability == ComputeCapability(7, 5)
    mixed = tuple(
        Gpu(index=i, name=f"g{i}", compute_capability=ComputeCapability.parse(c))
        for i, c in enumerate(("8.6", "9.0"))
    )
    _, gpus, _ = apply_overrides(read_overrides({"CONDA_OVERRIDE_CUDA_ARCH": "8.0"}), None, mixed)
    assert [(g.name, str(g.compute_capability)) for g in gpus] == [("g0", "8.0"), ("g1", "8.0")]


def test_empty_conda_override_cuda_arch_means_no_gpu(tmp_path: Path) -> None:
    assert detect(tmp_path, CONDA_OVERRIDE_CUDA_ARCH="").gpus == ()


def test_cuda_resolve_cuda_arch_beats_conda_override_cuda_arch(tmp_path: Path) -> None:
    env = detect(tmp_path, CUDA_RESOLVE_CUDA_ARCH="12.0", CONDA_OVERRIDE_CUDA_ARCH="")
    assert [str(g.compute_capability) for g in env.gpus] == ["12.0"]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "CUDA_RESOLVE_DRIVER",
            "12.2",
            "CUDA_RESOLVE_DRIVER='12.2': driver version '12.2' looks like a CUDA version",
        ),
        (
            "CUDA_RESOLVE_DRIVER",
            "latest",
            "CUDA_RESOLVE_DRIVER='latest': driver version 'latest' is not a dotted version number",
        ),
        (
            "CONDA_OVERRIDE_CUDA",
            "twelve",
            "CONDA_OVERRIDE_CUDA='twelve': CUDA version 'twelve' is not a dotted version number",
        ),
        (
            "CONDA_OVERRIDE_CUDA",
            "12",
            "CONDA_OVERRIDE_CUDA='12': CUDA version '12' needs a minor part",
        ),
        (
            "CUDA_RESOLVE_CUDA_ARCH",
            "8.0,,8.6",
            "CUDA_RESOLVE_CUDA_ARCH='8.0,,8.6': an empty entry in the list",
        ),
        (
            "CUDA_RESOLVE_CUDA_ARCH",
            "ampere",
            "CUDA_RESOLVE_CUDA_ARCH='ampere': compute capability 'ampere' is not of the form",
        ),
        (
            "CONDA_OVERRIDE_CUDA_ARCH",
            "8.0,8.6",
            "CONDA_OVERRIDE_CUDA_ARCH='8.0,8.6': conda's variable holds one capability",
        ),
        (
            "CONDA_OVERRIDE_CUDA_ARCH",
            "86",
            "CONDA_OVERRIDE_CUDA_ARCH='86': compute capability '86' is not of the form",
        ),
    ],
)
def test_bad_values_are_usage_errors_naming_variable_and_value(
    variable: str, value: str, message: str
) -> None:
    with pytest.raises(UsageError) as raised:
        read_overrides({variable: value})
    assert raised.value.message.startswith(message)
    assert raised.value.hint and variable in raised.value.hint
    assert raised.value.exit_code == 2


def test_a_bad_value_fails_before_anything_is_probed(tmp_path: Path) -> None:
    hanging = tmp_path / "bin" / "nvidia-smi"
    hanging.parent.mkdir()
    hanging.write_text("#!/bin/sh\nsleep 30\n")
    hanging.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(UsageError):
        detect_environment(
            root=tmp_path,
            environ={"PATH": f"{hanging.parent}:{SYSTEM_PATH}", "CONDA_OVERRIDE_CUDA": "x"},
            timeout=20,
        )
    assert time.monotonic() - started < 2.0
