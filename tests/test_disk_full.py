"""A full disk during a build or a publish names the folder that filled up and leaves nothing
half-written.

The disks are real: small tmpfs mounts (root may mount them here and in CI; the tests skip with
the reason where it cannot). The build is the fixture extension (tests/data/packages/quickext),
whose backend, with ``QUICKEXT_FILL`` set, writes until the disk is full and then fails the way
a linker does, with a line that names no path.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import copy_venv, standin_cuda_toolkit, torch_venv_template  # noqa: F401  (a fixture)

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "packages" / "quickext"
INDEX = DATA / "index" / "quickext"


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder``, a tmpfs of ``size`` (``256k``, ``16m``) while the block runs; the test skips,
    saying why, where it cannot be mounted (not root, or no mount permission)."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a small tmpfs to fill ({mounted.stderr.strip() or 'mount failed'}): "
            "needs root in a sandbox that allows mounts"
        )
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def build(tmp_path: Path, torch_venv_template: Path) -> tuple[list[str], dict[str, str]]:
    """(argv of `cuda-resolve build quickext` for an H200, its environment)."""
    python = copy_venv(tmp_path / "target", torch_venv_template)
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
    )
    argv = [
        sys.executable,
        "-m",
        "cuda_resolve",
        "build",
        "quickext",
        "--index",
        str(INDEX),
        "--python",
        str(python),
        "--arch-list",
        "9.0",
        "--source",
        str(SOURCE),
    ]
    return argv, env


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        cwd="/",
        check=False,
    )


def test_a_build_that_fills_tmpdir_names_it_and_leaves_nothing(
    tmp_path: Path, build: tuple[list[str], dict[str, str]]
) -> None:
    argv, env = build
    with small_tmpfs(tmp_path / "small-tmp", "16m") as disk:
        done = _run(argv, dict(env, TMPDIR=str(disk), QUICKEXT_FILL="1"))
        assert done.returncode == 1, done.stdout + done.stderr
        assert "diagnosis (disk-full)" in done.stderr, done.stderr
        # The linker's line names no path: the message names the folder whose disk is full.
        assert (
            f"the disk holding {disk} (TMPDIR, which holds the build folder) has 0 MB free"
            in done.stderr
        ), done.stderr
        assert "point TMPDIR at a folder on another disk" in done.stderr
        assert "Traceback" not in done.stderr
        assert list(disk.iterdir()) == [], "the build folder was left on the full disk"
    assert not list((tmp_path / "wheelhouse").rglob("*.whl"))


def test_a_publish_into_a_full_wheelhouse_names_it_and_leaves_nothing(
    tmp_path: Path, build: tuple[list[str], dict[str, str]]
) -> None:
    argv, env = build
    with small_tmpfs(tmp_path / "small-wheelhouse", "1m") as disk:
        wheelhouse = disk / "wheelhouse"
        wheelhouse.mkdir()
        filler = disk / "filler"
        try:
            with open(filler, "wb") as out:
                while True:
                    out.write(b"\0" * 4096)
                    out.flush()
        except OSError:
            pass
        done = _run(argv, dict(env, CUDA_RESOLVE_WHEELHOUSE=str(wheelhouse)))
        assert done.returncode != 0, done.stdout + done.stderr
        assert f"the disk holding the wheelhouse {wheelhouse} is full" in done.stderr, done.stderr
        assert "nothing was left half-written" in done.stderr and "Traceback" not in done.stderr
        left = [p.name for p in wheelhouse.rglob("*") if p.is_file()]
        assert not [name for name in left if name.endswith(".whl")], left
        filler.unlink()
        # With room again, the same build publishes: no staging or lock left in the way.
        done = _run(argv, dict(env, CUDA_RESOLVE_WHEELHOUSE=str(wheelhouse)))
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(list(wheelhouse.rglob("quickext-*.whl"))) == 1
