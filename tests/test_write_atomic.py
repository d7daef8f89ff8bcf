"""One atomic writer serves the probe cache, the parsed-index cache, profiles, refresh and (in its
streaming form, :func:`atomic_writer`) downloads."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_resolve._bounded import NotRegularFileError
from cuda_resolve.paths import atomic_writer, write_atomic


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


# -- the streaming form: atomic_writer -------------------------------------------------------


def test_atomic_writer_streams_pieces_and_replaces_at_the_end(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "file.bin"
    write_atomic(target, b"old")
    with atomic_writer(target) as stream:
        stream.write(b"new ")
        assert target.read_bytes() == b"old"  # nothing visible until the block ends
        stream.write(b"content")
    assert target.read_bytes() == b"new content"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"]


@pytest.mark.parametrize(
    "interruption", [RuntimeError("disk on fire"), KeyboardInterrupt()], ids=["error", "ctrl-c"]
)
def test_atomic_writer_interrupted_keeps_the_old_file_and_no_temporary(
    tmp_path: Path, interruption: BaseException
) -> None:
    target = tmp_path / "file.bin"
    write_atomic(target, b"old")
    with pytest.raises(type(interruption)), atomic_writer(target) as stream:
        stream.write(b"half")
        assert len(list(tmp_path.iterdir())) == 2  # the temporary file exists while writing
        raise interruption
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


def test_atomic_writer_refuses_a_fifo_before_writing(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    entered = False
    with pytest.raises(NotRegularFileError), atomic_writer(fifo):
        entered = True
    assert not entered and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["fifo"]


def test_atomic_writer_keeps_the_mode_and_new_files_are_0644_or_private(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.write_bytes(b"x")
    os.chmod(kept, 0o640)
    with atomic_writer(kept) as stream:
        stream.write(b"y")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    with atomic_writer(tmp_path / "new") as stream:
        stream.write(b"z")
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o644
    with atomic_writer(tmp_path / "secret", private=True) as stream:
        stream.write(b"token")
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600


def test_atomic_writer_removes_a_killed_writers_leftover(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = tmp_path / f".file.bin.{dead.pid}.k1ll3d.tmp"
    leftover.write_bytes(b"half")
    with atomic_writer(tmp_path / "file.bin") as stream:
        stream.write(b"whole")
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]
