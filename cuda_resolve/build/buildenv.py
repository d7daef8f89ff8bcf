"""The build's environment: the target interpreter, plus a temporary overlay of build requirements.

Like pip's overlay build environments: the recipe's build requirements (kaolin's
``setuptools<82``, ninja ...) that the target does not already satisfy are installed into a
temporary folder put first on the build's ``PYTHONPATH`` and ``PATH``. The target environment
is never changed by a build; only the final install changes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._frozen import frozen
from ..errors import BuildError
from .preflight import BuildSpec

__all__ = [
    "BuildEnvironment",
    "machine_capacity",
    "make_build_environment",
    "max_jobs",
    "no_debug_flags",
    "overlay_include_dirs",
    "overlay_options",
    "unsatisfied",
]

#: Memory one nvcc/cc1plus job over torch's headers can take; kaolin's largest units near 2 GiB.
BYTES_PER_JOB = 2 * 1024**3


@frozen
class BuildEnvironment:
    """What a source build runs with: its environment, the torch overlay, the job count."""

    variables: Mapping[str, str]  # the full environment the build runs with
    shown: tuple[
        tuple[str, str], ...
    ]  # the variables cuda-resolve set, for the terminal and the log
    overlay: Path | None
    overlay_requirements: tuple[str, ...]
    max_jobs: int


def max_jobs(cores: int, available_bytes: int | None) -> int:
    """One job a core, fewer when memory would not hold them (an OOM-killed nvcc wastes the
    build)."""
    jobs = max(1, cores)
    if available_bytes is not None:
        jobs = min(jobs, max(1, available_bytes // BYTES_PER_JOB))
    return jobs


def machine_capacity() -> tuple[int, int | None]:
    """Cores this process may use and MemAvailable in bytes (None where /proc/meminfo is
    unreadable)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return cores, available


def unsatisfied(requirements: Sequence[str], installed: Mapping[str, str | None]) -> list[str]:
    """The requirements the installed versions (keyed by canonical name) do not meet."""
    missing: list[str] = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            missing.append(text)
            continue
        version = installed.get(canonicalize_name(requirement.name))
        try:
            ok = version is not None and requirement.specifier.contains(
                Version(version), prereleases=True
            )
        except InvalidVersion:
            ok = False
        if not ok:
            missing.append(text)
    return missing


def no_debug_flags(environ: Mapping[str, str]) -> str | None:
    """The CPPFLAGS value that turns debug info off, or None where the user asked for debug info.

    Python's own CFLAGS carry ``-g`` and setuptools hands them to every C++ unit, so a torch
    extension is compiled with DWARF for all of torch's headers: slower to compile and link
    (pointnet2_ops' .so is 28 MB with it, 0.4 MB without), and the wheelhouse strips it anyway.
    CPPFLAGS, not CFLAGS: every setuptools appends CPPFLAGS after Python's CFLAGS (so ``-g0`` wins
    and ``-O3 -DNDEBUG`` stay), while newer ones let CFLAGS replace Python's flags outright. A
    ``-g`` the user put in CFLAGS, CXXFLAGS or CPPFLAGS is a request for debug info: it is honoured.
    """
    words = environ.get("CPPFLAGS", "").split()
    asked = words + environ.get("CFLAGS", "").split() + environ.get("CXXFLAGS", "").split()
    if any(w.startswith("-g") and w != "-g0" for w in asked):
        return None
    return " ".join(words if "-g0" in words else [*words, "-g0"])


#: pip options that choose where or what pip installs: an overlay is its own ``--target`` and
#: holds only its requirements, complete (the user's ``--no-deps`` is for their own install).
_NOT_FOR_OVERLAY_VALUED = (
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--src",
    "-r",
    "--requirement",
    "-e",
    "--editable",
    "--report",
)
_NOT_FOR_OVERLAY_FLAGS = ("--user", "--no-deps", "--dry-run")


def overlay_options(pip_options: Sequence[str]) -> list[str]:
    """``pip_options`` without those that choose where or what pip installs (``--target DIR``,
    ``--target=DIR``, ``-tDIR``, ``-r FILE``, ``--user``, ``--no-deps`` ...)."""
    kept: list[str] = []
    words = list(pip_options)
    i = 0
    while i < len(words):
        word = words[i]
        name = word.split("=", 1)[0]
        if word in _NOT_FOR_OVERLAY_VALUED:
            i += 2  # its value, the next word, goes with it
            continue
        short_joined = (
            len(word) > 2 and word[:2] in ("-t", "-r", "-e") and not word.startswith("--")
        )
        if name in _NOT_FOR_OVERLAY_VALUED or name in _NOT_FOR_OVERLAY_FLAGS or short_joined:
            i += 1
            continue
        kept.append(word)
        i += 1
    return kept


