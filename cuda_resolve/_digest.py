"""A content digest for cache keys, without loading OpenSSL.

``hashlib`` binds OpenSSL when imported (``_hashlib``: a few milliseconds, on every command that
checks a cache key: ``doctor``, ``detect``, ``plan``; issue 28). The keys of the probe cache and
the parsed index only need a digest that changes with what they cover, so BLAKE2b from the
interpreter's built-in module is used, with hashlib's SHA-256 where that module is missing (an
interpreter built without it)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Protocol

    class Digest(Protocol):
        def update(self, data: bytes, /) -> None: ...
        def hexdigest(self) -> str: ...


__all__ = ["new_digest"]


def new_digest(data: bytes = b"") -> Digest:
    """A fresh 256-bit digest fed ``data``."""
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - CPython builds it in; another interpreter may not
        import hashlib

        return hashlib.sha256(data)
    return blake2b(data, digest_size=32)
