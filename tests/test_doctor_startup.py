"""``doctor --json`` imports only what it needs once its caches are warm (issue 8: start-up time).

Each module named here cost the command measurable time on the H200 (docs/detection.md, "Speed")
and is needed only on a cold cache, a config file, a write or a program run. The user folders
that replaced platformdirs on the hot path must be exactly platformdirs' answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from cuda_resolve.paths import config_path, user_cache_dir, user_config_dir

#: Modules a warm ``doctor --json`` must not import (without a config file).
NOT_ON_THE_WARM_PATH = (
    "cuda_resolve.config",  # only when a config file exists
    "platformdirs",  # the XDG folders are read directly on Linux
    "tempfile",  # only a run that writes a file
    "shlex",  # only a run that starts a program
    "importlib.resources",  # the shipped index is found from its import spec
    "importlib.metadata",  # the in-process target report is cached
    "sysconfig",  # likewise
    "pynvml",  # GPU facts are cached
    "cuda_resolve.index._parse",  # the parsed index is cached
    "requests",
    "rich",
)

_RUN_DOCTOR = """
import contextlib, io, json, runpy, sys
sys.argv = ["cuda-resolve", "doctor", "--json"]
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        runpy.run_module("cuda_resolve", run_name="__main__")
except SystemExit:
    pass
json.loads(out.getvalue())  # the command did run
print(json.dumps(sorted(name for name in NAMES if name in sys.modules)))
"""


def _imported_by_doctor(names: tuple[str, ...], cwd: Path) -> list[str]:
    code = f"NAMES = {list(names)!r}\n{_RUN_DOCTOR}"
    environ = dict(os.environ)
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # The active venv is the running interpreter's: its target is read in process, as on the H200.
    environ["VIRTUAL_ENV"] = sys.prefix
    environ.pop("CONDA_PREFIX", None)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environ, cwd=cwd, check=False
    )
    assert result.returncode == 0, result.stderr
    imported: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return imported


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG folders are read directly on Linux only")
@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs to run in a virtualenv (the target read in process)")
def test_warm_doctor_imports_nothing_it_does_not_need(tmp_path: Path) -> None:
    assert not config_path().exists()  # the autouse fixture's private, absent config file
    cold = _imported_by_doctor(NOT_ON_THE_WARM_PATH, tmp_path)
    assert "sysconfig" in cold or "importlib.metadata" in cold  # the first run fills the caches
    assert _imported_by_doctor(NOT_ON_THE_WARM_PATH, tmp_path) == []


def test_with_a_config_file_doctor_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    overlay = tmp_path / "lab-index"
    overlay.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'index_dirs = ["{overlay}"]\n')
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    assert _imported_by_doctor(("cuda_resolve.config",), tmp_path) == ["cuda_resolve.config"]
    from cuda_resolve.index.load import overlay_dirs

    assert overlay in overlay_dirs()


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG folders are read directly on Linux only")
@pytest.mark.parametrize("value", [None, "", "   ", "/srv/xdg", "relative/xdg", "~/xdg"])
def test_user_folders_are_platformdirs_answers(value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    assert user_cache_dir() == Path(platformdirs.user_cache_dir("cuda-resolve", appauthor=False))
    assert user_config_dir() == Path(platformdirs.user_config_dir("cuda-resolve", appauthor=False))
    monkeypatch.delenv("CUDA_RESOLVE_CONFIG")
    assert config_path() == Path(platformdirs.user_config_dir("cuda-resolve", appauthor=False)) / "config.toml"
