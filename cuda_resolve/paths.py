"""Where cuda-resolve keeps its own files (one place, so tests and users can move them)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["cache_root", "write_atomic"]


def cache_root() -> Path:
    """``$CUDA_RESOLVE_CACHE_DIR``, else the platform's user cache directory for cuda-resolve."""
    override = os.environ.get("CUDA_RESOLVE_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("cuda-resolve", appauthor=False))


def write_atomic(path: Path, data: str | bytes, *, make_parents: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it into place.

    Readers see the old file or the new one, never half of one; on failure the temporary file
    is removed and ``OSError`` propagates (callers decide whether that is an error). A file the
    user names (``--save-profile``) passes ``make_parents=False``: a mistyped folder is an error."""
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
