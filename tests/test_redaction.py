"""Credentials in URLs are replaced by ``***`` wherever a URL is shown, and only there."""

from __future__ import annotations

import socket

import pytest

from cuda_resolve.errors import NetworkError
from cuda_resolve.net import FetchError, HttpClient, RetryPolicy, Timeouts, redact
from cuda_resolve.net.errors import http_status_error
from cuda_resolve.redaction import redact_data, redact_urls


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:t0KeN@mirror.lab/simple/", "https://user:***@mirror.lab/simple/"),
        (
            "https://TOKEN@mirror.lab/simple/",
            "https://***@mirror.lab/simple/",
        ),  # a lone user name is often the token
        ("https://user:@mirror.lab/", "https://user:***@mirror.lab/"),
        ("http://user:pw@127.0.0.1:8080/x?y=1", "http://user:***@127.0.0.1:8080/x?y=1"),
        (
            "https://u:p@[::1]:8443/simple/",
            "https://u:***@[::1]:8443/simple/",
        ),  # brackets and port kept
        ("https://u:p@Mirror.Lab", "https://u:***@Mirror.Lab"),  # nothing else is rewritten
        (
            "https://u:p@ss@mirror.lab/",
            "https://u:***@mirror.lab/",
        ),  # an unquoted @ in the password
        ("https://mirror.lab/simple/", "https://mirror.lab/simple/"),
        (
            "https://mirror.lab/user@example/",
            "https://mirror.lab/user@example/",
        ),  # an @ in the path
        ("https://user:***@mirror.lab/", "https://user:***@mirror.lab/"),  # twice is once
    ],
)
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_redact_urls_finds_every_url_in_a_text() -> None:
    text = (
        "HTTP 404 fetching 'https://a:secret1@one.lab/x' (mirror of https://pypi.org/simple/), "
        "proxy http://p:secret2@proxy:3128, see <https://tok3n@three.lab/y>; mail admin@lab.example"
    )
    shown = redact_urls(text)
    assert "secret" not in shown and "tok3n" not in shown
    assert "'https://a:***@one.lab/x'" in shown and "http://p:***@proxy:3128," in shown
    assert "<https://***@three.lab/y>" in shown and "https://pypi.org/simple/" in shown
    assert "admin@lab.example" in shown  # not a URL
    assert redact_data({"a": ["https://u:pw@h/", 3, None], "b": {"c": "https://u:pw@h/"}}) == {
        "a": ["https://u:***@h/", 3, None],
        "b": {"c": "https://u:***@h/"},
    }


def test_network_errors_never_carry_the_password() -> None:
    error = http_status_error(401, "Unauthorized", "https://lab:S3cret@mirror.lab/simple/pip/")
    assert isinstance(error, NetworkError)
    assert (
        "S3cret" not in error.message and "https://lab:***@mirror.lab/simple/pip/" in error.message
    )
    assert error.url == "https://lab:***@mirror.lab/simple/pip/"
    assert "S3cret" not in str(error.to_json())
    plain = NetworkError(
        "cannot reach https://lab:S3cret@mirror.lab/", hint="check https://lab:S3cret@mirror.lab/"
    )
    assert "S3cret" not in plain.message and plain.hint is not None and "S3cret" not in plain.hint


def test_a_failed_fetch_names_the_url_without_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://lab:S3cret@127.0.0.1:{port}/simple/pip/"
    with HttpClient(
        use_cache=False,
        retry=RetryPolicy(attempts=1),
        timeouts=Timeouts(connect=1, read=1, deadline=2),
        diagnose_tls=False,
    ) as client:
        with pytest.raises(FetchError) as info:
            client.get(url)
        probe = client.probe(url)
    assert info.value.kind == "refused"
    assert "S3cret" not in info.value.message and f"lab:***@127.0.0.1:{port}" in info.value.message
    assert probe.error is not None and "S3cret" not in probe.error.message
