"""``doctor --json`` imports only what it needs once its caches are warm (issue 8: start-up time).

Each module named here cost the command measurable time on the H200 (docs/detection.md, "Speed")
and is needed only on a cold cache, a config file, a write or a program run. The user folders
that replaced platformdirs on the hot path must be the installed platformdirs' answers (the XDG
base-directory rule: a relative XDG value is ignored; platformdirs 3 used such values as given).
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
    "cuda_resolve.index.model",  # doctor reads the index's CUDA facts only (index/cuda.py)
    "packaging.specifiers",  # held by the package catalogue, which doctor does not read
    "requests",
    "rich",
    "dataclasses",  # @frozen classes are made without it (it imports inspect: ~9 ms, issue 28)
    "inspect",
    "shutil",  # argparse's width is read without it; which() only where PATH is searched
    "subprocess",  # only a run that starts a program
    "packaging.version",  # the facts' torch releases are text, matched by index.cuda.release_key
    "pickle",
    "typing",  # names only the type checker needs are imported under TYPE_CHECKING = False
    "unicodedata",  # only text that is not ASCII is measured with it
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
    # The default cache folder (XDG_CACHE_HOME is the test's own), the branch users run.
    environ.pop("CUDA_RESOLVE_CACHE_DIR", None)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=cwd,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    imported: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return imported


@pytest.mark.skipif(
    sys.platform != "linux", reason="the XDG folders are read directly on Linux only"
)
@pytest.mark.skipif(
    sys.prefix == sys.base_prefix,
    reason="needs to run in a virtualenv (the target read in process)",
)
def test_warm_doctor_imports_nothing_it_does_not_need(tmp_path: Path) -> None:
    assert not config_path().exists()  # the autouse fixture's private, absent config file
    cold = _imported_by_doctor(NOT_ON_THE_WARM_PATH, tmp_path)
    assert "sysconfig" in cold or "importlib.metadata" in cold  # the first run fills the caches
    assert _imported_by_doctor(NOT_ON_THE_WARM_PATH, tmp_path) == []


def test_with_a_config_file_doctor_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = tmp_path / "lab-index"
    overlay.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'index_dirs = ["{overlay}"]\n')
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    assert _imported_by_doctor(("cuda_resolve.config",), tmp_path) == ["cuda_resolve.config"]
    from cuda_resolve.index.load import overlay_dirs

    assert overlay in overlay_dirs()


@pytest.mark.skipif(
    sys.platform != "linux", reason="the XDG folders are read directly on Linux only"
)
@pytest.mark.parametrize("value", [None, "", "   ", "/srv/xdg", "relative/xdg", "~/xdg"])
def test_user_folders_are_platformdirs_answers(
    value: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    assert user_cache_dir() == Path(platformdirs.user_cache_dir("cuda-resolve", appauthor=False))
    assert user_config_dir() == Path(platformdirs.user_config_dir("cuda-resolve", appauthor=False))
    monkeypatch.delenv("CUDA_RESOLVE_CONFIG")
    assert (
        config_path()
        == Path(platformdirs.user_config_dir("cuda-resolve", appauthor=False)) / "config.toml"
    )


@pytest.mark.skipif(
    sys.platform != "linux", reason="the XDG folders are read directly on Linux only"
)
@pytest.mark.parametrize("home", [None, "", "relative/home", "/srv/home"])
def test_a_missing_or_relative_home_is_looked_up_as_platformdirs_does(
    home: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)
    assert user_cache_dir() == Path(platformdirs.user_cache_dir("cuda-resolve", appauthor=False))
    assert user_config_dir() == Path(platformdirs.user_config_dir("cuda-resolve", appauthor=False))
    assert user_cache_dir().is_absolute()


@pytest.mark.skipif(
    sys.platform != "linux", reason="the XDG folders are read directly on Linux only"
)
def test_no_home_at_all_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    from cuda_resolve.errors import UsageError

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "relative/home")
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(UsageError, match=r"HOME is 'relative/home'") as raised:
        user_cache_dir()
    assert "absolute path" in (raised.value.hint or "")
