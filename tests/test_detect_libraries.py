"""NVML through pynvml and libcuda through ctypes, against stand-in libraries built from C here.

``tests/data/recorded/fake-libs/*.c`` implement the entry points with the signatures of
``nvml.h`` and ``cuda.h`` and answer as an H200 machine (or a broken one) would. They are
compiled with the system C compiler and loaded through ``LD_LIBRARY_PATH`` in a subprocess
(the dynamic loader reads it only at start-up; pynvml, like the libcuda binding, opens its
library by soname), so the argument and result types are exercised for real on a machine
without a GPU. The subprocess probes a fake root with ``libraries=True``: the kernel-module
files are the stand-in machine's (none, unless a test writes them), not a GPU host's.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

FAKE_LIBS = Path(__file__).parent / "data" / "recorded" / "fake-libs"
pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or not sys.platform.startswith("linux"), reason="needs gcc on Linux"
)

# argv: PATH, root, cache directory ("" for none). The NVML session is asked for itself after
# probe_nvidia, so "pynvml_imported" says whether probe_nvidia needed pynvml.
PROBE = """
import json, sys
from pathlib import Path
from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect import _libcuda, _nvml
from cuda_resolve.detect.nvidia import probe_nvidia
path, root, cache_dir = sys.argv[1:4]
cache = ProbeCache(Path(cache_dir) if cache_dir else None)
facts = probe_nvidia(
    root=Path(root), environ={"PATH": path}, timeout=5.0, cache=cache, libraries=True
)
cache.save()
pynvml_imported = "pynvml" in sys.modules
nvml = _nvml.query_nvml()
if isinstance(nvml, _nvml.NvmlReport):
    raw = {"driver": nvml.driver_version, "cuda": nvml.cuda_driver_version,
           "problems": list(nvml.problems),
           "gpus": [[g.index, g.name, str(g.compute_capability), g.uuid, g.memory_mib]
                    for g in nvml.gpus]}
else:
    raw = {"failure": nvml.message if nvml is not None else None}
