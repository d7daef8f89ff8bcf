"""``doctor``: turn an Environment into diagnoses (ok / warn / error), each with what it found and
the fix.

The checks in :mod:`.checks` are pure functions of the Environment and the index; rendering
lives in :mod:`.render`.
"""

from __future__ import annotations

from .findings import Finding

__all__ = ["Finding"]
