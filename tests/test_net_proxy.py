"""Proxies on the bench: HTTPS through a CONNECT tunnel and through an intercepting proxy,
verified with our context either way; NO_PROXY; explicit proxies; 407 and refusals."""

from __future__ import annotations

import pytest
import requests
from test_net_support import (
    BenchHandler,
    BenchServer,
    Cas,
    ClientFactory,
    ProxyFactory,
    SystemTrust,
    closed_port,
)

from cuda_resolve.net import FetchError, proxy_for

pytest_plugins = ["test_net_support"]

BODY = b'{"name": "demo"}'


def serve(server: BenchServer, path: str = "/pypi/demo/json") -> None:
    def route(handler: BenchHandler) -> None:
        handler.reply(200, BODY, content_type="application/json")

    server.routes[path] = route


def test_https_through_a_tunnel_proxy_uses_https_proxy_and_our_context(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_proxy: ProxyFactory,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system_trust(cas.origin)
    serve(origin)
    proxy = make_proxy("tunnel", routes={"mirror.invalid": origin.port})
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    url = "https://mirror.invalid/pypi/demo/json"  # resolves nowhere: only the proxy knows it
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url, timeout=5)  # certifi through the same tunnel
    assert make_client().get_json(url) == {"name": "demo"}
    assert proxy.connects[-1].startswith("CONNECT mirror.invalid:443 ")


def test_lower_case_https_proxy_and_no_proxy_are_honoured(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_proxy: ProxyFactory,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system_trust(cas.origin)
    serve(origin)
    proxy = make_proxy("tunnel", routes={"mirror.invalid": origin.port})
    monkeypatch.setenv("https_proxy", proxy.url)
    monkeypatch.setenv("no_proxy", "localhost")
    assert proxy_for(origin.url("/pypi/demo/json")) is None
    assert proxy_for("https://mirror.invalid/x") == proxy.url
    client = make_client()
    assert client.get_json(origin.url("/pypi/demo/json")) == {"name": "demo"}
    assert proxy.connects == []  # localhost went direct
    assert client.get_json("https://mirror.invalid/pypi/demo/json", ttl=0) == {"name": "demo"}
    assert len(proxy.connects) == 1


def test_intercepting_proxy_is_trusted_through_the_os_store_and_reported(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_proxy: ProxyFactory,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy re-signs TLS with the campus CA, which only the OS store holds."""
    system_trust(cas.intercept)
    serve(origin)
    proxy = make_proxy("intercept", routes={"pypi.invalid": origin.port}, origin=origin)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    url = "https://pypi.invalid/pypi/demo/json"
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url, timeout=5)
    client = make_client()
    assert client.get_json(url) == {"name": "demo"}
    report = client.inspect_tls(url)
    assert report.proxy == proxy.url
    assert report.intercepted is True
    assert report.top_issuer is not None and "Bench Campus Intercept CA" in report.top_issuer
    assert "Bench Origin CA" not in report.describe()


def test_intercepting_proxy_without_its_ca_fails_naming_the_interceptor(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_proxy: ProxyFactory,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system_trust(cas.origin)  # the real server's CA, but not the proxy's
    serve(origin)
    proxy = make_proxy("intercept", routes={"pypi.invalid": origin.port}, origin=origin)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    with pytest.raises(FetchError) as info:
        make_client().get("https://pypi.invalid/pypi/demo/json")
    err = info.value
    assert err.kind == "tls"
    assert f"through proxy {proxy.url}" in str(err)
    assert "Bench Campus Intercept CA" in str(err)  # chain read through the proxy
    assert err.tls is not None and err.tls.intercepted is False


def test_explicit_proxies_replace_the_environment(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_proxy: ProxyFactory,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system_trust(cas.origin)
    serve(origin)
    proxy = make_proxy("tunnel", routes={"mirror.invalid": origin.port})
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{closed_port()}")
    client = make_client(proxies={"https": proxy.url, "no_proxy": "localhost"})
    assert client.get_json("https://mirror.invalid/pypi/demo/json") == {"name": "demo"}
    assert client.get_json(origin.url("/pypi/demo/json")) == {"name": "demo"}  # no_proxy
    assert len(proxy.connects) == 1


def test_proxy_asking_for_credentials_is_named_and_not_retried(
    make_proxy: ProxyFactory,
    make_client: ClientFactory,
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy = make_proxy("407")
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    url = "https://pypi.invalid/simple/torch/"
    with pytest.raises(FetchError) as info:
        make_client().get(url)
    err = info.value
    assert err.kind == "proxy"
    assert "407" in str(err) and url in str(err) and proxy.url in str(err)
    assert len(proxy.connects) == 1


def test_proxy_refusing_a_host_is_named(
    make_proxy: ProxyFactory,
    make_client: ClientFactory,
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy = make_proxy("tunnel", routes={})
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    with pytest.raises(FetchError) as info:
        make_client().get("https://blocked.invalid/simple/")
    assert info.value.kind == "proxy"
    assert "403" in str(info.value)


def test_proxy_not_listening_is_named(
    make_client: ClientFactory, clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("HTTPS_PROXY", dead)
    with pytest.raises(FetchError) as info:
        make_client().get("https://pypi.invalid/simple/")
    assert info.value.kind == "proxy"
    assert "refused the connection" in str(info.value) and dead in str(info.value)


def test_proxy_password_is_not_printed(
    make_client: ClientFactory, clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"http://alice:s3cret@127.0.0.1:{closed_port()}"
    monkeypatch.setenv("HTTPS_PROXY", dead)
    with pytest.raises(FetchError) as info:
        make_client().get("https://pypi.invalid/simple/")
    assert "s3cret" not in str(info.value) and "alice:***@" in str(info.value)


def test_a_config_no_proxy_alone_exempts_hosts_from_the_environments_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``[proxy] no_proxy = ["mirror.lab.example.edu"]`` with HTTPS_PROXY from the shell: the lab
    mirror is reached directly, everything else through the proxy."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    explicit = {"no_proxy": "mirror.lab.example.edu"}
    assert proxy_for("https://mirror.lab.example.edu/simple/", explicit) is None
    assert proxy_for("https://pypi.org/simple/", explicit) == "http://proxy.example:3128"


def test_a_socks_proxy_without_socks_support_is_named_as_such(
    clean_env: None, make_client: ClientFactory
) -> None:
    """ssh -D tunnels give SOCKS proxies; without PySocks requests cannot use them. That is a
    proxy problem with a one-line fix, not a bad URL."""
    import importlib.util

    if importlib.util.find_spec("socks") is not None:
        pytest.skip("PySocks is installed here")
    client = make_client(proxies={"https": f"socks5://127.0.0.1:{closed_port()}"})
    with pytest.raises(FetchError) as info:
        client.get("https://pypi.org/simple/demo/")
    err = info.value
    assert err.kind == "proxy"
    assert "SOCKS" in err.message and "socks5://127.0.0.1" in err.message
    assert err.hint is not None and "PySocks" in err.hint
