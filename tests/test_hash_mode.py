"""pip's hash-checking mode is honoured when every file has a hash, refused naming each that has
none.

The install runs for real: cuda-pip builds the fixture extension (tests/data/packages/quickext,
no compiler) against a stand-in torch and installs it with real pip in ``--require-hashes``
mode, the built wheel given as ``name @ file:///...#sha256=``. What pip would fetch with no hash
(a name on the command line, an unhashed line of a -r file, a torch install and its
dependencies, a build tool that is not installed) is refused before anything is built.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _torch_env import copy_venv, standin_cuda_toolkit, torch_venv_template  # noqa: F401  (a fixture)
from test_install_unit import _env_with_torch_index, torch_index  # noqa: F401  (torch_index: a fixture)

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "packages" / "quickext"
INDEX = DATA / "index" / "quickext"


@pytest.fixture
def machine(tmp_path: Path, torch_venv_template: Path) -> tuple[Path, dict[str, str]]:
    """(the target's python: a venv with a stand-in torch 2.14.1+cu130, the environment of an
    H200-class machine with a stand-in CUDA 13.0 toolkit, in hash-checking mode from
    PIP_REQUIRE_HASHES)."""
    python = copy_venv(tmp_path / "target", torch_venv_template)
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        CUDA_RESOLVE_DRIVER="580.95.05",
        CUDA_RESOLVE_CUDA_ARCH="9.0",
        PIP_REQUIRE_HASHES="1",
    )
    return python, env


def _cuda_pip(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip_plugin", "install", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _installed(python: Path) -> dict[str, str]:
    done = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
    )
    return {entry["name"]: entry["version"] for entry in json.loads(done.stdout)}


def test_a_build_is_installed_with_its_hash_checked_by_pip(
    tmp_path: Path, machine: tuple[Path, dict[str, str]]
) -> None:
    python, env = machine
    done = _cuda_pip(
        "quickext",
        "--index",
        str(INDEX),
        "--source",
        str(SOURCE),
        "--python",
        str(python),
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    [wheel] = list((tmp_path / "wheelhouse").rglob("quickext-*.whl"))
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    [run] = report["result"]["pip_runs"]
    assert "--require-hashes" in run
    assert f"quickext @ {wheel.resolve().as_uri()}#sha256={sha}" in run
    assert _installed(python)["quickext"].startswith("0.1.0")


def test_a_dry_run_shows_the_hash_mode_commands(
    tmp_path: Path, machine: tuple[Path, dict[str, str]]
) -> None:
    python, env = machine
    done = _cuda_pip(
        "quickext",
        "--index",
        str(INDEX),
        "--source",
        str(SOURCE),
        "--python",
        str(python),
        "--dry-run",
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = json.loads(done.stdout)["commands"]
    assert "--require-hashes" in run and any(
        word.endswith("#sha256=<sha256 of the built wheel>") for word in run
    ), run


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["six"], "six (on the command line) has no hash"),
        (["-r", "{req}"], "req.txt:2: six has no --hash"),
    ],
    ids=["command line", "requirements file"],
)
def test_an_unhashed_requirement_is_refused_by_name_before_anything_is_built(
    tmp_path: Path, machine: tuple[Path, dict[str, str]], extra: list[str], named: str
) -> None:
    python, env = machine
    (tmp_path / "req.txt").write_text(
        "wheel==0.45.1 --hash=sha256:" + "0" * 64 + "\nsix\n", encoding="utf-8"
    )
    words = [word.replace("{req}", str(tmp_path / "req.txt")) for word in extra]
    done = _cuda_pip(
        "quickext",
        *words,
        "--index",
        str(INDEX),
        "--source",
        str(SOURCE),
        "--python",
        str(python),
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "hash-checking mode is on (require-hashes = 1 from the environment variable "
        "PIP_REQUIRE_HASHES)" in done.stderr
    ), done.stderr
    assert named in done.stderr and "Traceback" not in done.stderr
    assert not list((tmp_path / "wheelhouse").rglob("*.whl")), "something was built"
    assert "quickext" not in _installed(python)


def test_a_build_tool_that_is_not_installed_is_refused_by_name(
    tmp_path: Path, machine: tuple[Path, dict[str, str]]
) -> None:
    python, env = machine
    index = tmp_path / "index"
    shutil.copytree(INDEX, index)
    recipe = index / "packages" / "quickext.toml"
    recipe.write_text(
        recipe.read_text(encoding="utf-8").replace(
            "build_requires = []", 'build_requires = ["ninja>=1.11"]'
        ),
        encoding="utf-8",
    )
    done = _cuda_pip(
        "quickext",
        "--index",
        str(index),
        "--source",
        str(SOURCE),
        "--python",
        str(python),
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "ninja>=1.11 (needed by quickext) is not installed: pip would download it with no hash"
        in done.stderr
    ), done.stderr
    assert not list((tmp_path / "wheelhouse").rglob("*.whl"))


def test_a_torch_install_is_refused_naming_torch(tmp_path: Path, torch_index: str) -> None:
    target = copy_venv(tmp_path / "venv")
    env = dict(_env_with_torch_index(tmp_path, torch_index), PIP_REQUIRE_HASHES="1")
    env.pop("VIRTUAL_ENV", None)
    done = _cuda_pip("torch==2.6.0+cu126", "--python", str(target), env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "torch==2.6.0+cu126: pip would resolve its dependencies" in done.stderr, done.stderr
    assert "cuda-resolve lock" in done.stderr


def test_a_plan_made_without_hash_mode_is_not_applied_in_it(
    tmp_path: Path, machine: tuple[Path, dict[str, str]]
) -> None:
    python, env = machine
    plain = {k: v for k, v in env.items() if k != "PIP_REQUIRE_HASHES"}
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "plan",
            "quickext",
            "--index",
            str(INDEX),
            "--python",
            str(python),
            "--json",
        ],
        env=plain,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    (tmp_path / "plan.json").write_text(made.stdout, encoding="utf-8")
    done = _cuda_pip(
        "--plan",
        str(tmp_path / "plan.json"),
        "--index",
        str(INDEX),
        "--source",
        str(SOURCE),
        "--python",
        str(python),
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "this plan was made without it" in done.stderr, done.stderr
    assert not list((tmp_path / "wheelhouse").rglob("*.whl"))


def test_a_plan_for_another_machine_made_in_the_mode_names_the_torch_install(
    tmp_path: Path,
) -> None:
    """Without the target's distributions (``--profile``) what is known still counts: a torch
    install (its nvidia-* dependencies would come unhashed) cannot be carried out in the mode."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PIP_REQUIRE_HASHES"] = "1"
    profile = Path(__file__).parent / "data" / "profiles" / "gtx1080ti-driver580-torch211cu130.toml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "plan",
            "torch",
            "--profile",
            str(profile),
            "--allow-torch-change",
            "--json",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert "pip would resolve its dependencies" in document.get("cannot_apply", ""), document.get(
        "cannot_apply"
    )
    assert "steps" not in document


def test_a_requirements_line_pinned_by_url_and_hash_needs_no_hash_option() -> None:
    from cuda_resolve.install.hashmode import unhashed_file_lines
    from cuda_resolve.install.reqfile import FileRequirement

    lines = [
        FileRequirement(
            text="six @ https://files.example/six-1.17.0-py3-none-any.whl#sha256=" + "a" * 64,
            origin="r.txt:1",
        ),
        FileRequirement(text="numpy==2.0", origin="r.txt:2"),
        FileRequirement(text="scipy<2", origin="c.txt:1", constraint=True),
    ]
    assert unhashed_file_lines(lines) == ["r.txt:2: numpy==2.0 has no --hash"]
