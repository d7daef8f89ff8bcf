"""``target_lock(on_wait=...)``: an install that must wait for another one into the same
environment can say so (who holds it) instead of sitting at ``installing into ...`` in silence.

Found walking the README as a user (H7): a second ``cuda-pip install six`` into a venv whose
first install was running pip printed ``installing into .../python`` and nothing more for as
long as the first one ran (up to TARGET_LOCK_SECONDS, 10 minutes)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cuda_resolve.errors import InstallError
from cuda_resolve.install.stash import target_lock

PREFIX = "/envs/lab"  # given, so no interpreter is asked for its prefix


def test_waiting_is_told_once_with_the_holder_then_the_lock_is_taken(tmp_path: Path) -> None:
    told: list[str] = []
    held, release = threading.Event(), threading.Event()

    def first() -> None:
        with target_lock("/envs/lab/bin/python", tmp_path, timeout=5, prefix=PREFIX):
            held.set()
            release.wait(10)

    other = threading.Thread(target=first)
    other.start()
    assert held.wait(10)
    threading.Timer(0.4, release.set).start()
    started = time.monotonic()
    with target_lock(
        "/envs/lab/bin/python", tmp_path, timeout=10, prefix=PREFIX, on_wait=told.append
    ) as prefix:
        assert prefix == PREFIX
        assert time.monotonic() - started >= 0.3  # it did wait for the first
    other.join(10)
    assert len(told) == 1 and told[0].startswith("pid ") and "for /envs/lab/bin/python" in told[0]


def test_a_free_lock_says_nothing(tmp_path: Path) -> None:
    told: list[str] = []
    with target_lock(
        "/envs/lab/bin/python", tmp_path, timeout=1, prefix=PREFIX, on_wait=told.append
    ):
        pass
    assert told == []


def test_the_timeout_still_names_the_holder(tmp_path: Path) -> None:
    told: list[str] = []
    with target_lock("/envs/lab/bin/python", tmp_path, timeout=5, prefix=PREFIX):
        with (
            pytest.raises(InstallError, match=r"still held after 0\.2 s \(taken by pid"),
            target_lock(
                "/envs/lab/bin/python", tmp_path, timeout=0.2, prefix=PREFIX, on_wait=told.append
            ),
        ):
            pass
    assert len(told) == 1
