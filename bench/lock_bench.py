"""Lock and sync timings (issue 16), recorded, not asserted: run from the repo root.

    .venv/bin/python bench/lock_bench.py [--uv PATH] [--out bench/results/lock-DATE.json]

A loopback index of small wheels (tests/test_lock_support.py) stands in for PyPI and the
PyTorch index. Measured: ``cuda-resolve lock`` for 1, 10 and 50 profiles (machine classes
cycling through A100/V100/H100 on 535/550, RTX 4090/3090 on 580, CPU boxes) with the index pages
cached (a warm-up lock first); ``sync --check`` on a venv that matches; ``sync`` of a profile
whose files are all cached, beside plain ``pip install --no-deps`` of the same files, the same
with pip's hash-checking mode (``--require-hashes -r``, as sync runs pip), and ``uv pip install -r
pylock.toml --extra P`` (with --uv), each into a fresh venv, interleaved, median of --runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_lock_support import StaticIndex, make_wheel, serve, write_profile

CLASSES = [
    ("535.183.01", [("NVIDIA A100-SXM4-80GB", "8.0")]),
    ("580.95.05", [("NVIDIA GeForce RTX 4090", "8.9")]),
    (None, []),
    ("550.54.15", [("Tesla V100-SXM2-32GB", "7.0")]),
    ("535.183.01", [("NVIDIA H100 80GB HBM3", "9.0")]),
    ("580.95.05", [("NVIDIA GeForce RTX 3090", "8.6")]),
]


def _cli(*words: str, env: dict[str, str], expect: tuple[int, ...] = (0,)) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cuda_resolve", *words], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in expect:
        raise SystemExit(f"cuda-resolve {' '.join(words)} failed: {done.stderr}")
    return elapsed


def _venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    return folder / "bin" / "python"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uv", help="a uv binary to compare with")
    parser.add_argument("--counts", default="1,10,50", help="numbers of profiles to lock")
    parser.add_argument("--runs", type=int, default=5, help="runs of each sync measurement (median)")
    parser.add_argument("--scratch", type=Path, help="build the index, profiles, locks and venvs here and keep them (for profiling)")
    parser.add_argument("--out", type=Path, default=Path("bench/results") / f"lock-{time.strftime('%Y-%m-%d')}.json")
    args = parser.parse_args()
    results: dict[str, object] = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "python": sys.version.split()[0],
                                  "load_average_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as scratch_text:
        scratch = Path(scratch_text) if args.scratch is None else args.scratch.absolute()
        scratch.mkdir(parents=True, exist_ok=True)
        index = StaticIndex(scratch / "index")
        built = scratch / "built"
        index.add(make_wheel(built, "filelock", "3.20.0"))
        index.add(make_wheel(built, "tinyutil", "1.0", requires=["filelock>=3"]))
        for variant in ("cu126", "cu130", "cu132", "cpu"):
            index.add(make_wheel(built / variant, "filelock", "3.20.0"), variant=variant)
            for n in range(8):  # a closure of some size: torch needs a dozen runtime wheels
                index.add(make_wheel(built / variant, f"nvidia-lib{n}", "1.0"), variant=variant)
            requires = ["filelock", *(f"nvidia-lib{n}==1.0" for n in range(8))]
            index.add(make_wheel(built, "torch", f"2.14.1+{variant}", requires=requires), variant=variant)
        with serve(scratch / "index") as url:
            env = dict(os.environ, CUDA_RESOLVE_CONFIG=str(scratch / "config.toml"), CUDA_RESOLVE_CACHE_DIR=str(scratch / "cache"))
            env.pop("PIP_FIND_LINKS", None)
            (scratch / "config.toml").write_text(f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n'
                                                 f'[[rewrite]]\ncanonical = "https://download.pytorch.org/whl/"\nmirror = "{url}/whl/"\n')
            profiles = []
            for number in range(50):
                driver, gpus = CLASSES[number % len(CLASSES)]
                profiles.append(write_profile(scratch / f"class{number:02d}.toml", driver=driver, gpus=gpus))
            lock_seconds: dict[str, float] = {}
            for count in (int(n) for n in args.counts.split(",")):
                words = ["lock", "torch==2.14.1", "tinyutil", "--index-url", f"{url}/simple", "-o", str(scratch / f"pylock.p{count}.toml")]
                for path in profiles[:count]:
                    words += ["--profile", str(path)]
                _cli(*words, env=env)  # warm: index pages and file facts cached
                lock_seconds[str(count)] = round(statistics.median(_cli(*words, env=env) for _ in range(2)), 3)
            results["lock_seconds_by_profiles"] = lock_seconds
            lock = scratch / "pylock.p10.toml"
            python = _venv(scratch / "synced")
            _cli("sync", str(lock), "--name", "class00", "--python", str(python), env=env)
            results["sync_check_seconds"] = round(statistics.median(
                _cli("sync", str(lock), "--name", "class00", "--python", str(python), "--check", env=env) for _ in range(args.runs)), 3)
            files = sorted((scratch / "cache" / "lock-wheels").rglob("*.whl"))
            hashed = scratch / "hashed.txt"
            hashed.write_text("".join(f"{path.as_uri()} --hash=sha256:{path.parent.name}\n" for path in files))
            sync_runs, pip_runs, hashed_runs, uv_runs = [], [], [], []
            loads = []
            for attempt in range(args.runs):
                loads.append(os.getloadavg()[0])
                fresh = _venv(scratch / f"fresh{attempt}")
                sync_runs.append(_cli("sync", str(lock), "--name", "class00", "--python", str(fresh), env=env))
                plain = _venv(scratch / f"plain{attempt}")
                started = time.perf_counter()
                subprocess.run([str(plain), "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "--no-index", "--quiet",
                                *map(str, files)], check=True, env=env)
                pip_runs.append(time.perf_counter() - started)
                checked = _venv(scratch / f"hashed{attempt}")
                started = time.perf_counter()
                subprocess.run([str(checked), "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "--no-index", "--quiet",
                                "--require-hashes", "-r", str(hashed)], check=True, env=env)
                hashed_runs.append(time.perf_counter() - started)
                if args.uv:
                    # uv knows nothing of cuda-resolve's mirror rules: it gets the lock with the
                    # mirror's prefix written in, as a lab behind that mirror would hand it.
                    mirrored = scratch / "pylock.mirrored.toml"
                    mirrored.write_text(lock.read_text().replace("https://download.pytorch.org/whl/", f"{url}/whl/"))
                    bare = scratch / f"uv{attempt}"
                    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
                    uv_env = dict(env)
                    started = time.perf_counter()
                    done = subprocess.run([args.uv, "pip", "install", "--python", str(bare / "bin" / "python"), "-r", str(mirrored), "--extra", "class00"],
                                          env=uv_env, capture_output=True, text=True)
                    uv_runs.append(time.perf_counter() - started)
                    if done.returncode != 0:
                        raise SystemExit(f"uv failed: {done.stderr[-500:]}")
            results["sync_seconds"] = round(statistics.median(sync_runs), 3)
            results["pip_install_no_deps_seconds"] = round(statistics.median(pip_runs), 3)
            results["pip_install_require_hashes_seconds"] = round(statistics.median(hashed_runs), 3)
            results["sync_over_pip"] = round(statistics.median(sync_runs) / statistics.median(pip_runs), 2)
            results["sync_over_pip_require_hashes"] = round(statistics.median(sync_runs) / statistics.median(hashed_runs), 2)
            results["runs"] = {"sync": [round(t, 3) for t in sync_runs], "pip": [round(t, 3) for t in pip_runs],
                               "pip_require_hashes": [round(t, 3) for t in hashed_runs], "uv": [round(t, 3) for t in uv_runs],
                               "load_average_before_each": [round(x, 2) for x in loads]}
            if uv_runs:
                results["uv_pip_install_extra_seconds"] = round(statistics.median(uv_runs), 3)
            results["files_in_profile"] = len(files)
    results["load_average_at_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
