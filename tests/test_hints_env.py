"""No silence where something is wrong (issue 29).

- ``env --jupyter NAME`` for a target without ipykernel writes the spec and says that a notebook
  cannot start it, with the command that installs ipykernel into that target.
- ``wheelhouse list`` on a folder that does not exist says so (not "no wheels yet").
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from _torch_env import copy_venv

from cuda_resolve.cli import main


@pytest.fixture
def jupyter_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "jupyter"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(folder))
    return folder


def _site(python: Path) -> Path:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def test_a_kernel_spec_for_a_target_without_ipykernel_says_so(
    tmp_path: Path, jupyter_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = copy_venv(tmp_path / "venv")
    assert main(["env", "--jupyter", "no-kernel", "--python", str(python)]) == 0
    err = capsys.readouterr().err
    assert (jupyter_dir / "kernels" / "no-kernel" / "kernel.json").is_file()
    (warning,) = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert "has no ipykernel" in warning
    # The fix is one line that can be pasted: here, a stand-in ipykernel in its place.
    command = shlex.split(warning.rsplit(": ", 1)[1])
    assert command == [str(python), "-m", "pip", "install", "ipykernel"]
    (_site(python) / "ipykernel").mkdir()
    (_site(python) / "ipykernel" / "__init__.py").write_text("")
    assert main(["env", "--jupyter", "no-kernel", "--python", str(python), "--json"]) == 0
    assert "warning" not in json.loads(capsys.readouterr().out)
    assert main(["env", "--jupyter", "no-kernel", "--python", str(python)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_wheelhouse_list_says_a_missing_folder_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo"
    assert main(["wheelhouse", "list", "--wheelhouse", str(missing)]) == 0
    out = capsys.readouterr().out
    assert f"{missing} does not exist" in out and "no wheels yet" not in out
    assert main(["wheelhouse", "list", "--wheelhouse", str(missing), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exists"] is False


def test_help_says_what_the_option_does_here(capsys: pytest.CaptureFixture[str]) -> None:
    """env prints shell lines (no tables); build installs nothing (its --python is the
    interpreter built against)."""
    for command in ("env", "build"):
        assert main([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        if command == "env":
            assert "tables" not in text and "instead of the shell lines" in text
        else:
            python = text.split("--python PATH ", 1)[1]
            assert python.startswith("the interpreter whose torch (and Python) the builds "), python
            assert "to install into" not in python.split("--allow-torch-change")[0]
