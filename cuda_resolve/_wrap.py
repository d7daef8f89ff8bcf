"""Wrapping text for a terminal with a hanging indent, shared by every renderer (the CLI's and
doctor's): continuation lines start under the text, never at column 0, and no word is split.
Widths are terminal cells: a CJK character takes two."""

from __future__ import annotations

__all__ = ["cell_width", "char_width", "counted", "hanging"]


def cell_width(text: str) -> int:
    """How many terminal cells ``text`` takes: East Asian wide and full-width characters two,
    combining marks none, the rest one (as rich counts them, for what a plan holds)."""
    return sum(char_width(char) for char in text)


def char_width(char: str) -> int:
    if char.isascii():
        return 1
    # Loaded for the first character that is not ASCII (a 1 MB library: 0.4 ms of every command
    # that prints, issue 28).
    import unicodedata

    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def counted(number: int, noun: str) -> str:
    """``1 file``, ``2 files``: ``number`` and ``noun``, plural but for one."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def hanging(text: str, *, first: str, rest: str, width: int) -> str:
    """``text`` wrapped to ``width`` with a hanging indent: continuation lines start at ``rest``,
    never at column 0. Words and URLs are never split (a token longer than the line keeps a line
    of its own), so what is printed can be copied."""
    width = max(width, len(first) + 20)
    if not text.isascii():
        return _fill_cells(text, first=first, rest=rest, width=width)
    import textwrap

    return textwrap.fill(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _fill_cells(text: str, *, first: str, rest: str, width: int) -> str:
    """As textwrap.fill (words at single spaces), counting terminal cells, not characters."""
    lines: list[str] = []
    line, used = first, cell_width(first)
    fresh = True  # nothing on the line but its indent
    for word in text.split():
        size = cell_width(word)
        if not fresh and used + 1 + size > width:
            lines.append(line)
            line, used, fresh = rest, cell_width(rest), True
        if fresh:
            line, used, fresh = line + word, used + size, False
        else:
            line, used = f"{line} {word}", used + 1 + size
    lines.append(line)
    return "" if fresh else "\n".join(lines)  # no words: as textwrap, nothing
