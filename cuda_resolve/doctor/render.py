"""Rich rendering of an Environment and of doctor findings."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..environment import Environment
from .findings import Finding

__all__ = ["render_environment", "render_findings"]

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "error": "bold red"}


def _environment_rows(env: Environment) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    machine = env.machine
    rows.append(("machine", f"{machine.os} {machine.arch}" + (f", glibc {machine.glibc}" if machine.glibc else "")))
    py = env.python
    kind = "conda env" if py.is_conda else "venv" if py.is_venv else "interpreter"
    rows.append(("python", f"{py.version} ({py.abi_tag}, {kind})" + (f" {py.executable}" if py.executable else "")))
    if env.driver:
        rows.append(("driver", f"{env.driver.version}, supports CUDA <= {env.driver.cuda}"))
    else:
        rows.append(("driver", "none found"))
    for gpu in env.gpus:
        memory = f", {gpu.memory_mib // 1024} GiB" if gpu.memory_mib else ""
        rows.append((f"gpu {gpu.index}", f"{gpu.name} (compute capability {gpu.compute_capability}{memory})"))
    for toolkit in env.toolkits:
        where = f"{toolkit.root} via {toolkit.found_via}" if toolkit.root else toolkit.found_via
        rows.append(("toolkit", f"CUDA {toolkit.release or toolkit.version} at {where}"))
    if not env.toolkits:
        rows.append(("toolkit", "no nvcc found"))
    compiler = env.compiler
    if compiler.gcc or compiler.clang:
        parts = [f"gcc {compiler.gcc}" if compiler.gcc else "", f"clang {compiler.clang}" if compiler.clang else ""]
        if compiler.nvcc_host:
            parts.append(f"nvcc host: {compiler.nvcc_host}")
        rows.append(("compiler", ", ".join(p for p in parts if p)))
    torch = env.torch
    if torch:
        detail = f"CUDA {torch.cuda}" if torch.cuda else torch.build
        rows.append(("torch", f"{torch.version} ({detail})" + (f" at {torch.location}" if torch.location else "")))
    else:
        rows.append(("torch", "not installed"))
    if env.scheduler.in_slurm_job:
        rows.append(("scheduler", f"Slurm job {env.scheduler.slurm_job_id}"))
    return rows


def render_environment(env: Environment, console: Console) -> None:
    # Values are plain Text: paths and GPU names may hold "[...]", which rich reads as markup.
    title = "This machine" if env.source == "detected" else f"Profile {env.source}"
    table = Table(title=Text(title), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("found", overflow="fold")  # fold long paths, never cut them to "…"
    for what, found in _environment_rows(env):
        table.add_row(Text(what), Text(found))
    console.print(table)


def render_findings(findings: list[Finding], console: Console) -> None:
    table = Table(title="Checks", show_lines=True)
    table.add_column("status")
    table.add_column("check")
    table.add_column("found", overflow="fold")
    table.add_column("fix", overflow="fold")  # a fix cut to "export CUDA_HOME=/usr/loca…" is useless
    for finding in findings:
        style = _STYLE[finding.status]
        table.add_row(Text(finding.status, style=style), Text(finding.title), Text(finding.found), Text(finding.fix or ""))
    console.print(table)
