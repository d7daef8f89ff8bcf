"""No test depends on what the tool's own venv holds (issue 25, item 2).

The README's main command, run in the clone before its test command, leaves torch, a built
pointnet2_ops and a pip configuration in ``.venv``: the venv the tests run from. Tests make their
own targets, so none of that may change a result. Here a venv like that is made (a stand-in torch
and a pointnet2_ops built for it, a ``pip.conf`` naming an index, cuda-resolve and the test tools
reached through a ``.pth``, ``cuda-pip`` and ``cuda-resolve`` scripts), and the tests that once
read the tool's venv run from it and pass.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest
from _torch_env import standin_torch_venv
from test_install_unit import _wheel

TESTS = Path(__file__).parent

#: Tests whose result once followed the tool's venv: the GPU-less refusal, the README block that
#: runs doctor, the torch step's options (two), the options' own target.
SENSITIVE = (
    "test_readme_blocks.py::test_without_a_gpu_the_main_command_refuses_as_the_readme_says",
    "test_readme_blocks.py::test_block_runs[block1]",
    "test_install_unit.py::test_the_torch_step_keeps_the_users_pip_options_but_not_their_indexes",
    "test_hardening3_pip_options.py::"
    "test_the_torch_step_leaves_out_the_indexes_pips_configuration_names",
    "test_hardening3_pip_options.py::test_pips_pep668_override_is_seen_in_every_form",
)

_SCRIPT = """#!{python}
import sys
from {module} import {function}
if __name__ == '__main__':
    sys.exit({function}())
"""


def polluted_tool_venv(folder: Path) -> Path:
    """``folder/venv``: the tool's venv as the README's main command leaves it; its python."""
    python = standin_torch_venv(folder)  # torch 2.14.1+cu130, as a stand-in
    links = folder / "built"
    links.mkdir()
    built = _wheel(
        links,
        "pointnet2_ops",
        "3.0.0+pt2141cu130.sm80",
        files={"pointnet2_ops/__init__.py": "import torch\n"},
    )
    environ = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(built)],
        check=True,
        env=environ,
        timeout=300,
    )
    venv = python.parent.parent
    (venv / "pip.conf").write_text(
        "[global]\nextra-index-url = https://mirror.invalid/simple\n", encoding="utf-8"
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
    )
    # cuda-resolve, pytest and the rest from the running venv, after this venv's own packages.
    tool_site = sysconfig.get_paths()["purelib"]
    (site / "zz_tool.pth").write_text(
        f"import site; site.addsitedir({tool_site!r})\n", encoding="utf-8"
    )
    for name, module, function in (
        ("cuda-pip", "pip_plugin.__main__", "run"),
        ("cuda-resolve", "cuda_resolve.cli", "run"),
    ):
        script = venv / "bin" / name
        script.write_text(
            _SCRIPT.format(python=python, module=module, function=function), encoding="utf-8"
        )
        script.chmod(0o755)
    return python


@pytest.mark.slow
def test_tests_that_once_read_the_tools_venv_pass_from_a_polluted_one(tmp_path: Path) -> None:
    python = polluted_tool_venv(tmp_path / "tool")
    held = subprocess.run(
        [str(python), "-c", "import torch, pointnet2_ops, cuda_resolve; print(torch.__version__)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert held.stdout.strip() == "2.14.1", held.stderr  # the venv holds what it should
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'inner'}",
            *(str(TESTS / test) for test in SENSITIVE),
        ],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert f"{len(SENSITIVE)} passed" in done.stdout, done.stdout[-3000:]


def test_the_scripts_of_a_polluted_venv_run_its_python() -> None:
    # The console scripts written above are what pip writes (the entry points of pyproject).
    text = (TESTS.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert 'cuda-pip = "pip_plugin.__main__:run"' in text
    assert 'cuda-resolve = "cuda_resolve.cli:run"' in text
