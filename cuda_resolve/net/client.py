"""``HttpClient``: the only thing in cuda-resolve that opens connections.

requests with an adapter whose SSLContext is :func:`.tls.build_ssl_context` (the OS trust store
through truststore), for direct connections and for HTTPS tunnelled through a CONNECT proxy
alike. ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` cannot replace that context and nothing can
turn verification off: the session and the adapter both pin ``verify`` to on.

Every URL passes through ``rewrite`` (canonical URL in, mirror URL out) before it is fetched;
hashes are checked against the caller's canonical record. Failures raise
:class:`~.errors.FetchError` (a :class:`cuda_resolve.errors.NetworkError`) saying what failed.
There is no fallback to another index: a URL that cannot be fetched is an error.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter

from .._frozen import frozen
from ._deadline import GUARDED_POOLS, Deadline, guarded_pools
from .cache import CacheEntry, HttpCache, default_cache_dir
from .download import CHUNK, Progress, file_sha256, normalize_sha256, stream_to_file
from .errors import FetchError, describe_exception, exception_chain, http_status_error
from .inspect import TlsReport, inspect_tls
from .proxy import proxy_for, redact
from .tls import build_ssl_context

__all__ = [
    "HttpClient",
    "HttpResponse",
    "Limits",
    "Probe",
    "RangeResponse",
    "RetryPolicy",
    "Timeouts",
    "user_agent",
]

T = TypeVar("T")

MAX_REDIRECTS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_RETRY_KINDS = frozenset({"refused", "timeout", "connection", "truncated"})


def user_agent() -> str:
    from .. import __version__

    return f"cuda-resolve/{__version__}"


@frozen
class Timeouts:
    connect: float = 5.0  # per TCP connect
    read: float = 15.0  # per socket read (pip's default timeout is 15 s too)
    #: Until a response arrives, all attempts and back-off waits together stay under this:
    #: an unreachable index fails within 15 s, with 3 s to spare for a loaded machine.
    deadline: float = 12.0
    #: One whole fetch (page, JSON, byte range, probe), every attempt and the body included, ends
    #: within this: a server that sends one byte every few seconds is cut off here.
    total: float = 60.0
    #: The same for an artifact download (a multi-GB wheel).
    download: float = 3600.0


@frozen
class Limits:
    """The most bytes one answer may have; a larger one is refused (``FetchError`` kind "size")."""

    page: int = 64 << 20  # an index page or JSON document (PyPI's torch JSON is a few MB)
    probe: int = 256 << 10  # what :meth:`HttpClient.probe` reads of a body when asked to
    artifact: int = 16 << 30  # a download whose size the record does not give


@frozen
class RetryPolicy:
    """Connection failures, timeouts, truncated bodies, 429 and 5xx are retried; 4xx are not."""

    attempts: int = 4  # including the first
    backoff: float = 0.5  # seconds before the second attempt; doubles each time
    max_backoff: float = 4.0


@frozen
class HttpResponse:
    url: str  # the canonical URL asked for
    fetched_url: str  # after the mirror rewrite
    final_url: str  # after redirects
    status: int
    headers: Mapping[str, str]
    content: bytes
    elapsed: float  # seconds until the response headers arrived (0 from the cache)
    from_cache: bool = False
    redirects: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        charset = "utf-8"
        for part in self.headers.get("Content-Type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip('"')
        try:
            return self.content.decode(charset, "replace")
        except LookupError:
            return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        try:
            return json.loads(self.content)
        except (ValueError, RecursionError) as exc:
            raise FetchError(
                f"expected JSON from {self.fetched_url}, got "
                f"{self.headers.get('Content-Type', 'no content type')}: {exc}",
                kind="content",
                url=self.fetched_url,
                hint="the server (or a captive portal/proxy) answered with something else",
            ) from None


@frozen
class RangeResponse:
    content: bytes
    start: int
    total: int | None  # the whole file's size from Content-Range


@frozen
class Probe:
    """Whether a URL answers, how fast, and where it ended up; never raises."""

    url: str
    fetched_url: str
    ok: bool
    status: int | None = None
    latency: float | None = None  # seconds until the response headers arrived
    final_url: str | None = None
    redirects: tuple[str, ...] = ()
    error: FetchError | None = None
    content_type: str | None = None
    #: The first bytes of the body when the probe was asked for a ``sample`` (else empty).
    body: bytes = b""
    #: Whether ``body`` is the whole body (False: the answer was longer than the sample).
    complete: bool = True


class _TrustStoreAdapter(HTTPAdapter):
    """An HTTPAdapter that verifies with one SSLContext, for direct and proxied HTTPS alike."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self._ssl_context = ssl_context
        super().__init__(max_retries=0)

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        pool_kwargs["ssl_context"] = self._ssl_context
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = GUARDED_POOLS  # connections honour a Deadline

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        proxy_kwargs["ssl_context"] = self._ssl_context  # TLS to the origin, inside CONNECT
        if proxy.lower().startswith("https://"):
            proxy_kwargs["proxy_ssl_context"] = self._ssl_context  # TLS to the proxy itself
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        # An HTTP(S) proxy's manager and a SOCKS one (its own connection classes) alike
        manager.pool_classes_by_scheme = guarded_pools(manager.pool_classes_by_scheme)
        return manager

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # requests would point the pool at a bundle path (certifi or REQUESTS_CA_BUNDLE) here;
        # our SSLContext decides trust, and it always requires a valid certificate.
        if url.lower().startswith("https"):
            conn.cert_reqs = "CERT_REQUIRED"
            conn.ca_certs = None
            conn.ca_cert_dir = None

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        return super().send(
            request,
            stream=stream,
            timeout=timeout,
            verify=True,
            cert=None,
            proxies=dict(proxies or {}),
        )


