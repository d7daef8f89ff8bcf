"""``mirror show`` lists the site-wide pip files pip reads (``$XDG_CONFIG_DIRS/pip/pip.conf``,
``/etc/pip.conf``), not only the user and environment files.

A lab that points pip at its mirror in ``/etc/pip.conf`` got a ``mirror show`` saying nothing of
it, while ``mirror test`` (which asks pip) reported that index (found walking docs/mirrors.md as
a user, helper H7). They are read first by pip, so they are listed first; absent ones are left
out (``mirror set`` never writes them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_resolve.cli import main
from cuda_resolve.mirrors.targets import pip_global_files

LAB_MIRROR = "https://pypi.lab.example.edu/simple/"


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with no pip files of its own and a site folder whose pip.conf sets the mirror."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(home / "cr.toml"))
    for name in ("PIP_CONFIG_FILE", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDARC"):
        monkeypatch.delenv(name, raising=False)
    site = tmp_path / "xdg-site"
    (site / "pip").mkdir(parents=True)
    (site / "pip" / "pip.conf").write_text(
        f"[global]\nindex-url = {LAB_MIRROR}\ntrusted-host = pypi.lab.example.edu\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("XDG_CONFIG_DIRS", f"{tmp_path / 'absent'}:{site}")
    return site / "pip" / "pip.conf"


def test_show_lists_the_site_file_pip_reads(
    machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mirror", "show", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    pip_files = [f for f in files if f["tool"] == "pip"]
    assert pip_files[0]["role"] == "global" and pip_files[0]["path"] == str(machine)
    assert pip_files[0]["index_url"] == LAB_MIRROR
    assert any("trusted-host" in w for w in pip_files[0]["warnings"])
    shown = [f["path"] for f in pip_files if f["role"] == "global"]
    assert str(machine.parent.parent.parent / "absent" / "pip" / "pip.conf") not in shown
    assert main(["mirror", "show"]) == 0
    out = capsys.readouterr().out
    assert f"pip global: {machine}\n  index_url: {LAB_MIRROR}" in out


def test_the_files_are_the_ones_pip_itself_reads(machine: Path, tmp_path: Path) -> None:
    """pip's own `config debug` names the same site-wide files, in the same order."""
    env = {
        "XDG_CONFIG_DIRS": f"{tmp_path / 'absent'}:{machine.parent.parent}",
        "HOME": str(tmp_path / "home"),
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "debug"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=60,
    ).stdout
    section = out.split("\nglobal:\n")[1].split("\nsite:\n")[0]
    pips = [
        line.strip().split(", exists:")[0] for line in section.splitlines() if "exists:" in line
    ]
    assert pips == [str(p) for p in pip_global_files(env, "linux")]


def test_the_text_shows_every_setting_the_json_has(
    machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """find-links in a pip file was in `mirror show --json` and missing from the text (user walk
    H7 F4): the text lists each setting the file entry carries."""
    machine.write_text(
        f"[global]\nindex-url = {LAB_MIRROR}\nfind-links = /srv/wheels\n"
        "extra-index-url = https://extra.lab.example.edu/simple/\n",
        encoding="utf-8",
    )
    assert main(["mirror", "show", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    [entry] = [f for f in files if f["path"] == str(machine)]
    assert main(["mirror", "show"]) == 0
    out = capsys.readouterr().out
    settings = {k: v for k, v in entry.items() if v not in (None, [], {})}
    for key in set(settings) - {"tool", "role", "path", "exists", "warnings"}:
        assert f"\n  {key}: {settings[key]}" in out, key
    assert "\n  find_links: ['/srv/wheels']" in out
