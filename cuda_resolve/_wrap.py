"""Wrapping text for a terminal with a hanging indent, shared by every renderer (the CLI's and
doctor's): continuation lines start under the text, never at column 0, and no word is split."""

from __future__ import annotations

__all__ = ["counted", "hanging"]


def counted(number: int, noun: str) -> str:
    """``1 file``, ``2 files``: ``number`` and ``noun``, plural but for one."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def hanging(text: str, *, first: str, rest: str, width: int) -> str:
    """``text`` wrapped to ``width`` with a hanging indent: continuation lines start at ``rest``,
    never at column 0. Words and URLs are never split (a token longer than the line keeps a line
    of its own), so what is printed can be copied."""
    import textwrap

    return textwrap.fill(
        text,
        width=max(width, len(first) + 20),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
