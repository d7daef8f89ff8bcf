"""pip options beside ``cuda-pip install --plan FILE`` are refused, not dropped: the plan's steps
carry the pip options it was made with, so ``--target DIR`` beside it was ignored and the venv
changed instead (user walk 2026-12-05 B1). The hint, pasted, does what the user asked."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from _torch_env import copy_venv
from test_lock_support import make_wheel


def _run(argv: list[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=300, check=False, env=environ
    )


def test_pip_options_beside_a_plan_are_refused_and_the_hint_works(tmp_path: Path) -> None:
    links = tmp_path / "links"
    make_wheel(links, "six", "1.17.0", files={"six.py": ""})
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links))
    python = copy_venv(tmp_path / "venv")
    made = _run([sys.executable, "-m", "cuda_resolve", "plan", "six", "--python", str(python),
                 "--json"], environ)  # fmt: skip
    assert made.returncode == 0, made.stderr
    plan = tmp_path / "plan.json"
    plan.write_text(made.stdout)
    target = tmp_path / "target"
    argv = [sys.executable, "-m", "pip_plugin", "install", "--plan", str(plan)]
    refused = _run([*argv, "--target", str(target), "--python", str(python), "--json"], environ)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = json.loads(refused.stdout)
    assert f"--target {target} beside it would be ignored" in said["error"]
    assert not target.exists()
    hint = said["hint"].split(": ", 1)[1]
    assert hint.startswith("cuda-pip install six ")
    pasted = _run([sys.executable, "-m", "pip_plugin", *shlex.split(hint)[1:], "--no-verify"],
                  environ)  # fmt: skip
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert (target / "six.py").is_file()
