"""Live: real PyPI through our layer with no CA variables set (runs in CI, marked ``network``).

On a machine whose HTTPS is intercepted by a proxy with a CA in the OS store only, certifi alone
fails here and these pass; on a plain network they pass too. They assert only that.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cuda_resolve.net import HttpClient, Timeouts

pytestmark = pytest.mark.network

CA_VARS = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "PIP_CERT", "CURL_CA_BUNDLE")


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> HttpClient:
    for name in CA_VARS:
        monkeypatch.delenv(name, raising=False)
    return HttpClient(cache_dir=tmp_path / "cache", timeouts=Timeouts(read=30.0))


def test_pypi_torch_metadata_through_the_os_trust_store(client: HttpClient) -> None:
    with client:
        data = client.get_json("https://pypi.org/pypi/torch/json")
    assert data["info"]["name"] == "torch"
    assert "2.5.1" in data["releases"]


def test_pypi_file_download_with_hash_check(client: HttpClient, tmp_path: Path) -> None:
    with client:
        page = client.get_json(
            "https://pypi.org/simple/six/", accept="application/vnd.pypi.simple.v1+json"
        )
        wheel = next(f for f in page["files"] if f["filename"] == "six-1.16.0-py2.py3-none-any.whl")
        dest = client.download(
            wheel["url"],
            tmp_path / wheel["filename"],
            sha256=wheel["hashes"]["sha256"],
            size=wheel.get("size"),
        )
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == wheel["hashes"]["sha256"]
