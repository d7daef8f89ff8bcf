"""Names one edit away from a curated package: how typosquatted packages get installed.

``kaolinn`` or ``pointnet2_op`` is never handed to pip silently: the user confirms that exact
name first. Ordinary names (``torchx``, ``numpy``) are not near a curated extension package and
pass through untouched.
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["edit_distance_at_most_one", "near_miss", "requirement_name"]


def edit_distance_at_most_one(a: str, b: str) -> bool:
    """One insertion, deletion, substitution or swap of neighbours turns ``a`` into ``b``."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diffs = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(diffs) == 1:
            return True
        return (
            len(diffs) == 2
            and diffs[1] == diffs[0] + 1
            and a[diffs[0]] == b[diffs[1]]
            and a[diffs[1]] == b[diffs[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long[i]:
        i += 1
    return short[i:] == long[i + 1 :]


def requirement_name(text: str) -> str | None:
    try:
        return Requirement(text).name
    except InvalidRequirement:
        return None


#: Suffixes that upstream folder names add to a curated package's name: pointnet2_ops' README
#: installs from the folder ``pointnet2_ops_lib``, and ``pip install pointnet2_ops_lib`` asks a
#: public index for a package nobody curates.
FOLDER_SUFFIXES = ("-lib",)


def near_miss(name: str, curated: Iterable[str]) -> str | None:
    """The curated package ``name`` is one edit away from, or is with a folder suffix (and is
    not), else None."""
    wanted = canonicalize_name(name)
    for candidate in curated:
        other = canonicalize_name(candidate)
        if other == wanted:
            continue
        if edit_distance_at_most_one(wanted, other) or any(
            wanted == other + suffix for suffix in FOLDER_SUFFIXES
        ):
            return candidate
    return None
