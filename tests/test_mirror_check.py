"""``mirror test`` against a loopback HTTP server: a good mirror, one whose links point upstream,
one that 404s, one that lists nothing, a flat find-links page, a file that redirects upstream."""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_net_support import BenchHandler, Cas, ServerFactory, SystemTrust

from cuda_resolve.cli import main
from cuda_resolve.config import parse_config
from cuda_resolve.mirrors.check import (
    MirrorTarget,
    check_mirrors,
    file_links,
    targets_from_config,
    targets_from_preset,
    upstream_hosts,
)
from cuda_resolve.mirrors.presets import get_preset, load_presets
from cuda_resolve.net import HttpClient, RetryPolicy, Timeouts

pytest_plugins = ["test_net_support"]  # the hermetic TLS bench: trustme CAs, HTTPS on loopback

CANONICAL = load_presets()["official"].canonical
WHEEL = "pip-24.0-py3-none-any.whl"
HASH = "#sha256=" + "ab" * 32


def simple_page(*hrefs: str) -> bytes:
    links = "".join(
        f'<a href="{href}">{href.rsplit("/", 1)[-1].split("#")[0]}</a><br/>\n' for href in hrefs
    )
    return f"<!DOCTYPE html><html><body><h1>Links for pip</h1>\n{links}</body></html>".encode()


class Routes:
    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[str] = []
        self.authorizations: list[str | None] = []
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(
        self,
        path: str,
        body: bytes = b"",
        status: int = 200,
        *,
        content_type: str = "text/html",
        location: str | None = None,
    ) -> None:
        headers = {"Content-Type": content_type}
        if location is not None:
            headers["Location"] = location
        self.pages[path] = (status, headers, body)


@pytest.fixture(autouse=True)
def pip_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """`mirror test` asks the target's pip where it goes: no pip.conf and no PIP_* variable of the
    machine's (these machines set PIP_FIND_LINKS) may take part; tests set PIP_INDEX_URL."""
    for name in list(os.environ):
        if name.startswith("PIP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def pip_uses(monkeypatch: pytest.MonkeyPatch, index: str) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", index)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Routes]:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    routes = Routes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            routes.requests.append(self.path)
            routes.authorizations.append(self.headers.get("Authorization"))
            status, headers, body = routes.pages.get(
                self.path, (404, {"Content-Type": "text/plain"}, b"not here")
            )
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    routes.port = httpd.server_address[1]
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield routes
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[HttpClient]:
    with HttpClient(
        use_cache=False,
        timeouts=Timeouts(connect=2.0, read=5.0, deadline=5.0),
        retry=RetryPolicy(attempts=1),
        diagnose_tls=False,
    ) as http:
        yield http


def pypi_target(routes: Routes, name: str) -> MirrorTarget:
    mirror = f"{routes.base}/{name}/simple/"
    return MirrorTarget(ecosystem="pypi", url=f"{mirror}pip/", kind="simple", mirror=mirror)


def test_good_mirror_answers_with_latency(server: Routes, client: HttpClient) -> None:
    server.add(
        "/good/simple/pip/",
        simple_page(f"../../packages/aa/{WHEEL}{HASH}", "../../packages/bb/pip-24.0.tar.gz"),
    )
    server.add(
        "/good/packages/bb/pip-24.0.tar.gz", b"sdist", content_type="application/octet-stream"
    )
    (result,) = check_mirrors([pypi_target(server, "good")], client, canonical=CANONICAL)
    assert result.ok, result.error
    assert result.status == 200
    assert result.latency_ms is not None and result.latency_ms >= 0
    assert result.files == 2 and result.upstream_files == 0
    assert result.warnings == ()
    assert result.sample == f"{server.base}/good/packages/bb/pip-24.0.tar.gz"
    assert "/good/packages/bb/pip-24.0.tar.gz" in server.requests


def test_links_pointing_upstream_are_a_warning(server: Routes, client: HttpClient) -> None:
    server.add(
        "/leaky/simple/pip/",
        simple_page(
            f"https://files.pythonhosted.org/packages/aa/{WHEEL}{HASH}",
            "https://files.pythonhosted.org/packages/bb/pip-24.0.tar.gz",
        ),
    )
    (result,) = check_mirrors([pypi_target(server, "leaky")], client, canonical=CANONICAL)
    assert result.ok  # the page answers; the downloads would just bypass the mirror
    assert result.upstream_files == 2
    assert result.upstream_hosts == ("files.pythonhosted.org",)
    assert any("point upstream (files.pythonhosted.org)" in warning for warning in result.warnings)
    assert result.sample is None  # upstream files are not fetched
    assert server.requests == ["/leaky/simple/pip/"]


def test_404_is_a_failure_not_an_exception(server: Routes, client: HttpClient) -> None:
    (result,) = check_mirrors([pypi_target(server, "missing")], client, canonical=CANONICAL)
    assert not result.ok
    assert result.status == 404
    assert result.error is not None and "404" in result.error
    assert "/missing/simple/pip/" in result.error


