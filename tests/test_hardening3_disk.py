"""Memory and disk on huge inputs: an archive with an enormous member count is refused before its
member list fills memory; unpacking checks the free space of the folder it unpacks into against
the declared sizes first; a full disk while unpacking, copying a --source tree or building leaves
nothing half-written and names the folder that filled up.

A full disk is a real one where the test can mount a small tmpfs (root), else skipped with the
reason; the free-space check is also tested by faking ``os.statvfs`` at the boundary.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_resolve.build import archive as archive_module
from cuda_resolve.build.archive import ArchiveLimits, unpack_archive
from cuda_resolve.build.diagnose import diagnose
from cuda_resolve.build.source import _copy_tree
from cuda_resolve.errors import BuildError


def tar_of(count: int, size: int = 0) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for number in range(count):
            info = tarfile.TarInfo(f"pkg/f{number}")
            info.size = size
            tar.addfile(info, io.BytesIO(b"x" * size))
    return buffer.getvalue()


def zip_of(count: int, size: int = 0) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for number in range(count):
            archive.writestr(f"pkg/f{number}", b"x" * size)
    return buffer.getvalue()


class CountingReader(io.BytesIO):
    """Counts the bytes read, to show how much of an archive was looked at before refusing it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        block = super().read(size)
        self.read_bytes += len(block)
        return block


def test_a_tar_with_too_many_members_is_refused_before_they_are_all_listed(tmp_path: Path) -> None:
    data = tar_of(4000)
    handle = CountingReader(data)
    with pytest.raises(BuildError, match="has more than the 100 members allowed"):
        unpack_archive(
            handle,
            tmp_path / "out",
            strip=None,
            label="recipe demo",
            limits=ArchiveLimits(members=100),
        )
    assert handle.read_bytes < len(data) // 10, (handle.read_bytes, len(data))
    assert not (tmp_path / "out").exists()


def forged_zip(entries: int, directory_bytes: int, *, zip64: bool = False) -> bytes:
    """A real one-member zip whose end record (or zip64 end record) declares other numbers."""
    data = bytearray(zip_of(1))
    at = data.rfind(b"PK\x05\x06")
    if not zip64:
        data[at + 8 : at + 10] = data[at + 10 : at + 12] = min(entries, 0xFFFF).to_bytes(
            2, "little"
        )
        data[at + 12 : at + 16] = min(directory_bytes, 0xFFFFFFFF).to_bytes(4, "little")
        return bytes(data)
    offset = int.from_bytes(data[at + 16 : at + 20], "little")
    record_at = at
    record = (
        b"PK\x06\x06"
        + (44).to_bytes(8, "little")
        + (45).to_bytes(2, "little")
        + (45).to_bytes(2, "little")
        + (0).to_bytes(4, "little") * 2
        + entries.to_bytes(8, "little") * 2
        + directory_bytes.to_bytes(8, "little")
        + offset.to_bytes(8, "little")
    )
    locator = (
        b"PK\x06\x07"
        + (0).to_bytes(4, "little")
        + record_at.to_bytes(8, "little")
        + (1).to_bytes(4, "little")
    )
    end = bytearray(data[at:])
    end[8:10] = end[10:12] = b"\xff\xff"
    return bytes(data[:at]) + record + locator + bytes(end)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (zip_of(150), "has 150 members, more than the 100 allowed"),
        (forged_zip(60_000, 100), "has 60000 members, more than the 100 allowed"),
        (
            forged_zip(1, 3_000_000_000),
            "has a 3000000000-byte list of members, more than the 100 allowed",
        ),
        (
            forged_zip(50_000_000, 100, zip64=True),
            "has 50000000 members, more than the 100 allowed",
        ),
    ],
)
def test_a_zip_declaring_too_many_members_is_refused_from_its_end_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, message: str
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError(
            "zipfile read the central directory of an archive already known to be too big"
        )

    if "150 members" not in message:
        monkeypatch.setattr(zipfile, "ZipFile", never)
    with pytest.raises(BuildError, match=message):
        unpack_archive(
            io.BytesIO(data),
            tmp_path / "out",
            strip=None,
            label="recipe demo",
            limits=ArchiveLimits(members=100),
        )
    assert not (tmp_path / "out").exists()


