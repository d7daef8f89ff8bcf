"""``cuda-resolve lock`` builds the source builds the wheelhouse lacks itself: ``cuda-resolve build
REQ --profile FILE --python PY`` with an interpreter of the profile's Python holding the profile's
torch (``--python-for``, or found), then locks the wheel it made at ``--wheelhouse-url`` with its
sha256; a relock with nothing changed builds nothing and writes the same bytes. No interpreter:
an error naming the profile, its Python and torch, and ``--python-for``; ``--skip-unfit`` leaves
that profile out; ``--no-build`` prints the build commands instead.

The package is tests/data/packages/quickext (its backend writes a wheel in a moment), cloned from
a local git repository at a pinned commit, built against a stand-in torch 2.14.1+cu130 venv and a
stand-in CUDA 13.0 toolkit (tests/_torch_env.py): no compiler, no network, no GPU."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from _torch_env import standin_cuda_toolkit, standin_torch_venv
from test_lock_support import StaticIndex, make_wheel, serve, write_profile

from cuda_resolve.cli import main

DATA = Path(__file__).parent / "data"
MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a venv of this Python holding a stand-in torch 2.14.1+cu130, a stand-in CUDA 13.0
    toolkit)."""
    folder = tmp_path_factory.mktemp("target")
    return standin_torch_venv(folder), standin_cuda_toolkit(folder / "cuda")


def _repository(folder: Path) -> str:
    """quickext as a git repository; its commit."""
    shutil.copytree(
        DATA / "packages" / "quickext", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    git = [
        "git",
        "-C",
        str(folder),
        "-c",
        "user.email=test@example.invalid",
        "-c",
        "user.name=test",
    ]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "quickext"], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def _overlay(folder: Path, repository: Path, revision: str) -> Path:
    text = (DATA / "index" / "quickext" / "packages" / "quickext.toml").read_text()
    text = text.replace(
        'repository = "https://example.invalid/quickext"', f'repository = "{repository.as_uri()}"'
    )
    text = text.replace(
        'revision = "0000000000000000000000000000000000000000"', f'revision = "{revision}"'
    )
    (folder / "packages").mkdir(parents=True)
    (folder / "packages" / "quickext.toml").write_text(text)
    return folder


def _profile(path: Path, gpus: list[tuple[str, str]], *, torch: str = "2.14.1+cu130") -> Path:
    return write_profile(
        path,
        python=f"{MINOR}.0",
        driver="580.159.04",
        gpus=gpus,
        torch=torch,
        glibc="2.39",
        toolkit="13.0",
        gcc="13.3.0",
    )


@pytest.fixture
def bench(
    tmp_path: Path, target: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, object]]:
    python, cuda = target
    revision = _repository(tmp_path / "quickext-repo")
    overlay = _overlay(tmp_path / "overlay", tmp_path / "quickext-repo", revision)
    stand_in = StaticIndex(tmp_path / "stand-in")
    stand_in.add(make_wheel(tmp_path / "built", "torch", "2.14.1+cu130"), variant="cu130")
    # No other Python of this version is found: only this one (no torch) and what --python-for
    # gives.
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PYENV_ROOT", str(home / "no-pyenv"))
    monkeypatch.setenv("PATH", f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(tmp_path / "wheelhouse"))
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (tmp_path / "wheelhouse").mkdir()
    with serve(tmp_path / "stand-in") as url, serve(tmp_path / "wheelhouse") as wheelhouse_url:
        config = tmp_path / "config.toml"
        config.write_text(
            f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n[[rewrite]]\ncanonical = '
            f'"https://download.pytorch.org/whl/"\nmirror = "{url}/whl/"\n'
        )
        monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
        yield {
            "url": url,
            "wheelhouse_url": wheelhouse_url,
            "overlay": overlay,
            "python": python,
            "root": tmp_path,
        }


def _words(bench: dict[str, object], output: Path, *profiles: Path) -> list[str]:
    words = [
        "lock",
        "quickext",
        "--index",
        str(bench["overlay"]),
        "--index-url",
        f"{bench['url']}/simple",
        "--wheelhouse-url",
        str(bench["wheelhouse_url"]),
        "-o",
        str(output),
    ]
    for profile in profiles:
        words += ["--profile", str(profile)]
    return words


def _wheels(bench: dict[str, object]) -> list[Path]:
    return sorted((Path(str(bench["root"])) / "wheelhouse").rglob("quickext-*.whl"))


