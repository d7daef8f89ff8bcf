"""nvcc: find the real binary behind wrappers and links, and read what it says about itself.

On some machines ``nvcc`` on PATH is a two-line shell script (``exec /opt/cuda-12.4/bin/nvcc
"$@"``) or a symlink from ``/usr/bin``; torch then guesses ``CUDA_HOME`` as the directory
above the wrapper and misses the headers. :func:`resolve_nvcc` follows both to the binary, and
:func:`toolkit_root` names the directory a build should use as ``CUDA_HOME``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .._lazy_re import lazy_compile
from ..versions import ComputeCapability, CudaVersion
from ._files import is_executable_file, read_text

__all__ = [
    "parse_gpu_arch_list",
    "parse_nvcc_version",
    "resolve_nvcc",
    "toolkit_root",
]

_RELEASE = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_RELEASE_SHORT = lazy_compile(r"release (\d+\.\d+)")
_ARCH = re.compile(r"^\s*compute_(\d+)([af]?)\s*$", re.MULTILINE)
#: The words of a script line that a path can be part of: runs between blanks, quotes and ;|&().
_SCRIPT_WORD = lazy_compile(r"""[^\s"';|&()]+""")
_VARIABLE = lazy_compile(r"\$\{?(\w+)\}?")
_MAX_WRAPPER_DEPTH = 5
_SCRIPT_LIMIT = 64 * 1024


def parse_nvcc_version(text: str) -> tuple[CudaVersion, str | None] | None:
    """``Cuda compilation tools, release 13.0, V13.0.88`` → (13.0, "13.0.88")."""
    match = _RELEASE.search(text)
    if match is not None:
        return CudaVersion.parse(match.group(1)), match.group(2)
    short = _RELEASE_SHORT.search(text)
    if short is not None:
        return CudaVersion.parse(short.group(1)), None
    return None


def parse_gpu_arch_list(text: str) -> tuple[ComputeCapability, ...]:
    """``nvcc --list-gpu-arch``: one ``compute_XY`` per line → the capabilities, ascending."""
    found = {
        ComputeCapability(int(digits[:-1]), int(digits[-1]), suffix)
        for digits, suffix in _ARCH.findall(text)
        if len(digits) >= 2
    }
    return tuple(sorted(found))


def _expand_home(path: str, environ: Mapping[str, str]) -> str:
    """``~/x`` with *environ*'s HOME, as the wrapper's shell would see it; ``~user/x`` as usual."""
    head, separator, tail = path.partition("/")
    home = environ.get("HOME")
    if head == "~" and home:
        return home.rstrip("/") + separator + tail
    return os.path.expanduser(path)


def _expand(text: str, environ: Mapping[str, str], script_dir: str) -> str | None:
    unknown = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal unknown
        value = environ.get(match.group(1))
        if value is None:
            unknown = True
            return ""
        return value

    expanded = _VARIABLE.sub(substitute, text)
    if unknown:
        return None
    if expanded.startswith("~"):
        expanded = _expand_home(expanded, environ)
    if not os.path.isabs(expanded):
        expanded = os.path.join(script_dir, expanded)
    return os.path.normpath(expanded)


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _path_start(line: str, at: int, end: int) -> bool:
    """Whether a path to nvcc can start at ``at``: ``/``, ``~``, ``.``, ``$NAME`` or ``${NAME``,
    ending before the word's closing ``/nvcc`` (which starts at ``end``)."""
    first = line[at]
    if first in "/~.":
        return at + 1 <= end
    if first != "$":
        return False
    name = at + 2 if line[at + 1 : at + 2] == "{" else at + 1
    return name < end and _word_char(line[name])


def script_nvcc_paths(line: str) -> list[str]:
    """The paths to an nvcc in one script line, possibly quoted or built from variables: each word
    that ends with ``/nvcc`` (not called as ``/nvcc(``), from its start (after a blank, a quote or
    the line's start) or from just after an ``=`` in it (``NVCC=/opt/cuda/bin/nvcc``), whichever
    comes first and starts like a path. One pass over the line: the regular expression this
    replaces,
    ``(?:^|[\\s"'=])((?:\\$\\{?\\w+\\}?|~|\\.{1,2}|/)[^\\s"';|&()]*/nvcc)(?=$|[\\s"';|&)])``, found
    the same paths but rescanned the word from every ``=`` in it (quadratic)."""
    found: list[str] = []
    for word in _SCRIPT_WORD.finditer(line):
        start, end = word.span()
        if not word.group().endswith("/nvcc") or line[end : end + 1] == "(":
            continue
        suffix = end - len("/nvcc")
        starts = (
            [start] if start == 0 or line[start - 1].isspace() or line[start - 1] in "\"'" else []
        )
        at = line.find("=", start, end)
        while at != -1:
            starts.append(at + 1)
            at = line.find("=", at + 1, end)
        first = next((at for at in starts if at < end and _path_start(line, at, suffix)), None)
        if first is not None:
            found.append(line[first:end])
    return found


def _script_target(script: str, environ: Mapping[str, str]) -> str | None:
    """The other nvcc a wrapper script runs, preferring lines that ``exec`` it."""
    if read_text(script, limit=2) != "#!":  # a binary nvcc: not read further
        return None
    text = read_text(script, limit=_SCRIPT_LIMIT) or ""
    lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    lines.sort(key=lambda line: "exec" not in line)  # stable: exec lines first, else in order
    here = os.path.realpath(script)
    for line in lines:
        for candidate in script_nvcc_paths(line):
            path = _expand(candidate, environ, os.path.dirname(script))
            if path and is_executable_file(path) and os.path.realpath(path) != here:
                return path
    return None


def resolve_nvcc(path: str, environ: Mapping[str, str]) -> str:
    """The real nvcc binary behind *path*: symlinks resolved, wrapper scripts followed."""
    current = os.path.realpath(path)
    for _ in range(_MAX_WRAPPER_DEPTH):
        try:
            target = _script_target(current, environ)
        except OSError:
            return current
        if target is None:
            return current
        current = os.path.realpath(target)
    return current


def toolkit_root(real_nvcc: str) -> str:
    """The CUDA_HOME for a real nvcc: ``<root>/bin/nvcc``, or
    ``<prefix>/targets/<triple>/bin/nvcc``."""
    root = os.path.dirname(os.path.dirname(real_nvcc))
    parent = os.path.dirname(root)
    if os.path.basename(parent) == "targets":
        return os.path.dirname(parent)
    return root