def test_a_page_without_files_fails(server: Routes, client: HttpClient) -> None:
    server.add("/empty/simple/pip/", b"<html><body>Welcome to our mirror</body></html>")
    (result,) = check_mirrors([pypi_target(server, "empty")], client, canonical=CANONICAL)
    assert not result.ok
    assert result.files == 0
    assert "lists no distribution files" in (result.error or "")


def test_a_listed_file_that_is_missing_fails(server: Routes, client: HttpClient) -> None:
    server.add("/stale/simple/pip/", simple_page(f"../../packages/aa/{WHEEL}{HASH}"))
    (result,) = check_mirrors([pypi_target(server, "stale")], client, canonical=CANONICAL)
    assert not result.ok
    assert f"lists {server.base}/stale/packages/aa/{WHEEL}" in (result.error or "")


def test_flat_page_with_encoded_plus_and_a_file_redirecting_upstream(
    server: Routes, client: HttpClient
) -> None:
    wheel = "torch-2.5.1+cpu-cp311-cp311-linux_x86_64.whl"
    page = (
        "<html><body><a "
        f'href="torch-2.5.1&#43;cpu-cp311-cp311-linux_x86_64.whl">{wheel}</a></body></html>'
    )
    server.add("/pytorch-wheels/cpu/", page.encode())
    server.add(
        "/pytorch-wheels/cpu/torch-2.5.1+cpu-cp311-cp311-linux_x86_64.whl",
        status=302,
        location=f"http://localhost:{server.port}/upstream/{wheel}",
    )
    server.add(f"/upstream/{wheel}", b"wheel", content_type="application/octet-stream")
    mirror = f"{server.base}/pytorch-wheels/"
    target = MirrorTarget(ecosystem="pytorch", url=f"{mirror}cpu/", kind="flat", mirror=mirror)
    # stand-in for download.pytorch.org: the same server under another name
    (result,) = check_mirrors(
        [target], client, canonical=CANONICAL, upstream=frozenset({"localhost"})
    )
    assert result.ok, result.error
    assert result.files == 1
    assert result.sample == f"{mirror}cpu/{wheel}"
    assert any("redirects to upstream localhost" in warning for warning in result.warnings)


def test_conda_channel_is_probed_by_headers(server: Routes, client: HttpClient) -> None:
    server.add(
        "/anaconda/cloud/conda-forge/noarch/repodata.json", b"{}", content_type="application/json"
    )
    good = MirrorTarget(
        ecosystem="conda",
        url=f"{server.base}/anaconda/cloud/conda-forge/noarch/repodata.json",
        kind="probe",
        mirror=f"{server.base}/anaconda/cloud/conda-forge/",
    )
    bad = MirrorTarget(
        ecosystem="conda",
        url=f"{server.base}/gone/noarch/repodata.json",
        kind="probe",
        mirror=f"{server.base}/gone/",
    )
    first, second = check_mirrors([good, bad], client, canonical=CANONICAL)
    assert first.ok and first.latency_ms is not None
    assert not second.ok and second.status == 404


def test_targets_follow_the_layout() -> None:
    nju = targets_from_preset(get_preset("nju"), variant="cu121")
    assert [target.url for target in nju] == [
        "https://mirror.nju.edu.cn/pypi/web/simple/pip/",
        "https://mirror.nju.edu.cn/pytorch/whl/cu121/torch/",
        "https://mirror.nju.edu.cn/anaconda/cloud/conda-forge/noarch/repodata.json",
    ]
    aliyun = targets_from_preset(get_preset("aliyun"), variant="cu121")
    assert (
        aliyun[1].url == "https://mirrors.aliyun.com/pytorch-wheels/cu121/"
        and aliyun[1].kind == "flat"
    )
    config = parse_config(
        'preset = "custom"\n[pytorch]\nlayout = "flat"\nurl = "https://w.example/whl/"\n'
        '[[rewrite]]\ncanonical = "https://conda.anaconda.org/conda-forge/"\nmirror = "https://c.example/cf/"\n'
    )
    assert [
        (target.ecosystem, target.url) for target in targets_from_config(config, CANONICAL)
    ] == [
        ("pytorch", "https://w.example/whl/cpu/"),
        ("conda", "https://c.example/cf/noarch/repodata.json"),
    ]
    assert targets_from_config(parse_config(""), CANONICAL) == ()
    assert "files.pythonhosted.org" in upstream_hosts(CANONICAL)
    assert "download.pytorch.org" in upstream_hosts(CANONICAL)


def test_file_links_resolve_relative_and_skip_other_links() -> None:
    html = (
        '<a href="../../packages/x/a-1.0.tar.gz#sha256=00">a</a><a href="/other/">nav</a><A '
        'HREF="b-1.0-py3-none-any.whl">b</A>'
    )
    assert file_links(html, "https://m.example/simple/a/") == [
        "https://m.example/packages/x/a-1.0.tar.gz#sha256=00",
        "https://m.example/simple/a/b-1.0-py3-none-any.whl",
    ]


