"""The console scripts end with the objects left frozen (``gc.freeze``), so the interpreter's
exit does not walk them all in its garbage collections (about a tenth of a warm ``doctor
--json``, issue 28); the exit status is kept."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("code", [0, 1, 3, 130])
def test_exit_with_freezes_what_is_left_and_keeps_the_status(code: int) -> None:
    script = (
        "import atexit, gc\n"
        "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
        "from cuda_resolve._signals import exit_with\n"
        f"exit_with({code})\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == code, done.stderr
    assert done.stdout.strip() == "frozen at exit: True", done.stdout + done.stderr


def test_a_console_script_run_ends_through_exit_with() -> None:
    """``python -m cuda_resolve`` (as the cuda-resolve script: cli.run) ends frozen too."""
    script = (
        "import atexit, gc, sys, runpy\n"
        "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
        "sys.argv = ['cuda-resolve', 'detect', '--json']\n"
        "runpy.run_module('cuda_resolve', run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("frozen at exit: True"), done.stdout[-300:]
