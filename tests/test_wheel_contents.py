"""The wheel users install holds the whole product (issue 25).

``pip install .`` is how the README installs the tool; an editable install (the developers' and
CI's) reads the checkout and hides a package the wheel lacks (``cuda_resolve.slurm`` once was).
So the wheel is built here from a copy of the checkout, the way pip builds it, and its files are
compared with the checkout's: every module and data file of every package, index/ as
``cuda_resolve.index_data``, and the user documents docs/*.md (not docs/evidence/) as
``cuda_resolve/docs``, where the hints name them. The entry points must name modules the wheel
holds.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
#: The checkout's folders that ship, and where each lands in the wheel.
SHIPPED = {
    "cuda_resolve": "cuda_resolve",
    "conda_plugin": "conda_plugin",
    "pip_plugin": "pip_plugin",
    "index": "cuda_resolve/index_data",
}
#: The checkout's user documents (its folders are not shipped: docs/evidence/ is the record).
SHIPPED_DOCS = ("docs", "cuda_resolve/docs")
#: What the build needs from the checkout besides the shipped folders.
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md")
_NOT_SHIPPED_PARTS = {"__pycache__"}
_NOT_SHIPPED_SUFFIXES = {".pyc", ".pyo"}


def _shipped_files() -> set[str]:
    """The wheel paths the checkout's files should have."""
    expected = set()
    for folder, inside in SHIPPED.items():
        for path in (CHECKOUT / folder).rglob("*"):
            relative = path.relative_to(CHECKOUT / folder)
            if path.is_dir() or _NOT_SHIPPED_PARTS & set(relative.parts):
                continue
            if path.suffix in _NOT_SHIPPED_SUFFIXES:
                continue
            expected.add(f"{inside}/{relative.as_posix()}")
    folder, inside = SHIPPED_DOCS
    expected.update(f"{inside}/{path.name}" for path in (CHECKOUT / folder).glob("*.md"))
    return expected


def build_wheel(root: Path) -> Path:
    """The wheel pip builds from a copy of the checkout's shipped folders (offline: no build
    isolation, the test extra's setuptools)."""
    source = root / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in (*SHIPPED, SHIPPED_DOCS[0]):
        shutil.copytree(CHECKOUT / folder, source / folder, ignore=ignore)
    for name in BUILD_FILES:
        shutil.copy2(CHECKOUT / name, source / name)
    built = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"),
            *("--no-index", "-w", str(root / "dist"), str(source)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = (root / "dist").glob("cuda_resolve-*.whl")
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_every_file_of_the_checkouts_packages_and_nothing_else(
    wheel: Path,
) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = {name for name in archive.namelist() if ".dist-info/" not in name}
    expected = _shipped_files()
    assert "cuda_resolve/slurm/__init__.py" in expected  # the package a hand-kept list missed
    assert "cuda_resolve/docs/index-format.md" in expected  # what the hints name (walk C10)
    assert sorted(expected - names) == [], "in the checkout, missing from the wheel"
    assert sorted(names - expected) == [], "in the wheel, not in the checkout's packages"


def test_every_entry_point_names_a_module_the_wheel_holds(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser()
        parser.read_string(archive.read(entry_points).decode())
    assert set(parser["console_scripts"]) == {"cuda-resolve", "cuda-pip"}
    assert set(parser["conda"]) == {"cuda-resolve"}
    for group in ("console_scripts", "conda"):
        for value in parser[group].values():
            module = value.split(":")[0].strip()
            path = module.replace(".", "/")
            assert f"{path}.py" in names or f"{path}/__init__.py" in names, (group, value)
