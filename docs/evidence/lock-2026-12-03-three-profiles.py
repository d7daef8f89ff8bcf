"""The three-profile lock of docs/evidence/lock-2026-12-03.md, on the CPU machine (network: PyPI).

    .venv/bin/python docs/evidence/lock-2026-12-03-three-profiles.py OUT

Profiles: an RTX 4090 on driver 580, an A100 on 535, a CPU-only box (Python 3.11, glibc 2.35).
Requests: ``torch requests``. The 4090's torch is the build PyPI serves, locked for real from
PyPI (its nvidia-* closure from PEP 658 metadata, sizes and hashes from PEP 691 JSON; no wheel is
downloaded); the A100's and the CPU box's torch come from the PyTorch index, which does not answer
here: a loopback stand-in of small wheels behind a mirror rewrite, locked under
download.pytorch.org's canonical URLs. ``requests`` and its closure come from PyPI for all three.
Then sync installs the A100 and CPU profiles into fresh venvs and sync --check checks them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from test_lock_support import StaticIndex, make_wheel, serve, write_profile  # noqa: E402


def run(*words: str, env: dict[str, str], log: list[str]) -> int:
    started = time.perf_counter()
    done = subprocess.run(list(words), env=env, capture_output=True, text=True)
    shown = " ".join(w if "/" not in w or w.startswith("http") else Path(w).name for w in words)
    log.append(
        f"$ {shown}\n{done.stdout}{done.stderr}(exit {done.returncode}, {time.perf_counter() - started:.1f} s)\n"
    )
    print(log[-1], flush=True)
    return done.returncode


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    stand_in = StaticIndex(out / "stand-in")
    built = out / "built"
    for variant in ("cu126", "cpu"):
        stand_in.add(make_wheel(built / variant, "filelock", "3.20.0"), variant=variant)
    stand_in.add(make_wheel(built, "nvidia-cuda-runtime-cu12", "12.6.77"), variant="cu126")
    stand_in.add(
        make_wheel(
            built,
            "torch",
            "2.14.1+cu126",
            requires=["filelock", "nvidia-cuda-runtime-cu12==12.6.77; platform_system == 'Linux'"],
        ),
        variant="cu126",
    )
    stand_in.add(make_wheel(built, "torch", "2.15.0+cpu", requires=["filelock"]), variant="cpu")
    rtx = write_profile(
        out / "rtx4090.toml", driver="580.95.05", gpus=[("NVIDIA GeForce RTX 4090", "8.9")]
    )
    a100 = write_profile(
        out / "a100.toml", driver="535.183.01", gpus=[("NVIDIA A100-SXM4-80GB", "8.0")]
    )
    cpu = write_profile(out / "cpu.toml")
    env = dict(
        os.environ,
        CUDA_RESOLVE_CACHE_DIR=str(out / "cache"),
        CUDA_RESOLVE_CONFIG=str(out / "config.toml"),
    )
    env.pop("PIP_FIND_LINKS", None)
    log: list[str] = []
    cli = [sys.executable, "-m", "cuda_resolve"]
    with serve(out / "stand-in") as url:
        (out / "config.toml").write_text(
            f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n'
            f'[[rewrite]]\ncanonical = "https://download.pytorch.org/whl/"\nmirror = "{url}/whl/"\n'
        )
        lock = out / "pylock.toml"
        lock_words = [
            *cli,
            "lock",
            "torch",
            "requests",
            "-o",
            str(lock),
            "--profile",
            str(rtx),
            "--profile",
            str(a100),
            "--profile",
            str(cpu),
        ]
        run(*lock_words, env=env, log=log)
        first = lock.read_bytes()
        run(*lock_words, env=env, log=log)
        log.append(f"relocked: same bytes: {lock.read_bytes() == first}\n")
        run(*lock_words, "--check", env=env, log=log)
        run(
            sys.executable,
            "-c",
            "import tomllib,sys; from packaging.pylock import Pylock; "
            "p=Pylock.from_dict(tomllib.load(open(sys.argv[1],'rb'))); p.validate(); "
            "print('packaging.pylock: valid;', len(p.packages), 'packages; extras', list(p.extras or []))",
            str(lock),
            env=env,
            log=log,
        )
        for name in ("a100", "cpu"):
            subprocess.run([sys.executable, "-m", "venv", str(out / f"venv-{name}")], check=True)
            python = str(out / f"venv-{name}" / "bin" / "python")
            run(
                *cli,
                "sync",
                str(lock),
                "--name",
                name,
                "--python",
                python,
                "--check",
                env=env,
                log=log,
            )
            run(*cli, "sync", str(lock), "--name", name, "--python", python, env=env, log=log)
            run(
                *cli,
                "sync",
                str(lock),
                "--name",
                name,
                "--python",
                python,
                "--check",
                env=env,
                log=log,
            )
        python = str(out / "venv-cpu" / "bin" / "python")
        run(
            *cli,
            "sync",
            str(lock),
            "--name",
            "auto",
            "--python",
            python,
            "--check",
            env=env,
            log=log,
        )
        run(
            *cli,
            "sync",
            str(lock),
            "--name",
            "rtx4090",
            "--python",
            python,
            "--dry-run",
            env=env,
            log=log,
        )
    (out / "transcript.txt").write_text("\n".join(log))


if __name__ == "__main__":
    main()