def _prepend(value: str, existing: str | None) -> str:
    return value if not existing else f"{value}{os.pathsep}{existing}"


def make_build_environment(
    spec: BuildSpec,
    workdir: Path,
    *,
    base_environ: Mapping[str, str],
    installed: Mapping[str, str],
    capacity: tuple[int, int | None],
    pip_install: Callable[[list[str], bool], None],
    pip_options: Sequence[str] = (),
    say: Callable[[str], None] = lambda _: None,
) -> BuildEnvironment:
    """Compute the variables and, where needed, install the overlay with the target's own pip.

    ``installed`` is the target's distributions (canonical name -> version), as the caller
    already read them: a build never changes the target, so one reading serves every build.
    ``pip_install(args, torch_step)`` runs the target's ``pip install ARGS`` (the caller's
    :class:`~cuda_resolve.install.pip.TargetPip`: trust options, environment, log;
    ``torch_step``: the install of torch, which asks one index alone, the PyTorch index or the
    user's PyPI index, never find-links; from the PyTorch index it goes through the machine's
    download folder, so the target's torch step later downloads none of it:
    :class:`~cuda_resolve.install.downloads.DownloadingPip`) and raises on failure. ``pip_options``
    are the user's pip options for these installs (a proxy, a certificate, constraints); those
    that choose where or what pip installs are not given to an overlay (:func:`overlay_options`).
    """
    needed = unsatisfied(spec.build_requires, installed)
    overlay: Path | None = None
    environ = dict(base_environ)
    overlay_requirements: list[str] = list(needed)
    if needed or spec.torch_requirement:
        overlay = workdir / "overlay"
        overlay.mkdir(parents=True, exist_ok=True)
        into = [
            "--target",
            str(overlay),
            "--no-warn-script-location",
            *overlay_options(pip_options),
        ]
        if spec.torch_requirement:
            say(f"installing {spec.torch_requirement} into the build overlay (not the target)")
            args = [*into, spec.torch_requirement]
            if spec.torch_index:
                args += [spec.torch_index_option, spec.torch_index]
            pip_install(args, True)  # torch: its index alone, or the user's PyPI index alone
            overlay_requirements.insert(0, spec.torch_requirement)
        if needed:
            say(f"installing build requirements into a temporary overlay: {', '.join(needed)}")
            pip_install([*into, *needed], False)
    cores, available = capacity
    jobs = max_jobs(cores, available)
    user_jobs = base_environ.get("MAX_JOBS", "").strip()
    if spec.max_jobs is not None:
        jobs = spec.max_jobs  # decided at planning
    elif user_jobs.isdigit() and int(user_jobs) > 0:
        jobs = int(user_jobs)  # the user's word wins: they may know the machine is shared
    shown: list[tuple[str, str]] = [*spec.variables, ("MAX_JOBS", str(jobs))]
    flags = no_debug_flags(base_environ)
    if flags is not None:
        shown.append(("CPPFLAGS", flags))
    bin_dirs = [os.path.join(spec.toolkit.root, "bin")] if spec.toolkit.root else []
    if overlay is not None:
        bin_dirs.insert(0, str(overlay / "bin"))
        shown.append(("PYTHONPATH", _prepend(str(overlay), base_environ.get("PYTHONPATH"))))
    shown.append(("PATH", _prepend(os.pathsep.join(bin_dirs), base_environ.get("PATH"))))
    include_dirs = list(spec.include_dirs)
    if spec.missing_headers and overlay is not None:
        include_dirs += overlay_include_dirs(overlay, spec.missing_headers)
    if include_dirs:
        shown.append(("CPATH", _prepend(os.pathsep.join(include_dirs), base_environ.get("CPATH"))))
    environ.update(shown)
    # Plain `pip wheel` output is what users know; colour codes would garble the log.
    environ.setdefault("PIP_NO_COLOR", "1")
    return BuildEnvironment(
        variables=environ,
        shown=tuple(shown),
        overlay=overlay,
        overlay_requirements=tuple(overlay_requirements),
        max_jobs=jobs,
    )


def overlay_include_dirs(overlay: Path, headers: Sequence[str]) -> list[str]:
    """Include folders of the nvidia-* wheels in the overlay that hold any of ``headers``."""
    found: list[str] = []
    for folder in sorted((overlay / "nvidia").glob("*/include")):
        if any((folder / header).is_file() for header in headers):
            found.append(str(folder))
    if not found:
        raise BuildError(
            f"the toolkit lacks {', '.join(headers)} and the torch installed into the build "
            "overlay brought no nvidia-* wheel with them",
            hint="install the toolkit's development libraries (cusparse, cublas, cusolver "
            "headers), or a torch whose wheels ship them",
        )
    return found
