"""``cuda-pip install ./dist/pkg-1.0-py3-none-any.whl`` and ``cuda-pip install .`` go to pip as
pip takes them; they were refused as invalid requirements, with a hint to "write it as pip
would" (user walk 2026-12-05 B6). A local file of torch or a curated package is refused as a
direct URL to one is: cuda-resolve cannot check that file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_support import make_wheel

from cuda_resolve.errors import UsageError
from cuda_resolve.index import default_index
from cuda_resolve.resolve import parse_request


@pytest.mark.parametrize(
    "text",
    [".", "./pkg", "../pkg", "/src/pkg", "dist/six-1.17.0-py3-none-any.whl", "pkg-1.0.tar.gz"],
)
def test_paths_pass_through_to_pip(text: str) -> None:
    known, passed, skipped = parse_request([text], default_index())
    assert (known, passed, skipped) == ([], [text], [])


@pytest.mark.parametrize(
    "text",
    [
        "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "./kaolin-0.18.0-cp311-cp311-linux_x86_64.whl",
        "dist/pointnet2_ops-3.0.0.tar.gz",
    ],
)
def test_a_file_of_a_package_cuda_resolve_chooses_is_refused(text: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_request([text], default_index())
    assert "which cuda-resolve chooses itself" in str(refused.value)
    assert "cuda-resolve plan" in str(refused.value.hint)


def test_what_is_neither_a_requirement_nor_a_path_is_still_refused() -> None:
    with pytest.raises(UsageError) as refused:
        parse_request(["six>>1"], default_index())
    assert "is not valid" in str(refused.value) and "a path" in str(refused.value.hint)


def test_a_wheel_path_installs_from_the_folder_it_is_given_in(tmp_path: Path) -> None:
    make_wheel(tmp_path / "dist", "six", "1.17.0", files={"six.py": ""})
    python = copy_venv(tmp_path / "venv")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ["PIP_NO_INDEX"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pip_plugin", "install", "./dist/six-1.17.0-py3-none-any.whl",
         "--python", str(python), "--no-verify"],
        capture_output=True, text=True, timeout=300, check=False, env=environ, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shown = subprocess.run(
        [str(python), "-m", "pip", "show", "six"], capture_output=True, text=True, check=False
    )
    assert "Version: 1.17.0" in shown.stdout
