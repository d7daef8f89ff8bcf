"""Patterns compiled when first used (cuda_resolve._lazy_re, issue 28): the same answers as
``re.compile``'s, compiled once, and not at all by a command that never applies them."""

from __future__ import annotations

import re
import subprocess
import sys

from cuda_resolve._lazy_re import lazy_compile


def test_a_lazy_pattern_answers_as_re_compile_does_and_compiles_once() -> None:
    lazy = lazy_compile(r"(?P<word>[a-z]+)-(\d+)", re.IGNORECASE)
    assert lazy._compiled is None  # type: ignore[attr-defined]
    plain = re.compile(r"(?P<word>[a-z]+)-(\d+)", re.IGNORECASE)
    text = "Torch-2 and CUDA-13, kaolin-0"
    assert lazy.sub(r"\2", text) == plain.sub(r"\2", text)
    compiled = lazy._compiled  # type: ignore[attr-defined]
    assert compiled is not None
    assert [m.groupdict() for m in lazy.finditer(text)] == [
        m.groupdict() for m in plain.finditer(text)
    ]
    assert lazy.fullmatch("abc-1") is not None and lazy.flags == plain.flags
    assert lazy._compiled is compiled  # type: ignore[attr-defined]  # not compiled again
    assert "lazy_compile" in repr(lazy)


def test_doctors_modules_compile_none_of_their_lazy_patterns_at_import() -> None:
    """The modules doctor imports hold patterns doctor --json never applies (redaction's URL
    rules, the printable escapes, the extension scan's): importing them compiles none."""
    code = """
import importlib
from cuda_resolve._lazy_re import _LazyPattern
names = ["cuda_resolve._printable", "cuda_resolve.redaction", "cuda_resolve.detect.extensions",
         "cuda_resolve.detect.nvcc", "cuda_resolve.doctor.checks"]
patterns = [(name, attribute, value) for name in names
            for attribute, value in vars(importlib.import_module(name)).items()
            if isinstance(value, _LazyPattern)]
print(len(patterns), [f"{n}.{a}" for n, a, value in patterns if value._compiled is not None])
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, compiled = done.stdout.split(" ", 1)
    assert int(count) >= 10 and compiled.strip() == "[]", done.stdout
