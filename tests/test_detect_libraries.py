"""The ctypes bindings to NVML and libcuda, against stand-in libraries built from C here.

``tests/data/recorded/fake-libs/*.c`` implement the entry points with the signatures of
``nvml.h`` and ``cuda.h`` and answer as an H200 machine (or a broken one) would. They are
compiled with the system C compiler and loaded through ``LD_LIBRARY_PATH`` in a subprocess
(the dynamic loader reads it only at start-up), so the bindings' argument and result types
are exercised for real on a machine without a GPU.
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

# probe_nvidia with root "/" reads the kernel module's version files before the libraries;
# a GPU host has them, so they are read from the stand-in machine's root (argv[2]) instead.
PROBE = """
import json, sys
from pathlib import Path
from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect import _libcuda, _nvml, driver, nvidia
from cuda_resolve.detect.nvidia import probe_nvidia
nvidia.driver_version_from_files = lambda root: driver.driver_version_from_files(Path(sys.argv[2]))
nvml = _nvml.query_nvml()
if isinstance(nvml, _nvml.NvmlReport):
    raw = {"driver": nvml.driver_version, "cuda": nvml.cuda_driver_version, "problems": list(nvml.problems),
           "gpus": [[g.index, g.name, str(g.compute_capability), g.uuid, g.memory_mib] for g in nvml.gpus]}
else:
    raw = {"failure": nvml.message if nvml is not None else None}
facts = probe_nvidia(root=Path("/"), environ={"PATH": sys.argv[1]}, timeout=5.0, cache=ProbeCache(None))
devices = _libcuda.query_devices()
print(json.dumps({
    "nvml": raw,
    "driver": [str(facts.driver.version), str(facts.driver.cuda), facts.driver.source] if facts.driver else None,
    "gpus": [[g.index, g.name, str(g.compute_capability), g.uuid, g.memory_mib] for g in facts.gpus],
    "notes": list(facts.notes),
    "libcuda_version": _libcuda.driver_cuda_version(),
    "libcuda_gpus": None if devices is None else [[g.name, str(g.compute_capability), g.uuid, g.memory_mib] for g in devices.gpus],
    "libcuda_problem": None if devices is None else devices.problem,
}))
"""


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    built = tmp_path_factory.mktemp("fake-libs")
    directories = {"nvml": built / "nvml", "cuda": built / "cuda"}
    for (source, soname), directory in zip(
        (("fake_nvml.c", "libnvidia-ml.so.1"), ("fake_libcuda.c", "libcuda.so.1")), directories.values(), strict=True
    ):
        directory.mkdir()
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-o", str(directory / soname), str(FAKE_LIBS / source)], check=True
        )
    return directories


def probe(libraries: dict[str, Path], tmp_path: Path, *, use: tuple[str, ...], **variables: str) -> dict[str, object]:
    # A fake nvidia-smi that only logs: it must not be needed when the libraries answer.
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir(exist_ok=True)
    smi.write_text(f"#!/bin/sh\necho called >> '{tmp_path}/smi.log'\nexit 1\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    root = tmp_path / "root"  # no kernel module files: the stand-in libraries are the driver
    root.mkdir(exist_ok=True)
    environ = {
        **os.environ,
        "LD_LIBRARY_PATH": os.pathsep.join(str(libraries[name]) for name in use),
        **variables,
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(smi.parent), str(root)],
        capture_output=True, text=True, env=environ, check=True, timeout=60,
    ).stdout
    result: dict[str, object] = json.loads(out)
    result["smi_called"] = (tmp_path / "smi.log").exists()
    return result


H200_ROW = [0, "NVIDIA H200", "9.0", "GPU-2f9c1d7e-8a41-5b3e-9c0d-6e7f8a9b0c1d", 143771]


def test_nvml_and_libcuda_describe_the_h200(libraries: dict[str, Path], tmp_path: Path) -> None:
    result = probe(libraries, tmp_path, use=("nvml", "cuda"))
    assert result["nvml"] == {"driver": "580.159.04", "cuda": 13000, "problems": [], "gpus": [H200_ROW]}
    assert result["gpus"] == [H200_ROW]
    assert result["notes"] == []
    assert result["smi_called"] is False
    assert result["driver"] == ["580.159.04", "13.0", "NVML+libcuda"]


def test_nvml_version_mismatch_is_a_note_and_nvidia_smi_is_not_tried(libraries: dict[str, Path], tmp_path: Path) -> None:
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
    assert result["notes"] == ["NVIDIA driver 580.159.04 is loaded but no GPU is visible (No devices were found)"]


def test_a_lost_gpu_is_a_note_and_the_others_are_kept(libraries: dict[str, Path], tmp_path: Path) -> None:
    result = probe(libraries, tmp_path, use=("nvml", "cuda"), FAKE_NVML="mixed")
    assert result["nvml"] == {"driver": "580.159.04", "cuda": 13000, "problems": ["NVML GPU 1: GPU is lost"], "gpus": [H200_ROW]}
    assert result["gpus"] == [H200_ROW]
    assert result["notes"] == ["NVML GPU 1: GPU is lost"]


def test_libcuda_devices_from_attributes_75_and_76(libraries: dict[str, Path], tmp_path: Path) -> None:
    result = probe(libraries, tmp_path, use=("cuda",))
    assert result["libcuda_version"] == 13000
    assert result["libcuda_gpus"] == [["NVIDIA GeForce RTX 3090", "8.6", "GPU-9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0", 24576]]
    assert result["libcuda_problem"] is None


def test_libcuda_without_devices(libraries: dict[str, Path], tmp_path: Path) -> None:
    result = probe(libraries, tmp_path, use=("cuda",), FAKE_CUDA="nodevice")
    assert result["libcuda_gpus"] == [] and result["libcuda_problem"] is None
