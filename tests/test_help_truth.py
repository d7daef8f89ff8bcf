"""Each command's ``--help`` says what the command does (issue 29: doc lines true where read).

- ``--python``: every command that picks its target by the one rule (``choose_target``) says
  that rule in its help, not an older one ("the active virtualenv, else ...": the venv the command
  runs from comes first, and a tool environment never counts).
- Options shared with ``install`` say what they do in ``build``, which installs nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _torch_env import copy_venv

from cuda_resolve.cli import build_parser
from cuda_resolve.install.target import RULE

#: Commands whose target is ``choose_target(--python)``: (command words, what the help names).
TARGETED = [
    ("detect",),
    ("doctor",),
    ("plan",),
    ("apply",),
    ("install",),
    ("undo",),
    ("env",),
    ("sync",),
    ("mirror", "test"),
]


@functools.cache
def _parser(words: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _help_of(parser: argparse.ArgumentParser, option: str) -> str:
    action = next(a for a in parser._actions if option in a.option_strings)
    return " ".join((action.help or "").split())


@pytest.mark.parametrize("words", TARGETED, ids=" ".join)
def test_python_help_names_the_target_rule(words: tuple[str, ...]) -> None:
    said = _help_of(_parser(words), "--python")
    rule = RULE.removeprefix("--python PATH; else ")
    assert rule in said, f"{' '.join(words)} --python says {said!r}, not the rule: {RULE}"


def test_undo_chooses_by_that_rule(tmp_path: Path) -> None:
    """The help said "the active virtualenv" first: the venv the command runs from comes first."""
    other = copy_venv(tmp_path / "other")
    environ = {k: v for k, v in os.environ.items() if k not in ("UV_TOOL_DIR", "CONDA_PREFIX")}
    environ["VIRTUAL_ENV"] = str(other.parent.parent)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "cuda-resolve"), "undo", "--last", "--json"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["prefix"] == str(Path(sys.prefix).resolve())


@pytest.mark.parametrize("command", ["detect", "doctor", "plan"])
def test_reporting_commands_do_not_promise_to_install(command: str) -> None:
    """detect, doctor and plan read the target; their --python said "inspect and install into"."""
    said = _help_of(_parser((command,)), "--python")
    assert "install into" not in said and "nothing is installed" in said, said


@pytest.mark.parametrize("option", ["--accept-name", "--allow-torch-change"])
def test_build_options_do_not_promise_an_install(option: str) -> None:
    said = _help_of(_parser(("build",)), option)
    assert not re.search(r"\binstall\b|\binstalled torch\b|replacing", said), said


ROOT = Path(__file__).resolve().parent.parent
#: A command as the docs write it, up to the end of its code span, line or shell operator.
_COMMAND = re.compile(r"cuda-resolve ([a-z][a-z-]*(?: [^`\n|;&)]*)?)")


def _options_of(words: list[str]) -> tuple[set[str], int] | None:
    """The options the (sub)command ``words`` starts with takes, and how many words named it."""
    parser = _parser(())
    used = 0
    for word in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        parser = subs[0].choices[word]
        used += 1
    if used == 0:
        return None
    return {o for a in parser._actions for o in a.option_strings}, used


@pytest.mark.parametrize(
    "doc",
    [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
    ids=lambda p: p.name,
)
def test_docs_name_only_options_the_commands_take(doc: Path) -> None:
    """Every ``--option`` a README or docs/*.md command line gives ``cuda-resolve CMD`` is one
    that CMD's parser takes (a renamed or removed option leaves no stale line behind)."""
    text = doc.read_text(encoding="utf-8").replace("\\\n", " ")
    wrong = []
    for match in _COMMAND.finditer(text):
        words = match.group(1).split()
        found = _options_of(words)
        if found is None:
            continue
        options, used = found
        for word in words[used:]:
            flag = word.split("=", 1)[0].rstrip(",.:")
            if flag.startswith("--") and flag != "--" and flag not in options:
                wrong.append(f"cuda-resolve {' '.join(words[:used])} {flag}")
    assert not wrong, f"{doc.name} names options the commands do not take: {wrong}"


@pytest.mark.parametrize("doc", ["README.md", "docs/install.md"])
def test_the_docs_state_the_rule_the_commands_use(doc: str) -> None:
    """README ("Install on a GPU machine") and docs/install.md ("Which environment") say the
    target rule in the words ``install.target.RULE`` has (markdown's backticks aside)."""
    text = " ".join((ROOT / doc).read_text(encoding="utf-8").replace("`", "").split())
    assert RULE in text, f"{doc} does not state the target rule: {RULE}"


def test_build_status_refuses_the_options_of_a_build(tmp_path: Path) -> None:
    """``build --status JOBID`` reports on a submitted run: an option that decides a build beside
    it (--profile, --arch-list, ...) was taken and ignored; it is refused, and the hint's command
    gets past that refusal (here to "no run of that job id is recorded")."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_RESOLVE_SLURM")}
    environ["CUDA_RESOLVE_CACHE_DIR"] = str(tmp_path)
    cli = str(Path(sys.executable).parent / "cuda-resolve")

    def run(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [cli, *words], env=environ, capture_output=True, text=True, timeout=60, check=False
        )

    refused = run("build", "--status", "4242", "--profile", "a100.toml", "--arch-list", "8.0")
    assert refused.returncode == 2 and "--arch-list --profile beside it" in refused.stderr
    hint = refused.stderr.split("hint: ", 1)[1].strip()
    assert hint == "cuda-resolve build --status 4242", hint
    followed = run(*shlex.split(hint)[1:])
    assert "beside it" not in followed.stderr and "no build run of that job id" in followed.stderr


def test_mirror_test_with_a_preset_refuses_python_before_any_network() -> None:
    """``mirror test PRESET --python PATH`` tested the preset and ignored --python: refused (exit
    2) before anything is fetched (the catalogue follows the same refusal of ``mirror show``)."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "cuda-resolve"), "mirror", "test", "tuna", "--python",
         sys.executable],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "hint: drop --python" in done.stderr, done.stderr


def test_an_interpreter_that_floods_is_named_in_the_hint(tmp_path: Path) -> None:
    """``mirror set --scope env --python X`` where X writes too much when asked for sys.prefix:
    the hint's check names X (it said `PATH -c pass`)."""
    flood = tmp_path / "python"
    flood.write_text("#!/bin/sh\nhead -c 10000000 /dev/zero\n")
    flood.chmod(0o755)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "cuda-resolve"), "mirror", "set", "tuna", "--scope",
         "env", "--python", str(flood), "--dry-run"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"`{flood} -c pass`" in done.stderr, done.stderr
