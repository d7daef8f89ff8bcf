"""Which proxy a URL goes through, and a CONNECT tunnel for the TLS diagnosis.

Proxies come from the configuration when it names one (``{"https": ..., "http": ...,
"no_proxy": "a,b"}``, the shape of :meth:`cuda_resolve.config.Proxies.as_requests`), else from
the environment (``HTTPS_PROXY``/``https_proxy``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``/
``no_proxy``), which is what requests, pip, conda and curl read. The configuration's
``no_proxy`` applies either way: a config that names only ``no_proxy`` exempts those hosts (a
lab mirror) from the environment's proxy.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from ..redaction import redact

__all__ = ["ProxyRefused", "open_tunnel", "proxy_for", "redact"]


def proxy_for(url: str, explicit: Mapping[str, str] | None = None) -> str | None:
    """The proxy URL that ``url`` is fetched through, or None for a direct connection."""
    from requests.utils import get_environ_proxies, select_proxy, should_bypass_proxies

    no_proxy = explicit.get("no_proxy") if explicit else None
    if no_proxy and should_bypass_proxies(url, no_proxy=no_proxy):
        return None  # the config's no_proxy also exempts hosts from the environment's proxy
    if explicit and any(key in explicit for key in ("http", "https", "all")):
        proxies = {k: v for k, v in explicit.items() if k != "no_proxy"}
    else:
        proxies = dict(get_environ_proxies(url, no_proxy=None))
    return select_proxy(url, proxies)


class ProxyRefused(OSError):
    """The proxy answered CONNECT with something other than 200."""

    def __init__(self, proxy: str, status_line: str) -> None:
        super().__init__(f"proxy {redact(proxy)} answered CONNECT with {status_line!r}")
        self.status_line = status_line


def open_tunnel(host: str, port: int, proxy: str | None, *, timeout: float) -> socket.socket:
    """A TCP connection to ``host:port``, directly or through an ``http://`` proxy's CONNECT.

    Raises OSError (``socket.gaierror``, ``ConnectionRefusedError``, ``TimeoutError``,
    :class:`ProxyRefused`) like a plain connect would.
    """
    if proxy is None:
        return socket.create_connection((host, port), timeout=timeout)
    parts = urlsplit(proxy)
    if parts.scheme != "http" or not parts.hostname:
        raise OSError(
            f"cannot open a diagnostic tunnel through {redact(proxy)} (only http:// proxies)"
        )
    sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout)
    try:
        target = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if parts.username is not None:
            token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            lines.append(f"Proxy-Authorization: Basic {base64.b64encode(token).decode()}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
            if len(reply) > 65536:
                break
        status_line = reply.split(b"\r\n", 1)[0].decode("latin-1", "replace").strip()
        fields = status_line.split(" ", 2)
        if len(fields) < 2 or fields[1] != "200":
            raise ProxyRefused(proxy, status_line or "no answer")
        return sock
    except BaseException:
        sock.close()
        raise
