"""The wheelhouse: built wheels keyed by their full ABI, in a PEP 503 folder any static server can serve.

:class:`WheelKey` (key.py) names a build's ABI and gives the wheel its local version label;
:class:`Wheelhouse` (store.py) publishes, finds, lists and removes wheels under per-key file
locks; rewrite.py relabels and strips a built wheel; simple.py renders the index pages.
docs/wheelhouse.md describes the layout and how to share one.
"""

from __future__ import annotations

from .errors import WheelhouseError
from .key import WheelKey, canonical_arch_list
from .store import DEFAULT_LOCK_TIMEOUT, WHEELHOUSE_ENV, StoredWheel, Wheelhouse

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "WHEELHOUSE_ENV",
    "StoredWheel",
    "WheelKey",
    "Wheelhouse",
    "WheelhouseError",
    "canonical_arch_list",
]
