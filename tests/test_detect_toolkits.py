"""Toolkit discovery: the real nvcc on this machine, wrappers and links, and fake toolkits.

Fake toolkits are directories with an ``nvcc`` script that prints recorded output and logs its
arguments, so the tests can tell which nvcc ran and how often. PATH holds only the directories
a test names: a GPU host may have an ``nvcc`` in /usr/bin (Debian's nvidia-cuda-toolkit).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect.nvcc import resolve_nvcc, toolkit_root
from cuda_resolve.detect.toolkits import HEADERS, find_toolkits
from cuda_resolve.environment import Toolkit
from cuda_resolve.versions import ComputeCapability, CudaVersion

RECORDED = Path(__file__).parent / "data" / "recorded"
#: A PATH with no program on it; the fakes run these by full path.
NO_PROGRAMS = ""
CAT = shutil.which("cat") or "/bin/cat"
SLEEP = shutil.which("sleep") or "/bin/sleep"
REAL_CUDA = Path("/usr/local/cuda-13.0")
needs_real_nvcc = pytest.mark.skipif(
    not (REAL_CUDA / "bin" / "nvcc").exists(), reason="needs nvcc 13.0 at /usr/local/cuda-13.0"
)


def write_program(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_nvcc(
    nvcc: Path, version: str, *, headers: tuple[str, ...] = (), include: str = "include"
) -> Path:
    """``<root>/bin/nvcc`` printing recorded ``--version``/``--list-gpu-arch`` for *version*."""
    arch_file = RECORDED / f"nvcc/list-gpu-arch-{version}.txt"
    write_program(
        nvcc,
        f"echo \"$1\" >> '{nvcc}.log'\n"
        'case "$1" in\n'
        f"  --version) {CAT} '{RECORDED / f'nvcc/version-{version}.txt'}';;\n"
        f"  --list-gpu-arch) {CAT} '{arch_file}';;\n"
        "  *) exit 1;;\n"
        "esac\n",
    )
    root = toolkit_root(str(nvcc))
    for header in headers:
        target = Path(root) / include / header
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("/* header */\n")
    return nvcc


def calls(nvcc: Path) -> list[str]:
    log = Path(f"{nvcc}.log")
    return log.read_text().splitlines() if log.exists() else []


def toolkits(
    tmp_path: Path,
    environ: dict[str, str],
    *,
    root: Path | None = None,
    site_packages: tuple[str, ...] = (),
    timeout: float = 5.0,
    cache: ProbeCache | None = None,
) -> tuple[tuple[Toolkit, ...], tuple[str, ...]]:
    if root is None:
        root = tmp_path / "empty-root"
        root.mkdir(exist_ok=True)
    return find_toolkits(
        environ=environ,
        root=root,
        site_packages=site_packages,
        timeout=timeout,
        cache=cache if cache is not None else ProbeCache(None),
    )


# -- the real nvcc -------------------------------------------------------------------------------


@needs_real_nvcc
def test_real_nvcc_13_on_path(tmp_path: Path) -> None:
    found, notes = toolkits(tmp_path, {"PATH": str(REAL_CUDA / "bin")})
    assert notes == ()
    (toolkit,) = found
    assert toolkit.version == CudaVersion(13, 0)
    assert toolkit.release == "13.0.88"
    assert toolkit.root == str(REAL_CUDA)
    assert toolkit.nvcc == str(REAL_CUDA / "bin" / "nvcc")
    assert toolkit.found_via == "PATH"
    assert toolkit.nvcc_on_path_wrapper is None  # dirname(dirname(nvcc)) is the real root
    assert toolkit.gpu_archs[0] == ComputeCapability(7, 5)
    assert ComputeCapability(9, 0) in toolkit.gpu_archs
    assert ComputeCapability(7, 0) not in toolkit.gpu_archs  # CUDA 13 dropped Volta
    assert "cuda_runtime_api.h" not in toolkit.missing_headers


@needs_real_nvcc
def test_wrapper_script_on_path_leads_to_the_real_toolkit(tmp_path: Path) -> None:
    wrapper = write_program(tmp_path / "bin" / "nvcc", f'exec {REAL_CUDA}/bin/nvcc "$@"\n')
    found, _ = toolkits(tmp_path, {"PATH": str(tmp_path / "bin")})
    (toolkit,) = found
    assert toolkit.root == str(REAL_CUDA)
    assert toolkit.nvcc == str(REAL_CUDA / "bin" / "nvcc")
    assert toolkit.nvcc_on_path_wrapper == str(wrapper)
    assert toolkit.found_via == "PATH"
    assert toolkit.version == CudaVersion(13, 0)


@needs_real_nvcc
def test_wrapper_built_from_variables_and_symlinked(tmp_path: Path) -> None:
    script = write_program(
        tmp_path / "tools" / "nvcc-wrapper",
        '# picks the toolkit\nexec "${MY_CUDA}/bin/nvcc" "$@"\n',
    )
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(script)
    environ = {"PATH": str(tmp_path / "bin"), "MY_CUDA": str(REAL_CUDA)}
    assert resolve_nvcc(str(tmp_path / "bin" / "nvcc"), environ) == str(REAL_CUDA / "bin" / "nvcc")
    (toolkit,) = toolkits(tmp_path, environ)[0]
    assert toolkit.root == str(REAL_CUDA) and toolkit.nvcc_on_path_wrapper == str(
        tmp_path / "bin" / "nvcc"
    )


@needs_real_nvcc
def test_symlinked_nvcc_is_a_wrapper_for_torch(tmp_path: Path) -> None:
    """torch takes dirname(dirname(which nvcc)) without resolving links: /usr/bin/nvcc → /usr."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(REAL_CUDA / "bin" / "nvcc")
    (toolkit,) = toolkits(tmp_path, {"PATH": str(tmp_path / "bin")})[0]
    assert toolkit.root == str(REAL_CUDA)
    assert toolkit.nvcc_on_path_wrapper == str(tmp_path / "bin" / "nvcc")


