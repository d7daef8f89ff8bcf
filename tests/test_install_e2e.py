"""The real path, no GPU needed: a CUDA build of torch from PyPI installed by cuda-pip itself, then
the fixture extension (tests/data/packages/cuext, whose setup.py hard-codes a bad
TORCH_CUDA_ARCH_LIST the way pointnet2_ops does) built for real with this machine's nvcc, into a
wheelhouse, installed into a fresh venv and imported; a second install is a wheelhouse hit.

Slow (torch is several GB; each compile about a minute on 2 cores) and needs PyPI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from _torch_env import _cli, _venv

pytestmark = [pytest.mark.slow, pytest.mark.network]

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "packages" / "cuext"
FIXTURE_INDEX = DATA / "index" / "cuext"
ARCH = "9.0"  # nvcc needs no GPU to compile for one

if shutil.which("nvcc") is None:
    pytest.skip("needs nvcc on PATH (CI has CUDA 13.0)", allow_module_level=True)


def _freeze(python: Path) -> str:
    return subprocess.run(
        [str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True
    ).stdout


def _fresh_target(tmp_path: Path, torch_python: Path) -> Path:
    """A fresh venv that sees the torch venv's packages through a .pth file (no 5 GB copy)."""
    python = _venv(tmp_path / "target")
    site = subprocess.run(
        [str(torch_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(own, "torch-env.pth").write_text(site + "\n")
    return python


def _action(
    verb: str, python: Path, wheelhouse: Path, *extra: str, source: Path = FIXTURE
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CUDA_RESOLVE_WHEELHOUSE=str(wheelhouse))
    env.pop("VIRTUAL_ENV", None)
    return _cli(
        verb,
        "cuext",
        "--index",
        str(FIXTURE_INDEX),
        "--python",
        str(python),
        "--arch-list",
        ARCH,
        "--source",
        str(source),
        "--json",
        *extra,
        env=env,
    )


def test_concurrent_builds_then_install_then_cache_hit(tmp_path: Path, torch_python: Path) -> None:
    python = _fresh_target(tmp_path, torch_python)
    wheelhouse = tmp_path / "wheelhouse"
    before = _freeze(python)

    # Two builds of one key at once: one compiles, the other waits on the key's lock and finds
    # the first one's wheel (one compile on CI's two cores, not two).
    results: list[subprocess.CompletedProcess[str]] = []
    threads = [
        threading.Thread(target=lambda: results.append(_action("build", python, wheelhouse)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    entries = [json.loads(r.stdout)["builds"][0] for r in results]
    assert sorted(e["cache_hit"] for e in entries) == [False, True]
    assert len(list(wheelhouse.rglob("*.whl"))) == 1
    entry = next(e for e in entries if not e["cache_hit"])
    assert entry["arch_list"] == ARCH
    wheel = Path(entry["wheel"])
    assert wheel.is_file() and wheel.is_relative_to(wheelhouse)
    assert (
        "+pt2141cu130.sm90.r" in wheel.name
    )  # the ABI (and the recipe word) is in the local version label
    # The build requirements (setuptools >= 77, ninja) went into a temporary overlay, not the
    # target.
    assert _freeze(python) == before
    # Compiled without debug info (-g0 after Python's own -g), which the wheelhouse would strip
    # anyway.
    log = Path(entry["log"]).read_text()
    assert "CPPFLAGS=-g0" in log
    assert any(" -g0" in line and "bindings.cpp" in line for line in log.splitlines())

    # pip's command is checked here (uv, the default engine for a wheelhouse file where it is
    # installed, has its own tests: test_uv_engine).
    installed = _action("install", python, wheelhouse, "--installer", "pip")
    assert installed.returncode == 0, installed.stderr
    result = json.loads(installed.stdout)["result"]
    assert result["installers"] == ["pip"]
    assert result["builds"][0]["cache_hit"] is True  # no second compile
    assert {c["name"] for c in result["changed"]} >= {"cuext"}
    assert "cuext._ext" in result["verified_imports"]
    # cuext needs only torch, which is installed: pip got the wheel alone, with --no-deps.
    [run] = result[
        "pip_runs"
    ]  # the exact command: <python> -m pip install <trust options> --no-deps <wheel>
    assert run[:4] == [str(python), "-m", "pip", "install"]
    assert run[-2:] == ["--no-deps", str(wheel)]
    probe = subprocess.run(
        [str(python), "-c", "import cuext, torch; print(cuext.add_one.__doc__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0 and "x + 1" in probe.stdout, probe.stderr

    again = _action("install", python, wheelhouse)
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)["result"]
    assert result["builds"][0]["cache_hit"] is True and result["changed"] == []


def test_a_failed_build_leaves_the_environment_as_it_was(
    tmp_path: Path, torch_python: Path
) -> None:
    python = _fresh_target(tmp_path, torch_python)
    broken = tmp_path / "broken-src"
    shutil.copytree(FIXTURE, broken)
    bindings = broken / "csrc" / "bindings.cpp"
    bindings.write_text("#include <no_such_header_for_the_test.h>\n" + bindings.read_text())
    before = _freeze(python)
    done = _action("install", python, tmp_path / "wheelhouse", source=broken)
    assert done.returncode == 1
    error = json.loads(done.stdout)
    assert "building cuext 0.1.0 failed" in error["error"]
    assert "no_such_header_for_the_test.h" in error["error"]  # the line that matters, not 400 lines
    assert "diagnosis (missing-header)" in error["error"]
    assert "Full log:" in error["hint"]
    assert _freeze(python) == before
    assert not any((tmp_path / "wheelhouse").rglob("*.whl"))


def test_a_patch_that_no_longer_applies_fails_before_compiling(
    tmp_path: Path, torch_python: Path
) -> None:
    python = _fresh_target(tmp_path, torch_python)
    patched = tmp_path / "already-patched"
    shutil.copytree(FIXTURE, patched)
    setup = patched / "setup.py"
    setup.write_text(
        setup.read_text().replace(
            'os.environ["TORCH_CUDA_ARCH_LIST"] =', "os.environ.setdefault('TORCH_CUDA_ARCH_LIST', "
        )
    )
    done = _action("build", python, tmp_path / "wheelhouse", source=patched)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert "recipe cuext-fixture, patch 1 (setup.py)" in error and "found 0" in error


def test_a_build_whose_setup_py_overrides_the_arch_list_is_refused_before_pip(
    tmp_path: Path, torch_python: Path
) -> None:
    """A setup.py that forces its own arch list after the one the recipe patches (a new upstream
    line): the wheel has no kernel for this machine's GPU, and the install stops before pip."""
    python = _fresh_target(tmp_path, torch_python)
    forced = tmp_path / "forced-src"
    shutil.copytree(FIXTURE, forced)
    setup = forced / "setup.py"
    setup.write_text(
        setup.read_text().replace(
            "\nsetup(", '\nos.environ["TORCH_CUDA_ARCH_LIST"] = "8.0"\n\nsetup(', 1
        )
    )
    before = _freeze(python)
    env = dict(
        os.environ,
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        CUDA_RESOLVE_CUDA_ARCH="9.0",
        CUDA_RESOLVE_DRIVER="580.65.06",
    )
    env.pop("VIRTUAL_ENV", None)
    done = _cli(
        "install",
        "cuext",
        "--index",
        str(FIXTURE_INDEX),
        "--python",
        str(python),
        "--source",
        str(forced),
        "--json",
        env=env,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    error = json.loads(done.stdout)
    assert (
        "has no kernel for compute capability 9.0" in error["error"] and "sm_80" in error["error"]
    )
    assert "cuda-pip install --rebuild cuext" in error["hint"]
    assert _freeze(python) == before
