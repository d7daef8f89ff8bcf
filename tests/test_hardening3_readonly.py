"""Read-only and shared folders (issue 15): a wheelhouse, an index cache or a cache folder the
user can read but not write still serves hits; what is new goes under the user's own cache
folder; reading takes no lock. Root ignores permission bits, so the folders are made read-only
with a read-only bind mount (skipped, with the reason, where mounting is not possible)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cuda_resolve import paths
from cuda_resolve.index import load as index_load
from cuda_resolve.versions import ComputeCapability
from cuda_resolve.wheelhouse import Wheelhouse, WheelhouseError
from tests.test_wheelhouse import make_key, make_wheel


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """``folder``, mounted read-only at a sibling path (for root too) while the block runs."""
    mount = folder.parent / f"{folder.name}-ro"
    mount.mkdir()
    bound = subprocess.run(
        ["mount", "--bind", str(folder), str(mount)], capture_output=True, text=True, check=False
    )
    if bound.returncode != 0:
        pytest.skip(
            "a read-only bind mount is not possible here "
            f"({bound.stderr.strip() or 'mount failed'})"
        )
    try:
        ro = subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(mount)],
            capture_output=True,
            text=True,
            check=False,
        )
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr.strip()}")
        assert not os.access(mount, os.W_OK)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def _published(folder: Path, tmp_path: Path, arch_list: str = "8.6;9.0+PTX") -> Wheelhouse:
    house = Wheelhouse(folder)
    house.publish(
        make_key(arch_list=arch_list), make_wheel(tmp_path / f"built-{arch_list.replace(';', '_')}")
    )
    return house


def test_a_read_only_wheelhouse_serves_hits_and_builds_go_to_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared_source = tmp_path / "lab"
    _published(shared_source, tmp_path)
    own_cache = tmp_path / "own-cache"
    with read_only(shared_source) as shared:
        monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(shared))
        monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(own_cache))
        house = Wheelhouse.default()
        assert house.root == own_cache / "wheelhouse"
        assert [h.root for h in house.shared] == [shared]
        assert house.notes and str(shared) in house.notes[0] and str(house.root) in house.notes[0]
        # a hit in the shared one, read without any lock (it cannot be written, not even a lock
        # file)
        hit = house.lookup(make_key())
        assert hit is not None and hit.path.is_relative_to(shared)
        assert house.entry_dir(make_key()) == hit.path.parent
        covering = house.find_covering(make_key().query(), [ComputeCapability.parse("8.6")])
        assert covering is not None and covering[0].path.is_relative_to(shared)
        # the builder's sequence for a miss: lock, look up, publish; all of it in the user's own
        # wheelhouse
        missing = make_key(arch_list="8.0")
        with house.lock(missing):
            assert house.lookup(missing) is None
            stored = house.publish(missing, make_wheel(tmp_path / "built-new"))
        assert stored.path.is_relative_to(own_cache / "wheelhouse")
        assert house.lookup(missing) == stored
        assert {e.key.arch_list for e in house.entries()} == {"8.6;9.0+PTX", "8.0"}
        # the user's own pages list only the wheels beside them
        page = (own_cache / "wheelhouse" / "index.html").read_text(encoding="utf-8")
        assert stored.filename in page and hit.filename not in page
        with pytest.raises(WheelhouseError, match="shared wheelhouse"):
            house.remove(hit)
        assert house.lookup(make_key()) is not None


def test_a_writable_wheelhouse_is_used_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(tmp_path / "lab"))
    house = Wheelhouse.default()
    assert house.root == tmp_path / "lab" and house.shared == () and house.notes == ()


def test_logs_go_to_the_users_own_cache_when_the_cache_folder_is_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared_source = tmp_path / "lab-cache"
    shared_source.mkdir()
    with read_only(shared_source) as shared:
        monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(shared))
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        log = paths.new_log_path("install")
        assert log.parent == tmp_path / "xdg" / "cuda-resolve" / "logs"
        assert log.is_file() and (log.stat().st_mode & 0o777) == 0o600


def test_a_read_only_index_cache_serves_hits_and_misses_are_cached_in_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared_source = tmp_path / "lab-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(shared_source))
    index_load.clear_cache()
    first = index_load.load_index()  # parsed, and cached in the (still writable) lab folder
    assert list((shared_source / "index").glob("*.pickle"))
    with read_only(shared_source) as shared:
        monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(shared))

        def parse(*_: object, **__: object) -> object:
            raise AssertionError("parsed again: the shared cache was not read")

        with monkeypatch.context() as patched:
            patched.setattr(index_load, "_read_layer", parse)
            assert index_load.load_index() == first  # a hit in the read-only cache
        # a miss (another key) is parsed and cached under the user's own folder
        monkeypatch.setattr(
            index_load,
            "_parsed_cache_paths",
            lambda key, suffix, real=index_load._parsed_cache_paths: real("other" + key, suffix),
        )
        assert index_load.load_index() == first
        assert list((tmp_path / "xdg" / "cuda-resolve" / "index").glob("other*.pickle"))
