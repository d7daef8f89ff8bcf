"""A download is written like every other file (issue 8): through the one atomic writer.

So it replaces only a regular file (a FIFO at the destination is refused, not swapped for a
file), keeps the mode of the file it replaces, leaves nothing behind on Ctrl-C, and the partial
file of a download that was killed is removed by the next download to the same place.
"""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_net_support import BenchHandler, BenchServer, ClientFactory, ServerFactory

from cuda_resolve.errors import CudaResolveError

pytest_plugins = ["test_net_support"]

REPO = Path(__file__).resolve().parent.parent
WHEEL = bytes(range(256)) * 400  # 100 KiB
WHEEL_SHA = hashlib.sha256(WHEEL).hexdigest()


@pytest.fixture
def plain(make_server: ServerFactory) -> BenchServer:
    server = make_server(tls=False)
    server.routes["/demo.whl"] = lambda handler: handler.reply(
        200, WHEEL, content_type="application/zip"
    )
    return server


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    path = tmp_path / "downloads"
    path.mkdir()
    return path


def test_a_fifo_at_the_destination_is_refused_and_left_alone(
    plain: BenchServer, make_client: ClientFactory, downloads: Path
) -> None:
    dest = downloads / "demo.whl"
    os.mkfifo(dest)
    with pytest.raises(CudaResolveError) as info:
        make_client(use_cache=False).download(plain.url("/demo.whl"), dest, sha256=WHEEL_SHA)
    assert str(dest) in info.value.message and "FIFO" in info.value.message
    assert info.value.hint is not None and "regular file" in info.value.hint
    assert stat.S_ISFIFO(os.lstat(dest).st_mode)
    assert [p.name for p in downloads.iterdir()] == ["demo.whl"]


def test_a_replaced_file_keeps_its_mode(
    plain: BenchServer, make_client: ClientFactory, downloads: Path
) -> None:
    dest = downloads / "demo.whl"
    dest.write_bytes(b"an older upload")
    os.chmod(dest, 0o640)
    make_client(use_cache=False).download(plain.url("/demo.whl"), dest, sha256=WHEEL_SHA)
    assert dest.read_bytes() == WHEEL
    assert stat.S_IMODE(dest.stat().st_mode) == 0o640
    fresh = downloads / "fresh.whl"
    make_client(use_cache=False).download(plain.url("/demo.whl"), fresh, sha256=WHEEL_SHA)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644  # readable like any other wheel


def test_ctrl_c_during_a_download_leaves_nothing(
    plain: BenchServer, make_client: ClientFactory, downloads: Path
) -> None:
    def interrupt(received: int, total: int | None) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        make_client(use_cache=False).download(
            plain.url("/demo.whl"), downloads / "demo.whl", sha256=WHEEL_SHA, progress=interrupt
        )
    assert list(downloads.iterdir()) == []


def test_the_partial_file_of_a_killed_download_is_removed_by_the_next(
    plain: BenchServer, make_client: ClientFactory, downloads: Path
) -> None:
    def stalls(handler: BenchHandler) -> None:  # more than one read's worth, then nothing
        handler.send_response(200)
        handler.send_header("Content-Length", str(4 * len(WHEEL)))
        handler.end_headers()
        handler.wfile.write(2 * WHEEL)
        handler.wfile.flush()
        handler.server.stopping.wait(30)

    plain.routes["/stalls.whl"] = stalls
    dest = downloads / "demo.whl"
    code = (
        "import sys\n"
        "from cuda_resolve.net import HttpClient\n"
        "HttpClient(use_cache=False).download(sys.argv[1], sys.argv[2], sha256=sys.argv[3])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", code, plain.url("/stalls.whl"), str(dest), WHEEL_SHA],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        give_up = time.monotonic() + 30
        while (
            not any(p.stat().st_size > 0 for p in downloads.iterdir())
            and time.monotonic() < give_up
        ):
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    left = [p.name for p in downloads.iterdir()]
    assert left and "demo.whl" not in left, (
        "the killed download left nothing to clean: the test proves nothing"
    )
    make_client(use_cache=False).download(plain.url("/demo.whl"), dest, sha256=WHEEL_SHA)
    assert [p.name for p in downloads.iterdir()] == ["demo.whl"]
    assert dest.read_bytes() == WHEEL
