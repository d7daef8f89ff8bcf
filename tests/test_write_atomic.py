"""One atomic-write helper serves the probe cache, the parsed-index cache, profiles and refresh."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_resolve.paths import write_atomic


def test_writes_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "file.toml"
    write_atomic(target, "one")
    write_atomic(target, b"two")
    assert target.read_text() == "two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.toml"]


def test_a_failed_replace_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "occupied"
    target.mkdir()  # a directory where the file should go: the rename fails
    with pytest.raises(OSError):
        write_atomic(target, "data")
    assert [p.name for p in tmp_path.iterdir()] == ["occupied"]


def test_a_missing_folder_is_an_error_when_the_user_named_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "typo" / "profile.toml", "x", make_parents=False)
    assert not (tmp_path / "typo").exists()
