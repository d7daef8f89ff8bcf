"""Driver and GPU probes: a fake sysfs/procfs root and fake nvidia-smi programs on PATH.

The fakes are real executables run as real subprocesses; they print recorded outputs. With a
fake root the in-process library probes (NVML, libcuda) are skipped, and PATH holds only the
fakes' directory (a GPU host has the real nvidia-smi in /usr/bin), so these tests describe the
same machine on a GPU host and on this CPU one.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _host import NVIDIA_DRIVER_FILES, NVIDIA_DRIVER_HERE, NVIDIA_DRIVER_REASON

from cuda_resolve.detect import _libcuda, _nvml, nvidia
from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect._run import call_with_timeout, run, run_text
from cuda_resolve.detect.nvidia import probe_nvidia
from cuda_resolve.environment import Gpu
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

RECORDED = Path(__file__).parent / "data" / "recorded"
SYSTEM_PATH = "/usr/bin:/bin"
#: The fakes run these by full path, so their PATH need hold nothing of this machine's.
CAT = shutil.which("cat") or "/bin/cat"
SLEEP = shutil.which("sleep") or "/bin/sleep"


def write_program(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_nvidia_smi(
    bin_dir: Path,
    *,
    banner: str,
    query: str,
    banner_status: int = 0,
    query_status: int = 0,
) -> Path:
    """An nvidia-smi that prints recorded text: the banner plain, the CSV for --query-gpu."""
    log = bin_dir / "nvidia-smi.log"
    return write_program(
        bin_dir / "nvidia-smi",
        f"echo \"$@\" >> '{log}'\n"
        'case "$1" in\n'
        f"  --query-gpu=*) {CAT} '{RECORDED / query}'; exit {query_status};;\n"
        f"  *) {CAT} '{RECORDED / banner}'; exit {banner_status};;\n"
        "esac\n",
    )


def fake_root(
    tmp_path: Path, *, sys_version: str | None = None, proc_banner: str | None = None
) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    if sys_version is not None:
        module = root / "sys" / "module" / "nvidia"
        module.mkdir(parents=True)
        (module / "version").write_text(sys_version + "\n")
    if proc_banner is not None:
        proc = root / "proc" / "driver" / "nvidia"
        proc.mkdir(parents=True)
        shutil.copy(RECORDED / proc_banner, proc / "version")
    return root


def environ_with(bin_dir: Path) -> dict[str, str]:
    """PATH of the fakes alone (*bin_dir* may not exist: then there is no nvidia-smi)."""
    return {"PATH": str(bin_dir)}


def probe(root: Path, environ: dict[str, str], timeout: float = 5.0) -> nvidia.NvidiaFacts:
    return probe_nvidia(root=root, environ=environ, timeout=timeout, cache=ProbeCache(None))


@pytest.fixture
def index_says(monkeypatch: pytest.MonkeyPatch) -> Callable[[str | None], None]:
    """Make the index's driver → CUDA table answer *text* (the shipped index is not under test)."""

    def set_answer(text: str | None) -> None:
        answer = CudaVersion.parse(text) if text else None
        monkeypatch.setattr(nvidia, "cuda_for_driver_version", lambda version: answer)

    return set_answer


