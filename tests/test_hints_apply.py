"""apply carries out a plan exactly (issue 29): every option it accepts is honoured or refused.

An option that would change the plan (``--arch-list 9.0``, ``--rebuild``, ``--ptx`` ...) is
refused with exit 2, naming it, before anything is read or run; ``apply --help`` lists only the
options that apply. A new install option must be sorted into one of the two lists here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_resolve.cli import apply as apply_cli

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"

#: Options apply honours: where to install, how to report, what to check after, how to install.
HONOURED = {
    "--python",
    "--json",
    "--smoke",
    "--no-verify",
    "--keep-stale",
    "--installer",
    "--dry-run",
    "--source",  # where the pinned source is (its revision checked against the plan's)
    "--index",  # where the recipes are
}

#: A value for each refused option that takes one.
VALUES = {
    "--arch-list": ["9.0"],
    "--accept-name": ["torhc"],
}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_resolve", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(os.environ, COLUMNS="200"),
        stdin=subprocess.DEVNULL,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cuda-resolve")
    apply_cli.register(parser.add_subparsers())
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found = sub.choices["apply"]
    assert isinstance(found, argparse.ArgumentParser)
    return found


def test_every_option_is_honoured_or_refused() -> None:
    parser = _parser()
    options = {
        action.option_strings[-1]
        for action in parser._actions
        if action.option_strings and action.dest != "help"
    }
    refused = set(apply_cli.DECIDING) | {"--plan"}
    assert options - refused == HONOURED, "sort the new option into HONOURED or DECIDING"
    usage = parser.format_usage()
    listed = {line.split()[0] for line in parser.format_help().splitlines() if line[:3] == "  -"}
    for option in HONOURED:
        assert option in usage and option in listed
    for option in refused:
        assert option not in usage and option not in listed, f"apply --help lists {option}"


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    done = _run("plan", "torch", "--profile", str(PROFILE), "--json")
    assert done.returncode == 0, done.stderr
    path.write_text(done.stdout)
    return path


@pytest.mark.parametrize("option", apply_cli.DECIDING)
def test_a_deciding_option_is_refused_naming_it(option: str, plan_file: Path) -> None:
    done = _run("apply", str(plan_file), option, *VALUES.get(option, []), "--dry-run")
    assert done.returncode == 2, done.stdout + done.stderr
    error = done.stderr.splitlines()[0]
    assert option in error and "exactly as written" in error, done.stderr
    hint = next(line for line in done.stderr.splitlines() if line.startswith("hint: "))
    # the plan's own request, to decide again with the option (--repair takes none)
    assert "torch" in hint or option == "--repair", hint