@needs_real_nvcc
def test_cuda_home_and_a_wrapper_to_the_same_toolkit_are_one_entry(tmp_path: Path) -> None:
    wrapper = write_program(tmp_path / "bin" / "nvcc", f'exec {REAL_CUDA}/bin/nvcc "$@"\n')
    environ = {"PATH": str(tmp_path / "bin"), "CUDA_HOME": str(REAL_CUDA)}
    (toolkit,) = toolkits(tmp_path, environ)[0]
    assert toolkit.found_via == "CUDA_HOME"
    assert toolkit.nvcc_on_path_wrapper == str(wrapper)


# -- fake toolkits -------------------------------------------------------------------------------


def test_system_toolkits_newest_first_and_links_deduplicated(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fake_nvcc(root / "usr/local/cuda-12.4/bin/nvcc", "12.4", headers=HEADERS)
    fake_nvcc(
        root / "usr/local/cuda-11.8/bin/nvcc",
        "11.8",
        headers=("cuda_runtime_api.h",),
        include="targets/x86_64-linux/include",
    )
    (root / "usr/local/cuda").symlink_to(root / "usr/local/cuda-12.4")
    found, notes = toolkits(tmp_path, {"PATH": NO_PROGRAMS}, root=root)
    assert notes == ()
    assert [(t.found_via, str(t.version)) for t in found] == [
        ("/usr/local/cuda", "12.4"),
        ("/usr/local/cuda-11.8", "11.8"),
    ]
    newest, oldest = found
    assert newest.root == str(root / "usr/local/cuda-12.4")
    assert newest.missing_headers == ()
    assert newest.release == "12.4.131"
    assert ComputeCapability(9, 0, "a") in newest.gpu_archs
    assert oldest.missing_headers == ("cusparse.h", "cublas_v2.h", "cusolverDn.h")
    assert oldest.gpu_archs[0] == ComputeCapability(3, 5)


def test_cuda_home_comes_first_even_when_path_has_another(tmp_path: Path) -> None:
    old = fake_nvcc(tmp_path / "cuda-11.8/bin/nvcc", "11.8")
    new = fake_nvcc(tmp_path / "cuda-12.4/bin/nvcc", "12.4")
    environ = {"PATH": str(new.parent), "CUDA_HOME": str(old.parent.parent)}
    found, _ = toolkits(tmp_path, environ)
    assert [(t.found_via, str(t.version)) for t in found] == [
        ("CUDA_HOME", "11.8"),
        ("PATH", "12.4"),
    ]
    assert found[1].nvcc_on_path_wrapper is None


def test_cuda_home_that_is_not_a_toolkit_is_a_note(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-cuda"
    found, notes = toolkits(tmp_path, {"PATH": NO_PROGRAMS, "CUDA_HOME": str(missing)})
    assert found == ()
    assert notes == (
        f"CUDA_HOME={missing} is not a CUDA toolkit (no bin/nvcc, or not a directory)",
    )


def test_toolkit_without_nvcc_is_read_from_version_json(tmp_path: Path) -> None:
    home = tmp_path / "cuda-runtime-only"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda_runtime_api.h").write_text("")
    (home / "version.json").write_text(
        json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.4.1"}})
    )
    (toolkit,) = toolkits(tmp_path, {"PATH": NO_PROGRAMS, "CUDA_PATH": str(home)})[0]
    assert (toolkit.version, toolkit.release, toolkit.nvcc, toolkit.gpu_archs) == (
        CudaVersion(12, 4),
        "12.4.1",
        None,
        (),
    )
    assert toolkit.found_via == "CUDA_PATH"


def test_broken_nvcc_is_a_note_not_a_crash(tmp_path: Path) -> None:
    broken = write_program(
        tmp_path / "cuda/bin/nvcc", "echo 'error while loading shared libraries' >&2; exit 127\n"
    )
    found, notes = toolkits(tmp_path, {"PATH": str(broken.parent)})
    assert found == ()
    assert notes == (f"toolkit via PATH: nvcc at {broken} did not report a version",)


def test_hanging_nvcc_times_out(tmp_path: Path) -> None:
    hanging = write_program(tmp_path / "cuda/bin/nvcc", f"{SLEEP} 30\n")
    started = time.monotonic()
    found, notes = toolkits(tmp_path, {"PATH": str(hanging.parent)}, timeout=0.5)
    assert time.monotonic() - started < 3.0
    assert found == () and len(notes) == 1


def test_conda_prefix_cuda_nvcc_in_targets_layout(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "kaolin"
    fake_nvcc(prefix / "targets/x86_64-linux/bin/nvcc", "12.4")
    (toolkit,) = toolkits(tmp_path, {"PATH": NO_PROGRAMS, "CONDA_PREFIX": str(prefix)})[0]
    assert toolkit.found_via == "CONDA_PREFIX"
    assert toolkit.root == str(prefix)  # CUDA_HOME for conda's cuda-nvcc is the prefix itself
    assert toolkit.missing_headers == HEADERS


def test_pip_nvcc_wheel_in_site_packages(tmp_path: Path) -> None:
    site = tmp_path / "lib/python3.12/site-packages"
    fake_nvcc(site / "nvidia/cu13/bin/nvcc", "13.0", headers=("cuda_runtime_api.h",))
    (toolkit,) = toolkits(tmp_path, {"PATH": NO_PROGRAMS}, site_packages=(str(site),))[0]
    assert toolkit.found_via == "nvidia-cuda-nvcc wheel"
    assert toolkit.root == str(site / "nvidia/cu13")
    assert toolkit.version == CudaVersion(13, 0)
    assert toolkit.missing_headers == ("cusparse.h", "cublas_v2.h", "cusolverDn.h")


def test_nvcc_answers_are_cached_per_binary(tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path / "cuda/bin/nvcc", "12.4")
    environ = {"PATH": str(nvcc.parent)}
    first = ProbeCache(tmp_path / "cache")
    toolkits(tmp_path, environ, cache=first)
    first.save()
    assert calls(nvcc) == ["--version", "--list-gpu-arch"]
    second, _ = toolkits(tmp_path, environ, cache=ProbeCache(tmp_path / "cache"))
    assert calls(nvcc) == ["--version", "--list-gpu-arch"]  # a new process reads the file
    assert second[0].release == "12.4.131"
    # Rebuilding the binary (new mtime) invalidates it.
    stamp = nvcc.stat().st_mtime_ns + 5_000_000_000
    os.utime(nvcc, ns=(stamp, stamp))
    toolkits(tmp_path, environ, cache=ProbeCache(tmp_path / "cache"))
    assert calls(nvcc) == ["--version", "--list-gpu-arch"] * 2


def test_a_corrupt_cache_file_is_ignored(tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path / "cuda/bin/nvcc", "11.8")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "probes.json").write_text("{not json")
    (toolkit,) = toolkits(
        tmp_path, {"PATH": str(nvcc.parent)}, cache=ProbeCache(tmp_path / "cache")
    )[0]
    assert toolkit.version == CudaVersion(11, 8)


def test_wrapper_resolution_prefers_the_exec_line(tmp_path: Path) -> None:
    decoy = fake_nvcc(tmp_path / "decoy/bin/nvcc", "11.8")
    real = fake_nvcc(tmp_path / "real/bin/nvcc", "12.4")
    wrapper = write_program(
        tmp_path / "bin" / "nvcc",
        f"# was: {decoy}\n[ -x {decoy} ] && echo 'old toolkit still installed' >&2\nexec "
        f'{real} "$@"\n',
    )
    assert resolve_nvcc(str(wrapper), {}) == str(real)


def test_wrapper_home_is_the_given_environments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``~`` in a wrapper is the HOME the wrapper will run with, not this process's."""
    real = fake_nvcc(tmp_path / "home/cuda-12.4/bin/nvcc", "12.4")
    wrapper = write_program(tmp_path / "bin" / "nvcc", 'exec ~/cuda-12.4/bin/nvcc "$@"\n')
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    assert resolve_nvcc(str(wrapper), {"HOME": str(tmp_path / "home")}) == str(real)


def test_wrapper_with_an_unknown_variable_is_left_alone(tmp_path: Path) -> None:
    wrapper = write_program(tmp_path / "bin" / "nvcc", 'exec "$UNSET_CUDA/bin/nvcc" "$@"\n')
    assert resolve_nvcc(str(wrapper), {}) == str(wrapper)
