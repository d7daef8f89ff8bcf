"""pip's report of files whose hashes are not the pinned ones, read back for the error.

In hash-checking mode (a plan's steps, a lock, ``--require-hashes``) pip refuses a file whose
sha256 is not one of those pinned, and says which after a single ERROR line::

    ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have ...
        six==1.17.0 from file:///wheels/six-1.17.0-py2.py3-none-any.whl:
            Expected sha256 aaaa...
            Expected     or bbbb...
                 Got        4721...

The ERROR line alone names neither the file nor a hash (user walk 2026-12-05, B12): this reads
the block under it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._frozen import frozen

__all__ = ["HashMismatch", "describe", "hash_mismatches"]

_HEADING = "DO NOT MATCH THE HASHES"
_EXPECTED = re.compile(r"^\s*Expected\s+(\w+)\s+([0-9a-fA-F]{32,128})\s*$")  # "sha256" or "or"
_GOT = re.compile(r"^\s*Got\s+([0-9a-fA-F]{32,128})\s*$")
_PIPS_OWN = re.compile(r"\s*\(from -r .*\)$")  # "(from -r req.txt (line 1))": where pip read it


@frozen
class HashMismatch:
    """One file pip refused: what it was for (``six==1.17.0 from URL``), the pinned hashes and
    the file's."""

    requirement: str
    expected: tuple[str, ...]
    got: str
    algorithm: str = "sha256"


def hash_mismatches(lines: Sequence[str]) -> tuple[HashMismatch, ...]:
    """Each refused file in pip's output ``lines`` (none where pip refused none)."""
    found: list[HashMismatch] = []
    inside = False
    requirement, expected, algorithm = "", list[str](), "sha256"
    for line in lines:
        if _HEADING in line:
            inside, requirement, expected = True, "", []
            continue
        if not inside:
            continue
        pinned, got = _EXPECTED.match(line), _GOT.match(line)
        if pinned:
            if pinned.group(1) != "or":
                algorithm = pinned.group(1)
            expected.append(pinned.group(2).lower())
        elif got:
            if requirement and expected:
                found.append(
                    HashMismatch(
                        requirement=requirement,
                        expected=tuple(expected),
                        got=got.group(1).lower(),
                        algorithm=algorithm,
                    )
                )
            expected = []
        elif line.rstrip().endswith(":") and line.startswith(" "):
            requirement = _PIPS_OWN.sub("", line.strip()[:-1])
            expected = []
        elif line.strip():
            inside = False  # the block ended: another message
    return tuple(found)


def describe(mismatch: HashMismatch) -> str:
    """``six==1.17.0 from URL: its sha256 is 4721..., not the pinned aaaa...`` (pip names the
    algorithm of the pinned hashes)."""
    pinned = " or ".join(mismatch.expected)
    return (
        f"{mismatch.requirement}: its {mismatch.algorithm} is {mismatch.got}, not the pinned "
        f"{pinned}"
    )
