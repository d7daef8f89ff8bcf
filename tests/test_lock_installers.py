"""Stock installers honour a cuda-resolve lock (``network``: pip 26.3, uv and pypiserver come from
PyPI).

A two-variant lock (torch 2.14.1+cu126 for an A100 profile, 2.14.1+cpu for a CPU one) of small
test wheels, the pass-through package served by a real pypiserver on loopback and torch by a
PyTorch-style stand-in: ``pip install -r 'pylock.toml[a100]'`` (pip 26.3) and ``uv pip install -r
pylock.toml --extra cpu`` each fill a scratch venv, and ``cuda-resolve sync --check`` finds it
matches the profile."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_builds import CUDA_13, _lock_words, _publish, built_bench  # noqa: F401  (a fixture)
from test_lock_support import StaticIndex, make_wheel, serve, write_profile

from cuda_resolve.cli import main

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tools") / "venv"
    copy_venv(folder)
    subprocess.run(
        [
            str(folder / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "pip==26.3",
            "uv",
            "pypiserver",
            "passlib",
        ],
        check=True,
    )
    return folder / "bin"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def pypiserver(tools: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    packages = tmp_path_factory.mktemp("packages")
    make_wheel(packages, "filelock", "3.20.0")
    make_wheel(packages, "tinyutil", "1.0", requires=["filelock>=3"])
    port = _free_port()
    server = subprocess.Popen(
        [str(tools / "pypi-server"), "run", "-i", "127.0.0.1", "-p", str(port), str(packages)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def two_variant_lock(pypiserver: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("lock")
    built = root / "built"
    stand_in = StaticIndex(root / "torch-index")
    stand_in.add(make_wheel(built / "cu126", "filelock", "3.20.0"), variant="cu126")
    stand_in.add(make_wheel(built, "torch", "2.14.1+cu126", requires=["filelock"]), variant="cu126")
    stand_in.add(make_wheel(built / "cpu", "filelock", "3.20.0"), variant="cpu")
    stand_in.add(make_wheel(built, "torch", "2.14.1+cpu", requires=["filelock"]), variant="cpu")
    write_profile(root / "a100.toml", driver="535.183.01", gpus=[("NVIDIA A100-SXM4-80GB", "8.0")])
    write_profile(root / "cpu.toml")
    with serve(root / "torch-index") as url, pytest.MonkeyPatch.context() as patch:
        # No rewrite: the lock names the stand-in's own URLs, which stock installers can reach.
        (root / "config.toml").write_text(
            f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n', encoding="utf-8"
        )
        patch.setenv("CUDA_RESOLVE_CONFIG", str(root / "config.toml"))
        patch.delenv("PIP_FIND_LINKS", raising=False)
        output = root / "pylock.toml"
        assert (
            main(
                [
                    "lock",
                    "torch==2.14.1",
                    "tinyutil",
                    "--index-url",
                    f"{pypiserver}/simple",
                    "-o",
                    str(output),
                    "--profile",
                    str(root / "a100.toml"),
                    "--profile",
                    str(root / "cpu.toml"),
                ]
            )
            == 0
        )
        yield output


def _scratch_venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder / "bin" / "python"


def test_pip_26_3_installs_a_profile_of_the_lock_as_an_extra(
    tools: Path, two_variant_lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    python = copy_venv(tmp_path / "venv")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "pip==26.3",
        ],
        check=True,
    )
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--isolated",
            "--disable-pip-version-check",
            "-r",
            f"{two_variant_lock}[a100]",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (
        main(["sync", str(two_variant_lock), "--name", "a100", "--python", str(python), "--check"])
        == 0
    )
    assert (
        main(["sync", str(two_variant_lock), "--name", "cpu", "--python", str(python), "--check"])
        == 1
    )


def test_uv_installs_a_profile_of_the_lock_with_extra(
    tools: Path, two_variant_lock: Path, tmp_path: Path
) -> None:
    python = _scratch_venv(tmp_path / "venv")
    done = subprocess.run(
        [
            str(tools / "uv"),
            "pip",
            "install",
            "--python",
            str(python),
            "-r",
            str(two_variant_lock),
            "--extra",
            "cpu",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    subprocess.run(
        [str(python), "-m", "ensurepip"], check=True, capture_output=True
    )  # sync reads the target through its pip
    assert (
        main(["sync", str(two_variant_lock), "--name", "cpu", "--python", str(python), "--check"])
        == 0
    )


def test_pypiserver_serving_the_wheelhouse_folder_is_where_built_wheels_are_locked(
    tools: Path,
    built_bench: dict[str, object],
    tmp_path: Path,
) -> None:
    """pypiserver serves the wheelhouse folder as it is (wheelhouse_url in the config): lock names
    each source-built wheel where pypiserver lists it, and sync installs it from there."""
    import json
    import os

    import tomllib

    if not CUDA_13.is_file():
        pytest.skip("needs the CUDA 13.0 toolkit at /usr/local/cuda-13.0")
    _publish(built_bench, "h200")
    _publish(built_bench, "a100-h200")
    port = _free_port()
    server = subprocess.Popen(
        [
            str(tools / "pypi-server"),
            "run",
            "-i",
            "127.0.0.1",
            "-p",
            str(port),
            str(Path(str(built_bench["root"])) / "wheelhouse" / "wheels"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        config = Path(os.environ["CUDA_RESOLVE_CONFIG"])
        config.write_text(
            config.read_text().replace(
                "[pytorch]", f'wheelhouse_url = "http://127.0.0.1:{port}/simple/"\n[pytorch]'
            )
        )
        words = _lock_words(built_bench, tmp_path / "pylock.toml")
        at = words.index("--wheelhouse-url")
        del words[at : at + 2]
        assert main(words) == 0
        packages = tomllib.loads((tmp_path / "pylock.toml").read_text())["packages"]
        urls = [w["url"] for p in packages if p["name"] == "pointnet2-ops" for w in p["wheels"]]
        assert len(urls) == 2 and all(
            url.startswith(f"http://127.0.0.1:{port}/packages/") for url in urls
        )
        python = copy_venv(tmp_path / "venv")  # pip, nothing else
        torch_wheel = next((Path(str(built_bench["root"])) / "built").glob("torch-*.whl"))
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--no-index", str(torch_wheel)],
            check=True,
        )
        assert (
            main(["sync", str(tmp_path / "pylock.toml"), "--name", "h200", "--python", str(python)])
            == 0
        )
        listed = subprocess.run(
            [str(python), "-m", "pip", "list", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert any(item["name"] == "pointnet2_ops" for item in json.loads(listed))
    finally:
        server.terminate()
        server.wait(timeout=10)
