"""A file that pip refuses for its hash is named in the error, with both hashes.

pip's ERROR line alone ("THESE PACKAGES DO NOT MATCH THE HASHES ...") names neither the file nor
a hash (user walk 2026-12-05, B12: a plan with a tampered hash). The block under it is read here
from real pip's output, refusing a real file.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from _torch_env import copy_venv, standin_torch_wheel

from cuda_resolve.install.pip_hashes import HashMismatch, describe, hash_mismatches
from cuda_resolve.install.transaction import _pip_failed

PINNED = ("a" * 64, "b" * 64)


def _refused_by_pip(tmp_path: Path) -> tuple[list[str], str, Path]:
    wheel = standin_torch_wheel(tmp_path / "links")
    python = copy_venv(tmp_path / "venv")
    requirement = "torch==2.14.1 " + " ".join(f"--hash=sha256:{h}" for h in PINNED)
    (tmp_path / "req.txt").write_text(requirement + "\n")
    pip = [str(python), "-m", "pip", "install", "--no-index", "--isolated"]
    done = subprocess.run(
        [
            *pip,
            "--find-links",
            str(wheel.parent),
            "--require-hashes",
            "-r",
            str(tmp_path / "req.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0, done.stdout + done.stderr
    return (
        (done.stdout + done.stderr).splitlines(),
        hashlib.sha256(wheel.read_bytes()).hexdigest(),
        wheel,
    )


def test_real_pips_refusal_names_the_file_and_both_hashes(tmp_path: Path) -> None:
    lines, real, wheel = _refused_by_pip(tmp_path)
    (refused,) = hash_mismatches(lines)
    assert refused.expected == PINNED and refused.got == real
    assert refused.requirement == f"torch==2.14.1 from {wheel.as_uri()}"  # pip's "(from -r" cut
    error = _pip_failed("torch", lines, tmp_path / "install.log", None)
    said = str(error)
    assert said.startswith("pip install (torch) failed: a file pip fetched is not the one pinned")
    assert f"its sha256 is {real}, not the pinned {PINNED[0]} or {PINNED[1]}" in said
    assert wheel.as_uri() in said and "restored" in str(error.hint)


def test_other_failures_and_other_messages_are_not_read_as_a_mismatch() -> None:
    assert hash_mismatches(["ERROR: No matching distribution found for torch==9"]) == ()
    lines = [
        "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.",
        "    six==1 from https://x/six-1-py3-none-any.whl:",
        "        Expected sha256 " + "c" * 64,
        "             Got        " + "d" * 64,
        "",
        "    two==2 from https://x/two-2-py3-none-any.whl:",
        "        Expected sha256 " + "E" * 64,
        "             Got        " + "f" * 64,
        "    three==3 from https://x/three-3-py3-none-any.whl:",
        "        Expected sha512 " + "9" * 128,
        "             Got        " + "8" * 128,
        "WARNING: something else",
        "        Expected sha256 " + "0" * 64,
        "             Got        " + "1" * 64,
    ]
    assert hash_mismatches(lines) == (
        HashMismatch(
            requirement="six==1 from https://x/six-1-py3-none-any.whl",
            expected=("c" * 64,),
            got="d" * 64,
        ),
        HashMismatch(
            requirement="two==2 from https://x/two-2-py3-none-any.whl",
            expected=("e" * 64,),
            got="f" * 64,
        ),
        HashMismatch(
            requirement="three==3 from https://x/three-3-py3-none-any.whl",
            expected=("9" * 128,),
            got="8" * 128,
            algorithm="sha512",
        ),
    )
    assert describe(hash_mismatches(lines)[-1]).startswith(
        "three==3 from https://x/three-3-py3-none-any.whl: its sha512 is 888"
    )
