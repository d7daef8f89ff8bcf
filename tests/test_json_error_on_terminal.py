"""A --json command that fails while its stdout goes to a file says so on the terminal too: the
pasted hint ``cuda-resolve plan ... --json > plan.here.json && cuda-resolve apply ...`` showed
nothing at all when the plan failed (user walk 2026-12-05 B4). Where stderr is no terminal
either (a script, CI), stderr stays empty, as before."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

PROFILE = Path(__file__).parent / "data" / "profiles" / "rtx3090-torch21cu121-nvcc118.toml"
ARGV = [sys.executable, "-m", "cuda_resolve", "plan", "torch==2.99", "--profile", str(PROFILE)]


def test_the_error_reaches_the_terminal_when_stdout_is_a_file(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    try:
        with (tmp_path / "plan.json").open("w") as stdout:
            done = subprocess.run(
                [*ARGV, "--json"], stdout=stdout, stderr=follower, timeout=120, check=False
            )
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 1
    assert json.loads((tmp_path / "plan.json").read_text())["error"].startswith("nothing fits")
    said = seen.decode()
    assert "error: nothing fits this machine for torch==2.99" in said, said
    assert "hint: " in said


def test_without_a_terminal_stderr_stays_empty() -> None:
    done = subprocess.run(
        [*ARGV, "--json"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1 and json.loads(done.stdout)["error"]
    assert done.stderr == ""
