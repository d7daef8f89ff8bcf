"""Per-profile sbatch resources: a profile's ``[slurm] sbatch = [...]`` and ``--sbatch-arg-for
NAME=ARG``.

Each profile's tasks get, in this order on sbatch's command line (sbatch takes the last value
of an option given twice): the profile file's ``[slurm] sbatch`` list, every ``--sbatch-arg``,
then the ``--sbatch-arg-for`` values naming that profile. Tasks whose lists are equal share one
job array; each distinct list is an array of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import UsageError

__all__ = ["check_sbatch_arg", "profile_resources", "split_arg_for"]

#: Options the array's script sets itself; given again they would break the run's bookkeeping.
_RESERVED = {
    "--array": "the array's task list",
    "-a": "the array's task list",
    "--output": "each task's log path",
    "-o": "each task's log path",
    "--error": "each task's log path",
    "-e": "each task's log path",
    "--parsable": "the way the job id is read",
    "--wrap": "the job script",
}


def check_sbatch_arg(text: str) -> str:
    """One sbatch option as one word (``--partition=a100``, ``-pa100``); ValueError says why not."""
    if not text.startswith("-") or text in ("-", "--"):
        raise ValueError(
            "expected an sbatch option as one word, such as '--partition=a100' (a separate value "
            "word is not accepted)"
        )
    if any(ord(c) < 32 or c == "\x7f" for c in text):
        raise ValueError("an sbatch option holds no control characters (a newline, a tab)")
    name = text.split("=", 1)[0] if text.startswith("--") else text[:2]
    if name in _RESERVED:
        raise ValueError(
            f"{name} sets {_RESERVED[name]}, which cuda-resolve build --slurm writes itself"
        )
    return text


def split_arg_for(text: str) -> tuple[str, str]:
    """``NAME=ARG`` of ``--sbatch-arg-for``: (NAME, ARG), ARG checked."""
    name, sep, arg = text.partition("=")
    if not sep or not name or not arg:
        raise UsageError(
            f"--sbatch-arg-for {text!r}: expected PROFILE=ARG, such as a100=--partition=a100",
            hint="PROFILE is a --profile's file name without .toml (or its path)",
        )
    try:
        return name, check_sbatch_arg(arg)
    except ValueError as exc:
        raise UsageError(
            f"--sbatch-arg-for {text!r}: {arg!r}: {exc}",
            hint="for example --sbatch-arg-for a100=--partition=a100",
        ) from None


def _matches(name: str, profile: Path) -> bool:
    return name in (profile.stem, profile.name) or os.path.abspath(name) == str(profile)


def profile_resources(
    profiles: Sequence[Path],
    from_files: Mapping[Path, tuple[str, ...]],
    common: Sequence[str],
    arg_for: Sequence[str],
) -> dict[Path, tuple[str, ...]]:
    """Each profile's sbatch options: its file's, then ``common``, then its ``--sbatch-arg-for``.
    ``profiles`` are absolute; a NAME that names no profile, or two, is a UsageError."""
    for arg in common:
        try:
            check_sbatch_arg(arg)
        except ValueError as exc:
            raise UsageError(
                f"--sbatch-arg {arg!r}: {exc}", hint="for example --sbatch-arg=--partition=cpu"
            ) from None
    extra: dict[Path, list[str]] = {profile: [] for profile in profiles}
    for text in arg_for:
        name, arg = split_arg_for(text)
        named = [profile for profile in profiles if _matches(name, profile)]
        if len(named) != 1:
            known = ", ".join(dict.fromkeys(p.stem for p in profiles))
            why = (
                f"no --profile is named {name!r}"
                if not named
                else f"{name!r} names {len(named)} profiles ({', '.join(map(str, named))})"
            )
            raise UsageError(
                f"--sbatch-arg-for {text!r}: {why}",
                hint=f"name a profile by its file name without .toml ({known}), or by its path",
            )
        extra[named[0]].append(arg)
    return {
        profile: (*from_files.get(profile, ()), *common, *extra[profile]) for profile in profiles
    }
