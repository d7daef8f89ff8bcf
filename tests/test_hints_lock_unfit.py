"""``lock --skip-unfit`` where no profile fits: the hint's command is one to paste (issue 29). It
said "`cuda-resolve plan REQ --profile FILE --explain` says more"; now the lock's requests and the
first profile left out, and pasted it explains that profile (plan's own refusal, not the lock's).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_lock import _lock, bench, configured  # noqa: F401  (fixtures)
from test_lock_support import write_profile


def test_the_hint_explains_the_profile_left_out(
    configured: dict[str, Path | str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(configured["root"])
    old = write_profile(root / "old-driver.toml", driver="470.57.02", gpus=[("NVIDIA A100", "8.0")])
    capsys.readouterr()
    code = _lock(configured, tmp_path / "pylock.toml", old.name, extra=("--skip-unfit",))
    err = capsys.readouterr().err
    assert code != 0 and "no profile fits" in err, err
    hint = " ".join(err.split("hint: ", 1)[1].split())
    command = hint.split("`")[1]
    assert command == f"cuda-resolve plan torch==2.14.1 tinyutil --profile {old} --explain", hint
    environ = {**os.environ, "CUDA_RESOLVE_CONFIG": str(configured["config"])}
    words = shlex.split(command)
    done = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", *words[1:]],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert "no profile fits" not in said and "470.57.02" in said, said
