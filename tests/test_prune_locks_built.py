"""``wheelhouse prune`` and a lock written by ``cuda-resolve lock`` itself: the source-built wheels
that the lock names at the served wheelhouse's URL stay, an unnamed one goes. Needs the CUDA 13.0
toolkit like tests/test_lock_builds.py (the plan's pre-flight), no network, no GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_lock_builds import _lock_words, _publish, built_bench, pytestmark
from test_wheelhouse import make_key, make_wheel

from cuda_resolve.cli import main
from cuda_resolve.wheelhouse.store import Wheelhouse

__all__ = ["built_bench", "pytestmark"]  # the fixture and the toolkit's skip, shared


def test_prune_keeps_the_wheels_a_real_lock_names(
    built_bench: dict[str, object],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _publish(built_bench, "h200")
    _publish(built_bench, "a100-h200")
    house = built_bench["house"]
    assert isinstance(house, Wheelhouse)
    stale = house.publish(make_key(), make_wheel(tmp_path / "stale"))
    lock = tmp_path / "repo" / "pylock.toml"
    lock.parent.mkdir()
    assert main(_lock_words(built_bench, lock)) == 0
    locked = {entry.path for entry in house.entries() if entry.key.package == "pointnet2_ops"}
    assert len(locked) == 2
    capsys.readouterr()

    config = Path(str(built_bench["root"])) / "config.toml"
    config.write_text(
        f'lock_paths = ["{lock.parent}"]\n' + config.read_text(), encoding="utf-8"
    )  # keys before tables
    monkeypatch.chdir(tmp_path)
    assert main(["wheelhouse", "prune", "--all", "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["locks"] == [{"path": str(lock), "from": f"lock_paths in {config}"}]
    assert {entry["path"] for entry in report["kept_by_locks"]} == {str(path) for path in locked}
    assert all(
        entry["locks"] == [{"lock": str(lock), "package": "pointnet2-ops", "match": "sha256"}]
        for entry in report["kept_by_locks"]
    )
    assert [entry["path"] for entry in report["removed"]] == [str(stale.path)]

    assert main(["wheelhouse", "prune", "--all"]) == 0
    assert {entry.path for entry in house.entries()} == locked
    assert not stale.path.exists()