def test_lock_builds_what_the_wheelhouse_lacks_and_locks_it_at_the_wheelhouse_url(
    bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from packaging.pylock import Pylock

    a100 = _profile(tmp_path / "a100.toml", [("NVIDIA A100-SXM4-80GB", "8.0")])
    h100 = _profile(tmp_path / "h100.toml", [("NVIDIA H100 80GB HBM3", "9.0")])
    lock = tmp_path / "pylock.toml"
    words = [
        *_words(bench, lock, a100, h100),
        "--python-for",
        f"a100={bench['python']}",
        "--python-for",
        f"h100={bench['python']}",
    ]
    assert main(words) == 0, capsys.readouterr().err
    err = " ".join(capsys.readouterr().err.split())
    assert "profile a100: building quickext" in err and "profile h100: building quickext" in err
    # The build's own progress, on the terminal: cross-built for each profile's GPUs.
    assert (
        "TORCH_CUDA_ARCH_LIST=8.0" in err
        and "TORCH_CUDA_ARCH_LIST=9.0" in err
        and "built in" in err
    )
    wheels = _wheels(bench)
    assert (
        len(wheels) == 2
        and any(".sm80." in w.name for w in wheels)
        and any(".sm90." in w.name for w in wheels)
    ), wheels
    data = tomllib.loads(lock.read_text())
    pylock = Pylock.from_dict(data)
    locked = {str(p.marker): (p.wheels or ())[0] for p in pylock.packages if p.name == "quickext"}
    assert set(locked) == {'"a100" in extras', '"h100" in extras'}
    for wheel in locked.values():
        built = next(w for w in wheels if w.name == wheel.name)
        relative = built.relative_to(Path(str(bench["root"])) / "wheelhouse").as_posix()
        assert wheel.url == f"{bench['wheelhouse_url']}/{relative.replace('+', '%2B')}"
        assert (wheel.hashes or {})["sha256"] == hashlib.sha256(built.read_bytes()).hexdigest()
        assert wheel.size == built.stat().st_size
    assert any(
        "quickext" in line for line in data["tool"]["cuda-resolve"]["profiles"]["a100"]["builds"]
    )

    first = lock.read_bytes()
    stamps = {w: w.stat().st_mtime_ns for w in wheels}
    assert main([*words, "--json"]) == 0
    out, again = capsys.readouterr()
    assert json.loads(out)["built"] == []
    assert "building" not in again and "TORCH_CUDA_ARCH_LIST" not in again
    assert lock.read_bytes() == first
    assert {w: w.stat().st_mtime_ns for w in _wheels(bench)} == stamps
    # --json names what a lock built: here the h100 wheel, removed from the wheelhouse first.
    from cuda_resolve.wheelhouse.store import Wheelhouse

    house = Wheelhouse(Path(str(bench["root"])) / "wheelhouse")
    (h100_entry,) = [entry for entry in house.entries() if ".sm90." in entry.path.name]
    house.remove(h100_entry)
    assert main([*words, "--json"]) == 0
    (rebuilt,) = json.loads(capsys.readouterr().out)["built"]
    assert rebuilt["package"] == "quickext" and ".sm90." in rebuilt["wheel"]
    assert rebuilt["sha256"] == hashlib.sha256(Path(rebuilt["wheel"]).read_bytes()).hexdigest()


@pytest.mark.parametrize("where", ["path", "pyenv", "uv"])
def test_an_interpreter_with_the_profiles_python_and_torch_is_found(
    bench: dict[str, object],
    tmp_path: Path,
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No --python-for: the stand-in venv (holding the profile's torch) is python3.X on PATH (as
    when it is active), a pyenv version, or what `uv python find 3.X` answers."""
    venv = Path(str(bench["python"])).parent.parent
    if where == "path":
        monkeypatch.setenv("PATH", f"{venv / 'bin'}:{os.environ['PATH']}")
    elif where == "pyenv":
        (tmp_path / "pyenv" / "versions").mkdir(parents=True)
        (tmp_path / "pyenv" / "versions" / f"{MINOR}.99").symlink_to(venv, target_is_directory=True)
        monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    else:
        tools = tmp_path / "tools"
        tools.mkdir()
        uv = tools / "uv"
        uv.write_text(
            f'#!/bin/sh\n[ "$1 $2" = "python find" ] && [ "$4" = "{MINOR}" ] && echo '
            f"{venv / 'bin' / 'python'} && exit 0\nexit 2\n"
        )
        uv.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    h100 = _profile(tmp_path / "h100.toml", [("NVIDIA H100 80GB HBM3", "9.0")])
    assert main(_words(bench, tmp_path / "pylock.toml", h100)) == 0, capsys.readouterr().err
    assert "profile h100: building quickext" in capsys.readouterr().err
    assert [".sm90." in w.name for w in _wheels(bench)] == [True]


def test_no_interpreter_with_the_profiles_torch_names_what_is_missing(
    bench: dict[str, object],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What is found instead: this test's own venv with no torch (found as pyenv's), and the
    # running interpreter, always a candidate, named with whatever torch the tool's venv holds.
    empty = tmp_path / "no-torch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(empty)], check=True)
    (tmp_path / "pyenv" / "versions").mkdir(parents=True)
    (tmp_path / "pyenv" / "versions" / f"{MINOR}.99").symlink_to(empty, target_is_directory=True)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    h100 = _profile(tmp_path / "h100.toml", [("NVIDIA H100 80GB HBM3", "9.0")])
    lock = tmp_path / "pylock.toml"
    assert main(_words(bench, lock, h100)) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "profile h100 needs quickext 0.1.0+pt2141cu130.sm90." in err
    assert f"which needs Python {MINOR} with torch 2.14.1+cu130 installed" in err
    found = str(tmp_path / "pyenv" / "versions" / f"{MINOR}.99" / "bin" / "python")
    assert f"{found} (Python {platform.python_version()}, no torch)" in err
    assert f"{sys.executable} (" in err
    assert "--python-for h100=PATH" in err
    # The torch to install, from the index that serves it (user walk C6: "the cu130 index").
    assert "where `pip install torch==2.14.1" in err and "` was run)" in err
    assert "index was run" not in err
    assert not lock.exists() and _wheels(bench) == []
    # A --python-for of another torch is named with the torch it holds.
    other = _profile(
        tmp_path / "h100-old.toml", [("NVIDIA H100 80GB HBM3", "9.0")], torch="2.13.0+cu130"
    )
    assert main([*_words(bench, lock, other), "--python-for", f"h100-old={bench['python']}"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert (
        "with torch 2.13.0+cu130 installed" in err
        and f"{bench['python']} (torch 2.14.1+cu130)" in err
    )


def test_skip_unfit_leaves_out_the_profile_that_cannot_be_built_here(
    bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a100 = _profile(tmp_path / "a100.toml", [("NVIDIA A100-SXM4-80GB", "8.0")])
    h100 = _profile(tmp_path / "h100.toml", [("NVIDIA H100 80GB HBM3", "9.0")])
    lock = tmp_path / "pylock.toml"
    assert (
        main(
            [
                *_words(bench, lock, a100, h100),
                "--python-for",
                f"a100={bench['python']}",
                "--skip-unfit",
            ]
        )
        == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    assert "left out: h100: profile h100 needs quickext" in out
    assert tomllib.loads(lock.read_text())["extras"] == ["a100"]
    assert [".sm80." in w.name for w in _wheels(bench)] == [True]


def test_no_build_prints_the_build_commands_and_builds_nothing(
    bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a100 = _profile(tmp_path / "a100.toml", [("NVIDIA A100-SXM4-80GB", "8.0")])
    lock = tmp_path / "pylock.toml"
    assert (
        main([*_words(bench, lock, a100), "--python-for", f"a100={bench['python']}", "--no-build"])
        == 1
    )
    err = " ".join(capsys.readouterr().err.split())
    assert (
        "has no wheel for these source builds: profile a100: quickext 0.1.0+pt2141cu130.sm80."
        in err
    )
    assert f"cuda-resolve build quickext --profile {a100} --python {bench['python']}" in err
    assert not lock.exists() and _wheels(bench) == []


def test_a_profile_of_another_cpu_architecture_is_not_built_here(
    bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import platform

    other = "x86_64" if platform.machine().lower() in ("aarch64", "arm64") else "aarch64"
    grace = _profile(tmp_path / "grace.toml", [("NVIDIA GH200 480GB", "9.0")])
    grace.write_text(grace.read_text().replace('arch = "x86_64"', f'arch = "{other}"'))
    assert (
        main(
            [
                *_words(bench, tmp_path / "pylock.toml", grace),
                "--python-for",
                f"grace={bench['python']}",
            ]
        )
        == 1
    )
    err = " ".join(capsys.readouterr().err.split())
    assert f"profile grace (linux {other}) needs quickext 0.1.0+pt2141cu130.sm90." in err
    assert (
        f"this machine (linux {platform.machine().lower()}) cannot build for it: build on a linux "
        f"{other} machine" in err
    )
    assert _wheels(bench) == []


def test_a_profile_whose_arch_is_written_amd64_or_arm64_is_built_on_that_machine(
    bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile accepts ``amd64``/``arm64`` as written; they are this machine's x86_64/aarch64."""
    import platform

    alias = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine().lower())
    if alias is None:
        pytest.skip(f"no alias of {platform.machine()} for a profile")
    h100 = _profile(tmp_path / "h100.toml", [("NVIDIA H100 80GB HBM3", "9.0")])
    h100.write_text(h100.read_text().replace('arch = "x86_64"', f'arch = "{alias}"'))
    lock = tmp_path / "pylock.toml"
    assert main([*_words(bench, lock, h100), "--python-for", f"h100={bench['python']}"]) == 0, (
        capsys.readouterr().err
    )
    assert "profile h100: building quickext" in capsys.readouterr().err
    assert [".sm90." in w.name for w in _wheels(bench)] == [True]
    data = tomllib.loads(lock.read_text())
    assert data["extras"] == ["h100"]
    assert (
        data["tool"]["cuda-resolve"]["profiles"]["h100"]["arch"] == platform.machine().lower()
    )  # as an install here detects it
