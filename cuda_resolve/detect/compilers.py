"""Host compilers: gcc, g++, clang, other installed gcc-N, and the one nvcc would call.

Versions come from ``--version`` rather than ``-dumpfullversion``: one invocation that works
for gcc, g++, clang, ``cc`` and conda's cross-named compilers alike, and whose first line also
tells clang from gcc (``cc`` is either). Outputs are cached per binary (see :mod:`._cache`).

The host compiler for a torch extension build, in the order it wins:

1. ``CC``: ``torch.utils.cpp_extension`` passes it to nvcc as ``-ccbin``, and a command-line
   ``-ccbin`` beats nvcc's own variable;
2. ``NVCC_CCBIN``: read by nvcc itself (conda's ``cuda-nvcc`` activation sets it);
3. ``CUDAHOSTCXX``: what CMake-based builds pass as ``-ccbin``;
4. else nvcc's default, ``g++`` (or ``c++``) on PATH.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ..environment import Compiler
from ._cache import ProbeCache
from ._files import is_executable_file, path_dirs, which
from ._run import run

__all__ = ["HOST_COMPILER_VARIABLES", "find_compilers", "parse_compiler_version"]

HOST_COMPILER_VARIABLES = ("CC", "NVCC_CCBIN", "CUDAHOSTCXX")

_CLANG = re.compile(r"clang version (\d+\.\d+(?:\.\d+)?)")
_DOTTED = re.compile(r"(?<![\w.-])(\d+\.\d+(?:\.\d+)?)(?![\w.])")
#: ``gcc-12``, ``g++-11.2``: a versioned GCC, as a whole line of a folder's names joined.
_VERSIONED_GCC_LINE = re.compile(r"^(?:gcc|g\+\+)-\d+(?:\.\d+)*$", re.MULTILINE)


def parse_compiler_version(text: str) -> tuple[str, str] | None:
    """First line of ``--version`` → ("gcc" | "clang", version); ``None`` if not a compiler
    banner."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    clang = _CLANG.search(first)
    if clang is not None:
        return "clang", clang.group(1)
    # "gcc (Debian 12.2.0-14) 12.2.0", "g++ (GCC) 8.5.0 20210514 (Red Hat 8.5.0-4)"
    # Only up to the last ")": past it no "(" can close, and trying each would be quadratic.
    closed = first.rfind(")") + 1
    without_vendor = re.sub(r"\([^)]*\)", " ", first[:closed]) + first[closed:]
    match = _DOTTED.search(without_vendor)
    if match is None or "Copyright" in first:
        return None
    return "gcc", match.group(1)


def _version(
    executable: str | None, *, environ: Mapping[str, str], timeout: float, cache: ProbeCache
) -> tuple[str, str] | None:
    if executable is None:
        return None

    def compute() -> str | None:
        ran = run([executable, "--version"], timeout=timeout, environ=environ)
        return ran.stdout if ran is not None and ran.ok else None

    output = cache.command_output(executable, ("--version",), compute)
    return parse_compiler_version(output) if output else None


def _resolve_program(value: str, environ: Mapping[str, str]) -> str | None:
    """``CC=gcc-12``, ``CC=/opt/bin/gcc`` or ``NVCC_CCBIN=/usr/bin`` (nvcc accepts a directory)."""
    program = value.split()[0] if value.split() else ""
    if not program:
        return None
    if os.path.isdir(program):
        for name in ("g++", "c++", "gcc", "clang++"):
            candidate = os.path.join(program, name)
            if is_executable_file(candidate):
                return candidate
        return None
    if os.sep in program:
        return program if is_executable_file(program) else None
    return which(program, environ)


def _other_gcc(environ: Mapping[str, str]) -> list[str]:
    """``gcc-11``, ``g++-12`` ... on PATH (first of each name wins, as the shell would pick)."""
    found: dict[str, str] = {}
    for directory in path_dirs(environ):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        # One search of the folder's names joined, not a test of each: /usr/bin holds a thousand
        # or more, and a loop over them cost every command 1.5 ms (issue 28).
        for name in _VERSIONED_GCC_LINE.findall("\n".join(names)):
            if name not in found:
                path = os.path.join(directory, name)
                if is_executable_file(path):
                    found[name] = path
    return [found[name] for name in sorted(found)]


def find_compilers(*, environ: Mapping[str, str], timeout: float, cache: ProbeCache) -> Compiler:
    host_from_env = next(
        (environ[name] for name in HOST_COMPILER_VARIABLES if environ.get(name, "").strip()), None
    )
    host = (
        _resolve_program(host_from_env, environ)
        if host_from_env is not None
        else which("g++", environ) or which("c++", environ)
    )
    programs = {
        "gcc": which("gcc", environ),
        "gxx": which("g++", environ),
        "clang": which("clang", environ),
        "host": host,
    }
    others = _other_gcc(environ)

    # Sequential on purpose: answers are cached per binary, so after the first run this is a
    # few stat calls, cheaper than starting threads; the first run overlaps the driver probes.
    versions = {
        key: _version(path, environ=environ, timeout=timeout, cache=cache)
        for key, path in programs.items()
    }
    other_versions = [
        _version(path, environ=environ, timeout=timeout, cache=cache) for path in others
    ]
    default_gcc = versions["gcc"][1] if versions["gcc"] else None
    other_gcc = sorted(
        {
            found[1]
            for found in other_versions
            if found and found[0] == "gcc" and found[1] != default_gcc
        },
        key=lambda text: tuple(int(part) for part in text.split(".")),
    )

    def kind_version(key: str, kind: str) -> str | None:
        found = versions[key]
        return found[1] if found and found[0] == kind else None

    host_version = versions["host"]
    return Compiler(
        gcc=kind_version("gcc", "gcc"),
        gxx=kind_version("gxx", "gcc"),
        clang=kind_version("clang", "clang"),
        nvcc_host=host if host is not None else host_from_env,
        nvcc_host_version=host_version[1] if host_version else None,
        other_gcc=tuple(other_gcc),
    )