class _Session(requests.Session):
    """Proxies resolved by :func:`.proxy.proxy_for`; ``verify`` pinned on whatever the
    environment says (requests would take REQUESTS_CA_BUNDLE as the trust store)."""

    def __init__(self, explicit_proxies: Mapping[str, str] | None) -> None:
        super().__init__()
        self._explicit_proxies = dict(explicit_proxies) if explicit_proxies else None

    def merge_environment_settings(
        self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> dict[str, Any]:
        settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
        proxy = proxy_for(str(url), self._explicit_proxies)
        settings["proxies"] = {urlsplit(str(url)).scheme: proxy} if proxy else {}
        settings["verify"] = True
        settings["cert"] = None
        return settings


class HttpClient:
    """Fetch pages, JSON, byte ranges and artifacts, verified with the OS trust store.

    ``rewrite`` maps each canonical URL to the URL actually fetched (a mirror); ``proxies``
    (``{"https": ..., "http": ..., "no_proxy": ...}``) replaces the environment's proxies when
    given. Pages are cached under ``cache_dir`` for ``cache_ttl`` seconds; artifacts are not.
    """

    def __init__(
        self,
        *,
        rewrite: Callable[[str], str] | None = None,
        proxies: Mapping[str, str] | None = None,
        ssl_context_factory: Callable[[], ssl.SSLContext] = build_ssl_context,
        timeouts: Timeouts | None = None,
        limits: Limits | None = None,
        retry: RetryPolicy | None = None,
        cache_dir: Path | None = None,
        cache_ttl: float = 3600.0,
        use_cache: bool = True,
        diagnose_tls: bool = True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rewrite = rewrite
        self.timeouts = timeouts or Timeouts()
        self.limits = limits or Limits()
        self.retry = retry or RetryPolicy()
        self.cache_ttl = cache_ttl
        self._cache = HttpCache(cache_dir or default_cache_dir()) if use_cache else None
        self._ssl_context_factory = ssl_context_factory
        self._diagnose_tls = diagnose_tls
        self._sleep = sleep
        self._explicit_proxies = dict(proxies) if proxies else None
        self._session = _Session(self._explicit_proxies)
        self._session.headers["User-Agent"] = user_agent()
        adapter = _TrustStoreAdapter(ssl_context_factory())
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public fetches ---------------------------------------------------------------------

    def resolve(self, url: str) -> str:
        """The URL that will be fetched for canonical ``url`` (the mirror rewrite applied)."""
        return self.rewrite(url) if self.rewrite is not None else url

    def proxy_for(self, url: str) -> str | None:
        return proxy_for(url, self._explicit_proxies)

    def get(
        self,
        url: str,
        *,
        accept: str | None = None,
        ttl: float | None = None,
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        total: float | None = None,
    ) -> HttpResponse:
        """GET ``url`` (rewritten), from the cache when an entry is younger than ``ttl``
        (default: the client's ``cache_ttl``; 0 revalidates: a cached entry with an ETag or
        Last-Modified is reused when the server answers 304 Not Modified).

        The body may have ``max_bytes`` (default ``limits.page``); the whole fetch ends within
        ``total`` seconds (default ``timeouts.total``)."""
        fetched = self.resolve(url)
        limit = self.limits.page if max_bytes is None else max_bytes
        max_age = self.cache_ttl if ttl is None else ttl
        cache = self._cache
        entry = cache.get(fetched, accept) if cache is not None else None
        if entry is not None and max_age > 0 and entry.age() < max_age:
            return _from_entry(url, fetched, entry)
        request_headers = dict(headers or {})
        if accept:
            request_headers["Accept"] = accept
        if entry is not None:
            if entry.etag:
                request_headers["If-None-Match"] = entry.etag
            if entry.last_modified:
                request_headers["If-Modified-Since"] = entry.last_modified

        def consume(
            resp: requests.Response, final: str, redirects: tuple[str, ...], elapsed: float
        ) -> HttpResponse:
            if resp.status_code == 304 and entry is not None and cache is not None:
                return _from_entry(url, fetched, cache.touch(entry, accept))
            content = _read_capped(resp, final, limit)
            result = HttpResponse(
                url=url,
                fetched_url=fetched,
                final_url=final,
                status=resp.status_code,
                headers=_headers(resp.headers),
                content=content,
                elapsed=elapsed,
                redirects=redirects,
            )
            if cache is not None and resp.status_code == 200:
                cache.put(
                    CacheEntry(
                        url=fetched,
                        final_url=final,
                        fetched_at=time.time(),
                        content_type=resp.headers.get("Content-Type"),
                        etag=resp.headers.get("ETag"),
                        last_modified=resp.headers.get("Last-Modified"),
                        body=content,
                    ),
                    accept,
                )
            return result

        return self._run("GET", url, fetched, request_headers, consume, total=total)

    def get_text(self, url: str, *, accept: str | None = None, ttl: float | None = None) -> str:
        return self.get(url, accept=accept, ttl=ttl).text

    def get_json(
        self, url: str, *, accept: str = "application/json", ttl: float | None = None
    ) -> Any:
        return self.get(url, accept=accept, ttl=ttl).json()

    def get_range(
        self,
        url: str,
        *,
        start: int | None = None,
        end: int | None = None,
        suffix: int | None = None,
    ) -> RangeResponse:
        """Bytes ``start..end`` (inclusive) or the last ``suffix`` bytes of ``url``, never the
        whole file: a server that ignores Range is an error (its body is not read)."""
        if suffix is not None:
            spec = f"bytes=-{suffix}"
        elif start is not None:
            spec = f"bytes={start}-{'' if end is None else end}"
        else:
            raise ValueError("give start (and end) or suffix")
        span = (
            suffix
            if suffix is not None
            else (end - start + 1 if start is not None and end is not None else None)
        )
        fetched = self.resolve(url)

        def consume(
            resp: requests.Response, final: str, redirects: tuple[str, ...], elapsed: float
        ) -> RangeResponse:
            if resp.status_code != 206:
                raise FetchError(
                    f"{final} ignored the byte-range request (HTTP {resp.status_code} "
                    "instead of 206)",
                    kind="http",
                    url=final,
                    status=resp.status_code,
                    hint="this server or mirror cannot serve parts of a file",
                )
            content = _read_capped(resp, final, span if span is not None else self.limits.page)
            first, total = _content_range(resp.headers.get("Content-Range", ""))
            return RangeResponse(
                content=content, start=first if first is not None else (start or 0), total=total
            )

        return self._run(
            "GET", url, fetched, {"Range": spec, "Accept-Encoding": "identity"}, consume
        )

    def probe(
        self, url: str, *, accept: str | None = None, sample: int = 0, total: float | None = None
    ) -> Probe:
        """GET ``url`` (rewritten) up to the response headers: status, latency, final URL; with
        ``sample``, also the first ``sample`` bytes of the body (at most ``limits.probe``), so the
        caller can tell a real index from a login page. The probe ends within ``total`` seconds
        (default ``timeouts.total``; an installer's quick reachability check passes 15).

        Never raises: a failure is in ``error``. 4xx/5xx statuses count as not ok."""
        fetched = self.resolve(url)
        headers = {"Accept": accept} if accept else {}
        wanted = min(max(sample, 0), self.limits.probe)

        def consume(
            resp: requests.Response, final: str, redirects: tuple[str, ...], elapsed: float
        ) -> Probe:
            body, complete = _read_sample(resp, wanted) if wanted else (b"", True)
            return Probe(
                url=url,
                fetched_url=fetched,
                ok=True,
                status=resp.status_code,
                latency=elapsed,
                final_url=final,
                redirects=redirects,
                content_type=resp.headers.get("Content-Type"),
                body=body,
                complete=complete,
            )

        try:
            return self._run("GET", url, fetched, headers, consume, total=total)
        except FetchError as exc:
            return Probe(url=url, fetched_url=fetched, ok=False, status=exc.status, error=exc)

    def download(
        self,
        url: str,
        dest: Path | str,
        *,
        sha256: str,
        size: int | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Fetch artifact ``url`` (rewritten) to ``dest``; the file appears only when complete
        and its sha256 equals ``sha256`` (the canonical record's). An existing ``dest`` with that
        hash is kept without a request.

        ``progress(received, total)`` is called as bytes arrive (``total`` from the record or
        Content-Length, None when unknown); drawing it is the caller's business. The body may
        not exceed ``size`` (or ``limits.artifact``); the download ends within
        ``timeouts.download`` seconds."""
        expected = normalize_sha256(sha256)
        target = Path(dest)
        if target.is_file() and file_sha256(target) == expected:
            return target
        fetched = self.resolve(url)

        def consume(
            resp: requests.Response, final: str, redirects: tuple[str, ...], elapsed: float
        ) -> Path:
            return stream_to_file(
                resp,
                target,
                sha256=expected,
                size=size,
                progress=progress,
                url=final,
                canonical=url,
                max_bytes=size if size is not None else self.limits.artifact,
            )

        return self._run(
            "GET",
            url,
            fetched,
            {"Accept-Encoding": "identity"},
            consume,
            total=self.timeouts.download,
        )

    def post(
        self, url: str, *, body: bytes, headers: Mapping[str, str], max_bytes: int | None = None
    ) -> HttpResponse:
        """POST ``body`` to ``url`` once (an upload goes where it is told: no mirror rewrite, no
        retry, no redirect followed) and return the answer whatever its status; the caller judges
        it (an index server answers 409 for a file it already has). Network failures raise
        FetchError as fetches do; the whole request ends within ``timeouts.download`` seconds."""
        limit = self.limits.page if max_bytes is None else max_bytes
        timeouts = self.timeouts
        with Deadline(timeouts.download) as guard:
            try:
                started = time.monotonic()
                resp = self._session.request(
                    "POST",
                    url,
                    data=body,
                    headers=dict(headers),
                    timeout=(timeouts.connect, timeouts.read),
                    stream=True,
                    allow_redirects=False,
                )
                elapsed = time.monotonic() - started
                try:
                    content = _read_capped(resp, url, limit)
                finally:
                    resp.close()
            except (requests.exceptions.RequestException, OSError) as exc:
                if guard.fired:
                    raise _too_slow(url, url, timeouts.download) from exc
                raise self._describe(exc, url, timeouts.connect, timeouts.read, 1) from exc
        return HttpResponse(
            url=url,
            fetched_url=url,
            final_url=url,
            status=resp.status_code,
            headers=_headers(resp.headers),
            content=content,
            elapsed=elapsed,
        )

    def inspect_tls(self, url: str) -> TlsReport:
        """Name the certificate chain ``url``'s host presents and which trust stores accept it."""
        fetched = self.resolve(url)
        parts = urlsplit(fetched)
        return inspect_tls(
            parts.hostname or "",
            parts.port or 443,
            proxy=self.proxy_for(fetched),
            context_factory=self._ssl_context_factory,
            timeout=self.timeouts.connect,
        )

    # -- the engine -------------------------------------------------------------------------

    def _inspect(self, host: str, port: int, proxy: str | None) -> TlsReport | None:
        if not self._diagnose_tls:
            return None
        try:
            return inspect_tls(
                host,
                port,
                proxy=proxy,
                context_factory=self._ssl_context_factory,
                timeout=self.timeouts.connect,
            )
        except Exception:  # diagnosis must never hide the original failure
            return None

    def _describe(
        self, exc: BaseException, url: str, connect: float, read: float, attempt: int
    ) -> FetchError:
        return describe_exception(
            exc,
            url=url,
            proxy=self.proxy_for(url),
            connect_timeout=connect,
            read_timeout=read,
            attempts=attempt,
            inspect=self._inspect,
        )

    def _open(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        connect: float,
        read: float,
        where: list[str],
    ) -> tuple[requests.Response, tuple[str, ...], float]:
        """One attempt: send, following redirects ourselves (never https -> http)."""
        redirects: list[str] = []
        current = url
        elapsed = 0.0
        for _ in range(MAX_REDIRECTS + 1):
            where[0] = current
            started = time.monotonic()
            resp = self._session.request(
                method,
                current,
                headers=dict(headers),
                timeout=(connect, read),
                stream=True,
                allow_redirects=False,
            )
            elapsed += time.monotonic() - started
            location = resp.headers.get("Location")
            if resp.status_code not in _REDIRECTS or not location:
                return resp, tuple(redirects), elapsed
            resp.close()
            target = urljoin(current, location)
            if urlsplit(current).scheme == "https" and urlsplit(target).scheme != "https":
                raise FetchError(
                    f"{current} redirected to {target}, which is not HTTPS; refused",
                    kind="redirect",
                    url=current,
                    hint="the server or mirror downgrades to plain HTTP; use an HTTPS mirror",
                )
            redirects.append(target)
            current = target
        raise FetchError(
            f"more than {MAX_REDIRECTS} redirects fetching {url}", kind="redirect", url=url
        )

    def _run(
        self,
        method: str,
        canonical: str,
        fetched: str,
        headers: Mapping[str, str],
        consume: Callable[[requests.Response, str, tuple[str, ...], float], T],
        *,
        total: float | None = None,
    ) -> T:
        """:meth:`_attempts` under one total deadline (``timeouts.total`` unless given): when it
        passes, the connection is cut and the fetch fails as a timeout, whatever stage it was in."""
        limit = self.timeouts.total if total is None else total
        where = [fetched]
        with Deadline(limit) as guard:
            try:
                result = self._attempts(method, canonical, fetched, headers, consume, guard, where)
            except (
                FetchError,
                requests.exceptions.RequestException,
                urllib3.exceptions.HTTPError,
                OSError,
            ) as exc:
                if not guard.fired:
                    raise
                raise _too_slow(where[0], canonical, limit) from exc
            if guard.fired:  # a cut connection can look like a short, complete answer
                raise _too_slow(where[0], canonical, limit)
            return result

    def _attempts(
        self,
        method: str,
        canonical: str,
        fetched: str,
        headers: Mapping[str, str],
        consume: Callable[[requests.Response, str, tuple[str, ...], float], T],
        guard: Deadline,
        where: list[str],
    ) -> T:
        """Attempts with back-off until success, a final error, or the deadline."""
        timeouts, policy = self.timeouts, self.retry
        deadline = time.monotonic() + timeouts.deadline
        attempt = 0
        while True:
            attempt += 1
            remaining = min(deadline, guard.expires) - time.monotonic()
            connect = max(0.05, min(timeouts.connect, remaining))
            read = max(0.05, min(timeouts.read, guard.remaining()))
            where[0] = fetched
            got_response = False
            try:
                try:
                    resp, redirects, elapsed = self._open(
                        method, fetched, headers, connect, read, where
                    )
                except (requests.exceptions.RequestException, OSError) as exc:
                    raise self._describe(exc, where[0], connect, read, attempt) from exc
                got_response = True
                try:
                    if resp.status_code >= 400:
                        raise http_status_error(
                            resp.status_code,
                            resp.reason or "",
                            where[0],
                            attempts=attempt,
                            canonical=canonical,
                        )
                    # consume reports local trouble (disk full) as CudaResolveError: not retried
                    return consume(resp, where[0], redirects, elapsed)
                except requests.exceptions.RequestException as exc:  # reading the body
                    raise self._describe(exc, where[0], connect, read, attempt) from exc
                finally:
                    resp.close()
            except FetchError as err:
                error = err
            if got_response:
                deadline = (
                    time.monotonic() + timeouts.deadline
                )  # the server answered: a fresh budget
            if guard.fired:
                raise error
            wait = min(policy.backoff * 2 ** (attempt - 1), policy.max_backoff)
            if (
                not _retryable(error)
                or attempt >= policy.attempts
                or time.monotonic() + wait + 0.25 > min(deadline, guard.expires)
            ):
                raise _mention_canonical(error, canonical)
            self._sleep(wait)


def _retryable(error: FetchError) -> bool:
    if error.kind == "http":
        return error.status in _RETRY_STATUS
    if error.kind == "dns":  # only "temporary failure in name resolution"
        cause = error.__cause__
        return cause is not None and any(
            isinstance(e, socket.gaierror) and e.errno == socket.EAI_AGAIN
            for e in exception_chain(cause)
        )
    return error.kind in _RETRY_KINDS


def _mention_canonical(error: FetchError, canonical: str) -> FetchError:
    shown = redact(canonical)  # the error's url and message are redacted already
    if shown == error.url or shown in error.message:
        return error
    message = f"{error.message} (mirror of {canonical})"
    new = FetchError(
        message, kind=error.kind, url=error.url, hint=error.hint, status=error.status, tls=error.tls
    )
    new.__cause__ = error.__cause__
    return new


def _too_slow(url: str, canonical: str, limit: float) -> FetchError:
    error = FetchError(
        f"no complete answer from {url} within {limit:g} s (the total time allowed for one fetch): "
        "the server or the network is too slow, or the connection stalls",
        kind="timeout",
        url=url,
        hint="retry later, or configure a mirror closer to you (`cuda-resolve mirror list`)",
    )
    return _mention_canonical(error, canonical)


def _too_large(url: str, limit: int, declared: int | None = None) -> FetchError:
    said = f" (it announced {declared} bytes)" if declared is not None else ""
    return FetchError(
        f"the answer from {url} is larger than the {limit} bytes allowed{said}; refused",
        kind="size",
        url=url,
        hint="that is not the page or file expected there: check the URL or the mirror (a proxy or "
        "captive portal may be answering in its place)",
    )


def _read_capped(resp: requests.Response, url: str, limit: int) -> bytes:
    """The whole body, refused once it exceeds ``limit`` bytes (decoded), checked against
    Content-Length. urllib3 raises on a body shorter than Content-Length."""
    length = resp.headers.get("Content-Length")
    encoded = resp.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
    if length is not None and length.isdigit() and not encoded and int(length) > limit:
        raise _too_large(url, limit, int(length))
    chunks: list[bytes] = []
    received = 0
    for chunk in resp.iter_content(CHUNK):
        received += len(chunk)
        if received > limit:
            raise _too_large(url, limit)
        chunks.append(chunk)
    content = b"".join(chunks)
    if length is not None and length.isdigit() and not encoded and len(content) != int(length):
        raise FetchError(
            f"the response from {url} was truncated: received {len(content)} of {length} bytes",
            kind="truncated",
            url=url,
            hint="the connection was cut; retry, or use a mirror closer to you",
        )
    return content


def _read_sample(resp: requests.Response, wanted: int) -> tuple[bytes, bool]:
    """The first ``wanted`` bytes of the body, and whether that was all of it."""
    chunks: list[bytes] = []
    received = 0
    for chunk in resp.iter_content(min(CHUNK, wanted)):
        chunks.append(chunk)
        received += len(chunk)
        if received >= wanted:
            body = b"".join(chunks)
            return body[:wanted], False
    return b"".join(chunks), True


def _content_range(header: str) -> tuple[int | None, int | None]:
    """``bytes 100-199/1000`` -> (100, 1000)."""
    try:
        _unit, _, rest = header.partition(" ")
        span, _, total = rest.partition("/")
        first = int(span.split("-", 1)[0])
        return first, (int(total) if total.isdigit() else None)
    except ValueError:
        return None, None


def _headers(given: Mapping[str, str]) -> Mapping[str, str]:
    """Response headers looked up in any case, as HTTP field names are (RFC 9110): a server or
    proxy that sends ``content-type`` answers ``headers.get("Content-Type")`` too. (A plain dict
    of requests' headers kept the server's spelling, and a lock took a PEP 691 page it could not
    see as JSON for no page at all, then downloaded every wheel to learn its size.)"""
    return requests.structures.CaseInsensitiveDict(given)


def _from_entry(url: str, fetched: str, entry: CacheEntry) -> HttpResponse:
    headers = _headers({"Content-Type": entry.content_type} if entry.content_type else {})
    return HttpResponse(
        url=url,
        fetched_url=fetched,
        final_url=entry.final_url,
        status=200,
        headers=headers,
        content=entry.body,
        elapsed=0.0,
        from_cache=True,
    )
