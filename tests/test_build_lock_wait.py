"""A build that waits for another build of the same wheel says so, naming who holds the lock.

Before, a second ``cuda-pip install pointnet2_ops`` started while the first compiled (minutes)
printed ``checking that https://pypi.org/simple answers`` and then nothing at all until the
first finished (found walking the README as a user, helper H7)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from test_builder_runner import USER_ENV, FakePip, _pip, _spec, scratch, source  # noqa: F401

from cuda_resolve.build.builder import build, wheel_key
from cuda_resolve.build.source import source_identity
from cuda_resolve.reporting import NullReporter
from cuda_resolve.wheelhouse.errors import WheelhouseError
from cuda_resolve.wheelhouse.store import Wheelhouse


class Steps(NullReporter):
    def __init__(self) -> None:
        self.steps: list[str] = []

    def step(self, text: str) -> None:
        self.steps.append(text)


def _hold_elsewhere(
    house: Wheelhouse,
    release: threading.Event,
    held: threading.Event,
    source: Path | None = None,
) -> None:
    """Another holder of the key's lock (its own thread: filelock is re-entrant per thread);
    ``source``: the key of a build from that folder (a plain folder: keyed by its content)."""
    spec = _spec()
    with house.lock(wheel_key(spec, source_identity(spec.recipe, source, USER_ENV))):
        held.set()
        release.wait(10)


def test_a_build_waiting_for_the_keys_lock_says_so_then_goes_on(
    tmp_path: Path,
    scratch: Path,
    source: Path,
) -> None:
    house = Wheelhouse(tmp_path / "wheelhouse")
    release, held = threading.Event(), threading.Event()
    other = threading.Thread(target=_hold_elsewhere, args=(house, release, held, source))
    other.start()
    assert held.wait(10)
    reporter = Steps()
    threading.Timer(0.5, release.set).start()
    result = build(
        _spec(),
        house,
        source_dir=source,
        installed={"setuptools": "65.5.0"},
        environ=USER_ENV,
        pip=_pip(FakePip(), tmp_path),
        reporter=reporter,
    )
    other.join(10)
    waits = [s for s in reporter.steps if "waiting for another build of the same wheel" in s]
    assert len(waits) == 1, reporter.steps
    assert "(pid " in waits[0]  # who holds it, from the lock's owner file
    assert reporter.steps[0] == waits[0]  # said before anything else of this build
    assert not result.cache_hit and result.wheel.path.is_file()


def test_a_free_lock_is_taken_without_a_word(tmp_path: Path) -> None:
    house = Wheelhouse(tmp_path / "wheelhouse")
    told: list[str] = []
    with house.lock(wheel_key(_spec()), on_wait=told.append):
        with house.lock(wheel_key(_spec()), on_wait=told.append):  # re-entrant in one thread
            pass
    assert told == []


def test_the_wait_still_times_out_with_the_owner(tmp_path: Path) -> None:
    house = Wheelhouse(tmp_path / "wheelhouse")
    release, held = threading.Event(), threading.Event()
    other = threading.Thread(target=_hold_elsewhere, args=(house, release, held))
    other.start()
    assert held.wait(10)
    told: list[str] = []
    started = time.monotonic()
    try:
        with pytest.raises(WheelhouseError, match=r"timed out after 0\.3 s.*last taken by pid"):
            with house.lock(wheel_key(_spec()), timeout=0.3, on_wait=told.append):
                pass
    finally:
        release.set()
        other.join(10)
    assert len(told) == 1 and told[0].startswith("pid ")
    assert time.monotonic() - started < 5
