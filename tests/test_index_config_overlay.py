"""A lab directory named in cuda-resolve's config (index_dirs) is an index overlay."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_resolve.errors import IndexDataError
from cuda_resolve.index.load import load_index

OVERLAY = Path(__file__).parent / "data" / "index" / "overlay-lab"


def test_config_index_dirs_are_read_as_overlays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = shutil.copytree(OVERLAY, tmp_path / "lab-index")
    config = tmp_path / "config.toml"
    config.write_text(f'index_dirs = ["{lab}"]\n', encoding="utf-8")
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    index = load_index()
    assert index.package("pytorch3d") is not None
    assert str(lab) in (index.origin("package pytorch3d") or "")


def test_a_missing_config_index_dir_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'index_dirs = ["{tmp_path / "gone"}"]\n', encoding="utf-8")
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    with pytest.raises(IndexDataError, match=r"index_dirs names .*gone.* not a directory"):
        load_index()
