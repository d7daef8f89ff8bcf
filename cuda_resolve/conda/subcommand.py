"""``conda cuda COMMAND [-n NAME | -p PATH] ...``: cuda-resolve's commands with a conda
environment as the target, and the local channel's listing; no import of conda (the plugin
passes how conda finds an environment by name)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..errors import UsageError
from .channel import LocalChannel
from .convert import prefix_python

__all__ = ["PASS_THROUGH", "USAGE", "channel_lines", "cuda_argv", "installed_from"]

#: The cuda-resolve commands ``conda cuda`` runs with the environment as the target.
PASS_THROUGH = ("doctor", "detect", "plan", "install", "build", "lock", "sync")

USAGE = (
    "usage: conda cuda COMMAND [-n NAME | -p PATH] [options]\n"
    "\n"
    "cuda-resolve for a conda environment (default: the active one):\n"
    "  doctor, detect, plan, install, build,  cuda-resolve's commands with this "
    "environment as the target\n"
    "  lock, sync                             (`conda cuda plan --help` for each "
    "one's options; lock\n"
    "                                         adds the environment as profile `this`)\n"
    "  channel [--prune]                      list the local channel (--prune: drop "
    "what no environment uses)\n"
    "  activate / deactivate                  plain `conda install` builds what no "
    "channel serves (a .condarc setting)\n"
)


def _split_target(
    argv: Sequence[str], locate: Callable[[str], Path], default: Path
) -> tuple[Path, list[str]]:
    """``-n NAME`` / ``-p PATH`` out of ``argv``; default: the active environment."""
    rest: list[str] = []
    prefix: Path | None = None
    words = list(argv)
    while words:
        word = words.pop(0)
        for short, long in (("-n", "--name"), ("-p", "--prefix")):
            if word in (short, long) or word.startswith(long + "="):
                value = word.split("=", 1)[1] if "=" in word else (words.pop(0) if words else "")
                if not value:
                    raise UsageError(
                        f"{word} needs a value",
                        hint=f"conda cuda doctor {short} <{'name' if short == '-n' else 'path'}>",
                    )
                prefix = locate(value) if short == "-n" else Path(value).expanduser().absolute()
                break
        else:
            rest.append(word)
    return (prefix or default), rest


def cuda_argv(argv: Sequence[str], *, locate: Callable[[str], Path], default: Path) -> list[str]:
    """cuda-resolve's command line for ``conda cuda VERB ...`` (``argv`` starts at VERB):
    the environment's interpreter as the target (``lock``: as the profile ``this``)."""
    verb, rest = argv[0], argv[1:]
    if verb not in PASS_THROUGH:
        raise UsageError(f"conda cuda {verb}: no such command", hint="conda cuda --help lists them")
    prefix, words = _split_target(rest, locate, default)
    python = prefix_python(prefix)
    if "--python" in words or ("--profile" in words and verb not in ("build", "lock")):
        raise UsageError(
            f"conda cuda {verb}: the target is the conda environment",
            hint="name it with -n NAME or -p PATH",
        )
    if verb == "lock":  # the environment is the machine class `this`, resolved by its interpreter
        given = any(word.startswith("--profile") for word in words)
        profiles = [] if given else ["--profile", "this"]
        return [verb, *words, *profiles, "--python-for", f"this={python}"]
    return [verb, *words, "--python", str(python)]


def installed_from(channel: LocalChannel, prefixes: Iterable[Path]) -> set[str]:
    """The package files of ``channel`` that any of ``prefixes`` has installed."""
    used: set[str] = set()
    for prefix in prefixes:
        for meta in Path(prefix, "conda-meta").glob("*.json"):
            try:
                data = json.loads(meta.read_text())
            except (OSError, ValueError):
                continue
            if str(data.get("url", "")).startswith(channel.url) or str(
                data.get("channel", "")
            ).startswith(channel.url):
                used.add(str(data.get("fn", "")))
    return used


def channel_lines(
    words: Sequence[str], channel: LocalChannel, prefixes: Callable[[], Iterable[Path]]
) -> list[str]:
    """``conda cuda channel [--prune]``: what to print; ``--prune`` first removes the packages
    none of ``prefixes`` (every environment conda knows) has installed."""
    lines = []
    if "--prune" in words:
        removed = channel.prune(installed_from(channel, prefixes()))
        lines += [f"removed {path.name}" for path in removed]
        lines.append(f"{len(removed)} package(s) removed; the wheelhouse keeps their wheels")
    lines.append(f"local channel: {channel.url}")
    lines += [f"  {path.parent.name}/{path.name}" for path in channel.packages()]
    return lines
