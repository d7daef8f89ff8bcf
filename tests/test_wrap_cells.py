"""Wrapped lines fit the terminal in cells, not characters: a CJK character takes two cells, so
a line of Chinese text wrapped by character count ran past the edge (user walk 2026-12-05: one of
plan's "Why:" lines was 87 cells wide at 80 columns). ASCII text wraps exactly as before."""

from __future__ import annotations

import textwrap

from hypothesis import given
from hypothesis import strategies as st

from cuda_resolve._wrap import cell_width, hanging

_WORDS = st.lists(
    st.text(alphabet="ab数据集中文é", min_size=1, max_size=12), min_size=0, max_size=30
)


def test_cjk_words_wrap_at_the_cell_width() -> None:
    text = "源码 位于 /home/研究组/点云/Pointnet2_PyTorch 构建 使用 nvcc 13.0 与 torch 2.11.0 " * 3
    wrapped = hanging(text, first="  - ", rest="    ", width=40).splitlines()
    assert max(cell_width(line) for line in wrapped) <= 40, wrapped
    assert " ".join(wrapped).split() == ["-", *text.split()]
    assert all(line.startswith("    ") for line in wrapped[1:])


@given(_WORDS, st.integers(min_value=10, max_value=90))
def test_no_line_is_wider_than_the_terminal_unless_it_is_one_word(
    words: list[str], width: int
) -> None:
    text = " ".join(words)
    wrapped = hanging(text, first="  - ", rest="    ", width=width)
    limit = max(width, len("  - ") + 20)
    for line in wrapped.splitlines():
        assert cell_width(line) <= limit or len(line.split()) == 1 + line.startswith("  - ")
    assert wrapped.split() == ["-", *text.split()] if text.split() else wrapped == ""


@given(st.lists(st.text(alphabet="abc-/.", min_size=1, max_size=15), max_size=30))
def test_ascii_text_wraps_as_textwrap_does(words: list[str]) -> None:
    text = " ".join(words)
    assert hanging(text, first="  - ", rest="    ", width=30) == textwrap.fill(
        text,
        width=30,
        initial_indent="  - ",
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )
