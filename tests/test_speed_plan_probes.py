"""``plan`` at interactive speed (issue 28): the target's pip configuration is read here, as pip
reads it, instead of starting the target's pip for ``pip config debug`` (0.2 - 1 s, most of a
plan's time); where that is not certain, pip is asked, and ``plan`` starts it in the background
first thing.

The files read here are compared with what the target's real pip lists for the same files, in
every place pip looks (global through ``XDG_CONFIG_DIRS``, both user files, the venv's own
file, ``PIP_CONFIG_FILE``), and ``--isolated`` and ``PIP_CONFIG_FILE=/dev/null`` too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _torch_env import copy_venv

from cuda_resolve import _bounded
from cuda_resolve.install import pipconfig
from cuda_resolve.install.pipconfig import ConfigFile, config_values, prefetch_config


def _files(tmp_path: Path, python: Path) -> dict[str, str]:
    """Configuration files in every place pip reads, each setting keys of its own and one key
    (``global.timeout``) they all set; the environment that points pip at them."""
    home = tmp_path / "home"
    xdg = tmp_path / "xdg-dirs"
    config_home = tmp_path / "config-home"
    writes = {
        xdg / "pip" / "pip.conf": "[global]\ntimeout = 1\nretries = 7\n",
        home / ".pip" / "pip.conf": "[global]\ntimeout = 2\n[install]\nno_deps = yes\n",
        config_home / "pip" / "pip.conf": "[global]\ntimeout = 3\n--Trusted-Host = a.example\n",
        python.parent.parent / "pip.conf": "[install]\nrequire-hashes = true\n",
        tmp_path / "env.conf": "[global]\nextra-index-url =\n  https://one.example\n"
        "  https://two.example\n",
    }
    for path, text in writes.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PIP_", "XDG_")) and name != "HOME"
    }
    environ.update(HOME=str(home), XDG_CONFIG_DIRS=str(xdg), XDG_CONFIG_HOME=str(config_home))
    return environ


def _effective(files: list[ConfigFile]) -> dict[str, str]:
    """Each key's value in effect (a later file wins), whitespace as pip splits it."""
    found: dict[str, str] = {}
    for entry in files:
        for key, value in entry.values:
            found[key] = " ".join(value.split())
    return found


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    return copy_venv(tmp_path / "venv")


@pytest.mark.parametrize(
    "case", ["all files", "isolated", "PIP_CONFIG_FILE", "PIP_CONFIG_FILE=/dev/null", "none"]
)
def test_the_files_read_here_are_those_pip_lists(
    tmp_path: Path, venv: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    environ = _files(tmp_path, venv)
    isolated = case == "isolated"
    if case == "PIP_CONFIG_FILE":  # its file is read last, and the user files are not
        environ["PIP_CONFIG_FILE"] = str(tmp_path / "env.conf")
    elif case == "PIP_CONFIG_FILE=/dev/null":
        environ["PIP_CONFIG_FILE"] = os.devnull
    elif case == "none":
        environ["HOME"] = environ["XDG_CONFIG_HOME"] = str(tmp_path / "empty")
        environ["XDG_CONFIG_DIRS"] = str(tmp_path / "empty")
        (venv.parent.parent / "pip.conf").unlink()
    here = pipconfig._files_read_here(str(venv), environ, isolated=isolated)
    monkeypatch.setattr(pipconfig, "_files_read_here", lambda *_, **__: None)
    by_pip = pipconfig._read_config_now(str(venv), environ, isolated=isolated, timeout=120)
    assert by_pip[1:] == ([], None), by_pip
    assert here is not None and by_pip[0] is not None
    # The same settings in effect, from the same files. (pip < 26 prints a variant's merged
    # values under each of its files, multi-line values indented, and the files it skipped for
    # PIP_CONFIG_FILE=/dev/null without values: read here, each file has its own values.)
    assert _effective(here) == _effective(by_pip[0])
    assert {(f.path, f.variant) for f in here} == {
        (f.path, f.variant) for f in by_pip[0] if f.values
    }
    variants = {entry.variant for entry in here}
    expected = {
        "all files": {"global", "user", "site"},
        "isolated": {"global", "site"},
        "PIP_CONFIG_FILE": {"global", "site", "env"},
        "PIP_CONFIG_FILE=/dev/null": set(),
        "none": {"global"} & variants,  # only this machine's own /etc files, if any
    }[case]
    assert variants == expected, here


def test_a_venv_plan_reads_pip_config_without_starting_pip(
    tmp_path: Path, venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = _files(tmp_path, venv)
    started: list[list[str]] = []
    real_run = _bounded.run

    def run(argv: list[str], **kwargs: Any) -> Any:
        started.append(list(argv))
        return real_run(argv, **kwargs)

    monkeypatch.setattr(pipconfig, "run", run)
    found = config_values(str(venv), environ, keys=["require-hashes", "timeout"])
    assert any(key == "require-hashes" and value == "true" for key, value, _ in found), found
    assert [value for key, value, _ in found if key == "timeout"][-1] == "3", found  # user's
    assert started == []


def test_what_cannot_be_read_here_is_asked_of_pip_once_in_the_background(
    tmp_path: Path, venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file pip's parser refuses (here: a key twice) is pip's to explain; plan's prefetch
    starts that pip run early and the reader takes its answer instead of starting another."""
    environ = _files(tmp_path, venv)
    (venv.parent.parent / "pip.conf").write_text("[global]\ntimeout = 1\ntimeout = 2\n")
    assert pipconfig._files_read_here(str(venv), environ, isolated=False) is None
    started: list[list[str]] = []
    real_run = _bounded.run

    def run(argv: list[str], **kwargs: Any) -> Any:
        started.append(list(argv))
        return real_run(argv, **kwargs)

    monkeypatch.setattr(pipconfig, "run", run)
    prefetch_config(str(venv), environ)
    prefetch_config(str(venv.parent / "python3"), environ)  # the same bin/: the same answer
    listed, notes, error = pipconfig._read_config(str(venv), environ, isolated=False, timeout=120)
    assert started and all(argv[-2:] == ["config", "debug"] for argv in started)
    assert len(started) == 1, started
    assert listed is None and error is not None and "timeout" in error, (listed, notes, error)
    assert not pipconfig._PREFETCHED  # taken: a later reader asks again


def test_the_target_probe_started_early_is_taken_once_and_its_error_raised_where_asked(
    venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_resolve.errors import InstallError
    from cuda_resolve.install import pip

    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    calls: list[str] = []
    real = pip._run_json

    def run_json(python: str, script: str, given: Any, what: str) -> object:
        calls.append(python)
        return real(python, script, given, what)

    monkeypatch.setattr(pip, "_run_json", run_json)
    pip.prefetch_probe(str(venv), environ)
    pip.prefetch_probe(str(venv.parent / "python3"), environ)  # the same bin/: one probe
    facts, installed = pip.pip_facts_and_distributions(str(venv), environ)
    assert len(calls) == 1 and "pip" in installed and facts.prefix == str(venv.parent.parent)
    pip.pip_facts_and_distributions(str(venv), environ)  # taken: this one probes afresh
    assert len(calls) == 2
    missing = venv.parent / "no-such-python"
    pip.prefetch_probe(str(missing), environ)
    with pytest.raises(InstallError, match="could not report"):
        pip.pip_facts_and_distributions(str(missing), environ)
    pip.prefetch_probe(str(venv), environ)
    pip.forget_prefetched()  # a command that ended before asking leaves nothing behind
    pip.pip_facts_and_distributions(str(venv), environ)
    assert len(calls) == 5
