"""The hermetic TLS bench for the net tests (fixtures only; no tests here).

Throwaway CAs (trustme), HTTPS servers on 127.0.0.1 with scripted routes, and a CONNECT proxy
that tunnels or intercepts (terminates TLS with a leaf minted by its own CA, as campus proxies
do). A CA is made "system-trusted" for one test by pointing ``SSL_CERT_FILE`` at it and
``SSL_CERT_DIR`` at an empty directory: OpenSSL's defaults, which truststore uses on Linux.
Nothing here leaves loopback. Test modules load it with ``pytest_plugins = ["test_net_support"]``.
"""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trustme

from cuda_resolve.net import HttpClient, RetryPolicy, Timeouts

PROXY_VARS = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
)
CA_VARS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "SSL_CERT_FILE", "SSL_CERT_DIR")
NAMES = ("localhost", "127.0.0.1", "mirror.invalid", "other.invalid")

Route = Callable[["BenchHandler"], None]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


class BenchServer(ThreadingHTTPServer):
    """An HTTP(S) server on 127.0.0.1:0 answering from ``routes`` (path -> handler)."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, ssl_context: ssl.SSLContext | None) -> None:
        self.ssl_context = ssl_context
        self.routes: dict[str, Route] = {}
        self.seen: list[Seen] = []
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()
        super().__init__(("127.0.0.1", 0), BenchHandler)
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str, host: str = "localhost") -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def requests_to(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.errors.append(sys.exc_info()[1])  # type: ignore[arg-type]

    def start(self) -> BenchServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        self._thread.join()


class BenchHandler(BaseHTTPRequestHandler):
    server: BenchServer
    protocol_version = "HTTP/1.0"

    def setup(self) -> None:
        ctx = self.server.ssl_context
        if ctx is not None and not isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            self.request = ctx.wrap_socket(self.request, server_side=True)
        self._tls = self.request if isinstance(self.request, ssl.SSLSocket) else None
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self._tls is not None:
                self._tls.close()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        path = urlsplit(self.path).path
        self.server.seen.append(Seen(self.command, path, {k: v for k, v in self.headers.items()}))
        route = self.server.routes.get(path)
        if route is None:
            self.reply(404, b"not here\n")
            return
        route(self)

    def reply(
        self,
        status: int = 200,
        body: bytes = b"",
        *,
        content_type: str = "text/plain",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


# -- the CONNECT proxy ---------------------------------------------------------------------


class BenchProxy(socketserver.ThreadingTCPServer):
    """A CONNECT proxy on 127.0.0.1:0.

    ``mode``: "tunnel" relays bytes to ``routes[host]`` (a loopback port); "intercept" answers
    the CONNECT, then terminates TLS itself with a leaf for the host minted by ``intercept_ca``
    and serves the request from ``origin``'s routes; "407" asks for credentials.
    Host names need not resolve: the proxy maps them, so success proves the proxy was used.
    """

    daemon_threads = False
    block_on_close = True

    def __init__(
        self,
        *,
        mode: str,
        routes: dict[str, int],
        intercept_ca: trustme.CA | None = None,
        origin: BenchServer | None = None,
    ) -> None:
        self.mode = mode
        self.routes = routes
        self.intercept_ca = intercept_ca
        self.origin = origin
        self.connects: list[str] = []
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()
        self._leaf_contexts: dict[str, ssl.SSLContext] = {}
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def leaf_context(self, host: str) -> ssl.SSLContext:
        assert self.intercept_ca is not None
        if host not in self._leaf_contexts:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.intercept_ca.issue_cert(host).configure_cert(ctx)
            self._leaf_contexts[host] = ctx
        return self._leaf_contexts[host]

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.errors.append(sys.exc_info()[1])  # type: ignore[arg-type]

    def start(self) -> BenchProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        self._thread.join()


class ProxyHandler(socketserver.StreamRequestHandler):
    server: BenchProxy

    def handle(self) -> None:
        line = self.rfile.readline(65537).decode("latin-1").strip()
        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
            pass
        self.server.connects.append(line)
        method, target, _ = [*line.split(" ", 2), "", ""][:3]
        if self.server.mode == "407":
            self._answer(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="bench"\r\nContent-Length: 0\r\n\r\n'
            )
            return
        host = target.rpartition(":")[0]
        if method != "CONNECT" or host not in self.server.routes:
            self._answer(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        if self.server.mode == "tunnel":
            upstream = socket.create_connection(("127.0.0.1", self.server.routes[host]), timeout=5)
            try:
                self._answer(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self._relay(self.connection, upstream)
            finally:
                upstream.close()
        else:  # intercept
            assert self.server.origin is not None
            self._answer(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.connection.settimeout(10)
            tls = self.server.leaf_context(host).wrap_socket(self.connection, server_side=True)
            BenchHandler(tls, self.client_address, self.server.origin)

    def _answer(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        while not self.server.stopping.is_set():
            readable, _, _ = select.select([a, b], [], [], 0.05)
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                (b if sock is a else a).sendall(data)


# -- fixtures ----------------------------------------------------------------------------------


@dataclass
class Cas:
    origin: trustme.CA  # signs the bench servers' certificates
    intercept: trustme.CA  # the "campus proxy" CA
    unrelated: trustme.CA  # trusted in negative controls: trusts nothing we serve
    leaves: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="session")
def cas() -> Cas:
    return Cas(
        origin=trustme.CA(organization_name="Bench Origin CA"),
        intercept=trustme.CA(organization_name="Bench Campus Intercept CA"),
        unrelated=trustme.CA(organization_name="Bench Unrelated CA"),
    )


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CA bundle variables and no proxy variables from the developer's or CI's shell."""
    for name in CA_VARS + PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


