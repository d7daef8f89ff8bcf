"""A sync says where its time went, naming the engine that installed (issue 30): ``timings`` (in
``--json``, and the text output's last line) has "uv install" where uv ran and "pip install"
where pip did, never pip's name for uv's run. The lock of tests/test_lock.py, into copies of the
template venv."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_lock import _venv, bench, configured, locked  # noqa: F401  (fixtures)
from test_uv_engine import _json_sync, _sync

from cuda_resolve.install import uv as uv_engine

pytestmark = pytest.mark.skipif(uv_engine.find_uv(os.environ) is None, reason="uv not installed")


def test_sync_timings_name_the_engine_that_ran(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    by_uv = _json_sync(locked, _venv(tmp_path / "uv"), capsys)
    assert by_uv["installers"] == ["uv"]
    timings = by_uv["timings"]
    assert isinstance(timings, dict)
    assert "uv install" in timings and "pip install" not in timings, timings
    assert {"read and decide", "fetch", "stash", "import check"} <= set(timings), timings
    assert all(isinstance(seconds, float) and seconds >= 0 for seconds in timings.values())

    by_pip = _json_sync(locked, _venv(tmp_path / "pip"), capsys, "--installer", "pip")
    assert by_pip["installers"] == ["pip"]
    timings = by_pip["timings"]
    assert isinstance(timings, dict)
    assert "pip install" in timings and "uv install" not in timings, timings

    capsys.readouterr()
    assert _sync(locked, _venv(tmp_path / "text")) == 0
    [last] = capsys.readouterr().out.splitlines()[-1:]
    assert last.startswith("took ") and "uv install" in last and "pip install" not in last, last
