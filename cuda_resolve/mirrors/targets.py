"""Which files ``mirror set`` writes for a scope, and which files ``mirror show`` reads.

Every location is computed from injectable facts (home directory, environment variables,
platform, the target prefix), so tests point them at a temporary directory.

- pip, user scope: the file pip itself reads as the user configuration: on Linux
  ``$XDG_CONFIG_HOME/pip/pip.conf`` (default ``~/.config/pip/pip.conf``); on macOS
  ``~/Library/Application Support/pip/pip.conf`` when that folder exists, else
  ``~/.config/pip/pip.conf``; on Windows ``%APPDATA%\\pip\\pip.ini``. pip also reads the legacy
  ``~/.pip/pip.conf`` (Windows ``~\\pip\\pip.ini``) before it, so the new file wins.
- pip, env scope: ``<prefix>/pip.conf`` (``pip.ini`` on Windows), the "site" file pip reads for
  the interpreter whose ``sys.prefix`` that is.
- conda: ``~/.condarc`` (user) or ``<prefix>/.condarc`` for a conda environment.
- cuda-resolve: :func:`cuda_resolve.config.config_path` (one per user, whatever the scope).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from .._bounded import run as run_bounded
from .._frozen import frozen
from ..config import config_path
from ..errors import UsageError

__all__ = [
    "Scope",
    "Targets",
    "conda_env_file",
    "conda_user_file",
    "interpreter_prefix",
    "pip_env_file",
    "pip_global_files",
    "pip_legacy_user_file",
    "pip_user_file",
    "resolve_targets",
]

Scope = Literal["user", "env"]
_PROBE_TIMEOUT_S = 20
_OUTPUT_LIMIT = 64 * 1024  # sys.prefix is one line; a site hook printing more is cut off


def _pip_basename(platform: str) -> str:
    return "pip.ini" if platform.startswith("win") else "pip.conf"


def pip_user_file(home: Path, environ: Mapping[str, str], platform: str = sys.platform) -> Path:
    """The user-level file pip reads last among its user files (so it wins)."""
    basename = _pip_basename(platform)
    if platform.startswith("win"):
        appdata = environ.get("APPDATA") or str(home / "AppData" / "Roaming")
        return Path(appdata) / "pip" / basename
    if platform == "darwin":
        app_support = home / "Library" / "Application Support" / "pip"
        if app_support.is_dir():
            return app_support / basename
        return home / ".config" / "pip" / basename
    xdg = environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg.strip() else home / ".config"
    return base / "pip" / basename


def pip_global_files(environ: Mapping[str, str], platform: str = sys.platform) -> list[Path]:
    """The site-wide files pip reads first (the lowest precedence), in pip's order: on Linux
    each ``$XDG_CONFIG_DIRS`` folder's (default ``/etc/xdg``) ``pip/pip.conf``, then
    ``/etc/pip.conf``; on macOS ``/Library/Application Support/pip/pip.conf``; on Windows
    ``%ProgramData%\\pip\\pip.ini``."""
    basename = _pip_basename(platform)
    if platform.startswith("win"):
        program_data = environ.get("ProgramData") or environ.get("PROGRAMDATA") or r"C:\ProgramData"
        return [Path(program_data) / "pip" / basename]
    if platform == "darwin":
        return [Path("/Library/Application Support/pip") / basename]
    dirs = (environ.get("XDG_CONFIG_DIRS") or "").strip() or "/etc/xdg"
    found = [Path(folder) / "pip" / basename for folder in dirs.split(os.pathsep) if folder]
    return [*found, Path("/etc") / basename]


def pip_legacy_user_file(home: Path, platform: str = sys.platform) -> Path:
    folder = "pip" if platform.startswith("win") else ".pip"
    return home / folder / _pip_basename(platform)


def pip_env_file(prefix: Path, platform: str = sys.platform) -> Path:
    return prefix / _pip_basename(platform)


def conda_user_file(home: Path) -> Path:
    return home / ".condarc"


def conda_env_file(prefix: Path) -> Path:
    return prefix / ".condarc"


def is_conda_prefix(prefix: Path) -> bool:
    return (prefix / "conda-meta").is_dir()


def interpreter_prefix(python: str) -> Path:
    """``sys.prefix`` of another interpreter, asked with a timeout and an output cap (never
    imported here); the interpreter and anything it starts are killed past the timeout."""
    result = run_bounded(
        [python, "-c", "import sys; print(sys.prefix)"],
        timeout=_PROBE_TIMEOUT_S,
        output_limit=_OUTPUT_LIMIT,
    )
    if result is None:  # could not be started: say why
        if not os.path.exists(python) and shutil.which(python) is None:
            raise UsageError(
                f"--python {python}: no such interpreter",
                hint="give the path of the target environment's python",
            )
        if os.path.isfile(python) and not os.access(python, os.X_OK):
            raise UsageError(
                f"--python {python}: not executable", hint="give the path of a python executable"
            )
        raise UsageError(f"--python {python}: cannot run", hint="give a python executable")
    if result.returncode is None:
        raise UsageError(
            f"--python {python}: did not answer within {_PROBE_TIMEOUT_S} s"
            if not result.overflowed
            else f"--python {python}: wrote more than {_OUTPUT_LIMIT} bytes when asked "
            "for sys.prefix",
            hint=f"check that the interpreter starts (`{shlex.quote(python)} -c pass`)",
        )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise UsageError(
            f"--python {python}: exited with status {result.returncode} when asked for sys.prefix",
            hint="give the path of a working python executable",
        )
    return Path(lines[-1])


@frozen
class Targets:
    scope: Scope
    pip: Path
    #: None when the scope has no conda configuration (an env scope on a plain venv).
    condarc: Path | None
    config: Path
    prefix: Path | None = None
    notes: tuple[str, ...] = ()


def resolve_targets(
    scope: Scope,
    *,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
    prefix: Path | None = None,
    python: str | None = None,
    platform: str = sys.platform,
) -> Targets:
    """The three files ``mirror set`` writes for ``scope``.

    The env scope's prefix is, in order: ``prefix``, ``sys.prefix`` of ``python``, ``$VIRTUAL_ENV``,
    ``$CONDA_PREFIX``.
    """
    env = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    own = config_path(env)
    if scope == "user":
        if python is not None or prefix is not None:
            raise UsageError(
                "--python/--prefix name an environment, but --scope is user",
                hint="add --scope env to write that environment's pip.conf and .condarc",
            )
        return Targets(
            scope=scope,
            pip=pip_user_file(home, env, platform),
            condarc=conda_user_file(home),
            config=own,
        )
    if prefix is None and python is not None:
        prefix = interpreter_prefix(python)
    if prefix is None:
        for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
            if env.get(variable):
                prefix = Path(env[variable])
                break
    if prefix is None:
        raise UsageError(
            "--scope env: no target environment",
            hint="pass --python PATH (the environment's interpreter), or activate a venv or "
            "conda environment",
        )
    if not prefix.is_dir():
        raise UsageError(
            f"--scope env: {prefix} is not a directory", hint="give an existing environment"
        )
    notes: list[str] = []
    condarc: Path | None = conda_env_file(prefix)
    if not is_conda_prefix(prefix):
        condarc = None
        notes.append(
            f"{prefix} is not a conda environment (no conda-meta/): no .condarc written there"
        )
    return Targets(
        scope=scope,
        pip=pip_env_file(prefix, platform),
        condarc=condarc,
        config=own,
        prefix=prefix,
        notes=tuple(notes),
    )
