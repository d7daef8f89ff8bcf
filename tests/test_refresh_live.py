"""Live: `index refresh` against real PyPI, restricted to two releases (runs in CI, marked
``network``). The PyTorch index may be unreachable (it is from the development machine); the
refresh must say so and still derive every fact from PyPI."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_resolve.index.load import load_index
from cuda_resolve.net import HttpClient, Timeouts
from cuda_resolve.refresh import refresh_torch

pytestmark = pytest.mark.network


def test_refresh_two_releases_from_real_pypi(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in (
        "REQUESTS_CA_BUNDLE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "PIP_CERT",
        "CURL_CA_BUNDLE",
    ):
        monkeypatch.delenv(name, raising=False)
    shipped = load_index(include_user=False)
    started = time.monotonic()
    with HttpClient(cache_dir=tmp_path / "cache", timeouts=Timeouts(read=30.0)) as client:
        result = refresh_torch(
            client,
            index=shipped,
            shipped=shipped,
            output_dir=tmp_path / "overlay",
            versions=["1.8.0", "2.5.1"],
        )
    assert time.monotonic() - started < 120
    facts = {str(f.version): f for f in result.facts}
    old, mid = facts["1.8.0"], facts["2.5.1"]
    # 1.8.0 bundles CUDA 10.2 (no runtime pin: torch/version.py says so); its aarch64 wheel is CPU
    assert (old.pypi_default, old.pypi_cuda_runtime, old.pypi_linux_aarch64) == (
        "cu102",
        "bundled",
        "cpu",
    )
    # 2.5.1 pins nvidia-cuda-runtime-cu12==12.4.127 on Linux x86_64
    assert (mid.pypi_default, mid.pypi_cuda_runtime, mid.pypi_linux_aarch64) == (
        "cu124",
        "12.4.127",
        "cpu",
    )
    assert mid.requires_python == ">=3.8.0" and {"3.9", "3.13"} <= set(mid.python)
    assert old.problems == () and mid.problems == ()
    for item in result.unreachable:  # reported, not fatal
        assert item.url == "https://download.pytorch.org/whl/torch/" and item.error
