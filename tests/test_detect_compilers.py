"""Host compilers through fake programs on PATH, and the real gcc on this machine."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect.compilers import find_compilers
from cuda_resolve.environment import Compiler

RECORDED = Path(__file__).parent / "data" / "recorded"
#: The fakes run cat by its full path, so their PATH need hold nothing of this machine's.
CAT = shutil.which("cat") or "/bin/cat"


def fake_compiler(path: Path, recorded: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'#!/bin/sh\necho "$@" >> \'{path}.log\'\n[ "$1" = --version ] && exec {CAT} '
        f"'{RECORDED / recorded}'\nexit 1\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def compilers(environ: dict[str, str], cache: ProbeCache | None = None) -> Compiler:
    return find_compilers(environ=environ, timeout=5.0, cache=cache or ProbeCache(None))


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """gcc 12 and g++ 12 as the defaults, gcc-8/g++-8 and clang 17 beside them."""
    directory = tmp_path / "bin"
    fake_compiler(directory / "gcc", "compilers/gcc-12-debian.txt")
    fake_compiler(directory / "g++", "compilers/gcc-12-debian.txt")
    fake_compiler(directory / "gcc-8", "compilers/gcc-8-rhel.txt")
    fake_compiler(directory / "g++-8", "compilers/gcc-8-rhel.txt")
    fake_compiler(directory / "gcc-12", "compilers/gcc-12-debian.txt")
    fake_compiler(directory / "gcc-ar-12", "compilers/gcc-12-debian.txt")  # not a compiler
    fake_compiler(directory / "clang", "compilers/clang-17-ubuntu.txt")
    return directory


def path_of(directory: Path) -> dict[str, str]:
    # Only the fakes: /bin is /usr/bin on most systems now, where gcc-13, g++-12 ... live.
    return {"PATH": str(directory)}


def test_versions_and_other_gcc(bin_dir: Path) -> None:
    found = compilers(path_of(bin_dir))
    assert (found.gcc, found.gxx, found.clang) == ("12.2.0", "12.2.0", "17.0.6")
    assert found.other_gcc == ("8.5.0",)  # gcc-12 is the default gcc, gcc-ar-12 is no compiler
    assert found.nvcc_host == str(bin_dir / "g++")
    assert found.nvcc_host_version == "12.2.0"


@pytest.mark.parametrize(
    ("variables", "host", "version"),
    [
        ({"CC": "gcc-8"}, "gcc-8", "8.5.0"),  # torch passes CC to nvcc as -ccbin
        ({"NVCC_CCBIN": "g++-8"}, "g++-8", "8.5.0"),
        ({"CUDAHOSTCXX": "clang"}, "clang", "17.0.6"),
        ({"CC": "gcc-8", "NVCC_CCBIN": "clang"}, "gcc-8", "8.5.0"),
        ({"NVCC_CCBIN": "g++-8", "CUDAHOSTCXX": "clang"}, "g++-8", "8.5.0"),
        ({"CC": "  "}, "g++", "12.2.0"),  # blank is unset
    ],
)
def test_host_compiler_precedence(
    bin_dir: Path, variables: dict[str, str], host: str, version: str
) -> None:
    found = compilers({**path_of(bin_dir), **variables})
    assert found.nvcc_host == str(bin_dir / host)
    assert found.nvcc_host_version == version


def test_nvcc_ccbin_may_name_a_directory(bin_dir: Path) -> None:
    found = compilers({**path_of(bin_dir), "NVCC_CCBIN": str(bin_dir)})
    assert found.nvcc_host == str(bin_dir / "g++")


def test_host_compiler_that_does_not_exist_is_kept_as_named(tmp_path: Path) -> None:
    found = compilers({"PATH": str(tmp_path), "CC": "/opt/missing/gcc-13"})
    assert found.nvcc_host == "/opt/missing/gcc-13"
    assert found.nvcc_host_version is None


def test_no_compilers_at_all(tmp_path: Path) -> None:
    assert compilers({"PATH": str(tmp_path)}) == Compiler()


def test_clang_named_gcc_is_not_reported_as_gcc(tmp_path: Path) -> None:
    fake_compiler(tmp_path / "gcc", "compilers/apple-clang-15.txt")
    found = compilers(path_of(tmp_path))
    assert found.gcc is None


def test_versions_are_cached_per_binary(bin_dir: Path, tmp_path: Path) -> None:
    first = ProbeCache(tmp_path / "cache")
    compilers(path_of(bin_dir), first)
    first.save()
    compilers(path_of(bin_dir), ProbeCache(tmp_path / "cache"))
    assert (bin_dir / "gcc.log").read_text().splitlines() == ["--version"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_real_gcc() -> None:
    found = compilers({"PATH": "/usr/bin:/bin"})
    assert found.gcc is not None and found.gcc[0].isdigit()
    assert found.nvcc_host is not None
