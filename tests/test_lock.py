"""cuda-resolve lock and sync against a loopback index of small wheels (no network, no GPU).

Two profiles (an A100 on driver 535, a CPU box) lock torch from a PyTorch-style stand-in index
(reached through a configured mirror, locked under download.pytorch.org's canonical URLs) and a
pass-through package from a PEP 691 index. packaging.pylock validates the file; sync installs
each profile into a fresh venv with the real pip; the refusals change nothing."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from _torch_env import copy_venv
from test_lock_support import StaticIndex, make_wheel, serve, write_profile

from cuda_resolve.cli import main


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path | str]]:
    root = tmp_path_factory.mktemp("lockbench")
    built = root / "built"
    index = StaticIndex(root / "index")
    index.add(make_wheel(built, "filelock", "3.20.0"))
    index.add(make_wheel(built, "tinyutil", "1.0", requires=["filelock>=3"]))
    index.add(make_wheel(built / "cu126", "filelock", "3.20.0"), variant="cu126")
    index.add(make_wheel(built, "nvidia-cuda-runtime-cu12", "12.6.77"), variant="cu126")
    index.add(
        make_wheel(
            built,
            "torch",
            "2.14.1+cu126",
            requires=["filelock", "nvidia-cuda-runtime-cu12==12.6.77; sys_platform == 'linux'"],
        ),
        variant="cu126",
    )
    index.add(make_wheel(built / "cpu", "filelock", "3.20.0"), variant="cpu")
    index.add(make_wheel(built, "torch", "2.14.1+cpu", requires=["filelock"]), variant="cpu")
    write_profile(root / "a100.toml", driver="535.183.01", gpus=[("NVIDIA A100-SXM4-80GB", "8.0")])
    write_profile(root / "cpu-box.toml", name="cpu")
    with serve(root / "index") as url:
        config = root / "config.toml"
        config.write_text(
            f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n[[rewrite]]\ncanonical = '
            f'"https://download.pytorch.org/whl/"\nmirror = "{url}/whl/"\n',
            encoding="utf-8",
        )
        yield {"root": root, "url": url, "config": config}


@pytest.fixture
def configured(
    bench: dict[str, Path | str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path | str]:
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(bench["config"]))
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    return bench


def _lock(
    bench: dict[str, Path | str], output: Path, *profiles: str, extra: tuple[str, ...] = ()
) -> int:
    root = Path(bench["root"])
    words = [
        "lock",
        "torch==2.14.1",
        "tinyutil",
        "--index-url",
        f"{bench['url']}/simple",
        "-o",
        str(output),
        *extra,
    ]
    for profile in profiles:
        words += [
            "--profile",
            str(root / profile)
            if "=" not in profile
            else profile.split("=")[0] + "=" + str(root / profile.split("=")[1]),
        ]
    return main(words)


@pytest.fixture(scope="module")
def locked(bench: dict[str, Path | str]) -> Path:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_RESOLVE_CONFIG", str(bench["config"]))
        patch.delenv("PIP_FIND_LINKS", raising=False)
        output = Path(bench["root"]) / "pylock.toml"
        assert _lock(bench, output, "a100.toml", "cpu-box.toml") == 0
    return output


def _venv(folder: Path) -> Path:
    return copy_venv(folder)  # a copy of the session's template venv (pip, nothing else)


def _installed(python: Path) -> dict[str, str]:
    done = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {item["name"].lower(): item["version"] for item in json.loads(done.stdout)}


def test_the_lock_is_pep_751_with_one_extra_per_profile_and_per_profile_torch(locked: Path) -> None:
    from packaging.pylock import Pylock

    data = tomllib.loads(locked.read_text())
    pylock = Pylock.from_dict(data)
    pylock.validate()
    assert pylock.extras == [
        "a100",
        "cpu",
    ]  # the cpu box's own `name = "cpu"` wins over its file's stem
    torches = {str(p.version): str(p.marker) for p in pylock.packages if p.name == "torch"}
    assert torches == {"2.14.1+cu126": '"a100" in extras', "2.14.1+cpu": '"cpu" in extras'}
    shared = next(p for p in pylock.packages if p.name == "filelock")
    assert shared.marker is None  # both profiles install the same filelock: one entry, no marker
    runtime = next(p for p in pylock.packages if p.name == "nvidia-cuda-runtime-cu12")
    assert (
        str(runtime.marker) == '"a100" in extras'
    )  # torch's own requirement: the closure is locked
    for package in pylock.packages:
        for wheel in package.wheels or ():
            assert wheel.size and wheel.size > 0 and len((wheel.hashes or {})["sha256"]) == 64
    cu126 = next(p for p in pylock.packages if str(p.version) == "2.14.1+cu126")
    assert (
        cu126.wheels
        and cu126.wheels[0].url
        == "https://download.pytorch.org/whl/cu126/torch-2.14.1%2Bcu126-py3-none-any.whl"
    )
    profiles = data["tool"]["cuda-resolve"]["profiles"]
    assert profiles["a100"]["driver"] == "535.183.01" and profiles["a100"]["torch-cuda"] == "12.6"
    assert profiles["a100"]["decision"] == ["torch==2.14.1+cu126 (wheel)", "tinyutil (pip)"]


def test_relocking_gives_the_same_bytes_whatever_the_order_of_profiles(
    configured: dict[str, Path | str], locked: Path, tmp_path: Path
) -> None:
    again = tmp_path / "pylock.toml"
    assert _lock(configured, again, "cpu-box.toml", "a100.toml") == 0
    assert again.read_bytes() == locked.read_bytes()


def test_lock_check_says_current_then_stale_when_a_profile_changes(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = Path(configured["root"])
    words = [
        "lock",
        "torch==2.14.1",
        "tinyutil",
        "--check",
        "-o",
        str(locked),
        "--profile",
        str(root / "a100.toml"),
        "--profile",
        str(root / "cpu-box.toml"),
    ]
    assert main(words) == 0
    changed = tmp_path / "a100.toml"
    changed.write_text((root / "a100.toml").read_text().replace("535.183.01", "580.95.05"))
    assert (
        main([*words[:-4], "--profile", str(changed), "--profile", str(root / "cpu-box.toml")]) == 1
    )
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "profile a100" in out
        and "changed since the lock was made" in out
        and "decided now torch==" in out
    )


def test_sync_installs_a_profile_exactly_and_check_then_finds_no_drift(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = _venv(tmp_path / "venv")
    assert (
        main(["sync", str(locked), "--name", "a100", "--python", str(python), "--check", "--json"])
        == 1
    )
    report = json.loads(capsys.readouterr().out)
    assert {p["name"]: p["state"] for p in report["packages"]} == {
        "filelock": "missing",
        "nvidia-cuda-runtime-cu12": "missing",
        "tinyutil": "missing",
        "torch": "missing",
    }
    assert main(["sync", str(locked), "--name", "a100", "--python", str(python)]) == 0
    installed = _installed(python)
    assert (
        installed["torch"] == "2.14.1+cu126"
        and installed["nvidia-cuda-runtime-cu12"] == "12.6.77"
        and installed["tinyutil"] == "1.0"
    )
    capsys.readouterr()
    assert main(["sync", str(locked), "--name", "a100", "--python", str(python), "--check"]) == 0
    assert "matches profile a100" in capsys.readouterr().out


def test_a_torch_from_pypi_counts_as_the_locked_build_its_version_py_names(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On the H200, PyPI's torch says 2.11.0 to pip and 2.11.0+cu130 in torch/version.py: the lock
    names the PyTorch index's 2.11.0+cu130, which is that build, not another."""
    python = _venv(tmp_path / "venv")
    assert main(["sync", str(locked), "--name", "a100", "--python", str(python)]) == 0
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Make the installed torch look like PyPI's: no local label in its metadata, the build in
    # version.py.
    dist = Path(site) / "torch-2.14.1+cu126.dist-info"
    metadata = dist / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 2.14.1+cu126", "Version: 2.14.1"))
    dist.rename(Path(site) / "torch-2.14.1.dist-info")
    (Path(site) / "torch" / "version.py").write_text(
        "__version__ = '2.14.1+cu126'\ncuda = '12.6'\n"
    )
    capsys.readouterr()
    assert (
        main(["sync", str(locked), "--name", "a100", "--python", str(python), "--check", "--json"])
        == 0
    ), capsys.readouterr().out
    states = {p["name"]: p["state"] for p in json.loads(capsys.readouterr().out)["packages"]}
    assert states["torch"] == "ok"


