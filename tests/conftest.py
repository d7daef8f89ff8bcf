"""Session-wide test setup: cuda-resolve's caches go to a temporary directory, never the user's."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir() -> Iterator[None]:
    with tempfile.TemporaryDirectory(prefix="cuda-resolve-test-cache-") as directory:
        previous = os.environ.get("CUDA_RESOLVE_CACHE_DIR")
        os.environ["CUDA_RESOLVE_CACHE_DIR"] = directory
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("CUDA_RESOLVE_CACHE_DIR", None)
            else:
                os.environ["CUDA_RESOLVE_CACHE_DIR"] = previous
