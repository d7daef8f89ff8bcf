"""The total deadline of a fetch holds through a SOCKS proxy too (issue 8).

A SOCKS5 proxy on loopback (``ssh -D`` gives users one) either relays honestly or drips its
handshake reply one byte at a time; the origin behind it may drip its headers or body. Each
byte arrives within the per-read timeout, so only the total deadline can end the fetch.

The fetches through ``socks5h://`` need PySocks (requests' SOCKS support); without it they are
skipped, and the last test shows the same guard on a connection class written here, a SOCKS5
client of its own: the deadline does not depend on which connection class urllib3 uses.
"""

from __future__ import annotations

import select
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3.exceptions
from test_hardening_net_limits import QUICK, drip
from test_net_support import BenchServer, Cas, ClientFactory, SystemTrust
from urllib3 import PoolManager
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool

from cuda_resolve.net import FetchError, RetryPolicy
from cuda_resolve.net._deadline import Deadline, guarded_pools

pytest_plugins = ["test_net_support"]

NO_PYSOCKS = (
    "PySocks is not installed: requests cannot use a socks5h:// proxy without it (pip "
    "install PySocks)"
)

#: The proxy's CONNECT reply naming a 255-byte domain as the bound address: 263 bytes that,
#: dripped every 0.05 s, keep a client that has per-read timeouts only busy for 13 s.
LONG_REPLY = b"\x05\x00\x00\x03\xff" + b"a" * 255 + b"\x00\x50"
#: Answers that take 10 s or more at one byte every 0.1 s (finite, so a broken guard fails the
#: test in seconds instead of hanging it).
SLOW_HEADERS = b"HTTP/1.0 200 OK\r\nX-Slow: " + b"a" * 80 + b"\r\n\r\n"
SLOW_BODY = (
    b"HTTP/1.0 200 OK\r\nContent-Length: 100\r\nContent-Type: text/html\r\n\r\n" + b"<" * 100
)


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the client went away")
        data += chunk
    return data


