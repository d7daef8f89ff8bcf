"""``sync --exact`` never breaks the tool and never lies (issue 26), with the real pip.

The target holds a stand-in cuda-resolve (small local wheels: the tool, what it requires, what
its requirements require, and what it does not need), as in the README's default where the tool
syncs the venv it is installed in: --exact removes what the lock does not name but keeps the
tool, its requirement closure and pip, and says so in text and --json. A removal that fails
midway says what the restore really put back (and what it did not).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock import _installed, _venv, bench, configured, locked  # noqa: F401  (fixtures)
from test_lock_support import make_wheel

from cuda_resolve.cli import main


def _pip_install(python: Path, wheels: Path, *names: str) -> None:
    subprocess.run(
        [
            *(str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
            *("--no-index", "--find-links", str(wheels), *names),
        ],
        check=True,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin"},
    )


def _site(python: Path) -> Path:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


@pytest.fixture(scope="module")
def tool_template(
    bench: dict[str, Path | str], locked: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A venv synced to the lock's cpu profile, then given a stand-in cuda-resolve (which needs
    toolneed, which needs toolneed-deep and, through an extra, toolneed-extra) and packages the
    tool does not need: one behind a marker that does not hold here, one only cuda-resolve's
    own test extra wants, and a stray one."""
    tmp_path = tmp_path_factory.mktemp("tool")
    wheels = tmp_path / "wheels"
    make_wheel(
        wheels,
        "cuda-resolve",
        "0.0.1",
        requires=[
            "toolneed>=1",
            "filelock",  # locked too: it stays as the lock says
            "markerless-py2; python_version < '3'",
            "testonly; extra == 'test'",
        ],
    )
    make_wheel(
        wheels, "toolneed", "1.0", requires=["toolneed-deep", "toolneed-extra; extra == 'x'"]
    )
    make_wheel(wheels, "toolneed-deep", "2.0")
    make_wheel(wheels, "toolneed-extra", "1.0")
    make_wheel(wheels, "wants-toolneed-x", "1.0", requires=["toolneed[x]"])
    for name in ("markerless-py2", "testonly", "stray"):
        make_wheel(wheels, name, "1.0")
    python = _venv(tmp_path / "venv")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_RESOLVE_CONFIG", str(bench["config"]))
        patch.delenv("PIP_FIND_LINKS", raising=False)
        assert main(["sync", str(locked), "--name", "cpu", "--python", str(python)]) == 0
    _pip_install(python, wheels, "cuda-resolve", "markerless-py2", "testonly", "stray")
    _pip_install(python, wheels, "toolneed-extra")
    return tmp_path


@pytest.fixture
def tool_venv(configured: dict[str, Path | str], tool_template: Path, tmp_path: Path) -> Path:
    """A copy of the venv :func:`tool_template` made (a fraction of a second)."""
    (tmp_path / "wheels").symlink_to(tool_template / "wheels")
    return copy_venv(tmp_path / "venv", template=tool_template / "venv")


