"""An install into an environment that a killed install left half-changed undoes that one first
(its journal), and says so: the restore is a note of the result (``--json`` too), and what this
install changed is told against the environment as the restore left it. Before, the restore was
one progress line naming nothing, and the change list compared with the environment before it
(user walk 2026-12-05 F4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _torch_env import copy_venv
from test_lock_support import make_wheel

from cuda_resolve.install.journal import default_journal_dir
from cuda_resolve.install.stash import Stash, pending


def test_the_next_install_undoes_a_killed_one_first_and_says_what_it_put_back(
    tmp_path: Path,
) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "leftover", "1.0", files={"leftover.py": ""})
    make_wheel(wheels, "wanted", "2.0", files={"wanted.py": ""})
    python = copy_venv(tmp_path / "venv")
    # The killed install: its journal written, then pip added a package, then SIGKILL (no
    # commit, no restore).
    Stash.begin(str(python), environ=os.environ, journal_dir=default_journal_dir())
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
         "leftover==1.0"],
        check=True, timeout=120,
    )  # fmt: skip
    assert len(pending(default_journal_dir())) == 1
    done = subprocess.run(
        [sys.executable, "-m", "pip_plugin", "install", "wanted==2.0", "--python", str(python),
         "--no-index", "--find-links", str(wheels), "--json", "--no-verify"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)["result"]
    assert [c["name"] for c in result["changed"]] == ["wanted"], result["changed"]
    assert (
        "an earlier install into this environment was interrupted; undone first: leftover 1.0 "
        "removed (the install had added it)"
    ) in result["notes"]
    assert pending(default_journal_dir()) == []