def test_sync_switches_profile_and_exact_removes_what_the_lock_does_not_name(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = _venv(tmp_path / "venv")
    assert main(["sync", str(locked), "--name", "a100", "--python", str(python)]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "sync",
                str(locked),
                "--name",
                "cpu",
                "--python",
                str(python),
                "--check",
                "--exact",
                "--json",
            ]
        )
        == 1
    )
    report = {p["name"]: p["state"] for p in json.loads(capsys.readouterr().out)["packages"]}
    assert report["torch"] == "other build" and report["nvidia-cuda-runtime-cu12"] == "not locked"
    assert "pip" not in report and "setuptools" not in report
    assert (
        main(
            ["sync", str(locked), "--name", "cpu", "--python", str(python), "--exact", "--dry-run"]
        )
        == 0
    )
    assert _installed(python)["torch"] == "2.14.1+cu126"  # a dry run changes nothing
    assert main(["sync", str(locked), "--name", "cpu", "--python", str(python), "--exact"]) == 0
    installed = _installed(python)
    assert (
        installed["torch"] == "2.14.1+cpu"
        and "nvidia-cuda-runtime-cu12" not in installed
        and "pip" in installed
    )


def test_sync_auto_picks_the_profile_that_fits_this_machine(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = _venv(tmp_path / "venv")
    # This machine has no GPU (the test suite's rule): only the CPU profile fits it.
    assert (
        main(["sync", str(locked), "--name", "auto", "--python", str(python), "--check", "--json"])
        == 1
    )
    assert json.loads(capsys.readouterr().out)["profile"] == "cpu"


def test_auto_says_which_facts_differ_for_each_profile(locked: Path) -> None:
    from cuda_resolve.index import default_cuda_facts
    from cuda_resolve.lock.read import read_lock
    from cuda_resolve.lock.select import differences
    from cuda_resolve.profile import load_profile

    lock = read_lock(locked)
    h200 = load_profile(
        Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"
    )
    a100 = differences(lock.profiles["a100"], h200, default_cuda_facts())
    assert any("Python 3.12 here, 3.11 locked" in d for d in a100)
    assert any("compute capability 9.0 here; locked for 8.0" in d for d in a100)
    assert any(
        "GPUs here: 9.0; locked for: none" in d
        for d in differences(lock.profiles["cpu"], h200, default_cuda_facts())
    )


def _edited(locked: Path, tmp_path: Path, edit: object) -> Path:
    text = locked.read_text()
    assert callable(edit)
    changed = edit(text)
    assert changed != text
    path = tmp_path / "pylock.toml"
    path.write_text(changed)
    return path


def test_a_wheel_whose_hash_differs_is_refused_and_nothing_is_installed(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = locked.read_text()
    tiny = re.search(r'name = "tinyutil-1\.0-py3-none-any\.whl".*?sha256 = "([0-9a-f]{64})"', text)
    assert tiny is not None
    bad = _edited(locked, tmp_path, lambda t: t.replace(tiny.group(1), "0" * 64))
    python = _venv(tmp_path / "venv")
    before = _installed(python)
    assert main(["sync", str(bad), "--name", "cpu", "--python", str(python)]) == 1
    err = capsys.readouterr().err
    assert "sha256 mismatch" in err and "nothing was installed" in err
    assert _installed(python) == before


def test_a_newer_major_lock_version_is_refused_and_a_newer_minor_is_a_note(
    locked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = _edited(
        locked, tmp_path, lambda t: t.replace('lock-version = "1.0"', 'lock-version = "2.0"')
    )
    assert main(["sync", str(newer), "--name", "cpu", "--check"]) == 2
    assert (
        "lock-version = '2.0': this cuda-resolve reads lock version 1.x only"
        in capsys.readouterr().err
    )
    from cuda_resolve.lock.read import read_lock

    minor = tmp_path / "minor.toml"
    minor.write_text(locked.read_text().replace('lock-version = "1.0"', 'lock-version = "1.1"'))
    assert read_lock(minor).notes == (
        f"{minor}: lock-version 1.1 is newer than 1.0: keys it added are ignored",
    )
    # packaging's own "pylock minor version 1.1 is not supported" (through logging, printed bare
    # on stderr, saying the opposite of what happens) is not shown (user walk 2026-12-05 B11).
    import sys

    said = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "sync", str(minor), "--name", "cpu", "--check"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = said.stdout + said.stderr
    assert "lock-version 1.1 is newer than 1.0" in output, output
    assert "not supported" not in output, output


def test_an_unknown_profile_is_refused(locked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", str(locked), "--name", "h100", "--check"]) == 2
    assert "has no profile 'h100'; it has a100, cpu" in capsys.readouterr().err


def test_a_malformed_lock_names_the_path_in_the_document(
    locked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _edited(
        locked,
        tmp_path,
        lambda t: re.sub(r", hashes = \{ sha256 = \"[0-9a-f]{64}\" \}", "", t, count=1),
    )
    assert main(["sync", str(bad), "--name", "cpu", "--check"]) == 2
    assert re.search(
        r"packages\[0\]\.wheels\[0\]\.hashes: Missing required value", capsys.readouterr().err
    )
    broken = tmp_path / "broken.toml"
    broken.write_text("lock-version = \n")
    assert main(["sync", str(broken), "--check"]) == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_profile_names_that_clash_are_refused(
    configured: dict[str, Path | str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(configured["root"])
    assert (
        _lock(configured, tmp_path / "pylock.x.toml", "a100.toml", "cpu=a100.toml", "cpu-box.toml")
        == 2
    )
    assert "two profiles are both named 'cpu'" in capsys.readouterr().err
    assert not (tmp_path / "pylock.x.toml").exists()
    assert _lock(configured, tmp_path / "lock.toml", "a100.toml") == 2
    assert (
        "a lock file is named pylock.toml or pylock.NAME.toml (PEP 751)" in capsys.readouterr().err
    )
    assert root.exists()


def test_selection_without_packaging_26_1_equals_packagings_own(locked: Path) -> None:
    """Machines with packaging 25.0 - 26.0 (no Pylock.select) pick the same files for each
    profile."""
    from cuda_resolve.compat import marker_environment
    from cuda_resolve.lock import select
    from cuda_resolve.lock.read import read_lock
    from cuda_resolve.profile import load_profile

    lock = read_lock(locked)
    env = load_profile(Path(__file__).parent / "data" / "profiles" / "cpu-ci-no-driver.toml")
    markers = dict(marker_environment(env))
    for profile in lock.profiles:
        ours = [(str(p.name), w.filename) for p, w in select._select(lock, profile, env, markers)]
        theirs = [
            (str(p.name), w.filename)
            for p, w in lock.pylock.select(
                environment=markers, tags=env.wheel_tags(), extras={profile}
            )
        ]  # type: ignore[arg-type]
        assert ours == theirs and len(ours) >= 3


def test_update_relocks_one_profile_and_leaves_the_others_entries_byte_identical(
    configured: dict[str, Path | str], locked: Path, tmp_path: Path
) -> None:
    root = Path(configured["root"])
    output = tmp_path / "pylock.toml"
    output.write_bytes(locked.read_bytes())
    # The A100 node's driver moved to 550: only its profile is relocked.
    changed = tmp_path / "a100.toml"
    changed.write_text((root / "a100.toml").read_text().replace("535.183.01", "550.54.15"))
    before = tomllib.loads(locked.read_text())
    assert (
        main(
            [
                "lock",
                "torch==2.14.1",
                "tinyutil",
                "--index-url",
                f"{configured['url']}/simple",
                "-o",
                str(output),
                "--update",
                "--profile",
                str(changed),
            ]
        )
        == 0
    )
    after = tomllib.loads(output.read_text())
    assert (
        after["tool"]["cuda-resolve"]["profiles"]["cpu"]
        == before["tool"]["cuda-resolve"]["profiles"]["cpu"]
    )
    assert after["tool"]["cuda-resolve"]["profiles"]["a100"]["driver"] == "550.54.15"

    def packages(text: str) -> str:
        return text.split("\n\n[tool.cuda-resolve]")[0]

    # The A100's decision did not change (cu126 still), so every entry, the CPU box's included, is
    # the same bytes; only its facts under [tool.cuda-resolve] moved.
    assert "'cpu' in extras" in packages(locked.read_text()) and packages(
        output.read_text()
    ) == packages(locked.read_text())
    assert (
        main(["lock", "torch", "-o", str(output), "--update", "--profile", str(changed)]) == 1
    )  # other requests: refused


def test_a_cached_sync_loads_no_http_layer_and_a_cached_file_that_changed_is_checked_again(
    configured: dict[str, Path | str], locked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import sys

    from cuda_resolve.net.client import HttpClient
    from cuda_resolve.paths import cache_root

    assert (
        main(["sync", str(locked), "--name", "a100", "--python", str(_venv(tmp_path / "first"))])
        == 0
    )
    # Every file is cached and was checked: the next sync hashes none of them and never loads
    # requests.
    second = _venv(tmp_path / "second")
    script = (
        "import sys\nfrom cuda_resolve.cli import main\n"
        f"code = main(['sync', {str(locked)!r}, '--name', 'a100', '--python', {str(second)!r}])\n"
        "sys.exit(code if code else 3 if 'requests' in sys.modules else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _installed(second)["torch"] == "2.14.1+cu126"
    # A cached file changed since (same size, its mtime put back: only its ctime tells) is not
    # trusted: it is fetched and checked again.
    wheel = next((cache_root() / "lock-wheels").rglob("torch-2.14.1+cu126-py3-none-any.whl"))
    good = wheel.read_bytes()
    before = wheel.stat()
    wheel.write_bytes(bytes(len(good)))
    os.utime(wheel, ns=(before.st_atime_ns, before.st_mtime_ns))
    fetched: list[str] = []
    download = HttpClient.download

    def recording(self: HttpClient, url: str, dest: Path | str, **kwargs: object) -> Path:
        fetched.append(Path(dest).name)
        return download(self, url, dest, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(HttpClient, "download", recording)
    third = _venv(tmp_path / "third")
    assert main(["sync", str(locked), "--name", "a100", "--python", str(third)]) == 0
    assert fetched == ["torch-2.14.1+cu126-py3-none-any.whl"] and wheel.read_bytes() == good
    assert _installed(third)["torch"] == "2.14.1+cu126"


def test_a_sync_asks_the_target_for_its_facts_once(
    configured: dict[str, Path | str], locked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor takes what sync's own probe of the target read (pip's facts, the installed
    distributions, the resolved prefix) instead of asking again: each interpreter start is a
    tenth of a small sync. pip runs once, quietly (its console output cost it 0.15 s)."""
    import subprocess

    python = _venv(tmp_path / "venv")
    started: list[list[str]] = []
    original = subprocess.Popen.__init__

    def recording(
        self: subprocess.Popen[bytes], args: list[str], *rest: object, **kwargs: object
    ) -> None:
        if isinstance(args, list) and args and str(args[0]) == str(python):
            started.append([str(word) for word in args])
        original(self, args, *rest, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(subprocess.Popen, "__init__", recording)
    # pip's run is the one counted here (uv's: tests/test_uv_engine.py).
    sync = ["sync", str(locked), "--name", "a100", "--python", str(python), "--installer", "pip"]
    assert main(sync) == 0
    scripts = [words[words.index("-c") + 1] for words in started if "-c" in words]
    pip_runs = [words for words in started if words[1:3] == ["-m", "pip"]]
    assert (
        sum("externally_managed" in script for script in scripts) == 2
    )  # sync's probe, and the listing after pip
    assert not any("realpath(sys.prefix))" in script and len(script) < 100 for script in scripts)
    assert len(pip_runs) == 1 and "--quiet" in pip_runs[0]
    assert _installed(python)["torch"] == "2.14.1+cu126"


def test_sync_stashes_only_what_it_installs_or_removes(
    configured: dict[str, Path | str], locked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The undo of a sync links only the files of the names its --no-deps run (or --exact's
    uninstall) can change: linking every file of a torch environment cost it most of a small sync.
    """
    from cuda_resolve.install.stash import Stash

    asked: list[list[str] | None] = []
    begin = Stash.begin.__func__  # type: ignore[attr-defined]

    def spying(cls: type[Stash], python: str, **kwargs: object) -> Stash:
        only = kwargs.get("only")
        asked.append(sorted(only) if only is not None else None)  # type: ignore[call-overload]
        return begin(cls, python, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(Stash, "begin", classmethod(spying))
    python = _venv(tmp_path / "venv")
    assert main(["sync", str(locked), "--name", "a100", "--python", str(python)]) == 0
    assert main(["sync", str(locked), "--name", "cpu", "--python", str(python), "--exact"]) == 0
    assert asked == [
        ["filelock", "nvidia-cuda-runtime-cu12", "tinyutil", "torch"],
        ["torch"],
        ["nvidia-cuda-runtime-cu12"],
    ]
    assert _installed(python)["torch"] == "2.14.1+cpu"
