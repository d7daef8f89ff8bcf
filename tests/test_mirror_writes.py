"""All-or-nothing writes (``cuda_resolve.mirrors.writes``): a failure at any step leaves every
file as it was, with no temporary file or backup behind."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from cuda_resolve.errors import UsageError
from cuda_resolve.mirrors import writes
from cuda_resolve.mirrors.writes import PendingWrite, write_all

NOW = datetime(2026, 12, 2, 15, 30, 0)


def pending(path: Path, text: str) -> PendingWrite:
    return PendingWrite(path=path, target=path, text=text, hint="pick another place")


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two existing files and one new file in a folder that does not exist yet."""
    first = tmp_path / "pip" / "pip.conf"
    first.parent.mkdir()
    first.write_text("[global]\ntimeout = 60\n", encoding="utf-8")
    first.chmod(0o600)
    second = tmp_path / ".condarc"
    second.write_text("channels: [defaults]\n", encoding="utf-8")
    third = tmp_path / "new" / "folder" / "config.toml"
    return first, second, third


def test_every_file_is_written_with_backups_and_kept_modes(files: tuple[Path, Path, Path]) -> None:
    first, second, third = files
    backups = write_all(
        [pending(first, "one\n"), pending(second, "two\n"), pending(third, "three\n")], now=NOW
    )
    assert [path.read_text(encoding="utf-8") for path in files] == ["one\n", "two\n", "three\n"]
    assert backups[0] == first.with_name("pip.conf.20261202-153000.bak")
    assert (
        backups[0] is not None
        and backups[0].read_text(encoding="utf-8") == "[global]\ntimeout = 60\n"
    )
    assert backups[2] is None
    assert first.stat().st_mode & 0o777 == 0o600
    assert not list(first.parent.parent.rglob("*.tmp"))


def _failing_on(
    calls: list[int], fail_at: set[int], real: Callable[..., object]
) -> Callable[..., object]:
    def wrapper(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) in fail_at:
            raise PermissionError(13, "Permission denied", str(args[1]))
        return real(*args, **kwargs)

    return wrapper


def test_a_replace_that_fails_midway_restores_the_files_already_replaced(
    files: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second, third = files
    before = snapshot(tmp_path)
    calls: list[int] = []
    # the first file is replaced, the second fails: the first must be put back
    monkeypatch.setattr(writes.os, "replace", _failing_on(calls, {2}, os.replace))
    with pytest.raises(UsageError) as info:
        write_all(
            [pending(first, "one\n"), pending(second, "two\n"), pending(third, "three\n")], now=NOW
        )
    assert info.value.message.startswith(f"{second}: cannot be replaced: Permission denied")
    assert (
        info.value.hint is not None
        and "restored" in info.value.hint
        and "nothing was changed" in info.value.hint
    )
    assert snapshot(tmp_path) == before
    assert first.stat().st_mode & 0o777 == 0o600


def test_a_new_file_replaced_before_the_failure_is_removed_again(
    files: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _, third = files
    before = snapshot(tmp_path)
    calls: list[int] = []
    monkeypatch.setattr(writes.os, "replace", _failing_on(calls, {2}, os.replace))
    with pytest.raises(UsageError):
        write_all([pending(third, "three\n"), pending(first, "one\n")], now=NOW)
    assert snapshot(tmp_path) == before  # the new file and its folders are gone


def test_a_restore_that_fails_too_names_the_backup_it_kept(
    files: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second, _ = files
    calls: list[int] = []
    monkeypatch.setattr(writes.os, "replace", _failing_on(calls, {2, 3}, os.replace))
    with pytest.raises(UsageError) as info:
        write_all([pending(first, "one\n"), pending(second, "two\n")], now=NOW)
    backup = first.with_name("pip.conf.20261202-153000.bak")
    assert info.value.hint is not None
    assert f"{first} could not be restored" in info.value.hint and str(backup) in info.value.hint
    assert backup.read_text(encoding="utf-8") == "[global]\ntimeout = 60\n"
    assert second.read_text(encoding="utf-8") == "channels: [defaults]\n"
    assert not list(second.parent.rglob("*.tmp"))


def test_a_backup_that_fails_leaves_no_temporary_file_and_no_backup(
    files: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second, third = files
    before = snapshot(tmp_path)
    calls: list[int] = []
    real_backup = writes.make_backup

    def failing_backup(target: Path, now: datetime) -> Path:
        calls.append(1)
        if len(calls) == 2:
            raise PermissionError(13, "Permission denied", str(target))
        return real_backup(target, now)

    monkeypatch.setattr(writes, "make_backup", failing_backup)
    with pytest.raises(UsageError) as info:
        write_all(
            [pending(first, "one\n"), pending(second, "two\n"), pending(third, "three\n")], now=NOW
        )
    assert info.value.message.startswith(f"{second}: cannot be written: Permission denied")
    assert info.value.hint == "nothing was changed; pick another place"
    assert snapshot(tmp_path) == before


def test_a_target_under_a_regular_file_fails_before_anything_is_written(
    files: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Also as root: no folder can be made inside a file (os.access would not have said so)."""
    first, second, _ = files
    afile = tmp_path / "afile"
    afile.write_text("x\n", encoding="utf-8")
    before = snapshot(tmp_path)
    with pytest.raises(UsageError) as info:
        write_all(
            [
                pending(first, "one\n"),
                pending(second, "two\n"),
                pending(afile / "sub" / "config.toml", "3\n"),
            ]
        )
    assert info.value.message.startswith(
        f"{afile / 'sub' / 'config.toml'}: cannot be written: Not a directory"
    )
    assert snapshot(tmp_path) == before
