"""uv as the engine of the steps whose files are already local (issue 30).

pip unzips every wheel on every install; uv keeps them unpacked in its cache and links the files
into the environment. A step qualifies only when it names nothing but local wheel files, each
with its sha256 and no dependency resolution: a lock's checked files (``sync``'s step) and
wheelhouse wheels (a build reused). Every other step, and every step that resolves against an
index, stays pip's, so the user's pip configuration, mirrors and trust options keep their
meaning. uv then runs as::

    uv pip install --no-config --python TARGET --no-deps --offline --no-index \\
        --require-hashes --link-mode MODE -r FILE

``--offline`` and ``--no-index``: no index is contacted; ``--require-hashes`` over a file of
``name @ file:///...whl --hash=sha256:H`` lines: uv checks every file as pip would;
``--no-config``: a ``uv.toml`` cannot move the install (``[pip] target``, ``prefix``); of uv's
variables only the cache's reach it (``UV_CONFIG_FILE`` would bring a ``uv.toml`` back), so its
cache is where the user's cache settings say: ``UV_CACHE_DIR`` (``UV_NO_CACHE``), else uv's
default under ``XDG_CACHE_HOME`` or ``~/.cache``.

The link mode: a hard link from uv's cache where the cache and the target share a filesystem
(uv's own default on Linux); ``copy`` where they do not (a hard link cannot cross filesystems);
``UV_LINK_MODE=copy`` (or ``clone``, or ``hardlink``) chooses for the user; ``symlink`` is not
taken (``uv cache clean`` would break the environment). A hard link keeps every guarantee the
stash gives: the stash, its restore, pip's uninstall and reinstall and uv's own all unlink or
rename, never write into a file, so uv's cache stays as it was and the environment exact
(tests/test_uv_engine.py). What a hard link shares is an in-place write into an installed file
(an editor that writes through the link, ``open(path, "w")``): that changes uv's cache and every
environment linked from it; ``UV_LINK_MODE=copy`` rules it out at the price of copying.

uv is found as the ``uv`` module's binary (``pip install 'cuda-resolve[fast]'``) or on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._frozen import frozen
from ..errors import InstallError, UsageError
from .pipoptions import elsewhere_variables

if TYPE_CHECKING:
    from ..build.runner import ProcessRunner
    from ..plan import PipStep

__all__ = [
    "INSTALLERS",
    "LocalStep",
    "UvFailed",
    "UvInstaller",
    "cache_dir",
    "changes_target",
    "find_uv",
    "installer_of",
    "link_mode",
    "local_requirements",
    "uv_for",
]

#: What ``--installer`` takes: ``auto`` runs uv where it is found and the step is all-local.
INSTALLERS = ("auto", "pip", "uv")
#: A line of sync's requirements file, or of the file written here: one local wheel and its hash.
_LOCAL_LINE = re.compile(
    r"^(?:[A-Za-z0-9][A-Za-z0-9._-]* @ )?file:///\S+\.whl --hash=sha256:[0-9a-f]{64}$"
)
_LINK_MODES = ("copy", "clone", "hardlink")
#: uv's variables that reach it: where its cache is, or that it keeps none.
_CACHE_SETTINGS = frozenset({"UV_CACHE_DIR", "UV_NO_CACHE"})


class UvFailed(InstallError):
    """uv did not install a step; the executor restores the target and runs pip instead
    (``restored`` says whether the restore was complete: only then does pip run)."""

    restored = False


def find_uv(environ: Mapping[str, str]) -> str | None:
    """The uv binary: the ``uv`` module's (cuda-resolve[fast]), else ``uv`` on PATH; None."""
    try:
        import uv

        found: str | None = uv.find_uv_bin()
    except (ImportError, FileNotFoundError, OSError):
        found = None
    return found or shutil.which("uv", path=environ.get("PATH"))


