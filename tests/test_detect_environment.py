"""detect_environment end to end: this CPU machine for real, a faked GPU machine, the CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _host import NVIDIA_DRIVER_HERE, NVIDIA_DRIVER_REASON

from cuda_resolve.cli import main
from cuda_resolve.detect import detect_environment
from cuda_resolve.detect.host import normalize_arch, normalize_os, scheduler_facts
from cuda_resolve.profile import dump_profile, parse_profile
from cuda_resolve.versions import ComputeCapability, CudaVersion

RECORDED = Path(__file__).parent / "data" / "recorded"
#: The fakes run cat by its full path: PATH holds the fakes alone, none of this machine's programs.
CAT = shutil.which("cat") or "/bin/cat"
REAL_CUDA = Path("/usr/local/cuda-13.0")


def program(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.skipif(NVIDIA_DRIVER_HERE, reason=NVIDIA_DRIVER_REASON)
def test_this_cpu_machine_for_real(tmp_path: Path) -> None:
    env = detect_environment(environ=dict(os.environ), cache_dir=tmp_path)
    assert env.source == "detected"
    assert env.driver is None and env.gpus == () and not env.has_gpu
    assert env.python.executable == sys.executable
    assert env.python.version == "{}.{}.{}".format(*sys.version_info[:3])
    assert env.machine.os == "linux" and env.machine.arch in ("x86_64", "aarch64")
    assert env.machine.glibc is not None
    assert not any("NVML" in note or "nvidia-smi" in note for note in env.notes)


def fake_h200_with_wrapped_nvcc(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "root"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(
        (RECORDED / "proc/driver-version-580-open.txt").read_text()
    )
    bin_dir = tmp_path / "bin"
    program(
        bin_dir / "nvidia-smi",
        'case "$1" in\n'
        f"  --query-gpu=*) {CAT} '{RECORDED / 'nvidia-smi/h200-query.csv'}';;\n"
        f"  *) {CAT} '{RECORDED / 'nvidia-smi/h200.txt'}';;\nesac\n",
    )
    if (REAL_CUDA / "bin/nvcc").exists():
        program(bin_dir / "nvcc", f'exec {REAL_CUDA}/bin/nvcc "$@"\n')
    environ = {
        "PATH": str(bin_dir),
        "SLURM_JOB_ID": "4242",
        "SLURM_NTASKS": "1",
        "SLURM_CPUS_PER_TASK": "16",
        "CUDA_VISIBLE_DEVICES": "0",
        "LD_LIBRARY_PATH": "/opt/lib",
        "TORCH_CUDA_ARCH_LIST": "9.0",
    }
    return root, environ


def test_a_faked_h200_node_in_a_slurm_job(tmp_path: Path) -> None:
    root, environ = fake_h200_with_wrapped_nvcc(tmp_path)
    env = detect_environment(root=root, environ=environ, cache_dir=tmp_path / "cache")
    assert env.driver is not None
    assert (env.driver.version.text, env.driver.cuda, env.driver.source) == (
        "580.159.04",
        CudaVersion(13, 0),
        "procfs+nvidia-smi",
    )
    assert [(g.name, g.compute_capability) for g in env.gpus] == [
        ("NVIDIA H200", ComputeCapability(9, 0))
    ]
    assert env.scheduler.slurm_job_id == "4242" and env.scheduler.in_slurm_job
    assert env.scheduler.slurm_variables == ("SLURM_CPUS_PER_TASK", "SLURM_JOB_ID", "SLURM_NTASKS")
    assert env.variables.cuda_home is None
    assert env.variables.cuda_visible_devices == "0"
    assert env.variables.ld_library_path == "/opt/lib"
    assert env.variables.torch_cuda_arch_list == "9.0"
    if (REAL_CUDA / "bin/nvcc").exists():
        (toolkit,) = env.toolkits
        assert toolkit.root == str(REAL_CUDA) and toolkit.nvcc_on_path_wrapper == str(
            tmp_path / "bin/nvcc"
        )
    assert env.notes == ()


def test_detected_environment_round_trips_through_a_profile(tmp_path: Path) -> None:
    root, environ = fake_h200_with_wrapped_nvcc(tmp_path)
    env = detect_environment(root=root, environ=environ, cache_dir=tmp_path / "cache")
    again = parse_profile(dump_profile(env), origin="saved.toml")
    assert dataclasses.replace(again, source="detected") == env


def test_scheduler_outside_slurm() -> None:
    scheduler = scheduler_facts({"PATH": "/bin", "SLURMISH": "x"})
    assert (
        scheduler.slurm_job_id is None
        and scheduler.slurm_variables == ()
        and not scheduler.in_slurm_job
    )


@pytest.mark.parametrize(
    ("machine", "arch"),
    [
        ("AMD64", "x86_64"),
        ("x86_64", "x86_64"),
        ("arm64", "aarch64"),
        ("aarch64", "aarch64"),
        ("ppc64le", "ppc64le"),
    ],
)
def test_arch_normalisation(machine: str, arch: str) -> None:
    assert normalize_arch(machine) == arch


@pytest.mark.parametrize(
    ("platform", "name"),
    [("linux", "linux"), ("linux2", "linux"), ("win32", "windows"), ("darwin", "darwin")],
)
def test_os_normalisation(platform: str, name: str) -> None:
    assert normalize_os(platform) == name


# -- through the command line --------------------------------------------------------------------


def test_cli_detect_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "8.6")
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "535.104.05")
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.2")
    assert main(["detect", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["python"]["version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert data["driver"] == {
        "version": "535.104.05",
        "cuda": "12.2",
        "source": "CUDA_RESOLVE_DRIVER",
    }
    assert [gpu["compute_capability"] for gpu in data["gpu"]] == ["8.6"]


@pytest.mark.parametrize(
    ("arguments", "variables", "first_line"),
    [
        (
            ["detect", "--python", "{tmp}/notes.txt"],
            {},
            "error: --python {tmp}/notes.txt: is not executable",
        ),
        (["detect", "--python", "{tmp}"], {}, "error: --python {tmp}: is a directory"),
        (["detect"], {"CONDA_OVERRIDE_CUDA": "twelve"}, "error: CONDA_OVERRIDE_CUDA='twelve'"),
    ],
)
def test_cli_bad_input_is_one_error_line_and_exit_2(
    tmp_path: Path, arguments: list[str], variables: dict[str, str], first_line: str
) -> None:
    (tmp_path / "notes.txt").write_text("not a program\n")
    arguments = [argument.format(tmp=tmp_path) for argument in arguments]
    first_line = first_line.format(tmp=tmp_path)
    completed = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path), **variables},
        timeout=60,
    )
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.startswith(first_line), completed.stderr
    assert "Traceback" not in completed.stderr
    assert "hint:" in completed.stderr
