"""Plain-text rendering of an Environment and of doctor findings, readable at 80 columns.

Each fact is one entry: a label (``torch``, ``warn``) and its text, wrapped at the console's
width (80 in a pipe) with a hanging indent, so a continuation line starts under the text and
never at column 0. Words are never split: a path, a URL or a command stays whole, and a token
longer than the line keeps a line of its own rather than being cut, so that it can be copied.
Colour (the status word, the section titles) is added only where the console supports it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .._wrap import hanging
from ..environment import Environment, Gpu
from .findings import Finding

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["environment_lines", "finding_lines", "render_environment", "render_findings"]

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "error": "bold red"}
#: Findings: ``warn   title: found``; continuation and ``fix:`` lines start under the title.
_STATUS_WIDTH = 7
#: The narrowest width wrapped to (a console that reports less is not believed).
_MIN_WIDTH = 40
#: "131 ms", "140 GiB": a number keeps its unit on its line (glued by a character that is not
#: whitespace to the wrapper, and never in a report).
_UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:ms|s|GiB|MiB)\b)")
_GLUE = "\x1f"
#: A command to paste stays on one line, however long: a `quoted command` and an
#: ``export NAME=VALUE ...`` run (wrapped, the shell would run ``export`` alone).
_COMMAND = re.compile(r"`[^`]+`|\bexport(?: [A-Za-z_][A-Za-z0-9_]*=\S+)+")


def _wrap(text: str, *, first: str, rest: str, width: int) -> list[str]:
    glued = _UNIT_SPACE.sub(_GLUE, text.replace(_GLUE, " "))
    glued = _COMMAND.sub(lambda command: command.group().replace(" ", _GLUE), glued)
    wrapped = hanging(glued, first=first, rest=rest, width=max(width, _MIN_WIDTH))
    return wrapped.replace(_GLUE, " ").splitlines()


def _gpu_rows(gpus: tuple[Gpu, ...]) -> list[tuple[str, str]]:
    """One row per run of identical GPUs with consecutive indices: an 8-GPU node is one line."""
    rows: list[tuple[str, str]] = []
    run: list[Gpu] = []

    def describe(gpu: Gpu) -> str:
        memory = f", {gpu.memory_mib // 1024} GiB" if gpu.memory_mib else ""
        return f"{gpu.name} (compute capability {gpu.compute_capability}{memory})"

    def flush() -> None:
        if len(run) == 1:
            rows.append((f"gpu {run[0].index}", describe(run[0])))
        elif run:
            rows.append((f"gpu {run[0].index}-{run[-1].index}", f"{len(run)} x {describe(run[0])}"))
        run.clear()

    for gpu in gpus:
        if run and (describe(gpu) != describe(run[-1]) or gpu.index != run[-1].index + 1):
            flush()
        run.append(gpu)
    flush()
    return rows


def _environment_rows(env: Environment) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    machine = env.machine
    rows.append(
        (
            "machine",
            f"{machine.os} {machine.arch}" + (f", glibc {machine.glibc}" if machine.glibc else ""),
        )
    )
    py = env.python
    kind = "conda env" if py.is_conda else "venv" if py.is_venv else "interpreter"
    rows.append(
        (
            "python",
            f"{py.version} ({py.abi_tag}, {kind})" + (f" {py.executable}" if py.executable else ""),
        )
    )
    if env.driver:
        rows.append(("driver", f"{env.driver.version}, supports CUDA <= {env.driver.cuda}"))
    else:
        rows.append(("driver", "none found"))
    rows.extend(_gpu_rows(env.gpus))
    for toolkit in env.toolkits:
        where = f"{toolkit.root} via {toolkit.found_via}" if toolkit.root else toolkit.found_via
        rows.append(("toolkit", f"CUDA {toolkit.release or toolkit.version} at {where}"))
    if not env.toolkits:
        rows.append(("toolkit", "no nvcc found"))
    compiler = env.compiler
    if compiler.gcc or compiler.clang:
        parts = [
            f"gcc {compiler.gcc}" if compiler.gcc else "",
            f"clang {compiler.clang}" if compiler.clang else "",
        ]
        if compiler.nvcc_host:
            parts.append(f"nvcc host: {compiler.nvcc_host}")
        rows.append(("compiler", ", ".join(p for p in parts if p)))
    torch = env.torch
    if torch:
        detail = f"CUDA {torch.cuda}" if torch.cuda else torch.build
        rows.append(
            (
                "torch",
                f"{torch.version} ({detail})" + (f" at {torch.location}" if torch.location else ""),
            )
        )
    else:
        rows.append(("torch", "not installed"))
    if env.scheduler.in_slurm_job:
        rows.append(("scheduler", f"Slurm job {env.scheduler.slurm_job_id}"))
    return rows


def environment_lines(env: Environment, width: int) -> list[str]:
    """The environment as ``label  text`` lines (the title not included)."""
    rows = _environment_rows(env)
    indent = " " * (max(len(what) for what, _ in rows) + 2)
    lines: list[str] = []
    for what, found in rows:
        first = what.ljust(len(indent))
        lines.extend(_wrap(found, first=first, rest=indent, width=width))
    return lines


def finding_lines(finding: Finding, width: int) -> list[str]:
    """``status title: found``, then ``fix: ...`` when there is one; continuations indented."""
    indent = " " * _STATUS_WIDTH
    text = f"{finding.title}: {finding.found}"
    lines = _wrap(text, first=finding.status.ljust(_STATUS_WIDTH), rest=indent, width=width)
    if finding.fix:
        lines += _wrap(finding.fix, first=indent + "fix: ", rest=indent + "     ", width=width)
    return lines


def _title(text: str, console: Console) -> None:
    from rich.text import Text

    console.print(Text(text, style="bold"), soft_wrap=True, highlight=False)


def render_environment(env: Environment, console: Console) -> None:
    # Lines are printed as plain Text: paths and GPU names may hold "[...]", which rich reads
    # as markup; soft_wrap: they are wrapped here already, and rich must not cut them again.
    from rich.text import Text

    _title("This machine" if env.source == "detected" else f"Profile {env.source}", console)
    for line in environment_lines(env, int(console.width)):
        console.print(Text(line), soft_wrap=True, highlight=False)


def render_findings(findings: list[Finding], console: Console, *, title: str = "Checks") -> None:
    from rich.text import Text

    _title(title, console)
    for finding in findings:
        for number, line in enumerate(finding_lines(finding, int(console.width))):
            text = Text(line)
            if number == 0:
                text.stylize(_STYLE.get(finding.status, ""), 0, len(finding.status))
            console.print(text, soft_wrap=True, highlight=False)