def uv_for(installer: str, environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(the uv binary that runs the all-local steps, or None for pip; a note saying why not)."""
    if installer not in INSTALLERS:
        raise UsageError(
            f"--installer {installer!r} is not one of {', '.join(INSTALLERS)}",
            hint="--installer auto (uv where the files are local and uv is installed), pip or uv",
        )
    if installer == "pip":
        return None, None
    elsewhere = elsewhere_variables(environ)
    if elsewhere:
        return None, f"{', '.join(elsewhere)} set: pip installs, as it reads them"
    found = find_uv(environ)
    if found is None and installer == "uv":
        from .._upgrade import command_to_install

        raise UsageError(
            "--installer uv: uv is not installed here",
            hint=f"install uv next to cuda-resolve ({command_to_install('uv')}: the [fast] "
            "extra is uv from PyPI), or put uv on PATH",
        )
    return found, None


@frozen
class LocalStep:
    """An all-local step's files: one ``[name @ ]file:///...whl --hash=sha256:H`` line each, and
    the requirements file that already lists them (sync's), or None (uv's is written)."""

    lines: tuple[str, ...]
    file: Path | None = None


def local_requirements(step: PipStep, built: Sequence[tuple[str, Path, str]]) -> LocalStep | None:
    """The files of an all-local step; None for a step that resolves, asks an index or names
    anything else (pip runs it). ``built``: the step's wheelhouse wheels as (package, path,
    sha256)."""
    if step.args == ("--no-deps",) and step.built:  # wheelhouse wheels, their needs installed
        from packaging.utils import canonicalize_name

        if len(built) != len(step.built):
            return None
        return LocalStep(
            lines=tuple(
                f"{canonicalize_name(name)} @ {path.resolve().as_uri()} --hash=sha256:{sha256}"
                for name, path, sha256 in built
            )
        )
    words = [word for word in step.args if word != "--quiet"]
    if step.built or words[:4] != ["--no-deps", "--no-index", "--require-hashes", "-r"]:
        return None
    if len(words) != 5:
        return None
    try:
        lines = Path(words[4]).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    lines = [line.strip() for line in lines if line.strip()]
    if not lines or not all(_LOCAL_LINE.match(line) for line in lines):
        return None
    return LocalStep(lines=tuple(lines), file=Path(words[4]))


#: The wheel file a line names (its URL's last part).
_WHEEL_URL = re.compile(r"file:///\S*?([^/\s]+\.whl)(?:\s|$)")


def changes_target(local: LocalStep, installed: Mapping[str, str]) -> bool:
    """True when one of ``local``'s wheels is not installed at its version (``installed``: the
    target's ``{canonical name: version}`` before the step): installing the step certainly
    changes the target. False when that cannot be told (a name that cannot be read)."""
    from urllib.parse import unquote

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    for line in local.lines:
        found = _WHEEL_URL.search(line)
        if found is None:
            return False
        try:
            name, version, _, _ = parse_wheel_filename(unquote(found.group(1)))
            if name not in installed or Version(installed[name]) != version:
                return True
        except (InvalidWheelFilename, InvalidVersion):
            return False
    return False


def cache_dir(environ: Mapping[str, str]) -> Path:
    """Where uv keeps its cache for this environment: ``UV_CACHE_DIR``, else uv's default."""
    if environ.get("UV_CACHE_DIR"):
        return Path(environ["UV_CACHE_DIR"]).expanduser()
    base = environ.get("XDG_CACHE_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    return Path(base) / "uv"


def _device(path: Path) -> int | None:
    """The filesystem of ``path`` or of its nearest existing parent (the cache may not exist)."""
    for candidate in (path, *path.parents):
        try:
            return candidate.stat().st_dev
        except OSError:
            continue
    return None


def link_mode(environ: Mapping[str, str], prefix: str) -> str:
    """``UV_LINK_MODE`` where the user chose copy, clone or hardlink; else a hard link where uv's
    cache and the target share a filesystem, a copy where they do not (see the module)."""
    chosen = environ.get("UV_LINK_MODE", "")
    if chosen in _LINK_MODES:
        return chosen
    cache, target = _device(cache_dir(environ)), _device(Path(prefix))
    return "hardlink" if cache is not None and cache == target else "copy"


def installer_of(command: Sequence[str]) -> str:
    """Which engine a recorded command runs: ``uv`` (``uv pip install``) or ``pip`` (``python
    -m pip install``)."""
    return "uv" if tuple(command[1:3]) == ("pip", "install") else "pip"


class UvInstaller:
    """Runs ``uv pip install`` over one step's local files through the same process runner as
    pip (:func:`~cuda_resolve.build.runner.logged_runner`: its own session, ended with all it
    started on Ctrl-C, SIGTERM or SIGHUP; every line redacted into the log)."""

    name = "uv"

    def __init__(
        self,
        uv: str,
        python: str,
        *,
        prefix: str,
        environ: Mapping[str, str],
        log_path: Path,
        runner: ProcessRunner | None = None,
    ) -> None:
        self.uv = uv
        self.python = python
        self.prefix = prefix
        # uv's own variables could move the install or change how it checks: only its cache
        # is the user's to set here (UV_LINK_MODE is read by link_mode, then given).
        self.environ = {
            name: value
            for name, value in environ.items()
            if not name.startswith("UV_") or name in _CACHE_SETTINGS
        }
        self.mode = link_mode(environ, prefix)
        self.log_path = log_path
        self._runner = runner

    def command(self, requirements: Path) -> list[str]:
        """The exact words uv runs with for the files listed in ``requirements``."""
        return [
            self.uv,
            "pip",
            "install",
            "--no-config",
            "--python",
            self.python,
            "--no-deps",
            "--offline",
            "--no-index",
            "--require-hashes",
            "--link-mode",
            self.mode,
            "-r",
            str(requirements),
        ]

    def requirements_file(self, local: LocalStep, scratch: Path, number: int) -> Path:
        """The file uv reads ``local``'s lines from: the step's own, else one in ``scratch``."""
        return local.file or scratch / f"uv-step-{number}.txt"

    def install(
        self,
        local: LocalStep,
        requirements: Path,
        *,
        environ: Mapping[str, str] | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[list[str], int, list[str]]:
        """(the command, uv's exit status, its last lines) for ``local``'s files, listed in
        ``requirements`` (written here unless it is the step's own file)."""
        from ..build.runner import logged_runner

        if local.file is None:
            requirements.write_text("".join(f"{line}\n" for line in local.lines), "utf-8")
        command = self.command(requirements)
        runner = self._runner or logged_runner
        status, tail = runner(
            command,
            environ={**self.environ, **(environ or {})},
            log_path=self.log_path,
            on_line=on_line,
        )
        return command, status, tail
