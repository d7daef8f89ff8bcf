"""Where a hint's document is on this machine.

The user documents (docs/*.md of the checkout) ship in the wheel as ``cuda_resolve/docs``: a hint
names the installed file, which a user of ``pip install cuda-resolve`` can open, not a path in a
checkout they do not have (user walk C10). Run from a checkout, the checkout's docs/ is named.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["doc_path"]

_PACKAGE = Path(__file__).parent


def doc_path(name: str) -> str:
    """``name`` (``index-format.md``) where it can be read: the installed copy, else the
    checkout's, else ``docs/NAME`` as the project names it."""
    for folder in (_PACKAGE / "docs", _PACKAGE.parent / "docs"):
        found = folder / name
        if found.is_file():
            return str(found)
    return f"docs/{name}"
