"""Issue 26: the restore is complete; partial publish results are reported as partial; a bad
``--python-for`` interpreter is bad input.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The tiny-wheel and venv helpers of the stash tests: the same real pip into a real venv.
from test_install_stash import _pip, _wheel

from cuda_resolve.install.stash import Stash, pending, recover

# -- the restore is complete -------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("restore") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    return venv


@pytest.fixture
def venv(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "venv"
    shutil.copytree(template, copy, symlinks=True)
    return Path(os.path.realpath(copy))


def _site(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def _imports(venv: Path, name: str) -> bool:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", f"import {name}"],
        cwd="/",
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0


def test_half_written_bytecode_of_a_removed_package_is_removed(venv: Path, tmp_path: Path) -> None:
    """pip was killed while compiling ghost 2.0 over 1.0: importlib's atomic write leaves
    ``X.pyc.<id>`` beside the finished ``.pyc`` files. The restore removes them with the rest of
    2.0, so its new subpackage does not stay importable (a folder left holding only
    ``__pycache__`` imports as a namespace package)."""
    python, site = venv / "bin" / "python", _site(venv)
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "ghost", "1.0", {"ghost/__init__.py": b"V = 1\n"})
    new = {
        "ghost/__init__.py": b"V = 2\n",
        "ghost/newsub/__init__.py": b"",
        "ghost/newsub/m.py": b"",
    }
    _wheel(links, "ghost", "2.0", new)
    _pip(python, "install", "--no-index", "--find-links", str(links), "ghost==1.0")
    journal_dir = tmp_path / "journal"
    Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)  # then "killed"
    _pip(python, "install", "--no-index", "--find-links", str(links), "ghost==2.0")
    cache = site / "ghost" / "newsub" / "__pycache__"
    tag = sys.implementation.cache_tag
    (cache / f"m.{tag}.pyc.140234112").write_bytes(b"half")
    (cache / f"__init__.{tag}.opt-1.pyc.99").write_bytes(b"half")
    assert _imports(venv, "ghost.newsub")

    (journal,) = pending(journal_dir)
    report = recover(journal)
    assert report.complete, report.not_restored
    assert report.restored == ("ghost 1.0 put back (the install had put 2.0 in its place)",)
    assert not (site / "ghost" / "newsub").exists()
    assert not _imports(venv, "ghost.newsub") and _imports(venv, "ghost")


def test_a_package_written_before_its_metadata_is_removed(venv: Path, tmp_path: Path) -> None:
    """pip was killed while extracting a wheel, before its ``.dist-info`` (the last entries of a
    wheel): no RECORD names the files, yet they were not there when the install began."""
    python, site = venv / "bin" / "python", _site(venv)
    (site / "keep.py").write_text("K = 1\n")  # there before: stays
    journal_dir = tmp_path / "journal"
    Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)
    (site / "ghost").mkdir()
    (site / "ghost" / "__init__.py").write_text("")
    (site / "ghostmod.py").write_text("G = 1\n")
    assert _imports(venv, "ghost") and _imports(venv, "ghostmod")

    (journal,) = pending(journal_dir)
    report = recover(journal)
    assert report.complete, report.not_restored
    why = "removed (written since the install began; no installed package lists it)"
    assert sorted(report.restored) == [f"{site / 'ghost'} {why}", f"{site / 'ghostmod.py'} {why}"]
    assert not _imports(venv, "ghost") and not _imports(venv, "ghostmod")
    assert (site / "keep.py").exists() and _imports(venv, "keep")
