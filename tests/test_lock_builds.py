"""Source-built wheels in a lock: pointnet2_ops for a profile whose torch is installed is locked
from the wheelhouse at --wheelhouse-url (its plan's wheel key; a wheel covering every GPU is
reused), and sync installs it while counting the installed torch as satisfied. Needs nvcc 13 (the
build's pre-flight checks the toolkit the plan chose), no network, no GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_support import StaticIndex, make_wheel, serve, write_profile

from cuda_resolve.cli import main

CUDA_13 = Path(os.path.realpath("/usr/local/cuda-13.0/bin/nvcc"))
pytestmark = pytest.mark.skipif(
    not CUDA_13.is_file(), reason="needs the CUDA 13.0 toolkit at /usr/local/cuda-13.0"
)


def _profile(path: Path, gpus: list[tuple[str, str]]) -> Path:
    return write_profile(
        path,
        python=f"{sys.version_info[0]}.{sys.version_info[1]}.0",
        driver="580.159.04",
        gpus=gpus,
        torch="2.11.0+cu130",
        glibc="2.39",
        toolkit="13.0",
        gcc="13.3.0",
        arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
    )


@pytest.fixture
def built_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    from cuda_resolve.config import load_config
    from cuda_resolve.index import default_index
    from cuda_resolve.lock.make import profile_plan
    from cuda_resolve.lock.profiles import load_lock_profile
    from cuda_resolve.resolve import Options
    from cuda_resolve.wheelhouse.store import Wheelhouse

    stand_in = StaticIndex(tmp_path / "stand-in")
    stand_in.add(make_wheel(tmp_path / "built", "torch", "2.11.0+cu130"), variant="cu130")
    h200 = _profile(tmp_path / "h200.toml", [("NVIDIA H200", "9.0")])
    both = _profile(
        tmp_path / "a100-h200.toml", [("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA H200", "9.0")]
    )
    a100 = _profile(tmp_path / "a100.toml", [("NVIDIA A100-SXM4-80GB", "8.0")])
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(tmp_path / "wheelhouse"))
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    house = Wheelhouse(tmp_path / "wheelhouse")
    with serve(tmp_path / "stand-in") as url, serve(tmp_path / "wheelhouse") as wheelhouse_url:
        config = tmp_path / "config.toml"
        config.write_text(
            f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n[[rewrite]]\ncanonical = '
            f'"https://download.pytorch.org/whl/"\nmirror = "{url}/whl/"\n'
        )
        monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
        keys = {}
        for profile in (h200, both):
            plan, _ = profile_plan(
                load_lock_profile(str(profile)),
                ["torch", "pointnet2_ops"],
                default_index(),
                Options(),
                load_config(),
                house,
            )
            keys[profile.stem] = plan.builds[0].key
        yield {
            "url": url,
            "wheelhouse_url": wheelhouse_url,
            "house": house,
            "keys": keys,
            "profiles": (h200, a100, both),
            "root": tmp_path,
        }


def _publish(bench: dict[str, object], name: str) -> None:
    from cuda_resolve.wheelhouse.store import Wheelhouse

    key = bench["keys"][name]  # type: ignore[index]
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    wheel = make_wheel(
        Path(str(bench["root"])) / "built" / name,
        "pointnet2_ops",
        key.labelled_version,
        requires=["torch>=1.4"],
        tag=f"{tag}-{tag}-linux_x86_64",
    )
    house = bench["house"]
    assert isinstance(house, Wheelhouse)
    house.publish(key, wheel, strip_debug=False)


def _lock_words(bench: dict[str, object], output: Path) -> list[str]:
    words = [
        "lock",
        "torch",
        "pointnet2_ops",
        "--index-url",
        f"{bench['url']}/simple",
        "--wheelhouse-url",
        str(bench["wheelhouse_url"]),
        "-o",
        str(output),
    ]
    for profile in bench["profiles"]:  # type: ignore[attr-defined]
        words += ["--profile", str(profile)]
    return words


def test_a_build_the_wheelhouse_lacks_is_refused_with_the_build_command_or_the_missing_interpreter(
    built_bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (A wheel for the A100+H200 node would do for the H200 too: it covers every GPU there.)
    assert main([*_lock_words(built_bench, tmp_path / "pylock.toml"), "--no-build"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    h200 = built_bench["keys"]["h200"].labelled_version  # type: ignore[index]
    assert (
        "has no wheel for these source builds: profile " in err
        and f"profile h200: pointnet2_ops {h200}" in err
    )
    assert "profile a100: pointnet2_ops" in err
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert (
        f"cuda-resolve build torch pointnet2_ops --profile {built_bench['profiles'][0]} --python "
        f"PYTHON{minor}-WITH-TORCH-2.11.0+cu130" in err
    )  # type: ignore[index]
    # Without --no-build the lock builds them, with an interpreter of the profile's Python and
    # torch: none here.
    assert main(_lock_words(built_bench, tmp_path / "pylock.toml")) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert (
        f"profile h200 needs pointnet2_ops {h200} built, which needs Python" in err
        and "with torch 2.11.0+cu130 installed" in err
    )
    assert "--python-for h200=PATH" in err and not (tmp_path / "pylock.toml").exists()


def test_built_wheels_are_locked_from_the_wheelhouse_and_sync_installs_them_beside_installed_torch(
    built_bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib
    from packaging.pylock import Pylock

    _publish(built_bench, "h200")
    _publish(built_bench, "a100-h200")
    lock = tmp_path / "pylock.toml"
    assert main(_lock_words(built_bench, lock)) == 0
    data = tomllib.loads(lock.read_text())
    pylock = Pylock.from_dict(data)
    ops = {
        str(p.version): (str(p.marker), (p.wheels or ())[0].url)
        for p in pylock.packages
        if p.name == "pointnet2-ops"
    }
    h200, both = (built_bench["keys"][name].labelled_version for name in ("h200", "a100-h200"))  # type: ignore[index]
    assert ".sm90" in h200 and ".sm80.sm90" in both and set(ops) == {h200, both}
    assert ops[h200][0] == '"h200" in extras'
    assert (
        ops[both][0] == '"a100" in extras or "a100-h200" in extras'
    )  # a100 reuses the covering wheel
    assert all(
        url and url.startswith(str(built_bench["wheelhouse_url"]) + "/wheels/")
        for _, url in ops.values()
    )
    builds = data["tool"]["cuda-resolve"]["profiles"]["h200"]["builds"]
    assert (
        "recipe pointnet2_ops-" in builds[0]
        and "b5ceb6d9ca0467ea34beb81023f96ee82228f626" in builds[0]
        and "arch list 9.0" in builds[0]
    )
    # A node whose torch 2.11.0+cu130 is installed: sync fetches pointnet2_ops only.
    python = copy_venv(tmp_path / "venv")  # pip, nothing else
    torch_wheel = next((Path(str(built_bench["root"])) / "built").glob("torch-*.whl"))
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-index", str(torch_wheel)], check=True
    )
    capsys.readouterr()
    assert main(["sync", str(lock), "--name", "h200", "--python", str(python), "--json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["installed"] == [f"pointnet2-ops=={h200}"]
    assert main(["sync", str(lock), "--name", "h200", "--python", str(python), "--check"]) == 0


@pytest.mark.parametrize("layout", ["pep691", "html"])
def test_built_wheels_are_locked_where_the_labs_index_server_lists_them(
    built_bench: dict[str, object], tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wheelhouse_url in the config (the lab's index server, where `wheelhouse publish` uploads):
    the lock names the file where that index lists it, once its sha256 matches the wheelhouse's."""
    import tomllib

    from cuda_resolve.wheelhouse.store import Wheelhouse

    _publish(built_bench, "h200")
    _publish(built_bench, "a100-h200")
    house = built_bench["house"]
    assert isinstance(house, Wheelhouse)
    lab = StaticIndex(tmp_path / "lab")
    for entry in house.entries():
        lab.add(entry.path, variant=None if layout == "pep691" else "lab")
    with serve(tmp_path / "lab") as lab_url:
        simple = f"{lab_url}/simple/" if layout == "pep691" else f"{lab_url}/whl/lab/"
        config = Path(os.environ["CUDA_RESOLVE_CONFIG"])
        config.write_text(
            config.read_text().replace("[pytorch]", f'wheelhouse_url = "{simple}"\n[pytorch]')
        )
        words = [w for w in _lock_words(built_bench, tmp_path / "pylock.toml")]
        at = words.index("--wheelhouse-url")
        del words[at : at + 2]
        assert main(words) == 0
    packages = tomllib.loads((tmp_path / "pylock.toml").read_text())["packages"]
    urls = [
        wheel["url"]
        for package in packages
        if package["name"] == "pointnet2-ops"
        for wheel in package["wheels"]
    ]
    prefix = f"{lab_url}/files/" if layout == "pep691" else f"{lab_url}/whl/lab/"
    assert len(urls) == 2 and all(url.startswith(prefix) for url in urls)


