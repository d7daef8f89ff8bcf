"""``lock`` with a pip older than 23.3 beside cuda-resolve: one error that names that pip and the
command that upgrades it (found running the installed wheel in a fresh venv, whose pip is the
one ensurepip bundles: pip < 23.3 refuses --platform in a dry run, pypa/pip#12215)."""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

import pytest
from _torch_env import copy_venv
from packaging.version import Version
from test_lock_support import StaticIndex, make_wheel, serve, write_profile


def _venv_with_bundled_pip(folder: Path) -> Path:
    """A venv whose pip is ensurepip's (offline), that imports cuda-resolve and its dependencies
    from the test venv: its site folder is added after the venv's own (with its .pth files,
    so an editable install's finder works), so the venv's pip is the one imported."""
    python = copy_venv(folder)  # the template venv: ensurepip's pip, nothing else
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (Path(site) / "test-venv.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


def test_lock_with_a_pip_older_than_23_3_names_it_and_the_upgrade(tmp_path: Path) -> None:
    python = _venv_with_bundled_pip(tmp_path / "venv")
    pip_version = subprocess.run(
        [str(python), "-c", "import pip; print(pip.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if Version(pip_version) >= Version("23.3"):
        pytest.skip(f"ensurepip bundles pip {pip_version} here (23.3 and later need no upgrade)")
    index = StaticIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path / "built", "tinyutil", "1.0"))
    profile = write_profile(tmp_path / "cpu-box.toml", name="cpu")
    with serve(tmp_path / "index") as url:
        done = subprocess.run(
            [
                *(str(python), "-m", "cuda_resolve", "lock", "tinyutil", "--no-build"),
                *("--index-url", f"{url}/simple", "--profile", str(profile)),
                *("-o", str(tmp_path / "pylock.toml")),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
    assert done.returncode == 1, done.stderr
    assert "older than 23.3" in done.stderr and str(python) in done.stderr
    assert f"hint: upgrade it, then lock again: {python} -m pip install -U pip" in done.stderr
    assert not (tmp_path / "pylock.toml").exists()
