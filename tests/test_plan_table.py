"""The plan's table without rich (cli/_table.py, issue 28): rich's heavy-head box, cells wrapped
at spaces and never cut short, widths from the terminal as rich takes them. rich's own layout
of the same table is the reference where both fit."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cuda_resolve.cli._table import cell_width, render_table, stdout_width

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


def test_wide_characters_take_two_cells_as_rich_counts_them() -> None:
    rows = [("名前パッケージ", "1.0", "", "wheel", "ａｂｃ full-width and 漢字 words")]
    assert render_table("Plan", HEADERS, rows, 80) == _rich(rows, 80)
    # Narrower, the columns are narrowed (not as rich would, exactly): every line still has the
    # table's width in cells, so the rules line up.
    lines = render_table("Plan", HEADERS, rows, 60).splitlines()[1:]
    assert {cell_width(line) for line in lines} == {60}


def test_a_plan_cell_shows_control_characters_and_never_a_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass-through requirement is a row of its own: a newline or tab in it is shown as an
    escape (not a second row, not a blank), and a URL's password is *** wherever the table
    breaks the URL (rich's table, before, showed a password cut across two lines)."""
    from cuda_resolve.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    secret = "s3cretpassw0rd"
    url = f"https://user:{secret}@example.com/{'very/' * 8}foo-1.0-py3-none-any.whl"
    assert main(["plan", f"foo @ {url}", "--profile", str(PROFILE)]) == 0
    out = capsys.readouterr().out
    assert secret not in out.replace("│", "").replace("\n", "").replace(" ", "")
    assert "user:***@example.com" in out
    table = render_table("Plan", HEADERS, [("a\\tb", "1", "", "pip", "x")], 80)
    assert "a\\tb" in table


PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"


def test_items_from_one_place_share_its_number_and_a_profiles_interpreter_note_is_not_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch and torchvision from one index are [1] and [1], listed once (they were [1] and [2]
    with the same URL twice); ``--profile`` describes another machine, so the target-interpreter
    note saved in it is not printed as this one's (user walk 2026-12-05 F9)."""
    from cuda_resolve.cli import main

    # As detect --save-profile writes it: the note of the machine it was saved on.
    saved = (PROFILE.parent / "cpu-torch-on-a100.toml").read_text(encoding="utf-8")
    profile = tmp_path / "a100.toml"
    note = 'notes = ["target interpreter: /srv/other/bin/python (from --python)"]\n'
    profile.write_text(note + saved, encoding="utf-8")
    words = ["plan", "torch", "torchvision", "--allow-torch-change", "--profile", str(profile)]
    assert main(words) == 0
    captured = capsys.readouterr()
    rows = [line for line in captured.out.splitlines() if line.startswith("│ torch")]
    assert [row.split("│")[-2].strip() for row in rows] == ["[1]", "[1]"]
    assert [line for line in captured.out.splitlines() if line.startswith("  [")] == [
        "  [1] https://download.pytorch.org/whl/cu126"
    ]
    assert "target interpreter" not in captured.err