def _locked_at_a_server_that_is_away(
    built_bench: dict[str, object], tmp_path: Path
) -> tuple[Path, Path]:
    """(a lock whose builds are at a served wheelhouse that does not answer, built and published
    into the local wheelhouse; a fresh venv to sync into)."""
    _publish(built_bench, "h200")
    _publish(built_bench, "a100-h200")
    lock = tmp_path / "pylock.toml"
    words = _lock_words(built_bench, lock)
    words[words.index("--wheelhouse-url") + 1] = "https://127.0.0.1:9/wheelhouse"  # no server
    assert main([*words, "--no-build"]) == 0
    return lock, copy_venv(tmp_path / "venv")


def test_sync_takes_a_locked_build_from_the_local_wheelhouse_when_its_server_is_away(
    built_bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """User walk C9: the lab member who built and published pointnet2_ops could not sync while
    the served wheelhouse was down (or not set up yet): the same file, by sha256, is in the
    local wheelhouse's entry that the locked URL names."""
    lock, python = _locked_at_a_server_that_is_away(built_bench, tmp_path)
    torch_wheel = next((Path(str(built_bench["root"])) / "built").glob("torch-*.whl"))
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-index", str(torch_wheel)], check=True
    )
    capsys.readouterr()
    assert main(["sync", str(lock), "--name", "h200", "--python", str(python)]) == 0
    said = capsys.readouterr()
    assert "from the wheelhouse" in said.out + said.err, said
    h200 = built_bench["keys"]["h200"].labelled_version  # type: ignore[index]
    assert main(["sync", str(lock), "--name", "h200", "--python", str(python), "--check"]) == 0
    assert h200 in capsys.readouterr().out


