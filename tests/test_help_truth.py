"""Each command's ``--help`` says what the command does (issue 29: doc lines true where read).

- ``--python``: every command that picks its target by the one rule (``choose_target``) says
  that rule in its help, not an older one ("the active virtualenv, else ...": the venv the command
  runs from comes first, and a tool environment never counts).
- Options shared with ``install`` say what they do in ``build``, which installs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


@pytest.mark.parametrize("option", ["--accept-name", "--allow-torch-change"])
def test_build_options_do_not_promise_an_install(option: str) -> None:
    said = _help_of(_parser(("build",)), option)
    assert not re.search(r"\binstall\b|\binstalled torch\b|replacing", said), said
