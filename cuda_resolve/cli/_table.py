"""A plain text table in rich's heavy-head box, without rich.

``plan`` printed its table through rich: importing rich and laying one table out cost about a
quarter of a warm ``plan`` (issue 28: plan at most 2.5x ``detect --json``). The table here is
the same box, cells wrapped at spaces (a word wider than its column is folded, never cut short
with an ellipsis), widths taken from the terminal as rich takes them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence

from .._wrap import cell_width, char_width

__all__ = ["cell_width", "render_table", "stderr_width", "stdout_width"]

#: Each cell has a space either side, and a rule before each column and after the last.
_PER_COLUMN = 3


def stdout_width() -> int:
    """The width rich gives stdout: ``COLUMNS`` where it is a positive number, else the
    terminal's, else 80 (piped output)."""
    return _width_of(sys.__stdout__)


def stderr_width() -> int:
    """As :func:`stdout_width`, for stderr."""
    return _width_of(sys.__stderr__)


def _width_of(stream: object) -> int:
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return 80


def _widths(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Each column's width: its longest cell where the table fits ``width``, else the widest
    columns narrowed in turn, none below its longest word (or its header) while any other can
    still give; then, only where even that does not fit, below it (the word is folded)."""
    columns = range(len(headers))
    natural = [
        max(cell_width(cell) for cell in (headers[c], *(row[c] for row in rows))) for c in columns
    ]
    floor = [
        max(
            cell_width(headers[c]),
            max((cell_width(word) for row in rows for word in row[c].split()), default=0),
        )
        for c in columns
    ]
    room = max(width - _PER_COLUMN * len(headers) - 1, len(headers))
    widths = list(natural)
    while sum(widths) > room:
        narrowable = [c for c in columns if widths[c] > floor[c]]
        if not narrowable:
            narrowable = [c for c in columns if widths[c] > 1]
            if not narrowable:
                break
        widest = max(narrowable, key=lambda c: widths[c])
        widths[widest] -= 1
    return widths


def _lines(cell: str, width: int) -> list[str]:
    """``cell`` broken at spaces into lines of at most ``width`` cells; a word wider than that
    starts a line of its own and is folded (as rich's overflow="fold" does)."""
    lines: list[str] = []
    line, used = "", 0
    for word in cell.split():
        size = cell_width(word)
        if line and used + 1 + size <= width:
            line, used = f"{line} {word}", used + 1 + size
            continue
        if line:
            lines.append(line)
        pieces = list(_folded(word, width))
        lines.extend(pieces[:-1])
        line, used = pieces[-1], cell_width(pieces[-1])
    lines.append(line)
    return lines


def _folded(word: str, width: int) -> Iterator[str]:
    """``word`` cut into pieces of at most ``width`` cells (one, where it fits)."""
    piece, used = "", 0
    for char in word:
        size = char_width(char)
        if piece and used + size > width:
            yield piece
            piece, used = "", 0
        piece, used = piece + char, used + size
    yield piece


def _padded(text: str, width: int) -> str:
    return text + " " * max(width - cell_width(text), 0)


def render_table(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], width: int
) -> str:
    """The table as text (a line break after each line), ``title`` centred above it."""
    widths = _widths(headers, rows, width)

    def rule(left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * (w + 2) for w in widths) + right

    def row_lines(cells: Sequence[str], side: str) -> list[str]:
        wrapped = [_lines(cell, w) for cell, w in zip(cells, widths, strict=True)]
        height = max(len(lines) for lines in wrapped)
        return [
            side
            + side.join(
                " " + _padded(lines[i] if i < len(lines) else "", w) + " "
                for lines, w in zip(wrapped, widths, strict=True)
            )
            + side
            for i in range(height)
        ]

    top = rule("┏", "━", "┳", "┓")
    centred = " " * max((len(top) - len(title)) // 2, 0) + title  # rich's: the odd space right
    out = [centred, top, *row_lines(headers, "┃")]
    out.append(rule("┡", "━", "╇", "┩"))
    for row in rows:
        out.extend(row_lines(row, "│"))
    out.append(rule("└", "─", "┴", "┘"))
    return "".join(line + "\n" for line in out)
