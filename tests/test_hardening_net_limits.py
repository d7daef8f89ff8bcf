"""Every HTTP answer has a size cap and a total deadline (issue 8).

Servers on loopback that drip one byte at a time (in the headers, in the body), that send an
endless body, or that announce a huge one: the client gives up within its total deadline or at
its size cap, with a FetchError naming the URL, and never holds more than the cap in memory.
"""

from __future__ import annotations

import time

import pytest
from test_net_support import (
    BenchHandler,
    BenchServer,
    Cas,
    ClientFactory,
    Route,
    ServerFactory,
    SystemTrust,
)

from cuda_resolve.mirrors.check import MirrorTarget, check_mirrors
from cuda_resolve.mirrors.presets import load_presets
from cuda_resolve.net import FetchError, Limits, RetryPolicy, Timeouts

pytest_plugins = ["test_net_support"]

QUICK = Timeouts(connect=2.0, read=2.0, deadline=5.0, total=0.8, download=0.8)


@pytest.fixture
def trusted(cas: Cas, system_trust: SystemTrust) -> None:
    system_trust(cas.origin)


def drip(raw: bytes, *, every: float = 0.1) -> Route:
    """A route that writes ``raw`` (status line and all) one byte at a time, forever if it is
    long."""

    def route(handler: BenchHandler) -> None:
        for byte in raw:
            if handler.server.stopping.is_set():
                return
            try:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(every)

    return route


def endless(handler: BenchHandler) -> None:
    """200 with a body that never ends (no Content-Length: read until the connection closes)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.end_headers()
    block = b"<a href='x.whl'>x</a>\n" * 2048
    while not handler.server.stopping.is_set():
        try:
            handler.wfile.write(block)
        except OSError:
            return


HEADERS_FOREVER = b"HTTP/1.0 200 OK\r\n" + b"X-Slow: " + b"a" * 10_000 + b"\r\n\r\n"
BODY_FOREVER = (
    b"HTTP/1.0 200 OK\r\nContent-Length: 100000\r\nContent-Type: text/html\r\n\r\n" + b"<" * 100_000
)


@pytest.mark.parametrize("raw", [HEADERS_FOREVER, BODY_FOREVER], ids=["headers", "body"])
def test_a_server_dripping_one_byte_at_a_time_is_cut_off_at_the_total_deadline(
    origin: BenchServer, trusted: None, make_client: ClientFactory, raw: bytes
) -> None:
    origin.routes["/slow/"] = drip(raw)
    client = make_client(
        timeouts=QUICK, retry=RetryPolicy(attempts=3, backoff=0.01), use_cache=False
    )
    started = time.monotonic()
    with pytest.raises(FetchError) as info:
        client.get(origin.url("/slow/"))
    took = time.monotonic() - started
    assert took < 4.0, took  # per-read timeouts alone would wait for ever
    assert info.value.kind == "timeout"
    assert origin.url("/slow/") in info.value.message and "0.8 s" in info.value.message


def test_probe_and_download_are_cut_off_too(
    origin: BenchServer, trusted: None, make_client: ClientFactory, tmp_path: object
) -> None:
    origin.routes["/slow/"] = drip(BODY_FOREVER)
    client = make_client(timeouts=QUICK, use_cache=False)
    started = time.monotonic()
    probe = client.probe(origin.url("/slow/"), sample=4096)
    assert not probe.ok and probe.error is not None and probe.error.kind == "timeout"
    with pytest.raises(FetchError) as info:
        client.download(origin.url("/slow/"), f"{tmp_path}/x.whl", sha256="0" * 64)
    assert info.value.kind == "timeout"
    assert time.monotonic() - started < 6.0


def test_an_endless_body_stops_at_the_size_cap(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    origin.routes["/endless/"] = endless
    client = make_client(limits=Limits(page=1 << 20), use_cache=False)
    with pytest.raises(FetchError) as info:
        client.get(origin.url("/endless/"))
    assert info.value.kind == "size"
    assert origin.url("/endless/") in info.value.message and str(1 << 20) in info.value.message


def test_an_announced_huge_body_is_refused_before_reading(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    def huge(handler: BenchHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(1 << 40))
        handler.end_headers()
        handler.wfile.write(b"x" * 1000)

    origin.routes["/huge/"] = huge
    with pytest.raises(FetchError) as info:
        make_client(use_cache=False).get(origin.url("/huge/"))
    assert info.value.kind == "size" and str(1 << 40) in info.value.message


def test_a_range_answer_longer_than_asked_is_refused(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    def liar(handler: BenchHandler) -> None:
        handler.reply(206, b"y" * 5000, headers={"Content-Range": "bytes 0-9/5000"})

    origin.routes["/range"] = liar
    with pytest.raises(FetchError) as info:
        make_client(use_cache=False).get_range(origin.url("/range"), start=0, end=9)
    assert info.value.kind == "size"


def test_probe_sample_reads_the_start_of_the_body_only(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    origin.routes["/endless/"] = endless
    probe = make_client(use_cache=False).probe(origin.url("/endless/"), sample=1000)
    assert probe.ok and len(probe.body) == 1000 and not probe.complete
    assert probe.content_type == "text/html"


def test_mirror_test_against_a_dripping_mirror_fails_in_bounded_time(
    make_server: ServerFactory, trusted: None, make_client: ClientFactory
) -> None:
    server = make_server()
    server.routes["/simple/pip/"] = drip(BODY_FOREVER)
    canonical = load_presets()["official"].canonical
    target = MirrorTarget(
        ecosystem="pypi",
        url=server.url("/simple/pip/"),
        kind="simple",
        mirror=server.url("/simple/"),
    )
    started = time.monotonic()
    (result,) = check_mirrors(
        [target], make_client(timeouts=QUICK, use_cache=False), canonical=canonical
    )
    assert time.monotonic() - started < 4.0
    assert not result.ok and result.error is not None and "0.8 s" in result.error
