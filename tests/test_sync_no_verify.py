"""``sync --no-verify`` (issue 30): a lab that syncs one lock into many environments may skip the
import check, the one part of a cached sync that costs seconds (importing torch), as
``cuda-pip install --no-verify`` may; by default the check runs and a failed import undoes the
sync. ``--check`` changes nothing, so the options of a change are refused beside it. The lock of
tests/test_lock.py (its small wheels), synced into copies of the template venv."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from test_lock import _installed, _venv, bench, configured, locked  # noqa: F401  (fixtures)

from cuda_resolve.cli import main
from cuda_resolve.install import transaction


def _broken_import(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The import check fails as a torch that cannot load its libraries would; returns the
    module lists it was asked for."""
    asked: list[tuple[str, ...]] = []

    def verify(python: str, modules: Sequence[str], environ: Mapping[str, str]) -> str | None:
        asked.append(tuple(modules))
        return "torch: OSError: libcudart.so.12: cannot open shared object file"

    monkeypatch.setattr(transaction, "_verify_imports", verify)
    return asked


def _sync(locked: Path, python: Path, *words: str) -> int:
    return main(["sync", str(locked), "--name", "a100", "--python", str(python), *words])


def test_by_default_a_sync_whose_import_fails_is_undone(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    asked = _broken_import(monkeypatch)
    python = _venv(tmp_path / "venv")
    before = _installed(python)
    assert _sync(locked, python, "--json") != 0
    assert asked == [("torch",)]
    assert "import check failed" in capsys.readouterr().out
    assert _installed(python) == before


def test_no_verify_installs_without_importing_and_says_so(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = _venv(tmp_path / "venv")
    capsys.readouterr()
    with monkeypatch.context() as patch:
        asked = _broken_import(patch)
        assert _sync(locked, python, "--json", "--no-verify") == 0
    report = json.loads(capsys.readouterr().out)
    assert asked == []
    assert report["import_check"] == "skipped (--no-verify)" and report["verified_imports"] == []
    assert "import check" not in report["timings"]
    assert _installed(python)["torch"] == "2.14.1+cu126"
    # In text, the skipped check is said; a checked sync names what it imported.
    again = _venv(tmp_path / "again")
    assert _sync(locked, again, "--no-verify") == 0
    assert "import check skipped (--no-verify)" in capsys.readouterr().out
    third = _venv(tmp_path / "third")
    assert _sync(locked, third, "--json") == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["import_check"] == "passed" and checked["verified_imports"] == ["torch"]
    assert _sync(locked, third) == 0  # all installed: nothing to import, and it says so
    assert "already matches" in capsys.readouterr().out
    assert _sync(locked, third, "--json") == 0
    again = json.loads(capsys.readouterr().out)
    assert again["import_check"] == "not needed" and again["verified_imports"] == []
    # Only a dependency missing: nothing that imports changed, and the text says so.
    subprocess.run(
        [str(third), "-m", "pip", "uninstall", "-y", "-q", "tinyutil"], check=True, timeout=120
    )
    assert _sync(locked, third) == 0
    repaired = capsys.readouterr().out.splitlines()
    assert "installed tinyutil 1.0" in repaired
    assert any(line.startswith("import check not needed: neither torch") for line in repaired)
    fourth = _venv(tmp_path / "fourth")
    assert _sync(locked, fourth) == 0
    assert "imports checked: torch" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("words", "named"),
    [
        (["--no-verify"], "--no-verify"),
        (["--dry-run"], "--dry-run"),
        (["--installer", "pip", "--no-verify"], "--installer --no-verify"),
    ],
)
def test_check_refuses_the_options_of_a_change_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], words: list[str], named: str
) -> None:
    lock = tmp_path / "my lock.toml"  # never read: the refusal comes first
    assert main(["sync", str(lock), "--check", *words]) == 2
    err = capsys.readouterr().err
    assert f"--check changes nothing: {named} would be ignored beside it" in err
    assert f"cuda-resolve sync '{lock}' --name auto --check" in err


def test_the_refusals_hint_keeps_exact_and_json_which_change_what_a_check_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / "pylock.toml"
    words = ["sync", str(lock), "--check", "--exact", "--json", "--no-verify", "--name", "a100"]
    assert main(words) == 2
    err = capsys.readouterr().out  # --json: the error object on stdout
    assert f"cuda-resolve sync {lock} --name a100 --exact --json --check" in err
