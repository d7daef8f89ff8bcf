"""Locked files' facts when the index gives no hash (read once, remembered), and profiles for which
nothing fits (the lock fails naming the profile, or --skip-unfit leaves it out). No network."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import tomllib
from test_lock_support import StaticIndex, make_wheel, serve, write_profile

from cuda_resolve.cli import main
from cuda_resolve.lock.files import FileFinder
from cuda_resolve.net.client import HttpClient


def test_a_file_without_a_hash_from_its_index_is_read_once_hashed_and_remembered(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "files"
    wheel = make_wheel(folder, "tinyutil", "1.0")
    expected = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with serve(folder) as url, HttpClient(use_cache=False) as client:
        finder = FileFinder(client, cache_dir=tmp_path / "facts")
        facts = finder.facts(f"{url}/{wheel.name}", project="tinyutil", index=None, sha256=None)
    assert (facts.sha256, facts.size) == (expected, wheel.stat().st_size)
    # The server is gone: the facts come from what was remembered, not from a second download.
    with HttpClient(use_cache=False) as client:
        again = FileFinder(client, cache_dir=tmp_path / "facts").facts(
            f"{url}/{wheel.name}", project="tinyutil", index=None, sha256=None
        )
    assert again == facts


def test_a_hash_that_differs_from_the_index_page_is_refused(tmp_path: Path) -> None:
    from cuda_resolve.errors import LockError

    index = StaticIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path / "built", "tinyutil", "1.0"))
    with serve(tmp_path / "index") as url, HttpClient(use_cache=False) as client:
        finder = FileFinder(client, cache_dir=tmp_path / "facts")
        with pytest.raises(LockError, match="the index's page says sha256"):
            finder.facts(
                f"{url}/files/tinyutil-1.0-py3-none-any.whl",
                project="tinyutil",
                index=f"{url}/simple",
                sha256="0" * 64,
            )


def test_a_profile_for_which_nothing_fits_fails_the_lock_unless_skip_unfit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    index = StaticIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path / "built", "filelock", "3.20.0"), variant="cpu")
    index.add(
        make_wheel(tmp_path / "built", "torch", "2.14.1+cpu", requires=["filelock"]), variant="cpu"
    )
    cpu = write_profile(tmp_path / "cpu.toml")
    old = write_profile(tmp_path / "old.toml", python="3.6.15")  # no torch 2.14 for Python 3.6
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    with serve(tmp_path / "index") as url:
        (tmp_path / "config.toml").write_text(f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n')
        monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
        words = [
            "lock",
            "torch==2.14.1",
            "--index-url",
            f"{url}/simple",
            "-o",
            str(tmp_path / "pylock.toml"),
            "--profile",
            str(cpu),
            "--profile",
            str(old),
        ]
        assert main(words) == 1
        err = " ".join(capsys.readouterr().err.split())
        assert f"profile old ({old}): nothing fits" in err
        assert not (tmp_path / "pylock.toml").exists()
        assert main([*words, "--skip-unfit"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "left out: old: nothing fits" in out
    assert tomllib.loads((tmp_path / "pylock.toml").read_text())["extras"] == ["cpu"]
