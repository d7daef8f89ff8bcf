"""A total deadline for one fetch: when it passes, the fetch's sockets are shut down.

Socket timeouts bound each read, not the exchange: a server that sends one byte every few
seconds satisfies every per-read timeout forever (in the headers or the body alike), and so does
a SOCKS proxy dripping its handshake. A :class:`Deadline` is entered around one fetch; the
connections that fetch uses register with it, and a timer shuts their sockets down when the time
is up, so the blocked read returns and the fetch fails with ``fired`` set. Nothing is registered
outside a deadline, and a deadline that ended forgets its connections, so a pooled connection
reused later is never touched.

The guard does not depend on the connection class: :func:`guarded_pools` wraps whatever pool
classes a pool manager has (plain, HTTPS, urllib3.contrib.socks's), so a proxy type that brings
its own connections is guarded like a direct connection. Setting a connection up (``_new_conn``:
name resolution, the TCP connect, a SOCKS handshake) happens before there is a socket to shut
down, so it runs in a helper thread that the fetch waits for only until the deadline.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError

__all__ = ["GUARDED_POOLS", "Deadline", "DeadlinePassed", "guarded_pools"]

_T = TypeVar("_T")
_current = threading.local()


class DeadlinePassed(TimeoutError):
    """The deadline passed while a call was still under way (the call goes on unwatched)."""


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

    def wait_for(self, work: Callable[[], _T], discard: Callable[[_T], None]) -> _T:
        """``work()`` run in a helper thread, waited for until the deadline; past it the deadline
        fires and :class:`DeadlinePassed` is raised here. What ``work`` returns after nobody
        waits any more (or after Ctrl-C) is handed to ``discard`` (a socket is closed)."""
        lock = threading.Lock()
        done = threading.Event()
        outcome: list[tuple[bool, Any]] = []  # (succeeded, value or exception)
        abandoned = False

        def run() -> None:
            try:
                got: tuple[bool, Any] = (True, work())
            except BaseException as exc:
                got = (False, exc)
            with lock:
                if not abandoned:
                    outcome.append(got)
                    done.set()
                    return
            if got[0]:
                discard(got[1])

        def give_up() -> bool:
            """Whether the result was left to ``run`` (False: it had arrived already)."""
            nonlocal abandoned
            with lock:
                abandoned = not outcome
                return abandoned

        if self.remaining() <= 0:
            self._fire()
            raise DeadlinePassed("the deadline passed before the call started")
        threading.Thread(target=run, name="cuda-resolve-connect", daemon=True).start()
        try:
            finished = done.wait(max(0.0, self.remaining()))
        except BaseException:  # Ctrl-C: nobody will use the result
            if not give_up() and outcome[0][0]:
                discard(outcome[0][1])
            raise
        if not finished and give_up():
            self._fire()
            raise DeadlinePassed(f"not done within the deadline ({self.seconds:g} s)")
        succeeded, value = outcome[0]
        if not succeeded:
            raise value
        return cast("_T", value)

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


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


def _deadline() -> Deadline | None:
    return cast("Deadline | None", getattr(_current, "deadline", None))


class _DeadlineGuard(HTTPConnection):
    """Put first in a connection class's bases: the current fetch's deadline watches it."""

    def _new_conn(self) -> socket.socket:
        deadline = _deadline()
        if deadline is None:
            sock = super()._new_conn()
        else:
            try:
                sock = deadline.wait_for(super()._new_conn, _close)
            except DeadlinePassed:
                raise ConnectTimeoutError(
                    self, f"Connection to {self.host} not set up within the fetch's total deadline"
                ) from None
        self._deadline_fd = sock.fileno()
        return sock

    def connect(self) -> None:
        deadline = _deadline()
        if deadline is not None:
            deadline.watch(self)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        deadline = _deadline()
        if deadline is not None:
            deadline.watch(self)
        super().request(*args, **kwargs)


_guarded: dict[type[HTTPConnectionPool], type[HTTPConnectionPool]] = {}
_guarded_lock = threading.Lock()


def _guarded_pool(pool: type[HTTPConnectionPool]) -> type[HTTPConnectionPool]:
    """``pool`` with its connection class guarded, made once per class (requests asks for a
    proxy's pool manager again on every request)."""
    connection = pool.ConnectionCls
    if issubclass(connection, _DeadlineGuard):
        return pool
    with _guarded_lock:
        made = _guarded.get(pool)
        if made is None:
            guarded = type(f"Guarded{connection.__name__}", (_DeadlineGuard, connection), {})
            made = _guarded[pool] = type(
                f"Guarded{pool.__name__}", (pool,), {"ConnectionCls": guarded}
            )
        return made


def guarded_pools(
    pools: Mapping[str, type[HTTPConnectionPool]],
) -> dict[str, type[HTTPConnectionPool]]:
    """A pool manager's ``pool_classes_by_scheme`` with every connection class guarded."""
    return {scheme: _guarded_pool(pool) for scheme, pool in pools.items()}


#: ``PoolManager.pool_classes_by_scheme`` for direct connections that honour a :class:`Deadline`.
GUARDED_POOLS: dict[str, type[HTTPConnectionPool]] = guarded_pools(
    {"http": HTTPConnectionPool, "https": HTTPSConnectionPool}
)