def test_h200_through_sysfs_and_nvidia_smi(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(bin_dir, banner="nvidia-smi/h200.txt", query="nvidia-smi/h200-query.csv")
    facts = probe(fake_root(tmp_path, sys_version="580.159.04"), environ_with(bin_dir))
    assert facts.driver is not None
    assert facts.driver.version == DriverVersion.parse("580.159.04")
    assert facts.driver.cuda == CudaVersion(13, 0)
    assert facts.driver.source == "sysfs+nvidia-smi"
    assert facts.gpus == (
        Gpu(
            index=0,
            name="NVIDIA H200",
            compute_capability=ComputeCapability(9, 0),
            uuid="GPU-2f9c1d7e-8a41-5b3e-9c0d-6e7f8a9b0c1d",
            memory_mib=143771,
        ),
    )
    assert facts.notes == ()


def test_mixed_gpus_with_procfs_only(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(bin_dir, banner="nvidia-smi/mixed.txt", query="nvidia-smi/mixed-query.csv")
    facts = probe(
        fake_root(tmp_path, proc_banner="proc/driver-version-535.txt"), environ_with(bin_dir)
    )
    assert facts.driver is not None
    assert facts.driver.version.text == "535.104.05"
    assert facts.driver.cuda == CudaVersion(12, 2)
    assert facts.driver.source == "procfs+nvidia-smi"
    assert [str(g.compute_capability) for g in facts.gpus] == ["7.0", "8.0", "8.6"]


def test_sysfs_wins_over_procfs(tmp_path: Path, index_says: Callable[[str | None], None]) -> None:
    index_says("12.2")
    root = fake_root(
        tmp_path, sys_version="535.104.05", proc_banner="proc/driver-version-580-open.txt"
    )
    facts = probe(root, environ_with(tmp_path / "bin"))
    assert facts.driver is not None
    assert facts.driver.version.text == "535.104.05"
    assert facts.driver.source == "sysfs+index"


def test_driver_without_devices_is_reported_not_raised(
    tmp_path: Path, index_says: Callable[[str | None], None]
) -> None:
    index_says("13.0")
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(
        bin_dir,
        banner="nvidia-smi/no-devices.txt",
        banner_status=6,
        query="nvidia-smi/no-devices.txt",
        query_status=6,
    )
    facts = probe(fake_root(tmp_path, sys_version="580.159.04"), environ_with(bin_dir))
    assert facts.driver is not None and facts.driver.cuda == CudaVersion(13, 0)
    assert facts.gpus == ()
    assert "nvidia-smi: No devices were found" in facts.notes


def test_nvml_version_mismatch_becomes_a_note(
    tmp_path: Path, index_says: Callable[[str | None], None]
) -> None:
    index_says(None)  # and the index cannot help either: no driver can be described
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(
        bin_dir,
        banner="nvidia-smi/nvml-mismatch.txt",
        banner_status=18,
        query="nvidia-smi/nvml-mismatch.txt",
        query_status=18,
    )
    facts = probe(fake_root(tmp_path, sys_version="580.159.04"), environ_with(bin_dir))
    assert facts.driver is None and facts.gpus == ()
    assert "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch" in facts.notes
    assert any(
        "580.159.04 is loaded, but the CUDA version it supports is unknown" in n
        for n in facts.notes
    )


def test_nvml_mismatch_with_index_keeps_the_kernel_driver(
    tmp_path: Path, index_says: Callable[[str | None], None]
) -> None:
    index_says("13.0")
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(
        bin_dir,
        banner="nvidia-smi/nvml-mismatch.txt",
        banner_status=18,
        query="nvidia-smi/nvml-mismatch.txt",
        query_status=18,
    )
    facts = probe(fake_root(tmp_path, sys_version="580.159.04"), environ_with(bin_dir))
    assert facts.driver is not None
    assert (facts.driver.version.text, facts.driver.cuda, facts.driver.source) == (
        "580.159.04",
        CudaVersion(13, 0),
        "sysfs+index",
    )


def test_old_driver_without_cuda_line_or_compute_cap(
    tmp_path: Path, index_says: Callable[[str | None], None]
) -> None:
    index_says("11.4")
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(
        bin_dir,
        banner="nvidia-smi/driver-470-no-cuda-line.txt",
        query="nvidia-smi/old-no-compute-cap.txt",
        query_status=2,
    )
    facts = probe(fake_root(tmp_path), environ_with(bin_dir))
    assert facts.driver is not None
    assert facts.driver.version.text == "470.82.01"
    assert facts.driver.cuda == CudaVersion(11, 4)
    assert facts.driver.source == "nvidia-smi+index"
    assert facts.notes == ('nvidia-smi: Field "compute_cap" is not a valid field to query.',)


def test_nvidia_smi_without_a_driver(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(
        bin_dir,
        banner="nvidia-smi/no-driver.txt",
        banner_status=9,
        query="nvidia-smi/no-driver.txt",
        query_status=9,
    )
    facts = probe(fake_root(tmp_path), environ_with(bin_dir))
    assert facts.driver is None and facts.gpus == ()
    assert facts.notes[0].startswith(
        "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate"
    )


def test_hanging_nvidia_smi_times_out_fast(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    # No exec: the shell waits for sleep, which holds the output pipe: the whole group must die.
    write_program(bin_dir / "nvidia-smi", f"{SLEEP} 30\n")
    started = time.monotonic()
    facts = probe(fake_root(tmp_path), environ_with(bin_dir), timeout=0.5)
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, f"probe took {elapsed:.1f} s despite a 0.5 s timeout"
    assert facts.driver is None and facts.gpus == ()
    assert any("timed out after 0.5 s" in note for note in facts.notes)


def test_no_driver_and_no_nvidia_smi_says_nothing(tmp_path: Path) -> None:
    facts = probe(fake_root(tmp_path), environ_with(tmp_path / "bin"))
    assert facts == nvidia.NvidiaFacts(None, (), ())


def test_nvidia_smi_is_not_run_when_nothing_is_missing(
    tmp_path: Path, index_says: Callable[[str | None], None]
) -> None:
    """With a fake root only nvidia-smi can list GPUs, so it runs; its log proves each call."""
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(bin_dir, banner="nvidia-smi/h200.txt", query="nvidia-smi/h200-query.csv")
    probe(fake_root(tmp_path, sys_version="580.159.04"), environ_with(bin_dir))
    calls = sorted((bin_dir / "nvidia-smi.log").read_text().splitlines())
    assert calls == [
        "",
        "--query-gpu=index,name,uuid,compute_cap,memory.total --format=csv,noheader,nounits",
    ]


def test_without_a_driver_neither_nvml_nor_cuinit_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No kernel module and no libcuda: nothing to ask NVML about (and pynvml's import is not
    free)."""
    asked: list[str] = []
    monkeypatch.setattr(_libcuda, "driver_cuda_version", lambda: None)
    monkeypatch.setattr(_libcuda, "query_devices", lambda: asked.append("cuInit"))
    monkeypatch.setattr(_nvml, "query_nvml", lambda: asked.append("NVML"))
    facts = probe_nvidia(
        root=fake_root(tmp_path),
        environ=environ_with(tmp_path / "bin"),
        timeout=5.0,
        cache=ProbeCache(None),
        libraries=True,
    )
    assert asked == []
    assert facts == nvidia.NvidiaFacts(None, (), ())


# -- this machine, for real ----------------------------------------------------------------------


@pytest.mark.skipif(NVIDIA_DRIVER_HERE, reason=NVIDIA_DRIVER_REASON)
def test_real_machine_without_driver_every_probe_is_none() -> None:
    assert _nvml.query_nvml() is None
    assert _libcuda.driver_cuda_version() is None
    assert _libcuda.query_devices() is None
    facts = probe_nvidia(
        root=Path("/"), environ={"PATH": SYSTEM_PATH}, timeout=5.0, cache=ProbeCache(None)
    )
    assert facts.driver is None and facts.gpus == ()


@pytest.mark.gpu
def test_real_gpu_matches_nvidia_smi(tmp_path: Path) -> None:
    if not NVIDIA_DRIVER_FILES or shutil.which("nvidia-smi") is None:
        pytest.skip("needs an NVIDIA driver and nvidia-smi")
    cache = ProbeCache(tmp_path)
    facts = probe_nvidia(root=Path("/"), environ=dict(os.environ), timeout=10.0, cache=cache)
    cache.save()
    assert facts.driver is not None, facts.notes
    assert facts.driver.source.split("+")[-1] in ("libcuda", "NVML", "NVML (cached)")
    smi = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=index,name,compute_cap,driver_version",
            "--format=csv,noheader",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [
        [field.strip() for field in line.split(",")] for line in smi.splitlines() if line.strip()
    ]
    assert [(g.index, g.name, str(g.compute_capability)) for g in facts.gpus] == [
        (int(r[0]), r[1], r[2]) for r in rows
    ]
    assert facts.driver.version.text == rows[0][3]
    # A second process is answered from the cache file, with the same facts.
    again = probe_nvidia(
        root=Path("/"), environ=dict(os.environ), timeout=10.0, cache=ProbeCache(tmp_path)
    )
    assert (
        again.gpus == facts.gpus
        and again.driver is not None
        and again.driver.cuda == facts.driver.cuda
    )
    assert again.driver.source == facts.driver.source


# -- the GPU cache -----------------------------------------------------------------------------


def test_gpu_cache_round_trip_keyed_by_boot_driver_and_pci(tmp_path: Path) -> None:
    root = fake_root(tmp_path, sys_version="580.159.04")
    (root / "proc" / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "random" / "boot_id").write_text("0b1c2d3e-boot\n")
    (root / "proc" / "driver" / "nvidia" / "gpus" / "0000:4c:00.0").mkdir(parents=True)
    version = DriverVersion.parse("580.159.04")
    key = nvidia._gpu_cache_key(root, version)
    assert key == "0b1c2d3e-boot|580.159.04|0000:4c:00.0"
    assert nvidia._gpu_cache_key(root, None) is None
    assert nvidia._gpu_cache_key(root, DriverVersion.parse("535.104.05")) != key

    cache = ProbeCache(tmp_path / "cache")
    h200 = Gpu(
        index=0,
        name="NVIDIA H200",
        compute_capability=ComputeCapability(9, 0),
        uuid="GPU-1",
        memory_mib=143771,
    )
    found = nvidia._Findings(
        version=version, cuda=CudaVersion(13, 0), gpus=(h200,), gpus_source="NVML"
    )
    nvidia._remember(found, cache, key)
    cache.save()

    reread = nvidia._Findings(version=version)
    assert nvidia._from_cache(reread, ProbeCache(tmp_path / "cache"), key)
    assert reread.gpus == (h200,) and reread.cuda == CudaVersion(13, 0)
    assert not nvidia._from_cache(
        nvidia._Findings(), ProbeCache(tmp_path / "cache"), "another boot"
    )


def test_gpu_cache_ignores_answers_that_depend_on_this_process(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path)
    gpu = Gpu(index=0, name="x", compute_capability=ComputeCapability(8, 6))
    nvidia._remember(
        nvidia._Findings(cuda=CudaVersion(12, 2), gpus=(gpu,), gpus_source="libcuda"), cache, "k"
    )
    nvidia._remember(
        nvidia._Findings(
            cuda=CudaVersion(12, 2), gpus=(gpu,), gpus_source="NVML", notes=["GPU 1 lost"]
        ),
        cache,
        "k",
    )
    assert cache.get("nvidia", "k") is None


# -- the runner ------------------------------------------------------------------------------------


def test_run_reports_a_missing_program_as_none(tmp_path: Path) -> None:
    assert run([str(tmp_path / "absent")], timeout=1.0) is None
    assert run_text([str(tmp_path / "absent")], timeout=1.0) is None


def test_run_keeps_output_and_status(tmp_path: Path) -> None:
    program = write_program(tmp_path / "speak", "echo out; echo err >&2; exit 3\n")
    ran = run([str(program)], timeout=5.0, environ={"PATH": SYSTEM_PATH})
    assert ran is not None
    assert (ran.stdout, ran.stderr, ran.returncode, ran.ok, ran.first_line) == (
        "out\n",
        "err\n",
        3,
        False,
        "out",
    )
    assert run_text([str(program)], timeout=5.0, environ={"PATH": SYSTEM_PATH}) is None


def test_run_sets_a_c_locale_for_parsers(tmp_path: Path) -> None:
    program = write_program(tmp_path / "locale", 'echo "$LC_ALL"\n')
    assert (
        run_text(
            [str(program)], timeout=5.0, environ={"PATH": SYSTEM_PATH, "LC_ALL": "de_DE.UTF-8"}
        )
        == "C\n"
    )


def test_call_with_timeout_abandons_a_stalled_call() -> None:
    def stalled() -> int:
        time.sleep(5)
        return 1

    started = time.monotonic()
    assert call_with_timeout(stalled, timeout=0.2) is None
    assert time.monotonic() - started < 2.0
    assert call_with_timeout(lambda: 42, timeout=5.0) == 42