def test_exact_keeps_the_tool_and_what_it_needs_and_says_so(
    tool_venv: Path, locked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = str(tool_venv)
    words = ["sync", str(locked), "--name", "cpu", "--python", python, "--exact"]
    capsys.readouterr()
    assert main([*words, "--check", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    states = {p["name"]: p["state"] for p in report["packages"]}
    not_locked = sorted(name for name, state in states.items() if state == "not locked")
    # toolneed-extra is reached only through toolneed's extra x, which nothing installed asks.
    assert not_locked == ["markerless-py2", "stray", "testonly", "toolneed-extra"]
    kept = {k["name"]: k["why"] for k in report["kept"]}
    for installer in ("setuptools", "wheel"):  # where the venv has them (Python < 3.12)
        assert kept.pop(installer, "it installs the rest") == "it installs the rest"
    assert kept == {
        "cuda-resolve": "the tool itself",
        "toolneed": "cuda-resolve needs it to run",
        "toolneed-deep": "cuda-resolve needs it to run",
        "pip": "it installs the rest",
    }
    assert main(words) == 0
    out = capsys.readouterr().out
    assert "--exact kept toolneed-deep 2.0 (cuda-resolve needs it to run; not in the lock)" in out
    lines = out.splitlines()
    removed = [line for line in lines if line.startswith("removed ")]
    assert [line.split()[1] for line in removed] == [
        "markerless-py2",
        "stray",
        "testonly",
        "toolneed-extra",
    ], lines
    # Each with the version it removed.
    assert all(line.count(" ") == 2 for line in removed), removed
    assert lines[0].startswith("profile cpu of ") and lines[0].endswith(f"-> {python}")
    installed = _installed(tool_venv)
    assert {"cuda-resolve", "toolneed", "toolneed-deep", "pip", "filelock"} <= set(installed)
    assert not {"stray", "testonly", "markerless-py2", "toolneed-extra"} & set(installed)
    assert main([*words, "--check"]) == 0  # what --exact keeps is no drift


def test_exact_follows_the_extras_a_requiring_line_names(
    tool_venv: Path, locked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """toolneed[x] named by the lock's side is not the tool's need; named by the tool's closure
    it is: a stand-in cuda-resolve 0.0.2 that requires toolneed[x] keeps toolneed-extra."""
    wheels = tmp_path / "wheels2"
    make_wheel(wheels, "cuda-resolve", "0.0.2", requires=["toolneed[x]"])
    _pip_install(tool_venv, wheels, "--find-links", str(tmp_path / "wheels"), "cuda-resolve==0.0.2")
    capsys.readouterr()
    words = ["sync", str(locked), "--name", "cpu", "--python", str(tool_venv), "--exact"]
    assert main([*words, "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "toolneed-extra" in {k["name"] for k in report["kept"]}
    assert "toolneed-extra" not in report["remove"] and "stray" in report["remove"]


def test_a_removal_that_fails_midway_says_what_the_restore_put_back(
    tool_venv: Path, locked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip uninstalls markerless-py2 and stray, then stops at testonly (its RECORD is gone): the
    restore puts the two back, and the error says so by name, from the restore's result."""
    record = next(_site(tool_venv).glob("testonly-1.0.dist-info")) / "RECORD"
    record.unlink()
    capsys.readouterr()
    words = ["sync", str(locked), "--name", "cpu", "--python", str(tool_venv), "--exact", "--json"]
    assert main(words) != 0
    error = json.loads(capsys.readouterr().out)
    hint = error["hint"]
    assert "pip uninstall failed" in error["error"]
    assert hint.startswith("restored: "), hint
    assert "markerless-py2" in hint and "stray" in hint and "NOT restored" not in hint
    installed = _installed(tool_venv)
    assert {"markerless-py2", "stray", "testonly", "toolneed-extra"} <= set(installed)


def test_a_removal_that_fails_first_says_nothing_was_removed(
    tool_venv: Path, locked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = next(_site(tool_venv).glob("markerless_py2-1.0.dist-info")) / "RECORD"
    record.unlink()
    capsys.readouterr()
    words = ["sync", str(locked), "--name", "cpu", "--python", str(tool_venv), "--exact"]
    assert main(words) != 0
    err = capsys.readouterr().err
    assert "hint: nothing had been removed: the environment is as it was" in err, err
    assert {"markerless-py2", "stray"} <= set(_installed(tool_venv))


def test_a_restore_that_cannot_put_everything_back_says_what_it_could_not(
    tool_venv: Path,
    locked: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The restore's own report reaches the hint word for word: what it put back and what not."""
    from cuda_resolve.install.stash import RestoreReport, Stash

    real = Stash.restore

    def partial(self: Stash) -> RestoreReport:
        done = real(self)
        return RestoreReport(
            restored=done.restored[1:],
            not_restored=(*done.not_restored, f"{done.restored[0]} (a stand-in failure)"),
            kept="/the/stash",
        )

    monkeypatch.setattr(Stash, "restore", partial)
    record = next(_site(tool_venv).glob("testonly-1.0.dist-info")) / "RECORD"
    record.unlink()
    capsys.readouterr()
    words = ["sync", str(locked), "--name", "cpu", "--python", str(tool_venv), "--exact", "--json"]
    assert main(words) != 0
    hint = json.loads(capsys.readouterr().out)["hint"]
    assert "NOT restored: " in hint and "(a stand-in failure)" in hint, hint
    assert "the stash is kept at /the/stash" in hint and "cuda-resolve undo --last" in hint


def test_remove_extras_refuses_what_the_tool_needs() -> None:
    from cuda_resolve.errors import InstallError
    from cuda_resolve.lock.sync import remove_extras

    with pytest.raises(InstallError, match="refusing to remove toolneed"):
        remove_extras("/nonexistent/python", ["toolneed"], {}, Path("/dev/null"), keep={"toolneed"})


def test_tool_closure_follows_markers_and_extras() -> None:
    from cuda_resolve.lock.drift import tool_closure

    requires = {
        "cuda-resolve": ["a", "b; python_version < '3'", "c[fast]", "t; extra == 'test'"],
        "a": ["d"],
        "c": ["e; extra == 'fast'", "f; extra == 'slow'"],
        "d": ["a"],  # a cycle ends
        "e": [],
        "f": [],
        "b": [],
        "t": [],
    }
    markers = {"python_version": "3.12", "sys_platform": "linux"}
    assert tool_closure(requires, markers) == {"cuda-resolve", "a", "c", "d", "e"}
    assert tool_closure({"other": ["a"]}, markers) == frozenset()


def test_exact_keeps_uv_the_engine_sync_installs_local_files_with() -> None:
    """cuda-resolve[fast] puts uv beside the tool; --exact removed it, and every later sync fell
    back to pip (user walk 2026-12-05 F2)."""
    from cuda_resolve.lock.drift import kept_by_exact

    kept = kept_by_exact([], {"uv": "0.13.9", "stray": "1.0"}, [])
    assert [(k.name, k.why) for k in kept] == [("uv", "it installs the rest")]
