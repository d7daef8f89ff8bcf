"""Response headers are looked up in any case: a server (or a TLS-intercepting proxy) that sends
``content-type`` is read like one that sends ``Content-Type``.

Found walking the README as a user (H7): behind this machine's proxy, PyPI's answers came with
lower-case field names, ``HttpResponse.headers`` was a plain dict of them, and every
``headers.get("Content-Type")`` missed. ``cuda-resolve lock torch --profile a100.toml`` then took
each PEP 691 page for no page and downloaded every wheel of the closure (2.8 GB) to learn sizes
the page gives; a cached answer (stored as ``Content-Type``) worked, so only a cold cache showed
it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from cuda_resolve.lock.files import PEP691, FileFinder
from cuda_resolve.net.client import HttpClient

SHA = "ab" * 32
WHEEL = "demo-1.0-py3-none-any.whl"


class _Index(BaseHTTPRequestHandler):
    """A PEP 691 page whose header names are all lower case; wheels are counted, never served."""

    wheel_requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        if self.path.endswith(".whl"):
            type(self).wheel_requests.append(self.path)
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps(
            {
                "meta": {"api-version": "1.0"},
                "name": "demo",
                "files": [
                    {
                        "filename": WHEEL,
                        "url": f"/files/{WHEEL}",
                        "hashes": {"sha256": SHA},
                        "size": 1234,
                    }
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", PEP691)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def index() -> Iterator[str]:
    _Index.wheel_requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def _client(tmp_path: Path) -> HttpClient:
    return HttpClient(cache_dir=tmp_path / "http", proxies={"no_proxy": "127.0.0.1"})


def test_a_live_answer_is_read_in_any_case(index: str, tmp_path: Path) -> None:
    client = _client(tmp_path)
    live = client.get(f"{index}/demo/", accept=PEP691, ttl=0)
    assert not live.from_cache
    assert live.headers.get("Content-Type") == PEP691
    assert live.headers.get("CONTENT-TYPE") == PEP691
    cached = client.get(f"{index}/demo/", accept=PEP691, ttl=3600)
    assert cached.from_cache and cached.headers.get("content-type") == PEP691


def test_a_lock_takes_size_and_hash_from_the_page_without_downloading(
    index: str, tmp_path: Path
) -> None:
    finder = FileFinder(_client(tmp_path), cache_dir=tmp_path / "lock-files", page_seconds=0)
    base = index.rsplit("/", 1)[0]
    facts = finder.facts(
        f"{base}/files/{WHEEL}#sha256={SHA}", project="demo", index=index, sha256=SHA
    )
    assert (facts.size, facts.sha256) == (1234, SHA)
    assert _Index.wheel_requests == []  # the page answered: no wheel was fetched
