"""The plan's table without rich (cli/_table.py, issue 28): rich's heavy-head box, cells wrapped
at spaces and never cut short, widths from the terminal as rich takes them. rich's own layout
of the same table is the reference where both fit."""

from __future__ import annotations

import io

import pytest

from cuda_resolve.cli._table import render_table, stdout_width

HEADERS = ("package", "version", "variant", "kind", "from")
ROWS = [
    ("torch", "2.15.0+cu132", "cu132", "installed", "already installed"),
    ("torchvision", "0.29.2", "cu132", "wheel", "[1]"),
    (
        "kaolin",
        "0.18.0",
        "cu132",
        "build",
        "source build, recipe kaolin-master-d52da9f, nvcc 13.0, archs 9.0",
    ),
]


def _rich(rows: list[tuple[str, ...]], width: int) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    out = io.StringIO()
    table = Table(title="Plan")
    for column in HEADERS:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    Console(file=out, width=width, highlight=False, color_system=None).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


@pytest.mark.parametrize("width", [80, 100, 200])
def test_the_table_is_riches_where_its_cells_fit_at_natural_or_word_width(width: int) -> None:
    assert render_table("Plan", HEADERS, ROWS, width) == _rich(ROWS, width)


def test_every_line_fits_the_width_and_every_word_is_whole() -> None:
    text = render_table("Plan", HEADERS, ROWS, 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    words = " ".join(ROWS[2][4].split())
    cell = " ".join(
        line.split("│")[-2].strip() for line in text.splitlines() if line.startswith("│")
    )
    assert words in cell  # the cell's words, in order, none cut or dropped


def test_a_word_wider_than_any_column_can_be_is_folded_not_dropped() -> None:
    long = "x" * 150
    text = render_table("Plan", HEADERS, [("p", "1", "", "wheel", long)], 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    folded = "".join(
        line.split("│")[-2].strip() for line in text.splitlines() if line.startswith("│")
    )
    assert folded == long and "…" not in text


@pytest.mark.parametrize(
    ("columns", "width"), [("123", 123), ("", 80), ("0", 80), ("wide", 80), (" 90 ", 90)]
)
def test_the_width_is_columns_where_it_is_a_number_else_80_when_piped(
    monkeypatch: pytest.MonkeyPatch, columns: str, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert stdout_width() == width  # pytest's stdout is not a terminal
