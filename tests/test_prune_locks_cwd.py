"""A pylock.toml in the current folder never makes prune remove more, but one that cannot be read
stops the prune like a named lock (nothing removed), and docs/lockfiles.md says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_prune_locks import _fill, run, write_lock

DOCS = Path(__file__).parent.parent / "docs" / "lockfiles.md"


def test_an_unreadable_lock_in_the_current_folder_stops_the_prune(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "house"
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(root))
    monkeypatch.chdir(tmp_path)
    by_hash, by_name, unnamed = _fill(root, tmp_path)
    lock = write_lock(tmp_path / "pylock.toml", by_hash, by_name)
    lock.write_text(lock.read_text().replace('lock-version = "1.0"', "lock-version = ["))
    code, out, err = run(capsys, "wheelhouse", "prune", "--all")
    assert code == 2 and "(the current folder) cannot be read, so nothing was removed" in " ".join(
        err.split()
    )
    assert (
        "removed" not in out
        and by_hash.path.exists()
        and by_name.path.exists()
        and unnamed.path.exists()
    )
    # The docs say the same of the current folder's locks (not that they "only ever keep more").
    bullet = " ".join(
        DOCS.read_text(encoding="utf-8")
        .split("in the current folder (run prune from", 1)[1]
        .split("\n\n", 1)[0]
        .split()
    )
    assert (
        "only ever keeps more" not in bullet
        and "one there that cannot be read stops the prune" in bullet
    )
