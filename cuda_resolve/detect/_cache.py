"""A small on-disk memo for probe answers that only change when the thing probed changes.

``nvcc --version`` and ``--list-gpu-arch`` depend only on the nvcc binary, so they are keyed
by the binary's real path, modification time and size. GPU facts from NVML depend only on the
boot, the loaded driver and the set of GPUs, so they are keyed by the kernel's boot id, the
driver version and the GPUs' PCI addresses (all plain files under /proc and /sys): a second
``cuda-resolve doctor`` then skips NVML's initialisation and the import of ``pynvml``, the
slowest in-process probe.

The cache is an optimisation only: an unreadable or corrupt file is ignored, a failed write
is dropped, and ``ProbeCache(None)`` caches nothing.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from .._bounded import read_bytes
from ..paths import cache_root, write_atomic

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ProbeCache", "default_cache_dir", "file_identity"]

_FORMAT = 1
_FILE_NAME = "probes.json"
_MAX_ENTRIES = 256  # per namespace; the oldest go first
_READ_LIMIT = 16 * 1024 * 1024  # a full cache is far smaller; a larger file is not ours


def default_cache_dir() -> Path:
    return cache_root()


def file_identity(path: str) -> str | None:
    """``realpath|mtime_ns|size``: changes whenever the file is replaced or rebuilt."""
    try:
        real = os.path.realpath(path)
        stat = os.stat(real)
    except OSError:
        return None
    return f"{real}|{stat.st_mtime_ns}|{stat.st_size}"


class ProbeCache:
    """``private``: the folder is made the owner's only (0700) and a new file 0600, for answers
    that describe the user's environments (:mod:`cuda_resolve.install.pip`'s probe)."""

    def __init__(self, directory: Path | None, *, private: bool = False) -> None:
        self._path = directory / _FILE_NAME if directory is not None else None
        self._private = private
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, Any]] | None = None
        self._dirty = False

    def _loaded(self) -> dict[str, dict[str, Any]]:
        if self._data is None:
            self._data = {}
            if self._path is not None:
                try:
                    raw = json.loads(read_bytes(self._path, limit=_READ_LIMIT))
                except (
                    OSError,
                    ValueError,
                    RecursionError,
                ):  # unreadable, not JSON, nested too deep
                    raw = None
                if isinstance(raw, dict) and raw.get("format") == _FORMAT:
                    self._data = {k: v for k, v in raw.items() if isinstance(v, dict)}
        return self._data

    def get(self, namespace: str, key: str) -> Any:
        if self._path is None:
            return None
        with self._lock:
            return self._loaded().get(namespace, {}).get(key)

    def put(self, namespace: str, key: str, value: Any) -> None:
        if self._path is None:
            return
        with self._lock:
            table = self._loaded().setdefault(namespace, {})
            if table.get(key) == value:
                return
            table.pop(key, None)
            table[key] = value
            while len(table) > _MAX_ENTRIES:
                del table[next(iter(table))]
            self._dirty = True

    def command_output(
        self, program: str, args: Sequence[str], compute: Callable[[], str | None]
    ) -> str | None:
        """*compute*'s answer for running *program* with *args*, remembered per binary."""
        identity = file_identity(program)
        if identity is None:
            return compute()
        key = identity + "|" + " ".join(args)
        cached = self.get("commands", key)
        if isinstance(cached, str):
            return cached
        value = compute()
        if value is not None:  # failures are not remembered: the next run tries again
            self.put("commands", key, value)
        return value

    def save(self) -> None:
        """Write the file if anything changed; a failure to write is not an error."""
        if self._path is None or not self._dirty:
            return
        with self._lock:
            data = {"format": _FORMAT, **(self._data or {})}
            try:
                if self._private:
                    self._path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                write_atomic(self._path, json.dumps(data, indent=0), private=self._private)
                self._dirty = False
            except OSError:
                pass
