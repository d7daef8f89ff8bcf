"""TLS on the bench: the OS trust store is used, certifi alone is not enough, nothing overrides
our context, and a failure names the certificate the server presented."""

from __future__ import annotations

import os
import shutil
import ssl
from pathlib import Path

import certifi
import pytest
import requests
from test_net_support import (
    BenchHandler,
    BenchServer,
    Cas,
    ClientFactory,
    ServerFactory,
    SystemTrust,
)

from cuda_resolve.errors import NetworkError
from cuda_resolve.net import FetchError, build_ssl_context, trust_facts
from cuda_resolve.net.tls import analyse_trust, os_store_context

pytest_plugins = ["test_net_support"]

PAGE = b'<a href="/files/demo-0.1-py3-none-any.whl#sha256=00">demo</a>\n'


def serve_page(server: BenchServer, path: str = "/simple/demo/") -> str:
    def page(handler: BenchHandler) -> None:
        handler.reply(200, PAGE, content_type="text/html")

    server.routes[path] = page
    return server.url(path)


def test_certifi_path_fails_and_ours_succeeds(
    origin: BenchServer, cas: Cas, system_trust: SystemTrust, make_client: ClientFactory
) -> None:
    system_trust(cas.origin)
    url = serve_page(origin)
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url, timeout=5)  # certifi's Mozilla roots: the bench CA is not there
    client = make_client()
    assert client.get_text(url) == PAGE.decode()
    assert origin.requests_to("/simple/demo/")[0].headers["User-Agent"].startswith("cuda-resolve/")


def test_without_the_ca_in_the_system_store_ours_fails_and_names_the_certificate(
    origin: BenchServer, cas: Cas, system_trust: SystemTrust, make_client: ClientFactory
) -> None:
    system_trust(cas.unrelated)  # negative control: the bench CA is in no trust store
    url = serve_page(origin)
    client = make_client()
    with pytest.raises(NetworkError) as info:
        client.get(url)
    err = info.value
    assert isinstance(err, FetchError) and err.kind == "tls"
    message = str(err)
    assert url in message
    assert "localhost:" in message
    assert "Bench Origin CA" in message  # the issuer of the certificate the server presented
    assert "OS trust store: not trusted" in message
    assert "certifi: not trusted" in message
    assert err.tls is not None and err.tls.leaf is not None
    assert "CN=" not in err.tls.leaf.issuer and "O=Bench Origin CA" in err.tls.leaf.issuer
    assert err.hint is not None and "trust store" in err.hint
    assert len(origin.requests_to("/simple/demo/")) == 0  # no request ever got through


def test_requests_ca_bundle_and_curl_ca_bundle_do_not_replace_our_context(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    system_trust(cas.origin)
    url = serve_page(origin)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certifi.where())
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url, timeout=5)  # requests verifies with the bundle the variable names
    assert make_client().get_text(url) == PAGE.decode()
    # a bundle path that does not exist makes plain requests fail before connecting; not us
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(OSError, match="Could not find a suitable TLS CA certificate bundle"):
        requests.get(url, timeout=5)
    assert make_client(use_cache=False).get_text(url) == PAGE.decode()


def test_a_bundle_variable_trusting_the_server_does_not_turn_a_failure_into_success(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """REQUESTS_CA_BUNDLE is not read at all: trust comes from the OS store (and certifi)."""
    system_trust(cas.unrelated)
    url = serve_page(origin)
    bundle = tmp_path / "origin.pem"
    bundle.write_bytes(cas.origin.cert_pem.bytes())
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    assert requests.get(url, timeout=5).status_code == 200  # requests trusts the variable
    with pytest.raises(FetchError) as info:
        make_client().get(url)
    assert info.value.kind == "tls"


def test_host_name_is_checked(
    make_server: ServerFactory, cas: Cas, system_trust: SystemTrust, make_client: ClientFactory
) -> None:
    system_trust(cas.origin)
    server = make_server(names=("wrong.invalid",))
    url = serve_page(server)
    with pytest.raises(FetchError) as info:
        make_client().get(url)
    assert info.value.kind == "tls"
    assert "Hostname mismatch" in str(info.value) or "hostname" in str(info.value).lower()
    assert "wrong.invalid" not in url


def test_context_requires_verification() -> None:
    ctx = build_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname is True


def test_conda_bundle_shadowing_the_os_store_is_repaired(
    origin: BenchServer,
    cas: Cas,
    clean_env: None,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A conda env whose OpenSSL points at its own Mozilla bundle, while the OS bundle holds the
    campus CA: truststore alone fails; our context also loads the OS bundle and succeeds."""
    prefix = tmp_path / "envs" / "lab"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "ssl").mkdir()
    conda_bundle = prefix / "ssl" / "cacert.pem"
    shutil.copyfile(certifi.where(), conda_bundle)
    empty = prefix / "ssl" / "certs"
    empty.mkdir()
    # what conda-forge's openssl activation script does (both inside the environment)
    monkeypatch.setenv("SSL_CERT_FILE", str(conda_bundle))
    monkeypatch.setenv("SSL_CERT_DIR", str(empty))
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    os_bundle = tmp_path / "etc" / "ca-certificates.crt"
    os_bundle.parent.mkdir()
    os_bundle.write_bytes(cas.origin.cert_pem.bytes())

    facts = analyse_trust(
        ssl.get_default_verify_paths(),
        environ=os.environ,
        bundles=(str(os_bundle),),
        dirs=(),
        conda_prefixes=(str(prefix),),
    )
    assert facts.conda_openssl and facts.shadowed and not facts.user_override
    assert facts.loads == (str(os_bundle),)
    assert str(os_bundle) in facts.summary()

    url = serve_page(origin)
    with pytest.raises(FetchError) as info:
        make_client(ssl_context_factory=lambda: os_store_context()).get(url)
    assert info.value.kind == "tls"
    client = make_client(ssl_context_factory=lambda: build_ssl_context(facts=facts))
    assert client.get_text(url) == PAGE.decode()


def test_trust_facts_reports_bundle_variables_it_ignores(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/somewhere/bundle.pem")
    facts = trust_facts()
    assert ("REQUESTS_CA_BUNDLE", "/somewhere/bundle.pem") in facts.ignored_env


def test_host_name_mismatch_hint_is_about_the_name_not_the_trust_store(
    make_server: ServerFactory, cas: Cas, system_trust: SystemTrust, make_client: ClientFactory
) -> None:
    """The CA is trusted; the certificate names another host. Adding a CA would not help."""
    system_trust(cas.origin)
    server = make_server(names=("wrong.invalid",))
    url = serve_page(server)
    with pytest.raises(FetchError) as info:
        make_client().get(url)
    hint = info.value.hint or ""
    assert "update-ca-certificates" not in hint
    assert "host name" in hint
