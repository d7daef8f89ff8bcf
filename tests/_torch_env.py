"""The venvs the tests install into, and the torch environment the slow end-to-end tests share.

Test venvs are copies of one template, never made per test: ``python -m venv`` with pip runs
ensurepip (about 8 s on CI's two cores), a copy takes a fraction of a second. ``template_venv()``
makes the template (pip, nothing else) once per session; ``copy_venv(path)`` copies it with its
links kept (``bin/python`` stays a link to the base interpreter, so the copy is a venv of its own:
``sys.prefix`` is the copy, pip installs into the copy) and rewrites the template's path where
venv and pip wrote it (``pyvenv.cfg``, the ``bin/pip*`` shebangs, the activate scripts).

The torch environment is PyPI's CUDA build of torch, installed once per session by cuda-pip
itself (test_install_e2e and test_install_interrupt both use it; conftest.py registers the
fixture so that pytest makes it once, not once per module).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = [
    "_cli",
    "_venv",
    "copy_venv",
    "standin_torch_wheel",
    "template_venv",
    "torch_python",
    "unshare",
]


def _cli(
    *args: str,
    env: dict[str, str] | None = None,
    module: str = "cuda_resolve",
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        timeout=timeout,
        check=False,
    )


@functools.cache
def template_venv() -> Path:
    """An empty venv with pip, made once per test session (removed when the session's process
    ends)."""
    folder = Path(tempfile.mkdtemp(prefix="cuda-resolve-venv-template-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    template = folder / "venv"
    # pip's variables (these machines set PIP_FIND_LINKS) must not reach ensurepip's pip.
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PIP_") and name != "VIRTUAL_ENV"
    }
    subprocess.run(
        [sys.executable, "-m", "venv", str(template)], check=True, timeout=300, env=environ
    )
    _TEMPLATE_FILES.update(_shared_files(template))
    return template


#: The template's hard-linked files as they were made: path -> (inode, size, mtime).
_TEMPLATE_FILES: dict[str, tuple[int, int, int]] = {}


def _shared_files(template: Path) -> dict[str, tuple[int, int, int]]:
    found = {}
    for folder, _, names in os.walk(template / "lib"):
        for name in names:
            path = os.path.join(folder, name)
            facts = os.lstat(path)
            found[path] = (facts.st_ino, facts.st_size, facts.st_mtime_ns)
    return found


def template_changes() -> list[str]:
    """The template's shared files a test changed in place (so every later copy saw the change):
    each copied venv hard-links them, and a change must go through a new file (as pip's and
    Python's writes do). Empty where no template was made this session."""
    if not _TEMPLATE_FILES:
        return []
    now = _shared_files(template_venv())
    return sorted(path for path, facts in _TEMPLATE_FILES.items() if now.get(path) != facts)


def copy_venv(path: Path, template: Path | None = None) -> Path:
    """A venv at *path*, copied from *template* (default: ``template_venv()``); returns its
    python."""
    source = template if template is not None else template_venv()
    shutil.copytree(source, path, symlinks=True, copy_function=_linked_under(source / "lib"))
    old, new = os.fsencode(source), os.fsencode(path)
    for written in [path / "pyvenv.cfg", *(path / "bin").iterdir()]:
        if written.is_symlink() or not written.is_file():
            continue
        content = written.read_bytes()
        if old in content:
            written.write_bytes(content.replace(old, new))
    return path / "bin" / "python"


def _linked_under(shared: Path) -> Callable[[str, str], object]:
    """copytree's copy function: the files under ``shared`` (the template's site-packages: pip's
    1,500 files, never changed in place by pip, which installs new files and removes by rename)
    hard-linked, the rest copied; where a link cannot be made (another filesystem), a copy.
    Copying them took 0.2-0.7 s of system time per venv, hundreds of times a run."""
    prefix = str(shared) + os.sep

    def copy(source: str, destination: str) -> object:
        if source.startswith(prefix):
            try:
                os.link(source, destination)
                return destination
            except OSError:
                pass
        return shutil.copy2(source, destination)

    return copy


def unshare(path: Path) -> Path:
    """Give a copied venv's file its own inode before a test changes it in place (writes into it,
    or sets its times): its site-packages files are hard links to the template's, shared by every
    copy (:func:`copy_venv`)."""
    if path.is_file() and not path.is_symlink() and path.stat().st_nlink > 1:
        private = path.with_name(path.name + ".unshared")
        shutil.copy2(path, private)
        os.replace(private, path)
    return path


def _venv(path: Path) -> Path:
    return copy_venv(path)


@pytest.fixture(scope="session")
def torch_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with PyPI's CUDA build of torch 2.14.1, installed through cuda-pip itself."""
    python = _venv(tmp_path_factory.mktemp("torch-env") / "venv")
    # The overrides describe an H200 on driver 580 (CI has no GPU); --strict-driver keeps the
    # choice on CUDA 13.0, the variant PyPI serves: the real path through the default index.
    env = dict(
        os.environ,
        CUDA_RESOLVE_DRIVER="580.65.06",
        CUDA_RESOLVE_CUDA_ARCH="9.0",
        CUDA_RESOLVE_CONFIG=str(tmp_path_factory.mktemp("cfg") / "none.toml"),
    )
    done = _cli(
        "install",
        "torch==2.14.1",
        "--strict-driver",
        "--python",
        str(python),
        "--json",
        module="pip_plugin",
        env=env,
    )
    # --json puts the error on stdout: both, so a failure here says why
    assert done.returncode == 0, done.stderr + done.stdout[-4000:]
    report = json.loads(done.stdout)
    assert [i["requirement"] for i in report["plan"]["install"]] == ["torch==2.14.1"]
    assert report["plan"]["install"][0]["index"] == "https://pypi.org/simple"
    assert "torch" in report["result"]["verified_imports"]
    return python


def standin_torch_wheel(links: Path) -> Path:
    """``links/torch-2.14.1-py3-none-any.whl``: a stand-in torch 2.14.1 built for CUDA 13.0
    (two small files, no libraries)."""
    from test_install_unit import _wheel

    links.mkdir(parents=True, exist_ok=True)
    return _wheel(
        links,
        "torch",
        "2.14.1",
        files={
            "torch/__init__.py": "__version__ = '2.14.1'\nfrom . import version\n",
            "torch/version.py": "__version__ = '2.14.1'\ncuda = '13.0'\n",
        },
    )


def standin_torch_venv(folder: Path) -> Path:
    """``folder/venv``: a venv holding a stand-in torch 2.14.1 built for CUDA 13.0 (two small
    files, no libraries), for tests that drive the builder without a real torch."""
    links = folder / "links"
    standin_torch_wheel(links)
    python = copy_venv(folder / "venv")
    environ = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-index",
            "--find-links",
            str(links),
            "torch==2.14.1",
        ],
        check=True,
        env=environ,
        timeout=120,
    )
    return python


@pytest.fixture(scope="module")
def torch_venv_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding a stand-in torch 2.14.1 built for CUDA 13.0 (two small files, no
    libraries), made once per module that imports this fixture; tests copy it (copy_venv)."""
    folder = tmp_path_factory.mktemp("torch-template")
    standin_torch_venv(folder)
    return folder / "venv"


def standin_cuda_toolkit(folder: Path) -> Path:
    """``folder``, made a stand-in CUDA 13.0 toolkit: the headers the builder's pre-flight looks
    for, and an ``nvcc`` that answers ``--version`` (and compiles nothing)."""
    (folder / "bin").mkdir(parents=True)
    (folder / "include").mkdir()
    for header in ("cuda_runtime_api.h", "cusparse.h", "cublas_v2.h", "cusolverDn.h"):
        (folder / "include" / header).write_text("/* stand-in */\n")
    nvcc = folder / "bin" / "nvcc"
    nvcc.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && printf \'Cuda compilation tools, release 13.0, '
        "V13.0.88\\n' && exit 0\nexit 1\n"
    )
    nvcc.chmod(0o755)
    return folder
