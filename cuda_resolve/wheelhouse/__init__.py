"""The wheelhouse: built wheels keyed by their full ABI, in a PEP 503 folder any static server can
serve.

:class:`WheelKey` (key.py) names a build's ABI and gives the wheel its local version label;
:class:`KeyQuery` is a key less its arch list and :func:`covers` ranks how an arch list covers a
machine's GPUs; :class:`Wheelhouse` (store.py) publishes, finds (by exact key, or by coverage:
:meth:`Wheelhouse.find_covering`, :func:`best_covering`), lists and removes wheels under per-key
file locks; rewrite.py relabels and strips a built wheel; simple.py renders the index pages.
docs/wheelhouse.md describes the layout and how to share one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import WheelhouseError
from .key import (
    Coverage,
    CoverageKind,
    GpuCoverage,
    KeyQuery,
    WheelKey,
    canonical_arch_list,
    covers,
)

if TYPE_CHECKING:
    from .store import (
        DEFAULT_LOCK_TIMEOUT,
        WHEELHOUSE_ENV,
        StoredWheel,
        Wheelhouse,
        best_covering,
        covering_reason,
        rank_covering,
    )

#: Loaded on first use: a plan names wheel keys, and the store (file locks, page rendering) is
#: only needed where wheels are published or looked up.
_FROM_STORE = frozenset(
    {
        "DEFAULT_LOCK_TIMEOUT",
        "WHEELHOUSE_ENV",
        "StoredWheel",
        "Wheelhouse",
        "best_covering",
        "covering_reason",
        "rank_covering",
    }
)


def __getattr__(name: str) -> Any:
    if name in _FROM_STORE:
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "WHEELHOUSE_ENV",
    "Coverage",
    "CoverageKind",
    "GpuCoverage",
    "KeyQuery",
    "StoredWheel",
    "WheelKey",
    "Wheelhouse",
    "WheelhouseError",
    "best_covering",
    "canonical_arch_list",
    "covering_reason",
    "covers",
    "rank_covering",
]
