"""Which environment a command reports on or changes: the user's, never a tool-only one.

One rule for ``detect``, ``doctor``, ``plan``, ``build``, ``install`` and ``cuda-pip`` (RULE below,
also the ``--python`` help): ``.venv/bin/cuda-pip`` installs into that venv as ``.venv/bin/pip``
does, while a tool-only environment (pipx, ``uv tool``) is never a target. Each command says
which interpreter it used and which rule chose it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from .._frozen import frozen
from ..errors import UsageError

__all__ = [
    "RULE",
    "TargetChoice",
    "choose_target",
    "is_base_interpreter",
    "is_running_interpreter",
    "is_tool_environment",
]

RULE = (
    "--python PATH; else the virtual environment the command runs from (not a pipx or uv tool "
    "environment); else $VIRTUAL_ENV; else $CONDA_PREFIX; else python3 on PATH"
)

RUNNING = "the venv it runs from"


@frozen
class TargetChoice:
    """The interpreter installs go to, and which rule chose it."""

    python: str  # the interpreter (absolute where it was found on PATH)
    how: str  # "--python", RUNNING, "VIRTUAL_ENV", "CONDA_PREFIX", "python3 on PATH"

    def describe(self) -> str:
        return f"{self.python} (from {self.how})"


def _interpreter_in(prefix: str) -> str | None:
    for name in ("bin/python", "bin/python3", "python.exe", "Scripts/python.exe"):
        candidate = os.path.join(prefix, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _under(path: str, folder: str) -> bool:
    """By the path as written and as resolved: a tool's venv may be reached through a link."""
    inside = Path(folder).expanduser()
    try:
        return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(inside)) or Path(
            path
        ).resolve().is_relative_to(inside.resolve())
    except (OSError, ValueError):
        return False


def is_tool_environment(prefix: str, environ: Mapping[str, str]) -> bool:
    """Whether ``prefix`` holds a tool installed by pipx or ``uv tool``: the tool's own, no
    user's project lives there."""
    home = environ.get("HOME") or os.path.expanduser("~")
    data = environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    pipx_homes = [environ["PIPX_HOME"]] if environ.get("PIPX_HOME") else []
    pipx_homes += [os.path.join(home, ".local", "pipx"), os.path.join(data, "pipx")]
    tool_dirs = [os.path.join(pipx, "venvs") for pipx in pipx_homes]
    tool_dirs += [environ["UV_TOOL_DIR"]] if environ.get("UV_TOOL_DIR") else []
    tool_dirs.append(os.path.join(data, "uv", "tools"))
    if any(_under(prefix, folder) for folder in tool_dirs):
        return True
    # Moved homes: the files pipx and uv write into each tool's environment.
    return any(
        os.path.isfile(os.path.join(prefix, marker))
        for marker in ("pipx_metadata.json", "uv-receipt.toml")
    )


def _which(program: str, path: str | None = None) -> str | None:
    """``shutil.which``, imported where a program is looked up on PATH: shutil imports bz2 and
    lzma, 2 ms that a command given ``--python PATH`` does not need (issue 28)."""
    import shutil

    return shutil.which(program, path=path)


def is_base_interpreter(python: str) -> bool:
    """Whether ``python`` is an interpreter's own installation: not a venv, not a conda env."""
    found = python if os.sep in python else _which(python)
    if found is None:
        return False
    prefix = Path(os.path.abspath(found)).parent.parent  # <prefix>/bin/python
    return not ((prefix / "pyvenv.cfg").is_file() or (prefix / "conda-meta").is_dir())


def choose_target(
    explicit: str | None,
    environ: Mapping[str, str] | None = None,
    *,
    running: tuple[str, str] | None = None,
) -> TargetChoice:
    """The target by RULE; ``running`` is (sys.prefix, sys.base_prefix) of the running tool."""
    env = os.environ if environ is None else environ
    if explicit is not None:
        # A relative path means relative to where the user stands, whatever folder probes run in.
        python = os.path.abspath(explicit) if os.sep in explicit else explicit
        return TargetChoice(python=python, how="--python")
    prefix, base_prefix = (sys.prefix, sys.base_prefix) if running is None else running
    if os.path.abspath(prefix) != os.path.abspath(base_prefix) and not is_tool_environment(
        prefix, env
    ):
        found = _interpreter_in(prefix)
        if found is not None:
            return TargetChoice(python=found, how=RUNNING)
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = env.get(variable, "").strip()
        if not prefix:
            continue
        found = _interpreter_in(prefix)
        if found is None:
            raise UsageError(
                f"{variable}={prefix} names an environment with no Python interpreter",
                hint=f"activate a working environment, unset {variable}, or pass --python PATH",
            )
        return TargetChoice(python=found, how=variable)
    found = _which("python3", path=env.get("PATH", ""))
    if found is None:
        raise UsageError(
            "no target environment: no virtualenv or conda env is active and python3 "
            "is not on PATH",
            hint="activate the environment to use, or pass --python PATH",
        )
    return TargetChoice(python=found, how="python3 on PATH")


def is_running_interpreter(python: str) -> bool:
    """Whether ``python`` is the interpreter running cuda-resolve (so it can be read in process).

    Compared by folder, not by resolved path: a venv's ``bin/python`` links to the base
    interpreter, yet sees other site-packages."""

    def folder(path: str) -> str:
        return os.path.normcase(os.path.abspath(os.path.dirname(path)))

    candidate = python if os.sep in python else (_which(python) or python)
    return folder(candidate) == folder(sys.executable) and os.path.basename(candidate).startswith(
        "python"
    )
