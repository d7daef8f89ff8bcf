"""The parsed index is cached on disk, and an edited file is always parsed afresh."""

from __future__ import annotations

import os
import shutil
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
    (pickle,) = (cache_dir / "index").glob("*.pickle")
    pickle.write_bytes(b"not a pickle")
    assert load_index([overlay], include_user=False) == expected


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=dict(os.environ), check=True)
    assert result.stdout.strip() == "False", result.stderr