def test_unpacking_checks_the_free_space_against_the_declared_sizes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_statvfs = os.statvfs

    def nearly_full(path: str | os.PathLike[str]) -> os.statvfs_result:
        found = real_statvfs(path)
        values = list(found)
        values[4] = 10  # f_bavail: ten 4 KiB blocks free
        values[1] = 4096  # f_frsize
        return os.statvfs_result(values)

    monkeypatch.setattr(os, "statvfs", nearly_full)
    with pytest.raises(BuildError) as info:
        unpack_archive(
            io.BytesIO(tar_of(4, size=50_000)),
            tmp_path / "work" / "src",
            strip=None,
            label="recipe demo",
        )
    assert (
        f"needs about 0.2 MiB in {tmp_path}, which has 0.0 MiB free; nothing was unpacked"
        in info.value.message
    )
    assert info.value.hint and str(tmp_path) in info.value.hint
    assert not (tmp_path / "work").exists()
    # enough room: unpacked
    unpack_archive(
        io.BytesIO(tar_of(2, size=100)), tmp_path / "small", strip=None, label="recipe demo"
    )
    assert (tmp_path / "small" / "f1").read_bytes() == b"x" * 100


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, mounted for the test (root only)."""
    from test_disk_full import small_tmpfs

    with small_tmpfs(tmp_path / "small-disk", "256k") as mount:
        yield mount


def test_a_disk_that_fills_up_while_unpacking_names_the_folder_and_keeps_nothing(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tar_of(8, size=64 * 1024)  # 512 KiB into a 256 KiB disk
    with pytest.raises(
        BuildError, match="nothing was unpacked"
    ):  # the free-space check sees it first
        unpack_archive(io.BytesIO(data), small_disk / "src", strip=None, label="recipe demo")
    # another process takes the space after the check: the write itself fails
    monkeypatch.setattr(archive_module, "_check_free_space", lambda *args: None)
    with pytest.raises(BuildError) as info:
        unpack_archive(io.BytesIO(data), small_disk / "src", strip=None, label="recipe demo")
    assert f"the disk holding {small_disk / 'src'} filled up while unpacking" in info.value.message
    assert (
        "No space left on device" in info.value.message
        and "the unpacked files were removed" in info.value.message
    )
    assert not (small_disk / "src").exists() and not any(small_disk.iterdir())


def test_a_disk_that_fills_up_while_copying_a_source_tree_names_the_folder(
    small_disk: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for number in range(6):
        (tree / f"f{number}.cu").write_bytes(os.urandom(64 * 1024))
    with pytest.raises(BuildError) as info:
        _copy_tree(tree, small_disk / "work" / "src")
    assert (
        f"copying --source {tree}: the disk holding {small_disk / 'work'} is full; the partial "
        "copy was removed" in info.value.message
    )
    assert info.value.exit_code == 1 and "TMPDIR" in (info.value.hint or "")
    assert not (small_disk / "work" / "src").exists()


def test_a_full_disk_in_a_build_log_is_diagnosed_with_the_path() -> None:
    found = diagnose(
        [
            "[3/5] c++ -c a.cpp",
            "OSError: [Errno 28] No space left on device: "
            "'/tmp/cuda-resolve-build-x/src/build/a.o'",
            "error: command '/usr/bin/c++' failed with exit code 1",
        ]
    )
    assert found is not None and found[0] == "disk-full"
    assert "/tmp/cuda-resolve-build-x/src/build/a.o" in found[1] and "TMPDIR" in found[2]


def test_refusing_an_oversized_tar_is_fast() -> None:
    data = tar_of(20_000)
    started = time.process_time()
    with pytest.raises(BuildError):
        unpack_archive(
            io.BytesIO(data),
            Path("/nonexistent/never"),
            strip=None,
            label="recipe demo",
            limits=ArchiveLimits(members=10),
        )
    assert time.process_time() - started < 0.2


def test_a_disk_that_fills_up_while_publishing_names_the_wheelhouse_and_keeps_no_entry(
    small_disk: Path, tmp_path: Path
) -> None:
    from test_wheelhouse import make_key, make_wheel

    from cuda_resolve.wheelhouse.errors import WheelhouseError
    from cuda_resolve.wheelhouse.store import Wheelhouse

    built = make_wheel(
        tmp_path / "built", extension=os.urandom(400 * 1024)
    )  # does not fit in 256 KiB
    house = Wheelhouse(small_disk / "wheelhouse")
    with pytest.raises(WheelhouseError) as info:
        house.publish(make_key(), built, strip_debug=False)
    assert (
        f"the disk holding the wheelhouse {small_disk / 'wheelhouse'} is full" in info.value.message
    )
    assert "MB free now" in (info.value.hint or "")
    assert "No space left on device" in info.value.message
    assert house.lookup(make_key()) is None
    # nothing half-written: no wheel, no entry, no staging folder; only the lock files
    left = sorted(
        str(path.relative_to(house.root)) for path in house.root.rglob("*") if not path.is_dir()
    )
    assert all(name.startswith("locks/") for name in left), left
    assert not [path for path in house.root.rglob(".tmp-*")]


def test_a_quota_is_its_own_diagnosis_not_a_full_disk() -> None:
    found = diagnose(["ld: final link failed: Disk quota exceeded"])
    assert found is not None and found[0] == "disk-quota" and "quota -s" in found[2]


def test_a_full_disk_while_writing_the_pages_says_the_wheel_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from test_wheelhouse import make_key, make_wheel

    from cuda_resolve.wheelhouse import store
    from cuda_resolve.wheelhouse.errors import WheelhouseError

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "write_atomic", full)
    house = store.Wheelhouse(tmp_path / "wheelhouse")
    with pytest.raises(WheelhouseError) as info:
        house.publish(make_key(), make_wheel(tmp_path / "built"), strip_debug=False)
    assert (
        "writing the index pages" in info.value.message
        and "the wheels are stored" in info.value.message
    )
    assert "nothing was left half-written" not in info.value.message
    assert house.lookup(make_key()) is not None