def _write_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, routes: Routes, name: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'preset = "custom"\n[[rewrite]]\ncanonical = "https://pypi.org/simple/"\nmirror = '
        f'"{routes.base}/{name}/simple/"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pip_uses(monkeypatch, f"{routes.base}/{name}/simple/")


def test_cli_tests_the_configured_mirror(
    server: Routes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server.add(
        "/good/simple/pip/",
        simple_page(f"https://files.pythonhosted.org/packages/aa/{WHEEL}{HASH}"),
    )
    _write_config(tmp_path, monkeypatch, server, "good")
    assert main(["mirror", "test", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True
    (result,) = data["results"]
    assert result["ecosystem"] == "pypi" and result["latency_ms"] is not None
    assert result["upstream_files"] == 1 and result["warnings"]
    assert main(["mirror", "test"]) == 0
    out = capsys.readouterr().out
    assert "ok   pypi" in out and " ms, 1 files)" in out and "warning:" in out


def test_cli_exits_1_when_a_mirror_fails(
    server: Routes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _write_config(tmp_path, monkeypatch, server, "missing")
    assert main(["mirror", "test"]) == 1
    captured = capsys.readouterr()
    assert "FAIL pypi" in captured.out and "404" in captured.out
    assert "Traceback" not in captured.out + captured.err


def test_cli_never_shows_the_credentials_of_a_mirror_url(
    server: Routes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The mirror is fetched with its credentials; the lines and --json show ``user:***@``, for a
    mirror that answers (its sample file URL too), one that fails and one that lists nothing."""
    secret = "S3cretTok"
    server.add("/good/simple/pip/", simple_page(f"../../packages/aa/{WHEEL}{HASH}"))
    server.add(f"/good/packages/aa/{WHEEL}", b"wheel", content_type="application/octet-stream")
    server.add("/empty/simple/pip/", b"<html><body>nothing</body></html>")
    authority = server.base.replace("http://", f"http://lab:{secret}@")
    for name, status in (("good", 0), ("missing", 1), ("empty", 1)):
        config = tmp_path / f"{name}.toml"
        config.write_text(
            '[[rewrite]]\ncanonical = "https://pypi.org/simple/"\nmirror = '
            f'"{authority}/{name}/simple/"\n',
            encoding="utf-8",
        )
        monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        pip_uses(monkeypatch, f"{authority}/{name}/simple/")
        assert main(["mirror", "test"]) == status
        assert main(["mirror", "test", "--json"]) == status
        captured = capsys.readouterr()
        shown = captured.out + captured.err
        assert secret not in shown, name
        assert f"http://lab:***@127.0.0.1:{server.port}/{name}/simple/pip/" in shown
        data = json.loads(captured.out[captured.out.index("\n{") + 1 :])
        (result,) = data["results"]
        assert result["mirror"] == f"http://lab:***@127.0.0.1:{server.port}/{name}/simple/"
        if name == "good":
            assert result["sample"].startswith("http://lab:***@")
    assert (
        "/good/simple/pip/" in server.requests and f"/good/packages/aa/{WHEEL}" in server.requests
    )
    login = "Basic " + base64.b64encode(f"lab:{secret}".encode()).decode()
    assert server.authorizations and set(server.authorizations) == {
        login
    }  # fetched with the real credentials


def _https_mirror(
    make_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    server = make_server()
    page = simple_page(f"../../packages/aa/{WHEEL}{HASH}")

    def serve_page(handler: BenchHandler) -> None:
        handler.reply(200, page, content_type="text/html")

    def serve_file(handler: BenchHandler) -> None:
        handler.reply(200, b"wheel", content_type="application/octet-stream")

    server.routes["/simple/pip/"] = serve_page
    server.routes[f"/packages/aa/{WHEEL}"] = serve_file
    mirror = server.url("/simple/")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[rewrite]]\ncanonical = "https://pypi.org/simple/"\nmirror = "{mirror}"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pip_uses(monkeypatch, mirror)
    return mirror


def test_https_mirror_trusted_by_the_system_store(
    make_server: ServerFactory,
    system_trust: SystemTrust,
    cas: Cas,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mirror = _https_mirror(make_server, tmp_path, monkeypatch)
    system_trust(cas.origin)
    assert main(["mirror", "test", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["url"] == f"{mirror}pip/"
    assert (
        result["ok"]
        and result["files"] == 1
        and result["sample"].startswith(mirror.rsplit("/simple/", 1)[0])
    )


def test_https_mirror_with_an_untrusted_certificate_fails_verified(
    make_server: ServerFactory,
    system_trust: SystemTrust,
    cas: Cas,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _https_mirror(make_server, tmp_path, monkeypatch)
    system_trust(cas.unrelated)  # negative control: the server's CA is not in the store
    assert main(["mirror", "test"]) == 1
    captured = capsys.readouterr()
    assert "FAIL pypi" in captured.out
    assert "certificate" in captured.out.lower()
    assert "Traceback" not in captured.out + captured.err
