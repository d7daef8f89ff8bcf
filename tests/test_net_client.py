"""HttpClient on the bench: statuses and retries, time bounds, redirects, downloads with hash and
length checks, the mirror rewrite, the page cache, byte ranges, probes."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_net_support import (
    BenchHandler,
    BenchServer,
    Cas,
    ClientFactory,
    ServerFactory,
    SleepRecorder,
    SystemTrust,
    closed_port,
    unanswered_port,
)

from cuda_resolve.errors import NetworkError
from cuda_resolve.net import FetchError, HttpClient, RetryPolicy, Timeouts

pytest_plugins = ["test_net_support"]

WHEEL = bytes(range(256)) * 400  # 100 KiB of "wheel"
WHEEL_SHA = hashlib.sha256(WHEEL).hexdigest()


@pytest.fixture
def trusted(cas: Cas, system_trust: SystemTrust) -> None:
    system_trust(cas.origin)


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    path = tmp_path / "downloads"
    path.mkdir()
    return path


def static(
    body: bytes,
    status: int = 200,
    content_type: str = "application/octet-stream",
    headers: dict[str, str] | None = None,
) -> Callable[[BenchHandler], None]:
    def route(handler: BenchHandler) -> None:
        handler.reply(status, body, content_type=content_type, headers=headers)

    return route


# -- statuses and retries ---------------------------------------------------------------------


def test_404_is_not_retried_and_names_status_and_url(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    sleep = SleepRecorder()
    url = origin.url("/simple/kaolin/")
    with pytest.raises(NetworkError) as info:
        make_client(sleep=sleep).get(url)
    err = info.value
    assert isinstance(err, FetchError) and err.kind == "http" and err.status == 404
    assert "HTTP 404" in str(err) and url in str(err)
    assert len(origin.requests_to("/simple/kaolin/")) == 1
    assert sleep.calls == []


def test_500_then_200_is_retried_with_backoff(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    answers = iter([500, 200])

    def flaky(handler: BenchHandler) -> None:
        status = next(answers)
        handler.reply(status, b"ok" if status == 200 else b"boom")

    origin.routes["/flaky"] = flaky
    sleep = SleepRecorder()
    client = make_client(sleep=sleep, retry=RetryPolicy(attempts=3, backoff=0.25))
    assert client.get_text(origin.url("/flaky")) == "ok"
    assert len(origin.requests_to("/flaky")) == 2
    assert sleep.calls == [0.25]


def test_persistent_503_gives_up_after_the_attempts_and_says_so(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    origin.routes["/down"] = static(b"down", status=503)
    sleep = SleepRecorder()
    client = make_client(sleep=sleep, retry=RetryPolicy(attempts=3, backoff=0.1))
    with pytest.raises(FetchError) as info:
        client.get(origin.url("/down"))
    assert info.value.status == 503 and "after 3 attempts" in str(info.value)
    assert len(origin.requests_to("/down")) == 3
    assert sleep.calls == [0.1, 0.2]


def test_read_timeout_fails_fast_and_is_bounded(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    def stall(handler: BenchHandler) -> None:
        handler.server.stopping.wait(30)

    origin.routes["/stall"] = stall
    client = make_client(
        timeouts=Timeouts(connect=1.0, read=0.5, deadline=2.0),
        retry=RetryPolicy(attempts=10, backoff=0.05),
        sleep=time.sleep,
    )
    started = time.monotonic()
    with pytest.raises(FetchError) as info:
        client.get(origin.url("/stall"))
    elapsed = time.monotonic() - started
    assert info.value.kind == "timeout"
    assert "sent no data" in str(info.value) and origin.url("/stall") in str(info.value)
    assert elapsed < 4.0


@pytest.mark.slow  # waits out shipped timeouts and retries: 8 to 12 s
def test_unreachable_index_fails_within_15_seconds_with_default_settings(
    clean_env: None, tmp_path: Path
) -> None:
    """Defaults as shipped: connect timeouts, retries and back-off stay under the deadline,
    which leaves a real margin (3 s) under the promised 15 s."""
    assert Timeouts().deadline <= 12.0
    with unanswered_port() as port, HttpClient(cache_dir=tmp_path) as client:
        url = f"http://127.0.0.1:{port}/simple/torch/"
        started = time.monotonic()
        with pytest.raises(FetchError) as info:
            client.get(url)
        elapsed = time.monotonic() - started
    assert elapsed < 15.0
    assert info.value.kind == "timeout"
    assert url in str(info.value) and "timed out" in str(info.value)


def test_connection_refused_names_the_url(clean_env: None, make_client: ClientFactory) -> None:
    url = f"https://127.0.0.1:{closed_port()}/simple/torch/"
    with pytest.raises(FetchError) as info:
        make_client().get(url)
    assert info.value.kind == "refused"
    assert (
        url in str(info.value)
        and "refused" in str(info.value)
        and "after 3 attempts" in str(info.value)
    )


def test_dns_failure_names_the_host(clean_env: None, make_client: ClientFactory) -> None:
    sleep = SleepRecorder()
    url = "https://pypi-mirror.invalid/simple/torch/"
    with pytest.raises(FetchError) as info:
        make_client(sleep=sleep).get(url)
    assert info.value.kind == "dns"
    assert "DNS lookup failed for host 'pypi-mirror.invalid'" in str(info.value)
    assert url in str(info.value)
    assert sleep.calls == []  # a name that does not exist is not retried


def test_bad_url_is_a_clear_error(make_client: ClientFactory) -> None:
    with pytest.raises(FetchError) as info:
        make_client().get("pypi.org/simple/")
    assert info.value.kind == "url"


# -- redirects --------------------------------------------------------------------------------


def test_redirect_to_another_host_is_followed_and_verified(
    origin: BenchServer, make_server: ServerFactory, trusted: None, make_client: ClientFactory
) -> None:
    files = make_server()
    files.routes["/packages/demo.whl"] = static(WHEEL)
    target = files.url("/packages/demo.whl", host="127.0.0.1")
    origin.routes["/files/demo.whl"] = static(b"", status=302, headers={"Location": target})
    client = make_client()
    response = client.get(origin.url("/files/demo.whl"))
    assert response.content == WHEEL
    assert response.final_url == target and response.redirects == (target,)
    assert files.requests_to("/packages/demo.whl")[0].headers["Host"].startswith("127.0.0.1:")


def test_download_follows_a_redirect_to_the_file_host(
    origin: BenchServer,
    make_server: ServerFactory,
    trusted: None,
    make_client: ClientFactory,
    downloads: Path,
) -> None:
    files = make_server()
    files.routes["/packages/demo.whl"] = static(WHEEL)
    target = files.url("/packages/demo.whl", host="127.0.0.1")
    origin.routes["/files/demo.whl"] = static(b"", status=307, headers={"Location": target})
    dest = make_client().download(
        origin.url("/files/demo.whl"), downloads / "demo.whl", sha256=WHEEL_SHA
    )
    assert dest.read_bytes() == WHEEL


def test_redirect_from_https_to_http_is_refused(
    origin: BenchServer, make_server: ServerFactory, trusted: None, make_client: ClientFactory
) -> None:
    plain = make_server(tls=False)
    plain.routes["/demo.whl"] = static(WHEEL)
    origin.routes["/demo.whl"] = static(
        b"", status=301, headers={"Location": plain.url("/demo.whl")}
    )
    with pytest.raises(FetchError) as info:
        make_client().get(origin.url("/demo.whl"))
    assert info.value.kind == "redirect" and "not HTTPS" in str(info.value)
    assert plain.seen == []


# -- downloads --------------------------------------------------------------------------------


def test_download_streams_checks_and_moves_into_place(
    origin: BenchServer, trusted: None, make_client: ClientFactory, downloads: Path
) -> None:
    origin.routes["/demo.whl"] = static(WHEEL)
    dest = downloads / "wheels" / "demo-0.1-py3-none-any.whl"
    client = make_client()
    assert client.download(origin.url("/demo.whl"), dest, sha256=WHEEL_SHA, size=len(WHEEL)) == dest
    assert dest.read_bytes() == WHEEL
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name]
    assert origin.requests_to("/demo.whl")[0].headers["Accept-Encoding"] == "identity"
    # already there with the right hash: no second request
    client.download(origin.url("/demo.whl"), dest, sha256=f"sha256:{WHEEL_SHA.upper()}")
    assert len(origin.requests_to("/demo.whl")) == 1


def test_hash_mismatch_names_url_and_both_hashes_and_leaves_nothing(
    origin: BenchServer, trusted: None, make_client: ClientFactory, downloads: Path
) -> None:
    origin.routes["/demo.whl"] = static(WHEEL)
    wrong = hashlib.sha256(b"the recorded file").hexdigest()
    dest = downloads / "demo.whl"
    sleep = SleepRecorder()
    with pytest.raises(FetchError) as info:
        make_client(sleep=sleep).download(origin.url("/demo.whl"), dest, sha256=wrong)
    message = str(info.value)
    assert info.value.kind == "integrity"
    assert origin.url("/demo.whl") in message and wrong in message and WHEEL_SHA in message
    assert list(downloads.iterdir()) == []  # no file, no partial file
    assert sleep.calls == []  # a wrong file is not fetched again


def test_truncated_body_is_detected_and_the_partial_file_removed(
    origin: BenchServer, trusted: None, make_client: ClientFactory, downloads: Path
) -> None:
    def truncated(handler: BenchHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(WHEEL)))
        handler.end_headers()
        handler.wfile.write(WHEEL[: len(WHEEL) // 2])
        handler.close_connection = True

    origin.routes["/demo.whl"] = truncated
    dest = downloads / "demo.whl"
    with pytest.raises(FetchError) as info:
        make_client(retry=RetryPolicy(attempts=2, backoff=0.01)).download(
            origin.url("/demo.whl"), dest, sha256=WHEEL_SHA
        )
    assert info.value.kind == "truncated"
    assert f"of {len(WHEEL)}" in str(info.value) and origin.url("/demo.whl") in str(info.value)
    assert list(downloads.iterdir()) == []
    assert len(origin.requests_to("/demo.whl")) == 2  # a cut connection is retried


def test_truncated_page_is_detected(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    def truncated(handler: BenchHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        handler.wfile.write(b"x" * 10)

    origin.routes["/simple/"] = truncated
    with pytest.raises(FetchError) as info:
        make_client().get(origin.url("/simple/"))
    assert info.value.kind == "truncated"


def test_size_mismatch_is_an_integrity_error(
    origin: BenchServer, trusted: None, make_client: ClientFactory, downloads: Path
) -> None:
    origin.routes["/demo.whl"] = static(WHEEL)
    with pytest.raises(FetchError) as info:
        make_client().download(
            origin.url("/demo.whl"), downloads / "demo.whl", sha256=WHEEL_SHA, size=len(WHEEL) + 1
        )
    assert info.value.kind == "integrity" and "size" in str(info.value)
    assert list(downloads.iterdir()) == []


def test_download_reports_progress_through_the_callback_and_prints_nothing(
    origin: BenchServer,
    trusted: None,
    make_client: ClientFactory,
    downloads: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    origin.routes["/demo.whl"] = static(WHEEL)
    seen: list[tuple[int, int | None]] = []
    make_client().download(
        origin.url("/demo.whl"),
        downloads / "demo.whl",
        sha256=WHEEL_SHA,
        progress=lambda received, total: seen.append((received, total)),
    )
    assert seen and seen[-1] == (len(WHEEL), len(WHEEL))
    assert [r for r, _ in seen] == sorted(r for r, _ in seen)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_bad_hash_argument_is_rejected_before_fetching(
    origin: BenchServer, trusted: None, make_client: ClientFactory, downloads: Path
) -> None:
    with pytest.raises(ValueError, match="sha256"):
        make_client().download(origin.url("/demo.whl"), downloads / "x", sha256="md5:abc")
    assert origin.seen == []


# -- the mirror rewrite -----------------------------------------------------------------------


def test_rewrite_fetches_the_mirror_and_checks_the_canonical_hash(
    origin: BenchServer, trusted: None, make_client: ClientFactory, downloads: Path
) -> None:
    origin.routes["/mirror/whl/cu121/demo.whl"] = static(WHEEL)
    canonical = "https://download.pytorch.invalid/whl/cu121/demo.whl"

    def rewrite(url: str) -> str:
        return url.replace("https://download.pytorch.invalid/", origin.url("/mirror/"))

    client = make_client(rewrite=rewrite)
    dest = client.download(canonical, downloads / "demo.whl", sha256=WHEEL_SHA)
    assert dest.read_bytes() == WHEEL
    assert [s.path for s in origin.seen] == ["/mirror/whl/cu121/demo.whl"]
    with pytest.raises(FetchError) as info:
        client.download(canonical, downloads / "other.whl", sha256="0" * 64)
    assert canonical in str(info.value) and origin.url("/mirror/whl/cu121/demo.whl") in str(
        info.value
    )


def test_rewrite_failure_names_mirror_and_canonical_and_does_not_fall_back(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    canonical = "https://pypi.invalid/simple/kaolin/"
    client = make_client(
        rewrite=lambda url: url.replace("https://pypi.invalid/", origin.url("/m/"))
    )
    with pytest.raises(FetchError) as info:
        client.get(canonical)
    assert info.value.status == 404
    assert canonical in str(info.value) and origin.url("/m/simple/kaolin/") in str(info.value)
    assert [s.path for s in origin.seen] == ["/m/simple/kaolin/"]


# -- cache ------------------------------------------------------------------------------------


def test_pages_are_cached_for_the_validity_period(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    origin.routes["/pypi/torch/json"] = static(b'{"v": 1}', content_type="application/json")
    client = make_client(cache_ttl=3600)
    url = origin.url("/pypi/torch/json")
    first = client.get(url)
    second = client.get(url)
    assert not first.from_cache and second.from_cache and second.json() == {"v": 1}
    assert len(origin.requests_to("/pypi/torch/json")) == 1
    # a different Accept header is a different entry
    client.get(url, accept="application/vnd.pypi.simple.v1+json")
    assert len(origin.requests_to("/pypi/torch/json")) == 2
    # ttl=0 bypasses; a fresh client with the same directory reuses the entry
    client.get(url, ttl=0)
    assert len(origin.requests_to("/pypi/torch/json")) == 3
    assert make_client(cache_ttl=3600).get(url).from_cache


def test_stale_entries_are_revalidated_with_etag(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    def etagged(handler: BenchHandler) -> None:
        if handler.headers.get("If-None-Match") == '"v1"':
            handler.send_response(304)
            handler.send_header("ETag", '"v1"')
            handler.end_headers()
        else:
            handler.reply(200, b"page v1", headers={"ETag": '"v1"'})

    origin.routes["/simple/torch/"] = etagged
    client = make_client(cache_ttl=1e-9)
    url = origin.url("/simple/torch/")
    assert client.get(url).text == "page v1"
    again = client.get(url)
    assert again.text == "page v1" and again.from_cache
    seen = origin.requests_to("/simple/torch/")
    assert len(seen) == 2 and seen[1].headers.get("If-None-Match") == '"v1"'


def test_errors_are_not_cached(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    answers = iter([404, 200])
    origin.routes["/p"] = lambda h: h.reply(next(answers), b"body")
    client = make_client()
    with pytest.raises(FetchError):
        client.get(origin.url("/p"))
    assert client.get_text(origin.url("/p")) == "body"


# -- ranges, probes, JSON ---------------------------------------------------------------------


def _ranged(handler: BenchHandler) -> None:
    spec = handler.headers.get("Range", "")
    if not spec.startswith("bytes="):
        handler.reply(200, WHEEL)
        return
    first, _, last = spec[len("bytes=") :].partition("-")
    if first == "":
        start, end = len(WHEEL) - int(last), len(WHEEL) - 1
    else:
        start, end = int(first), (int(last) if last else len(WHEEL) - 1)
    handler.reply(
        206, WHEEL[start : end + 1], headers={"Content-Range": f"bytes {start}-{end}/{len(WHEEL)}"}
    )


def test_byte_ranges(origin: BenchServer, trusted: None, make_client: ClientFactory) -> None:
    origin.routes["/demo.whl"] = _ranged
    client = make_client()
    tail = client.get_range(origin.url("/demo.whl"), suffix=100)
    assert (
        tail.content == WHEEL[-100:] and tail.total == len(WHEEL) and tail.start == len(WHEEL) - 100
    )
    middle = client.get_range(origin.url("/demo.whl"), start=10, end=19)
    assert middle.content == WHEEL[10:20] and middle.start == 10


def test_a_server_ignoring_range_is_an_error(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    origin.routes["/demo.whl"] = static(WHEEL)
    with pytest.raises(FetchError, match="ignored the byte-range request"):
        make_client().get_range(origin.url("/demo.whl"), suffix=100)


def test_probe_reports_latency_and_failures_without_raising(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    origin.routes["/simple/"] = static(b"index")
    client = make_client()
    good = client.probe(origin.url("/simple/"))
    assert good.ok and good.status == 200 and good.latency is not None and good.latency >= 0
    missing = client.probe(origin.url("/nothing/"))
    assert not missing.ok and missing.status == 404 and missing.error is not None
    dead = client.probe(f"https://127.0.0.1:{closed_port()}/simple/")
    assert not dead.ok and dead.error is not None and dead.error.kind == "refused"


def test_non_json_answer_is_named(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    origin.routes["/pypi/torch/json"] = static(
        b"<html>captive portal</html>", content_type="text/html"
    )
    with pytest.raises(FetchError) as info:
        make_client().get_json(origin.url("/pypi/torch/json"))
    assert info.value.kind == "content" and "text/html" in str(info.value)


def test_a_destination_that_cannot_be_written_is_a_local_error_not_retried(
    origin: BenchServer, trusted: None, make_client: ClientFactory, downloads: Path
) -> None:
    from cuda_resolve.errors import CudaResolveError

    origin.routes["/demo.whl"] = static(WHEEL)
    blocker = downloads / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    sleep = SleepRecorder()
    with pytest.raises(CudaResolveError) as info:
        make_client(sleep=sleep).download(
            origin.url("/demo.whl"), blocker / "demo.whl", sha256=WHEEL_SHA
        )
    assert not isinstance(info.value, NetworkError)
    assert "cannot write the download" in str(info.value) and str(blocker) in str(info.value)
    assert sleep.calls == [] and len(origin.requests_to("/demo.whl")) == 1


def test_only_temporary_dns_failures_are_retried() -> None:
    import socket

    from cuda_resolve.net.client import _retryable

    def dns_error(errno: int) -> FetchError:
        error = FetchError("DNS lookup failed", kind="dns", url="https://x.invalid/")
        try:
            try:
                raise socket.gaierror(errno, "lookup")
            except socket.gaierror as inner:
                raise OSError("wrapped") from inner
        except OSError as outer:
            error.__cause__ = outer
        return error

    assert _retryable(dns_error(socket.EAI_AGAIN))
    assert not _retryable(dns_error(socket.EAI_NONAME))


def test_default_cache_lives_under_the_cache_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cuda_resolve.net.cache import default_cache_dir

    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "root"))
    assert default_cache_dir() == tmp_path / "root" / "http"
