"""Two profiles whose closure pip would resolve from the same inputs (machine classes that
differ only in GPUs or driver: one Python, one platform, one plan) ask pip once in a lock run;
a profile whose platform differs asks again (user walk H7 F7). The lock of tests/test_lock.py's
loopback indexes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_lock import _lock, bench, configured  # noqa: F401  (fixtures)
from test_lock_support import write_profile

from cuda_resolve.lock import closure


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []
    real = closure._report

    def report(*args: Any, **kwargs: Any) -> Any:
        asked.append(str(args[4]))  # what: "profile NAME (...)"
        return real(*args, **kwargs)

    monkeypatch.setattr(closure, "_report", report)
    return asked


def test_profiles_with_equal_inputs_share_one_pip_resolution(
    configured: dict[str, Path | str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(configured["root"])
    write_profile(root / "h100.toml", driver="535.183.01", gpus=[("NVIDIA H100 80GB", "9.0")])
    write_profile(
        root / "a100-glibc228.toml",
        glibc="2.28",
        driver="535.183.01",
        gpus=[("NVIDIA A100-SXM4-80GB", "8.0")],
    )
    asked = _counted(monkeypatch)
    assert _lock(configured, tmp_path / "pylock.two.toml", "a100.toml", "h100.toml") == 0
    assert len(asked) >= 1 and all("profile a100 " in what for what in asked), asked
    first = len(asked)
    asked.clear()
    # Another glibc is another resolution (other manylinux tags fit): pip is asked again.
    # (--refresh: the answers a run keeps on disk for an hour are not what is tested here.)
    assert (
        _lock(
            configured,
            tmp_path / "pylock.three.toml",
            "a100.toml",
            "a100-glibc228.toml",
            extra=("--refresh",),
        )
        == 0
    )
    assert any("profile a100-glibc228 " in what for what in asked), asked
    assert len(asked) == 2 * first, asked
