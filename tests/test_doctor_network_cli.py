"""``cuda-resolve doctor --network`` against the real PyPI (runs in CI, which reaches PyPI)."""

from __future__ import annotations

import json

import pytest

from cuda_resolve.cli import main


@pytest.mark.network
def test_doctor_network_reaches_pypi_through_the_system_store(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "PIP_CERT", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    main(["doctor", "--network", "--json"])
    report = json.loads(capsys.readouterr().out)
    checks = {finding["check"]: finding for finding in report["findings"]}
    assert checks["index:pypi"]["status"] == "ok", checks["index:pypi"]
    assert "tls-store" in checks and "pip-trust" in checks


def test_doctor_without_network_opens_no_connection(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("doctor without --network opened a connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert not any(f["check"].startswith("index:") for f in report["findings"])
