"""Lockfiles for labs: one PEP 751 ``pylock.toml`` for several machine profiles, and ``sync``.

A lock is a Plan per profile (:mod:`.make`), each profile's whole closure resolved by the
profile's own pip without downloading wheels (:mod:`.closure`), every file with its canonical
URL, size and sha256 (:mod:`.files`), written as sorted, stable TOML (:mod:`.document`).
:mod:`.read` reads it back through ``packaging.pylock`` with path-aware errors; :mod:`.select`
picks a profile for a machine and its files; :mod:`.sync` checks drift and installs exactly what
is locked through the executor.
"""

from __future__ import annotations

__all__ = ["LOCK_VERSION"]

#: The PEP 751 version this cuda-resolve writes (and the newest major it reads).
LOCK_VERSION = "1.0"
