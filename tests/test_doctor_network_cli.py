"""``cuda-resolve doctor --network`` against the real PyPI (runs in CI, which reaches PyPI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve.cli import main
from cuda_resolve.doctor.findings import Finding


@pytest.mark.network
def test_doctor_network_reaches_pypi_through_the_system_store(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "REQUESTS_CA_BUNDLE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "PIP_CERT",
        "CURL_CA_BUNDLE",
    ):
        monkeypatch.delenv(name, raising=False)
    main(["doctor", "--network", "--json"])
    report = json.loads(capsys.readouterr().out)
    checks = {finding["check"]: finding for finding in report["findings"]}
    assert checks["index:pypi"]["status"] == "ok", checks["index:pypi"]
    assert "tls-store" in checks and "pip-trust" in checks


PROFILE = Path(__file__).parent / "data" / "profiles" / "cpu-ci-no-driver.toml"


@pytest.fixture
def no_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection attempt fails the test: at the socket level, where urllib3 connects
    (``socket.socket.connect``; urllib3 has its own create_connection) and resolves names."""
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a connection was attempted: {args[1:] or kwargs}")

    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_the_connection_guard_catches_what_the_http_client_does(no_connections: None) -> None:
    """Negative control: the guard below must see a real fetch, by name and by address."""
    from cuda_resolve.net import HttpClient

    for url in ("https://127.0.0.1:9/simple/", "https://pypi.org/simple/"):
        with (
            HttpClient(use_cache=False) as client,
            pytest.raises(AssertionError, match="connection was attempted"),
        ):
            client.get(url)


def test_doctor_without_network_opens_no_connection(
    no_connections: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--json", "--profile", str(PROFILE)]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert not any(f["check"].startswith("index:") for f in report["findings"])


LONG_URL = (
    "https://mirror-with-a-long-name.example.edu/pypi/web/simple/torch-stack/very/long/path/torch/"
)


def test_network_findings_print_compactly_at_80_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import cuda_resolve.doctor.network as network

    findings = [
        Finding(
            check="index:pypi",
            status="warn",
            title="reach pypi",
            found="DNS lookup failed for host 'mirror-with-a-long-name.example.edu' fetching "
            f"{LONG_URL}; without it, PyPI cannot be used: cuda-resolve fails rather than fall "
            "back to another index",
            fix="check the host name; if this network only reaches the internet through a proxy, "
            "set HTTPS_PROXY",
        ),
        Finding(
            check="pip-trust",
            status="ok",
            title="pip and the system trust store",
            found="pip 25.0 on Python 3.12 verifies with the system store and certifi",
        ),
    ]
    monkeypatch.setattr(network, "network_findings", lambda env, index=None: findings)
    monkeypatch.setenv("COLUMNS", "80")
    main(["doctor", "--network", "--profile", str(PROFILE)])
    out = capsys.readouterr().out
    section = out[out.index("\nNetwork\n") + 1 :].splitlines()
    assert LONG_URL in out  # never split
    entries = [line for line in section[1:] if not line.startswith(" ")]
    assert [e.split()[0] for e in entries[:2]] == ["warn", "ok"]  # one line at column 0 per finding
    assert all(line.startswith(" " * 7) for line in section[1:] if line not in entries)
    assert all(len(line) <= 80 or " " not in line.strip() for line in section)
    assert "fix: check the host name" in out
    assert len(section) <= 12  # the table drew about 40 lines for these two