devices = _libcuda.query_devices()
print(json.dumps({
    "nvml": raw,
    "pynvml_imported": pynvml_imported,
    "driver": [str(facts.driver.version), str(facts.driver.cuda), facts.driver.source]
              if facts.driver else None,
    "gpus": [[g.index, g.name, str(g.compute_capability), g.uuid, g.memory_mib]
             for g in facts.gpus],
    "notes": list(facts.notes),
    "libcuda_version": _libcuda.driver_cuda_version(),
    "libcuda_gpus": None if devices is None else [
        [g.name, str(g.compute_capability), g.uuid, g.memory_mib] for g in devices.gpus],
    "libcuda_problem": None if devices is None else devices.problem,
}))
"""


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    built = tmp_path_factory.mktemp("fake-libs")
    builds = {
        "nvml": ("fake_nvml.c", "libnvidia-ml.so.1", ()),
        "nvml-old": ("fake_nvml.c", "libnvidia-ml.so.1", ("-DFAKE_NVML_OLD",)),
        "cuda": ("fake_libcuda.c", "libcuda.so.1", ()),
    }
    directories: dict[str, Path] = {}
    for name, (source, soname, flags) in builds.items():
        directory = directories[name] = built / name
        directory.mkdir()
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                *flags,
                "-o",
                str(directory / soname),
                str(FAKE_LIBS / source),
            ],
            check=True,
        )
    return directories


def probe(
    libraries: dict[str, Path],
    tmp_path: Path,
    *,
    use: tuple[str, ...],
    root: Path | None = None,
    cache_dir: Path | None = None,
    **variables: str,
) -> dict[str, object]:
    # A fake nvidia-smi that only logs: it must not be needed when the libraries answer.
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir(exist_ok=True)
    smi.write_text(f"#!/bin/sh\necho called >> '{tmp_path}/smi.log'\nexit 1\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    if root is None:
        root = tmp_path / "root"  # no kernel module files: the stand-in libraries are the driver
        root.mkdir(exist_ok=True)
    environ = {
        **os.environ,
        "LD_LIBRARY_PATH": os.pathsep.join(str(libraries[name]) for name in use),
        **variables,
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(smi.parent), str(root), str(cache_dir or "")],
        capture_output=True,
        text=True,
        env=environ,
        check=True,
        timeout=60,
    ).stdout
    result: dict[str, object] = json.loads(out)
    result["smi_called"] = (tmp_path / "smi.log").exists()
    return result


H200_ROW = [0, "NVIDIA H200", "9.0", "GPU-2f9c1d7e-8a41-5b3e-9c0d-6e7f8a9b0c1d", 143771]


def test_nvml_and_libcuda_describe_the_h200(libraries: dict[str, Path], tmp_path: Path) -> None:
    result = probe(libraries, tmp_path, use=("nvml", "cuda"))
    assert result["nvml"] == {
        "driver": "580.159.04",
        "cuda": 13000,
        "problems": [],
        "gpus": [H200_ROW],
    }
    assert result["gpus"] == [H200_ROW]
    assert result["notes"] == []
    assert result["smi_called"] is False
    assert result["driver"] == ["580.159.04", "13.0", "NVML+libcuda"]


def test_nvml_version_mismatch_is_a_note_and_nvidia_smi_is_not_tried(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    result = probe(libraries, tmp_path, use=("nvml", "cuda"), FAKE_NVML="mismatch")
    assert result["nvml"] == {"failure": "Driver/library version mismatch"}
    assert "Failed to initialize NVML: Driver/library version mismatch" in result["notes"]  # type: ignore[operator]
    assert result["smi_called"] is False
    assert result["gpus"] == []  # libcuda's GPUs without a driver version are not reported
    assert result["driver"] is None  # no kernel-module file to give the version


def test_nvml_without_devices(libraries: dict[str, Path], tmp_path: Path) -> None:
    result = probe(libraries, tmp_path, use=("nvml", "cuda"), FAKE_NVML="none")
    assert result["nvml"] == {"driver": "580.159.04", "cuda": 13000, "problems": [], "gpus": []}
    assert result["gpus"] == []
    assert result["driver"] == ["580.159.04", "13.0", "NVML+libcuda"]
    assert result["notes"] == [
        "NVIDIA driver 580.159.04 is loaded but no GPU is visible (No devices were found)"
    ]


def test_a_lost_gpu_is_a_note_and_the_others_are_kept(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    result = probe(libraries, tmp_path, use=("nvml", "cuda"), FAKE_NVML="mixed")
    assert result["nvml"] == {
        "driver": "580.159.04",
        "cuda": 13000,
        "problems": ["NVML GPU 1: GPU is lost"],
        "gpus": [H200_ROW],
    }
    assert result["gpus"] == [H200_ROW]
    assert result["notes"] == ["NVML GPU 1: GPU is lost"]


def test_libcuda_devices_from_attributes_75_and_76(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    result = probe(libraries, tmp_path, use=("cuda",))
    assert result["libcuda_version"] == 13000
    assert result["libcuda_gpus"] == [
        ["NVIDIA GeForce RTX 3090", "8.6", "GPU-9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0", 24576]
    ]
    assert result["libcuda_problem"] is None


def test_libcuda_without_devices(libraries: dict[str, Path], tmp_path: Path) -> None:
    result = probe(libraries, tmp_path, use=("cuda",), FAKE_CUDA="nodevice")
    assert result["libcuda_gpus"] == [] and result["libcuda_problem"] is None


def test_an_older_nvml_is_a_failure_that_names_the_missing_call(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    """Without nvmlSystemGetCudaDriverVersion_v2 the first version answers; without the compute
    capability call (drivers before 410) NVML cannot describe the GPUs at all."""
    result = probe(libraries, tmp_path, use=("nvml-old", "cuda"))
    assert result["nvml"] == {"failure": "NVML library lacks nvmlDeviceGetCudaComputeCapability"}
    assert (
        "Failed to initialize NVML: NVML library lacks nvmlDeviceGetCudaComputeCapability"
        in result["notes"]
    )  # type: ignore[operator]


def test_a_cached_answer_needs_neither_nvml_nor_pynvml(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    """The warm path: the GPUs come from the probe cache, and pynvml is not even imported."""
    root = tmp_path / "root"
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/version").write_text("580.159.04\n")
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    (root / "proc/sys/kernel/random/boot_id").write_text("0b1c2d3e-boot\n")
    (root / "proc/driver/nvidia/gpus/0000:4c:00.0").mkdir(parents=True)
    cold = probe(libraries, tmp_path, use=("nvml", "cuda"), root=root, cache_dir=tmp_path / "cache")
    warm = probe(libraries, tmp_path, use=("nvml", "cuda"), root=root, cache_dir=tmp_path / "cache")
    assert cold["gpus"] == warm["gpus"] == [H200_ROW]
    assert cold["driver"] == warm["driver"] == ["580.159.04", "13.0", "sysfs+libcuda"]
    assert (cold["pynvml_imported"], warm["pynvml_imported"]) == (True, False)
    assert warm["notes"] == [] and warm["smi_called"] is False