class Socks5Proxy(socketserver.ThreadingTCPServer):
    """A SOCKS5 proxy (no authentication, CONNECT only) on 127.0.0.1:0 that connects every
    request to 127.0.0.1 (host names need not resolve: success proves the proxy was used).
    With ``drip_reply`` it answers CONNECT one byte every 0.05 s and never relays."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *, drip_reply: bool = False) -> None:
        self.drip_reply = drip_reply
        self.requests: list[tuple[str, int]] = []
        self.stopping = threading.Event()
        super().__init__(("127.0.0.1", 0), _Socks5Handler)
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client cut off at its deadline is what these tests expect

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        self._thread.join()


class _Socks5Handler(socketserver.BaseRequestHandler):
    server: Socks5Proxy

    def handle(self) -> None:
        client: socket.socket = self.request
        client.settimeout(10)
        _version, methods = _recv_exactly(client, 2)
        _recv_exactly(client, methods)
        client.sendall(b"\x05\x00")  # no authentication
        _version, _command, _reserved, kind = _recv_exactly(client, 4)
        if kind == 1:
            host = socket.inet_ntoa(_recv_exactly(client, 4))
        elif kind == 3:
            host = _recv_exactly(client, _recv_exactly(client, 1)[0]).decode("ascii")
        else:
            host = socket.inet_ntop(socket.AF_INET6, _recv_exactly(client, 16))
        (port,) = struct.unpack("!H", _recv_exactly(client, 2))
        self.server.requests.append((host, port))
        if self.server.drip_reply:
            for byte in LONG_REPLY:
                if self.server.stopping.is_set():
                    return
                client.sendall(bytes([byte]))
                time.sleep(0.05)
            return
        with socket.create_connection(("127.0.0.1", port), timeout=5) as upstream:
            client.sendall(
                b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack("!H", port)
            )
            self._relay(client, upstream)

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        while not self.server.stopping.is_set():
            readable, _, _ = select.select([a, b], [], [], 0.05)
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                (b if sock is a else a).sendall(data)


@pytest.fixture
def socks_proxy() -> Iterator[Socks5Proxy]:
    proxy = Socks5Proxy()
    yield proxy
    proxy.stop()


@pytest.fixture
def dripping_socks_proxy() -> Iterator[Socks5Proxy]:
    proxy = Socks5Proxy(drip_reply=True)
    yield proxy
    proxy.stop()


@pytest.fixture
def trusted(cas: Cas, system_trust: SystemTrust) -> None:
    system_trust(cas.origin)


@pytest.fixture
def pysocks() -> None:
    pytest.importorskip("socks", reason=NO_PYSOCKS)


def _via(proxy: Socks5Proxy) -> dict[str, str]:
    url = f"socks5h://127.0.0.1:{proxy.port}"
    return {"https": url, "http": url}


# -- through HttpClient, as a user with a SOCKS proxy runs it (needs PySocks) -----------------


def test_a_fetch_through_the_socks_proxy_arrives(
    pysocks: None,
    origin: BenchServer,
    trusted: None,
    socks_proxy: Socks5Proxy,
    make_client: ClientFactory,
) -> None:
    """The control: the bench proxy relays, and the client really goes through it."""
    origin.routes["/simple/"] = lambda handler: handler.reply(
        200, b"<a href='x.whl'>x</a>", content_type="text/html"
    )
    client = make_client(proxies=_via(socks_proxy), timeouts=QUICK, use_cache=False)
    url = origin.url("/simple/", host="mirror.invalid")  # resolvable by the proxy only
    assert "x.whl" in client.get_text(url)
    assert socks_proxy.requests == [("mirror.invalid", origin.port)]


@pytest.mark.parametrize("raw", [SLOW_HEADERS, SLOW_BODY], ids=["headers", "body"])
def test_an_origin_dripping_through_a_socks_proxy_is_cut_off_at_the_total_deadline(
    pysocks: None,
    origin: BenchServer,
    trusted: None,
    socks_proxy: Socks5Proxy,
    make_client: ClientFactory,
    raw: bytes,
) -> None:
    origin.routes["/slow/"] = drip(raw)
    client = make_client(
        proxies=_via(socks_proxy),
        timeouts=QUICK,
        retry=RetryPolicy(attempts=3, backoff=0.01),
        use_cache=False,
    )
    url = origin.url("/slow/", host="mirror.invalid")
    started = time.monotonic()
    with pytest.raises(FetchError) as info:
        client.get(url)
    took = time.monotonic() - started
    assert took < 4.0, took  # per-read timeouts alone would wait for ever
    assert info.value.kind == "timeout"
    assert url in info.value.message and "0.8 s" in info.value.message
    assert socks_proxy.requests  # it went through the proxy


def test_a_socks_proxy_dripping_its_handshake_is_cut_off_at_the_total_deadline(
    pysocks: None, dripping_socks_proxy: Socks5Proxy, make_client: ClientFactory, tmp_path: Any
) -> None:
    client = make_client(
        proxies=_via(dripping_socks_proxy),
        timeouts=QUICK,
        retry=RetryPolicy(attempts=3, backoff=0.01),
        use_cache=False,
    )
    started = time.monotonic()
    with pytest.raises(FetchError) as info:
        client.get("https://mirror.invalid/simple/")
    assert info.value.kind == "timeout" and "0.8 s" in info.value.message
    probe = client.probe("https://mirror.invalid/simple/")
    assert not probe.ok and probe.error is not None and probe.error.kind == "timeout"
    with pytest.raises(FetchError) as download:
        client.download("https://mirror.invalid/x.whl", tmp_path / "x.whl", sha256="0" * 64)
    assert download.value.kind == "timeout"
    assert time.monotonic() - started < 6.0  # three fetches; the handshake alone lasts 13 s
    assert not (tmp_path / "x.whl").exists()


# -- any connection class: one that speaks SOCKS5 itself (no PySocks needed) -----------------


class _OwnSocks5Connection(HTTPConnection):
    """A connection that sets itself up through a SOCKS5 proxy with code of its own, as
    urllib3.contrib.socks does with PySocks: the whole handshake happens in ``_new_conn``."""

    proxy_port = 0

    def _new_conn(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.proxy_port), timeout=self.timeout)
        try:
            sock.sendall(b"\x05\x01\x00")
            _recv_exactly(sock, 2)
            name = self.host.encode("ascii")
            sock.sendall(
                b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack("!H", self.port)
            )
            _version, status, _reserved, kind = _recv_exactly(sock, 4)
            if kind == 3:
                _recv_exactly(sock, _recv_exactly(sock, 1)[0] + 2)
            else:
                _recv_exactly(sock, (4 if kind == 1 else 16) + 2)
            if status != 0:
                raise ConnectionError(f"SOCKS5 CONNECT failed ({status})")
        except BaseException:
            sock.close()
            raise
        return sock


class _OwnSocks5Pool(HTTPConnectionPool):
    ConnectionCls = _OwnSocks5Connection


@pytest.mark.parametrize("stage", ["handshake", "body"])
def test_the_deadline_guards_any_connection_class(
    stage: str, make_server: Any, socks_proxy: Socks5Proxy, dripping_socks_proxy: Socks5Proxy
) -> None:
    plain = make_server(tls=False)
    plain.routes["/slow/"] = drip(SLOW_BODY)
    plain.routes["/fast/"] = lambda handler: handler.reply(200, b"fast")
    proxy = dripping_socks_proxy if stage == "handshake" else socks_proxy
    _OwnSocks5Connection.proxy_port = proxy.port
    manager = PoolManager(retries=False, timeout=2.0)
    manager.pool_classes_by_scheme = guarded_pools({"http": _OwnSocks5Pool})
    try:
        if stage == "body":  # the control: the guarded class still works
            assert (
                manager.request("GET", plain.url("/fast/", host="mirror.invalid")).data == b"fast"
            )
        started = time.monotonic()
        with Deadline(0.8) as deadline, pytest.raises(urllib3.exceptions.HTTPError) as info:
            manager.request("GET", plain.url("/slow/", host="mirror.invalid"))
        took = time.monotonic() - started
        assert deadline.fired, info.value
        assert took < 3.0, took
    finally:
        manager.clear()
