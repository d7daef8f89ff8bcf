"""Where a sync takes a locked file from without downloading it (lock/wheelcache.local_copy), by
records alone: a download folder's record, or a local wheelhouse entry's ``entry.json``, naming
the lock's sha256. A dry run reads this to say what a sync would download (user walk C9's
follow-up: it said a file in the wheelhouse was "not in the cache yet" and printed a pip command
that fetched it from a server that was down)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve.lock.select import Wanted
from cuda_resolve.lock.wheelcache import local_copy

SHA = "a" * 64
FILE = "tinyutil-1.0-py3-none-any.whl"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(tmp_path / "wheelhouse"))
    return tmp_path / "cache"


def _wanted(url: str = f"https://pypi.example/files/{FILE}", sha256: str = SHA) -> Wanted:
    return Wanted(name="tinyutil", version="1.0", file=FILE, url=url, size=3, sha256=sha256)


def _downloaded(cache: Path, sha256: str) -> Path:
    folder = cache / "downloads" / "0123456789abcdef"
    (folder / "files").mkdir(parents=True)
    (folder / "records").mkdir()
    (folder / "files" / FILE).write_bytes(b"abc")
    (folder / "records" / f"{FILE}.json").write_text(json.dumps({"sha256": sha256}))
    return folder / "files" / FILE


def test_a_download_folder_whose_record_names_the_locks_hash(cache: Path) -> None:
    file = _downloaded(cache, SHA)
    assert local_copy(_wanted()) == file
    assert local_copy(_wanted(sha256="b" * 64)) is None  # another hash: downloaded


def test_a_wheelhouse_entry_of_the_served_url_whose_entry_names_the_locks_hash(
    cache: Path, tmp_path: Path
) -> None:
    entry = tmp_path / "wheelhouse" / "wheels" / "tinyutil" / "0123456789abcdef"
    entry.mkdir(parents=True)
    (entry / FILE).write_bytes(b"abc")
    (entry / "entry.json").write_text(json.dumps({"sha256": SHA}))
    served = f"https://lab.example/wheelhouse/wheels/tinyutil/0123456789abcdef/{FILE}"
    assert local_copy(_wanted(served)) == entry / FILE
    assert local_copy(_wanted(served, sha256="b" * 64)) is None
    other = f"https://lab.example/wheelhouse/wheels/tinyutil/fedcba9876543210/{FILE}"
    assert local_copy(_wanted(other)) is None  # another entry's digest
    assert local_copy(_wanted()) is None  # not a served wheelhouse's URL, and no download
