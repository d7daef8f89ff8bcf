"""Where cuda-resolve keeps its own files (one place, so tests and users can move them)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """``$CUDA_RESOLVE_CACHE_DIR``, else the platform's user cache directory for cuda-resolve."""
    override = os.environ.get("CUDA_RESOLVE_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("cuda-resolve", appauthor=False))
