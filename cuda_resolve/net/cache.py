"""An on-disk cache for index pages and metadata (never for artifacts: those are hashed files).

One entry per (URL fetched, Accept header): the body and a small JSON record (when it was fetched,
the final URL, content type, ETag / Last-Modified for revalidation). An entry younger than the
validity period is served without a request; an older one is revalidated or refetched.
Writes are atomic (temporary file + rename), so concurrent processes never see half an entry.
Entries are the user's own: files 0600 in folders 0700. A URL fetched may carry credentials
(``https://user:token@mirror/simple/``) and the record keeps it, since the key is the URL asked.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from .._frozen import frozen
from ..paths import write_atomic

__all__ = ["CacheEntry", "HttpCache", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``<cache root>/http``: ``$CUDA_RESOLVE_CACHE_DIR/http`` when set, else
    ``platformdirs.user_cache_dir("cuda-resolve")/http``."""
    from ..paths import cache_root

    return cache_root() / "http"


@frozen
class CacheEntry:
    url: str
    final_url: str
    fetched_at: float  # time.time() of the last successful fetch or revalidation
    content_type: str | None
    etag: str | None
    last_modified: str | None
    body: bytes

    def age(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.fetched_at


class HttpCache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def key(url: str, accept: str | None) -> str:
        return hashlib.sha256(f"{url}\n{accept or ''}".encode()).hexdigest()

    def _paths(self, url: str, accept: str | None) -> tuple[Path, Path]:
        key = self.key(url, accept)
        base = self.directory / key[:2]
        return base / f"{key}.json", base / f"{key}.body"

    def get(self, url: str, accept: str | None) -> CacheEntry | None:
        meta_path, body_path = self._paths(url, accept)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            body = body_path.read_bytes()
            if meta.get("url") != url or meta.get("size") != len(body):
                return None
            return CacheEntry(
                url=url,
                final_url=str(meta.get("final_url") or url),
                fetched_at=float(meta["fetched_at"]),
                content_type=meta.get("content_type"),
                etag=meta.get("etag"),
                last_modified=meta.get("last_modified"),
                body=body,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, entry: CacheEntry, accept: str | None) -> None:
        """Store ``entry``; a cache that cannot be written is skipped, never an error."""
        meta_path, body_path = self._paths(entry.url, accept)
        meta = {
            "url": entry.url,
            "final_url": entry.final_url,
            "fetched_at": entry.fetched_at,
            "content_type": entry.content_type,
            "etag": entry.etag,
            "last_modified": entry.last_modified,
            "size": len(entry.body),
        }
        try:
            meta_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            for path, data in ((body_path, entry.body), (meta_path, json.dumps(meta).encode())):
                write_atomic(path, data, private=True)
                os.chmod(path, 0o600)  # a replaced file keeps its mode: an older cache's 0644
        except OSError:
            return

    def touch(
        self, entry: CacheEntry, accept: str | None, *, now: float | None = None
    ) -> CacheEntry:
        """Mark ``entry`` fresh again (the server answered 304 Not Modified)."""
        fresh = CacheEntry(
            url=entry.url,
            final_url=entry.final_url,
            fetched_at=time.time() if now is None else now,
            content_type=entry.content_type,
            etag=entry.etag,
            last_modified=entry.last_modified,
            body=entry.body,
        )
        self.put(fresh, accept)
        return fresh