SystemTrust = Callable[..., Path]


@pytest.fixture
def system_trust(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clean_env: None) -> SystemTrust:
    """``system_trust(ca, ...)``: make exactly these CAs the OS store for this test."""

    def trust(*authorities: trustme.CA) -> Path:
        pem = tmp_path / "system-trust.pem"
        pem.write_bytes(b"".join(ca.cert_pem.bytes() for ca in authorities))
        empty = tmp_path / "empty-cert-dir"
        empty.mkdir(exist_ok=True)
        monkeypatch.setenv("SSL_CERT_FILE", str(pem))
        monkeypatch.setenv("SSL_CERT_DIR", str(empty))
        return pem

    return trust


def server_context(ca: trustme.CA, *names: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*(names or NAMES)).configure_cert(ctx)
    return ctx


ServerFactory = Callable[..., BenchServer]


@pytest.fixture
def make_server(cas: Cas) -> Iterator[ServerFactory]:
    """``make_server()`` an HTTPS server signed by the origin CA; ``tls=False`` plain HTTP;
    ``ca=`` and ``names=`` for other certificates. Stopped after the test."""
    started: list[BenchServer] = []

    def make(
        *, tls: bool = True, ca: trustme.CA | None = None, names: tuple[str, ...] = ()
    ) -> BenchServer:
        ctx = server_context(ca or cas.origin, *names) if tls else None
        server = BenchServer(ctx).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def origin(make_server: ServerFactory) -> BenchServer:
    return make_server()


ProxyFactory = Callable[..., BenchProxy]


@pytest.fixture
def make_proxy(cas: Cas) -> Iterator[ProxyFactory]:
    started: list[BenchProxy] = []

    def make(
        mode: str = "tunnel",
        *,
        routes: dict[str, int] | None = None,
        origin: BenchServer | None = None,
    ) -> BenchProxy:
        proxy = BenchProxy(
            mode=mode, routes=routes or {}, intercept_ca=cas.intercept, origin=origin
        ).start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


class SleepRecorder:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


ClientFactory = Callable[..., HttpClient]


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[ClientFactory]:
    """``make_client(**kw)``: an HttpClient with a private cache and fast, recorded back-off
    (``sleep`` is a :class:`SleepRecorder` unless given). Built when called, so it sees the
    test's environment. Closed after the test."""
    made: list[HttpClient] = []

    def make(**kwargs: Any) -> HttpClient:
        kwargs.setdefault("cache_dir", tmp_path / "http-cache")
        kwargs.setdefault("sleep", SleepRecorder())
        kwargs.setdefault("timeouts", Timeouts(connect=2.0, read=5.0, deadline=10.0))
        kwargs.setdefault("retry", RetryPolicy(attempts=3, backoff=0.01))
        client = HttpClient(**kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@contextlib.contextmanager
def unanswered_port() -> Iterator[int]:
    """A loopback port whose listen backlog is full: new connections hang (SYNs are dropped)
    until the client's connect timeout, like a firewalled host."""
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError, OSError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


#: Sockets bound and never listening, kept open so that no other process (another test, another
#: test run on a busy machine) can take their ports while a test relies on them being refused.
_HELD_CLOSED: list[socket.socket] = []


def closed_port() -> int:
    """A loopback port nothing listens on (connections are refused): bound here and never
    listened on, so it stays refused for the rest of the session."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _HELD_CLOSED.append(sock)
    return int(sock.getsockname()[1])


def ranged(body: bytes, sent: list[int] | None = None, *, honour_range: bool = True) -> Route:
    """A route serving ``body`` with HTTP Range support (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``);
    the number of body bytes each response carried is appended to ``sent``."""

    def route(handler: BenchHandler) -> None:
        spec = handler.headers.get("Range", "")
        if not honour_range or not spec.startswith("bytes="):
            if sent is not None:
                sent.append(len(body))
            handler.reply(200, body, content_type="application/octet-stream")
            return
        first, _, last = spec[len("bytes=") :].partition("-")
        if first == "":
            start, end = max(0, len(body) - int(last)), len(body) - 1
        else:
            start, end = int(first), min(int(last) if last else len(body) - 1, len(body) - 1)
        if start >= len(body):
            handler.reply(416, b"", headers={"Content-Range": f"bytes */{len(body)}"})
            return
        part = body[start : end + 1]
        if sent is not None:
            sent.append(len(part))
        handler.reply(
            206,
            part,
            content_type="application/octet-stream",
            headers={"Content-Range": f"bytes {start}-{end}/{len(body)}"},
        )

    return route
