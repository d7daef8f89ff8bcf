"""A total deadline for one fetch: when it passes, the fetch's sockets are shut down.

Socket timeouts bound each read, not the exchange: a server that sends one byte every few
seconds satisfies every per-read timeout forever (in the headers or the body alike). A
:class:`Deadline` is entered around one fetch; the connections that fetch uses register with
it (the connection classes below do so when they connect or send a request), and a timer
shuts their sockets down when the time is up, so the blocked read returns and the fetch fails
with ``fired`` set. Nothing is registered outside a deadline, and a deadline that ended
forgets its connections, so a pooled connection reused later is never touched.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["GUARDED_POOLS", "Deadline"]

_current = threading.local()


class Deadline:
    """``with Deadline(seconds) as deadline: ...``; ``deadline.fired`` tells whether it cut."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expires = time.monotonic() + seconds
        self.fired = False
        self._lock = threading.Lock()
        self._connections: list[Any] = []
        self._timer: threading.Timer | None = None
        self._previous: Deadline | None = None

    def remaining(self) -> float:
        return self.expires - time.monotonic()

    def __enter__(self) -> Deadline:
        self._previous = getattr(_current, "deadline", None)
        _current.deadline = self
        self._timer = threading.Timer(max(0.0, self.remaining()), self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._connections.clear()
        _current.deadline = self._previous

    def watch(self, connection: Any) -> None:
        with self._lock:
            if self.fired:
                _shut(connection)
            elif connection not in self._connections:
                self._connections.append(connection)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for connection in self._connections:
                _shut(connection)


def _shut(connection: Any) -> None:
    """Shut the connection's socket down (both ways): a blocked recv returns at once."""
    sock = getattr(connection, "sock", None)
    try:
        if sock is not None and sock.fileno() >= 0:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
            return
        fd = getattr(connection, "_deadline_fd", None)
        if sock is not None and fd is not None:
            # the TLS handshake is under way: the raw socket was handed to the SSLSocket
            raw = socket.socket(fileno=fd)
            try:
                raw.shutdown(socket.SHUT_RDWR)
            finally:
                raw.detach()
    except OSError:
        pass


def _watch(connection: Any) -> None:
    deadline: Deadline | None = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.watch(connection)


class _GuardedHTTPConnection(HTTPConnection):
    """A connection the current fetch's deadline watches (its socket is cut when time is up)."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        self._deadline_fd = sock.fileno()
        return sock

    def connect(self) -> None:
        _watch(self)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch(self)
        super().request(*args, **kwargs)


class _GuardedHTTPSConnection(_GuardedHTTPConnection, HTTPSConnection):
    """The same for HTTPS: the guard's methods come first, HTTPSConnection's TLS set-up after."""


class _GuardedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


#: ``PoolManager.pool_classes_by_scheme`` for connections that honour a :class:`Deadline`.
GUARDED_POOLS: dict[str, type[HTTPConnectionPool]] = {
    "http": _GuardedHTTPConnectionPool,
    "https": _GuardedHTTPSConnectionPool,
}
