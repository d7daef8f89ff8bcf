"""``cuda-resolve build REQ...``: the source builds of a plan, into the wheelhouse (see :mod:`.install`)."""

from __future__ import annotations

from typing import Any

from .install import register_build

__all__ = ["register"]


def register(subparsers: Any) -> None:
    register_build(subparsers)
