"""The adapter's ``cert_verify`` override is what keeps requests' own CA bundle out (issue 8).

requests' ``HTTPAdapter.cert_verify`` points every HTTPS connection at a bundle path
(``requests.adapters.DEFAULT_CA_BUNDLE_PATH``, certifi's file; a distribution's patched requests
points it elsewhere) and urllib3 then loads that file into the SSLContext it was given: ours. Our
override leaves trust to the context alone. These tests fail when the override is removed: a
bundle that trusts the server would turn a refused certificate into a success, and a missing
bundle would make every fetch fail before connecting.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests.adapters
from test_net_support import BenchHandler, BenchServer, Cas, ClientFactory, SystemTrust

from cuda_resolve.net import FetchError

pytest_plugins = ["test_net_support"]

PAGE = b'<a href="/files/demo-0.1-py3-none-any.whl#sha256=00">demo</a>\n'


def serve(server: BenchServer) -> str:
    def page(handler: BenchHandler) -> None:
        handler.reply(200, PAGE, content_type="text/html")

    server.routes["/simple/demo/"] = page
    return server.url("/simple/demo/")


def test_requests_default_bundle_does_not_add_trust(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    system_trust(cas.unrelated)  # the OS store does not trust the bench CA
    bundle = tmp_path / "requests-bundle.pem"
    bundle.write_bytes(cas.origin.cert_pem.bytes())
    monkeypatch.setattr(requests.adapters, "DEFAULT_CA_BUNDLE_PATH", str(bundle))
    url = serve(origin)
    with pytest.raises(FetchError) as info:
        make_client(use_cache=False).get(url)
    assert info.value.kind == "tls"
    assert origin.requests_to("/simple/demo/") == []


def test_a_missing_requests_bundle_does_not_break_fetches(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    system_trust(cas.origin)
    monkeypatch.setattr(
        requests.adapters, "DEFAULT_CA_BUNDLE_PATH", str(tmp_path / "no-certifi.pem")
    )
    url = serve(origin)
    assert make_client(use_cache=False).get_text(url) == PAGE.decode()
