"""Words of a line split as :func:`shlex.split` splits them, in linear time.

pip splits the options of a requirements-file line with :func:`shlex.split`, whose tokenizer grows
each word one character at a time by concatenation: quadratic, so one long word (a 3 MB
``--index-url`` value) takes minutes. :func:`split_words` gives the same words (POSIX rules,
whitespace ``' \\t\\r\\n'``, no comments) with a handful of regular-expression passes that each
look at every character a bounded number of times.
"""

from __future__ import annotations

import re

__all__ = ["split_words"]

#: One piece of a word: unquoted characters and backslash escapes, a single-quoted string, or a
#: double-quoted string. Each alternative starts with a different character, and each is written
#: so that its text can be matched one way only: an unclosed quote fails after one pass.
_PIECE = r"""(?:[^ \t\r\n'"\\]|\\[\s\S])+|'[^']*'|"[^"\\]*(?:\\[\s\S][^"\\]*)*""" '"'
_TOKEN = re.compile(rf"(?P<word>(?:{_PIECE})+)|(?P<space>[ \t\r\n]+)")
_PIECES = re.compile(_PIECE)
_QUOTING = re.compile(r"""['"\\]""")
_SPACE = re.compile(r"[ \t\r\n]+")
#: Inside double quotes only ``\\`` and ``\"`` are escapes; any other backslash stays.
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\([\\"])')
#: Outside quotes a backslash escapes any character.
_ESCAPE = re.compile(r"\\([\s\S])")


def _unquote(word: str) -> str:
    parts: list[str] = []
    for piece in _PIECES.finditer(word):
        text = piece.group()
        if text[0] == "'":
            parts.append(text[1:-1])
        elif text[0] == '"':
            parts.append(_DOUBLE_QUOTED_ESCAPE.sub(r"\1", text[1:-1]))
        else:
            parts.append(_ESCAPE.sub(r"\1", text))
    return "".join(parts)


def split_words(text: str) -> list[str]:
    """``shlex.split(text)``: the same words, and a ``ValueError`` for an unclosed quote or a
    trailing backslash."""
    if _QUOTING.search(text) is None:
        return [word for word in _SPACE.split(text) if word]
    words: list[str] = []
    at, end = 0, len(text)
    while at < end:
        token = _TOKEN.match(text, at)
        if token is None:
            # What no piece can start with: an unclosed quote, or a backslash at the very end.
            raise ValueError(
                "No escaped character" if text[at:] == "\\" else "No closing quotation"
            )
        at = token.end()
        word = token.group("word")
        if word is not None:
            words.append(_unquote(word) if _QUOTING.search(word) else word)
    return words
