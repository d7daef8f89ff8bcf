"""What each torch wheel's metadata said, remembered by file name and sha256.

A file published on PyPI never changes (its sha256 is in the JSON API's record), so what its
metadata says about its CUDA build can be kept for good: a second ``index refresh torch`` reads
no metadata file and no wheel again. The store is one small JSON file under the cache root; an
unreadable or foreign store is ignored (and rewritten), never an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..paths import cache_root, write_atomic

if TYPE_CHECKING:
    from .torch import WheelReading

__all__ = ["ReadingCache", "default_reading_cache"]

_FORMAT = 1
_LIMIT = 4 << 20  # thousands of readings fit in far less
_FIELDS = ("filename", "platform", "variant", "cuda_runtime", "requires_python", "evidence")


def default_reading_cache() -> ReadingCache:
    return ReadingCache(cache_root() / "refresh" / "torch-wheels.json")


class ReadingCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, dict[str, str | None]] | None = None

    @staticmethod
    def _key(filename: str, sha256: str) -> str:
        return f"{filename}#{sha256}"

    def _load(self) -> dict[str, dict[str, str | None]]:
        if self._entries is not None:
            return self._entries
        entries: dict[str, dict[str, str | None]] = {}
        try:
            if self.path.is_file() and self.path.stat().st_size <= _LIMIT:
                data: Any = json.loads(self.path.read_text(encoding="utf-8"))
                if (
                    isinstance(data, dict)
                    and data.get("format") == _FORMAT
                    and isinstance(data.get("wheels"), dict)
                ):
                    for key, value in data["wheels"].items():
                        if _valid(value):
                            entries[str(key)] = value
        except (OSError, ValueError, RecursionError):
            entries = {}
        self._entries = entries
        return entries

    def get(self, filename: str, sha256: str) -> dict[str, str | None] | None:
        """The reading's fields (all but ``url``), or None when this file was never read."""
        entry = self._load().get(self._key(filename, sha256))
        return dict(entry) if entry is not None and entry.get("filename") == filename else None

    def put(self, filename: str, sha256: str, reading: WheelReading) -> None:
        """Remember ``reading``; a cache that cannot be written is skipped, never an error."""
        entries = self._load()
        entries[self._key(filename, sha256)] = {name: getattr(reading, name) for name in _FIELDS}
        try:
            write_atomic(
                self.path,
                json.dumps({"format": _FORMAT, "wheels": entries}, indent=0, sort_keys=True),
            )
        except OSError:
            pass


def _valid(value: object) -> bool:
    if not isinstance(value, dict) or set(value) != set(_FIELDS):
        return False
    if not all(isinstance(value[name], str) for name in ("filename", "platform", "evidence")):
        return False
    return all(
        value[name] is None or isinstance(value[name], str)
        for name in ("variant", "cuda_runtime", "requires_python")
    )
