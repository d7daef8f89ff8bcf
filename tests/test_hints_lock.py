"""lock's refusals lead somewhere (issue 29).

- An index that does not answer is named (its host), as cuda-pip names it, not taken for a
  package with "no wheel".
- A source build that cannot fetch its source says "pass --source DIR": lock takes ``--source``
  (offline labs) and, given it, builds and locks.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
from test_lock_build import _overlay, _profile, _repository, _words, bench, target  # noqa: F401

from cuda_resolve.cli import main
from cuda_resolve.errors import LockError
from cuda_resolve.lock.closure import _report, _unreachable, pip_markers
from cuda_resolve.profile import load_profile

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"

RETRY = (
    "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) "
    "after connection broken by 'NewConnectionError(\"HTTPSConnection(host='download.pytorch.org'"
    ", port=443): Failed to establish a new connection: [Errno 101] Network is unreachable\")': "
    "/whl/cu130/torch/"
)
NO_VERSION = (
    "ERROR: Could not find a version that satisfies the requirement torch==2.14.1+cu130 "
    "(from versions: none)"
)


def test_the_index_that_did_not_answer_is_the_one_named() -> None:
    indexes = ["https://pypi.org/simple", "https://user:secret@download.pytorch.org/whl/cu130"]
    assert _unreachable(f"{RETRY}\n{NO_VERSION}\n", indexes) == ["download.pytorch.org"]
    fetched = "WARNING: Could not fetch URL https://mirror.example.edu:8443/simple/torch/: x"
    assert _unreachable(fetched, indexes) == ["mirror.example.edu:8443"]
    # pip failed for another reason: nothing unreachable is claimed.
    assert _unreachable(f"{NO_VERSION}\n", indexes) == []


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_lock_names_the_host_pip_could_not_reach(tmp_path: Path) -> None:
    """Through pip itself: an index on a closed port (one retry, so pip says so once)."""
    port = _closed_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    words = [
        "--index-url",
        f"http://127.0.0.1:{port}/whl/cu130",
        "--retries",
        "1",
        "--timeout",
        "2",
        "torch==2.14.1",
    ]
    with pytest.raises(LockError) as refused:
        _report(
            sys.executable,
            pip_markers(load_profile(PROFILE)),
            words,
            environ,
            "torch for profile h200",
            tmp_path / "report.json",
        )
    assert f"could not reach 127.0.0.1:{port}" in refused.value.message, refused.value.message
    assert "no wheel" not in (refused.value.hint or "")
    assert "doctor --network" in (refused.value.hint or "")


def test_lock_takes_source_where_the_build_cannot_fetch_it(
    bench: dict[str, object],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The recipe's repository is gone (an offline lab): the build's hint says --source DIR;
    lock takes it and the lock is written."""
    copy = tmp_path / "quickext-copy"
    revision = _repository(copy)
    overlay = _overlay(tmp_path / "offline-overlay", tmp_path / "no-such-repository", revision)
    a100 = _profile(tmp_path / "a100.toml", [("NVIDIA A100-SXM4-80GB", "8.0")])
    lock = tmp_path / "pylock.toml"
    words = [
        *_words({**bench, "overlay": overlay}, lock, a100),
        "--python-for",
        f"a100={bench['python']}",
    ]
    assert main(words) != 0
    said = capsys.readouterr().err
    assert "--source DIR" in said, said
    assert main([*words, "--source", f"quickext={copy}"]) == 0, capsys.readouterr().err
    assert "quickext" in lock.read_text()
    # A folder that is not there: refused before any work (exit 2, naming it).
    assert main([*words, "--source", f"quickext={tmp_path / 'gone'}"]) == 2
    assert "gone" in capsys.readouterr().err
