"""The import check after an install (issue 30): still a real import of what was installed, in
one fresh interpreter, but started as soon as the steps are done where they certainly changed
the target, so that listing the target's distributions (and the torch-landed check) run while
it imports; skipped, as before, where nothing changed; killed with the run on Ctrl-C, SIGTERM or
SIGHUP, waited for on an error before the target is restored. The lock of tests/test_lock.py
(its small wheels), synced into copies of the template venv."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_lock import _installed, _venv, bench, configured, locked  # noqa: F401  (fixtures)
from test_uv_engine import _json_sync

from cuda_resolve.install import transaction
from cuda_resolve.install import uv as uv_engine
from cuda_resolve.lock.sync import SyncRequest, sync

needs_uv = pytest.mark.skipif(uv_engine.find_uv(os.environ) is None, reason="uv not installed")

_HASH = "--hash=sha256:" + "0" * 64


@pytest.mark.parametrize(
    ("lines", "installed", "changes"),
    [
        ([f"file:///w/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl {_HASH}"], {}, True),
        (
            [f"file:///w/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl {_HASH}"],
            {"torch": "2.13.0+cpu"},
            False,
        ),
        (
            [f"file:///w/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl {_HASH}"],
            {"torch": "2.13.0"},
            True,
        ),
        (
            [
                f"quickext @ file:///h/quickext-0.1.0+pt.sm90-cp311-cp311-linux_x86_64.whl {_HASH}",
                f"file:///w/tiny_util-1.0-py3-none-any.whl {_HASH}",
            ],
            {"quickext": "0.1.0+pt.sm90", "tiny-util": "1.0"},
            False,
        ),
        (
            [
                f"quickext @ file:///h/quickext-0.1.0+pt.sm90-cp311-cp311-linux_x86_64.whl {_HASH}",
                f"file:///w/tiny_util-1.0-py3-none-any.whl {_HASH}",
            ],
            {"quickext": "0.1.0+pt.sm90", "tiny-util": "0.9"},
            True,
        ),
        ([f"file:///w/not-a-wheel-name.whl {_HASH}"], {}, False),  # cannot be told
    ],
)
def test_a_local_step_certainly_changes_the_target_where_a_wheel_is_not_installed_as_such(
    lines: list[str], installed: dict[str, str], changes: bool
) -> None:
    local = uv_engine.LocalStep(lines=tuple(lines))
    assert uv_engine.changes_target(local, installed) is changes


def _watched(
    monkeypatch: pytest.MonkeyPatch, listing: Any = None
) -> tuple[threading.Event, list[float]]:
    """(set when the import check starts, the times it was called)."""
    started = threading.Event()
    calls: list[float] = []
    real = transaction._verify_imports

    def verify(python: str, modules: Sequence[str], environ: Mapping[str, str]) -> str | None:
        calls.append(time.monotonic())
        started.set()
        return real(python, modules, environ)

    monkeypatch.setattr(transaction, "_verify_imports", verify)
    if listing is not None:
        monkeypatch.setattr(transaction, "installed_distributions", listing)
    return started, calls


@needs_uv
def test_the_import_check_runs_while_the_target_is_listed_and_once_where_nothing_changed_not(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    real_listing = transaction.installed_distributions
    overlapped: list[bool] = []

    def listing(python: str, environ: Mapping[str, str]) -> dict[str, str]:
        # The first run: the check starts before the target is listed. (Where it would not,
        # a second run's check shows as a second call.)
        overlapped.append(started.wait(20 if not overlapped else 0.2))
        return real_listing(python, environ)

    started, calls = _watched(monkeypatch, listing)
    real_execute = transaction.execute
    again: list[transaction.InstallResult] = []

    def twice(plan: Any, env: Any, **words: Any) -> transaction.InstallResult:
        done = real_execute(plan, env, **words)
        started.clear()
        again.append(real_execute(plan, env, **{**words, "probed": None}))  # all installed now
        return done

    monkeypatch.setattr(transaction, "execute", twice)
    python = _venv(tmp_path / "venv")
    report = _json_sync(locked, python, capsys)
    assert report["installers"] == ["uv"]
    assert overlapped[0] is True and len(calls) == 1, (overlapped, calls)
    # The same files again: nothing changes, the check is neither started early nor run.
    assert overlapped[1:] == [False] and len(calls) == 1
    assert "nothing changed in the environment: import check skipped" in again[0].notes
    assert again[0].verified == () and again[0].changed == ()
    assert {"uv install", "installed list", "import check"} <= set(dict(report["timings"]))


@needs_uv
@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_ctrl_c_or_an_error_while_the_check_imports_kills_it_then_restores(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stop: type[BaseException],
) -> None:
    """The listing (main thread) is stopped while the check's interpreter runs in its thread:
    Ctrl-C (KeyboardInterrupt; SIGTERM and SIGHUP raise its subclass) or an error (the torch
    that landed is refused) kills that interpreter, whose thread ends, before the restore; the
    error does not wait out a slow import (review H9). Either way the target is restored."""
    from cuda_resolve._bounded import run as bounded_run

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    pid_file = tmp_path / "checker.pid"
    ended: list[float] = []

    def verify(python: str, modules: Sequence[str], environ: Mapping[str, str]) -> str | None:
        """An import check that takes its time (killed long before it ends)."""
        seconds = 120
        script = (
            f"import os, time\nwith open({str(pid_file)!r}, 'w') as out:\n"
            f"    out.write(str(os.getpid()))\ntime.sleep({seconds})"
        )
        bounded_run([python, "-c", script], timeout=300)
        ended.append(time.monotonic())
        return None

    def listing(python: str, environ: Mapping[str, str]) -> dict[str, str]:
        deadline = time.monotonic() + 60
        while not (pid_file.is_file() and pid_file.read_text()):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        raise stop("stopped while the check imports")

    monkeypatch.setattr(transaction, "_verify_imports", verify)
    monkeypatch.setattr(transaction, "installed_distributions", listing)
    python = _venv(tmp_path / "venv")
    before = _installed(python)
    request = SyncRequest(lock=locked, name="a100", python=str(python))
    started = time.monotonic()
    with pytest.raises(stop):
        sync(request)
    raised = time.monotonic()
    pid = int(pid_file.read_text())
    assert raised - started < 60, "the check was waited out, not killed"
    assert ended and ended[0] <= raised, "the restore began while the check's thread ran"
    assert not _alive(pid), "the check's interpreter still runs"
    assert _installed(python) == before


def _alive(pid: int) -> bool:
    """The process runs (a zombie, ended and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
