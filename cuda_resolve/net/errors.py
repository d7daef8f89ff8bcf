"""What failed, in words: every failure of the HTTP layer becomes one :class:`FetchError`.

The message names the URL and the layer that failed (DNS, connection, proxy, TLS, HTTP status,
integrity); the hint says what to do. TLS failures carry a :class:`~.inspect.TlsReport`
(subject and issuer of the certificate the server presented, and whether the OS store and
certifi trust it). The advice never includes turning verification off.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterator
from typing import Literal
from urllib.parse import urlsplit

from ..errors import NetworkError
from .inspect import TlsReport
from .proxy import ProxyRefused, redact

__all__ = [
    "FailureKind",
    "FetchError",
    "describe_exception",
    "exception_chain",
    "http_status_error",
]

FailureKind = Literal[
    "url",
    "dns",
    "refused",
    "timeout",
    "proxy",
    "tls",
    "connection",
    "http",
    "redirect",
    "content",
    "integrity",
    "truncated",
    "size",
]

TLS_HINT = (
    "if your network re-signs HTTPS (a campus or company proxy), add its CA certificate to the "
    "OS trust store (Debian/Ubuntu: copy it to /usr/local/share/ca-certificates/ and run "
    "update-ca-certificates; Fedora/RHEL: /etc/pki/ca-trust/source/anchors/ and update-ca-trust); "
    "cuda-resolve verifies with the OS store. Never turn verification off"
)

#: OpenSSL verify codes whose cure is not a CA in the trust store.
_NAME_MISMATCH = frozenset({62, 63, 64})  # X509_V_ERR_HOSTNAME/EMAIL/IP_ADDRESS_MISMATCH
_VALIDITY = frozenset({9, 10})  # X509_V_ERR_CERT_NOT_YET_VALID, X509_V_ERR_CERT_HAS_EXPIRED


def _tls_hint(verify_code: int | None, host: str) -> str:
    if verify_code in _NAME_MISMATCH:
        return (
            f"the certificate is valid, but not for the host name {host!r}: use the URL with the "
            "host name the server's certificate names (a mirror addressed by IP address or by an "
            "alias fails this way). Never turn verification off"
        )
    if verify_code in _VALIDITY:
        return (
            "the certificate is outside its validity period: check this machine's clock (date -u), "
            "or tell the server's operator. Never turn verification off"
        )
    return TLS_HINT


class FetchError(NetworkError):
    """A fetch that failed; ``kind`` says which layer, ``url`` what was fetched."""

    def __init__(
        self,
        message: str,
        *,
        kind: FailureKind,
        url: str,
        hint: str | None = None,
        status: int | None = None,
        tls: TlsReport | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.kind: FailureKind = kind
        self.url = redact(url)  # shown and put in --json output: no credentials
        self.status = status
        self.tls = tls

    def to_json(self) -> dict[str, str | None]:
        data = super().to_json()
        data["kind"] = self.kind
        data["url"] = self.url
        return data


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and everything it wraps (causes, contexts, urllib3 reasons, args)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            todo.append(reason)
        todo.extend(arg for arg in current.args if isinstance(arg, BaseException))
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)


def _first(exc: BaseException, *types: type[BaseException]) -> BaseException | None:
    return next((e for e in exception_chain(exc) if isinstance(e, types)), None)


def _where(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


def describe_exception(
    exc: BaseException,
    *,
    url: str,
    proxy: str | None,
    connect_timeout: float,
    read_timeout: float,
    attempts: int = 1,
    inspect: Callable[[str, int, str | None], TlsReport | None] | None = None,
) -> FetchError:
    """Turn a requests/urllib3/ssl/socket exception raised while fetching ``url`` into a
    :class:`FetchError` that says what failed. ``inspect`` is called for certificate failures
    to name the presented chain (it must not raise)."""
    import requests
    import urllib3.exceptions as u3

    name_resolution = getattr(u3, "NameResolutionError", socket.gaierror)  # urllib3 >= 2
    parts = urlsplit(url)
    host = parts.hostname or "?"
    bad_url = (
        requests.exceptions.InvalidURL,
        requests.exceptions.MissingSchema,
        requests.exceptions.InvalidSchema,
        u3.LocationValueError,
    )
    if (
        isinstance(exc, requests.exceptions.InvalidSchema)
        and proxy
        and proxy.lower().startswith("socks")
    ):
        # requests raises this before connecting when PySocks is missing
        from .._upgrade import command_to_install

        return FetchError(
            f"proxy {redact(proxy)} is a SOCKS proxy and SOCKS support is not installed ({exc}) "
            f"fetching {url}",
            kind="proxy",
            url=url,
            hint="install PySocks next to cuda-resolve "
            f"({command_to_install('pysocks')}) where PyPI answers without this proxy, or from "
            "a PySocks wheel you downloaded (pip cannot reach PyPI through a SOCKS proxy before "
            "PySocks is there); or use an http:// proxy",
        )
    if isinstance(exc, bad_url):
        return FetchError(
            f"cannot fetch {url!r}: {exc}",
            kind="url",
            url=url,
            hint="check the URL (an https:// URL with a host name)",
        )
    where = _where(url)
    via = f" through proxy {redact(proxy)}" if proxy else ""
    tried = f" (after {attempts} attempts)" if attempts > 1 else ""

    verify = _first(exc, ssl.SSLCertVerificationError)
    if isinstance(verify, ssl.SSLCertVerificationError):
        reason = str(verify.verify_message or verify.reason or verify)
        report = inspect(host, parts.port or 443, proxy) if inspect else None
        detail = f": {report.describe()}" if report is not None else ""
        return FetchError(
            f"TLS certificate verification failed for {where}{via} ({reason}) fetching "
            f"{url}{detail}",
            kind="tls",
            url=url,
            hint=_tls_hint(verify.verify_code, host),
            tls=report,
        )

    proxy_error = _first(exc, requests.exceptions.ProxyError, u3.ProxyError, ProxyRefused)
    if proxy_error is not None and proxy:
        text = " ".join(str(e) for e in exception_chain(proxy_error))
        if "407" in text:
            what = "asks for authentication (407 Proxy Authentication Required)"
            hint = (
                "put the proxy credentials in the proxy URL (http://user:password@proxy:port) or "
                "ask your IT for them"
            )
        elif _first(proxy_error, ConnectionRefusedError) is not None:
            what = "refused the connection"
            hint = "check the proxy host and port in HTTPS_PROXY / cuda-resolve's [proxy] config"
        elif _first(proxy_error, socket.gaierror, name_resolution) is not None:
            what = "cannot be resolved (DNS)"
            hint = "check the proxy host name in HTTPS_PROXY / cuda-resolve's [proxy] config"
        elif _first(proxy_error, u3.ConnectTimeoutError, socket.timeout) is not None:
            what = f"did not answer within {connect_timeout:g} s"
            hint = "check the proxy address, or whether this machine must use a proxy at all"
        else:
            status = next(
                (s for s in ("403", "502", "503", "504") if f" {s} " in f" {text} "), None
            )
            what = (
                f"refused to CONNECT to {where} (HTTP {status})"
                if status
                else f"failed: {proxy_error}"
            )
            hint = "the proxy may block this host; ask for it to be allowed, or configure a mirror"
        return FetchError(
            f"proxy {redact(proxy)} {what}{tried} fetching {url}", kind="proxy", url=url, hint=hint
        )

    if _first(exc, name_resolution, socket.gaierror) is not None:
        return FetchError(
            f"DNS lookup failed for host {host!r}{tried} fetching {url}",
            kind="dns",
            url=url,
            hint="check the host name; if this network only reaches the internet through a proxy, "
            "set HTTPS_PROXY",
        )
    if _first(exc, ConnectionRefusedError) is not None:
        return FetchError(
            f"connection to {where}{via} refused{tried} fetching {url}",
            kind="refused",
            url=url,
            hint="nothing is listening there; check the URL and port",
        )
    # urllib3's NewConnectionError subclasses ConnectTimeoutError: only a real timeout counts
    connect_timed_out = any(
        isinstance(e, u3.ConnectTimeoutError) and not isinstance(e, u3.NewConnectionError)
        for e in exception_chain(exc)
    )
    if connect_timed_out:
        return FetchError(
            f"connection to {where}{via} timed out after {connect_timeout:g} s{tried} "
            f"fetching {url}",
            kind="timeout",
            url=url,
            hint="the host may be blocked or down; a proxy may be needed (HTTPS_PROXY), or "
            "configure a mirror",
        )
    if (
        _first(exc, requests.exceptions.ReadTimeout, u3.ReadTimeoutError, socket.timeout)
        is not None
    ):
        return FetchError(
            f"{where}{via} sent no data for {read_timeout:g} s{tried} fetching {url}",
            kind="timeout",
            url=url,
            hint="the server is overloaded or the connection stalls; retry later or use a mirror",
        )
    if _first(exc, u3.IncompleteRead, requests.exceptions.ChunkedEncodingError) is not None:
        return FetchError(
            f"the response from {where} ended early (truncated body){tried} fetching {url}",
            kind="truncated",
            url=url,
            hint="the connection was cut; retry, or use a mirror closer to you",
        )
    ssl_error = _first(exc, ssl.SSLError)
    if ssl_error is not None:
        reason = getattr(ssl_error, "reason", None) or str(ssl_error)
        return FetchError(
            f"TLS handshake with {where}{via} failed ({reason}){tried} fetching {url}",
            kind="tls",
            url=url,
            hint="the server or a proxy in between does not speak TLS as expected; check the "
            "URL's scheme and port",
        )
    return FetchError(
        f"connection to {where}{via} failed: {exc}{tried} fetching {url}",
        kind="connection",
        url=url,
    )


def http_status_error(
    status: int, reason: str, url: str, *, attempts: int = 1, canonical: str | None = None
) -> FetchError:
    """An HTTP status that is not success: names the status and the URL."""
    tried = f" (after {attempts} attempts)" if attempts > 1 else ""
    also = f" (mirror of {canonical})" if canonical and canonical != url else ""
    if status == 404:
        hint = (
            "the file or page does not exist there; check the version, or whether the "
            "mirror carries it"
        )
    elif status in (401, 403):
        hint = (
            "the server refused access; check credentials (~/.netrc) or whether the host is allowed"
        )
    elif status >= 500:
        hint = "the server failed; retry later or use a mirror"
    else:
        hint = None
    return FetchError(
        f"HTTP {status} {reason}".rstrip() + f"{tried} fetching {url}{also}",
        kind="http",
        url=url,
        hint=hint,
        status=status,
    )
