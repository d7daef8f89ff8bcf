"""The parsed index is cached on disk, and an edited file is always parsed afresh."""

from __future__ import annotations

import os
import pickle
import shutil
import stat
from pathlib import Path

import pytest

from cuda_resolve.index import load
from cuda_resolve.index.load import load_index

OVERLAY = Path(__file__).parent / "data" / "index" / "overlay-lab"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(directory))
    return directory


def test_second_load_comes_from_the_cache_and_equals_the_parse(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    first = load_index([overlay], include_user=False)
    pickles = list((cache_dir / "index").glob("*.pickle"))
    assert len(pickles) == 1

    def no_parsing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the second load parsed TOML instead of reading the cache")

    # With parsing impossible, only a cache read can produce the index.
    monkeypatch.setattr(load, "_read_layer", no_parsing)
    second = load_index([overlay], include_user=False)
    assert second == first
    assert second is not first  # unpickled from disk, not an in-process memo


def test_an_edited_overlay_is_parsed_again(tmp_path: Path, cache_dir: Path) -> None:
    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    before = load_index([overlay], include_user=False)
    assert before.package("pytorch3d") is not None
    (overlay / "packages" / "pytorch3d.toml").unlink()
    after = load_index([overlay], include_user=False)
    assert after.package("pytorch3d") is None


def test_a_corrupt_cache_file_is_ignored(tmp_path: Path, cache_dir: Path) -> None:
    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    expected = load_index([overlay], include_user=False)
    (cached,) = (cache_dir / "index").glob("*.pickle")
    cached.write_bytes(b"not a pickle")
    assert load_index([overlay], include_user=False) == expected


def test_an_unwritable_cache_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(blocker))
    assert load_index([], include_user=False).package("kaolin") is not None
    assert os.path.isfile(blocker)


def test_a_cache_hit_never_imports_the_toml_parser(tmp_path: Path, cache_dir: Path) -> None:
    """`doctor --json` pays for the parser (and packaging.requirements) only on a cache miss."""
    import subprocess
    import sys

    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    load_index([overlay], include_user=False)  # fills the cache
    probe = (
        "import sys; from pathlib import Path; from cuda_resolve.index.load import load_index;"
        f"load_index([Path({str(overlay)!r})], include_user=False);"
        "print('cuda_resolve.index._parse' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        check=True,
    )
    assert result.stdout.strip() == "False", result.stderr


# -- the cache is read like any other input: a regular file, with a size cap -------------------


def _only_pickle(cache_dir: Path) -> Path:
    (cached,) = (cache_dir / "index").glob("*.pickle")
    return cached


def test_a_fifo_where_the_cache_file_goes_is_ignored_not_waited_on(
    tmp_path: Path, cache_dir: Path
) -> None:
    import threading

    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    expected = load_index([overlay], include_user=False)
    cached = _only_pickle(cache_dir)
    cached.unlink()
    os.mkfifo(cached)
    got: list[object] = []
    reader = threading.Thread(
        target=lambda: got.append(load_index([overlay], include_user=False)), daemon=True
    )
    reader.start()
    reader.join(10)
    if reader.is_alive():  # blocked opening the FIFO: give it an end so the thread can finish
        os.close(os.open(cached, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
        pytest.fail("loading the index blocked on a FIFO in the cache directory")
    assert got == [expected]
    assert stat.S_ISFIFO(os.lstat(cached).st_mode)  # not ours to replace: parsed each time instead


def test_an_oversized_cache_file_is_not_trusted_and_is_rebuilt(
    tmp_path: Path, cache_dir: Path
) -> None:
    """A valid pickle of another index, padded past the cap: only a reader that ignores the cap
    would return it."""
    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    expected = load_index([overlay], include_user=False)
    cached = _only_pickle(cache_dir)
    planted = load_index([], include_user=False)
    assert planted != expected
    with cached.open("wb") as handle:
        pickle.dump(planted, handle, protocol=pickle.HIGHEST_PROTOCOL)
        handle.truncate(load._PARSED_LIMIT + 1)  # sparse: no disk used
    assert load_index([overlay], include_user=False) == expected
    assert cached.stat().st_size < load._PARSED_LIMIT  # rebuilt
    assert load_index([overlay], include_user=False) == expected


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x80\x04\x95" + b"\xff" * 8 + b"N.",  # a FRAME longer than memory: OverflowError
        b"\x80\x04",  # cut short
        b"\x80\x04K\x01.",  # a pickle, of something else
    ],
    ids=["overflow", "truncated", "not-an-index"],
)
def test_a_corrupt_cache_file_is_never_an_error(
    tmp_path: Path, cache_dir: Path, garbage: bytes
) -> None:
    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    expected = load_index([overlay], include_user=False)
    cached = _only_pickle(cache_dir)
    cached.write_bytes(garbage)
    assert load_index([overlay], include_user=False) == expected
    assert pickle.loads(cached.read_bytes()) == expected  # rebuilt