def test_a_sync_dry_run_says_a_locked_build_comes_from_the_local_wheelhouse(
    built_bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dry run of the sync above: it said the build was "not in the cache yet" and printed a
    pip command that fetches it from the server (down), while the sync itself takes it from the
    local wheelhouse. Now the note says where the file is, and pip's command reads it there."""
    import json

    lock, python = _locked_at_a_server_that_is_away(built_bench, tmp_path)
    capsys.readouterr()
    assert main(["sync", str(lock), "--name", "h200", "--python", str(python), "--dry-run"]) == 0
    said = capsys.readouterr().out
    assert "are on this machine already (pointnet2-ops" in said, said
    house = built_bench["house"]
    entry = house.lookup(built_bench["keys"]["h200"])  # type: ignore[attr-defined,index]
    assert str(entry.path.parent) in said, said

    assert main(["sync", str(lock), "--name", "h200", "--python", str(python), "--dry-run",
                 "--json"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    requirements = Path(next(w for run in report["pip_runs"] for w in run if w.endswith(".txt")))
    lines = requirements.read_text().splitlines()
    built = next(line for line in lines if "pointnet2" in line.lower())
    assert entry.path.as_uri() in built and "127.0.0.1:9" not in built, lines


def test_lock_refuses_a_source_folder_that_is_not_the_pinned_source_before_building(
    built_bench: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review F3: a plain copy was compiled, kept under its content, and then the lock failed
    saying the profile's torch or Python did not match. A lock names builds anyone can rebuild
    from the pinned source, so such a folder is refused first, saying what to give instead."""
    plain = tmp_path / "Pointnet2_PyTorch"
    (plain / "pointnet2_ops_lib").mkdir(parents=True)
    (plain / "pointnet2_ops_lib" / "setup.py").write_text("raise SystemExit('never run')\n")
    words = _lock_words(built_bench, tmp_path / "pylock.toml")
    capsys.readouterr()
    assert main([*words, "--source", f"pointnet2_ops={plain}"]) == 1
    said = capsys.readouterr().err
    assert f"--source {plain} is not a git checkout" in said, said
    assert "a lock names builds of the pinned source" in said and "nothing was built" in said
    assert f"cuda-pip install pointnet2_ops --source {plain}" in said, said
    assert not (tmp_path / "pylock.toml").exists()
    house = built_bench["house"]
    assert house.entries() == []  # type: ignore[attr-defined]
