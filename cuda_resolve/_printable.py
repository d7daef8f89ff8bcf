"""Text from another program, made safe to show: control characters become visible escapes.

A child's output (pip, a compiler, a user's interpreter, an import that fails) can hold terminal
escape sequences, carriage returns, bells, bidirectional overrides or bytes that decoded to C1
controls. Echoed raw into our messages they would move the cursor, recolour or hide the
terminal's text, or make a line say something else than it does. :func:`printable` keeps every
other character as it is and writes those as ``\\x1b``, ``\\r``, ``\\u202e`` ...; line breaks and
tabs stay unless ``one_line`` asks for a single line.
"""

from __future__ import annotations

import re

from ._lazy_re import lazy_compile

__all__ = ["printable"]

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode format characters that
# reorder or hide text (bidi embeddings, overrides and isolates, zero-width marks, BOM).
_CONTROL = lazy_compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)
_ONE_LINE_CONTROL = lazy_compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control and text-reordering character written as a visible escape
    (with ``one_line``, newlines and tabs too). Linear; plain text comes back unchanged."""
    return (_ONE_LINE_CONTROL if one_line else _CONTROL).sub(_escape, text)
