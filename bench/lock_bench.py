"""Lock and sync timings (issue 16), recorded, not asserted: run from the repo root.

    .venv/bin/python bench/lock_bench.py [--uv PATH] [--runs N] [--counts 1,10,50] [--scratch DIR]
        [--real-torch torch-...whl --real-deps DIR] [--out bench/results/lock-DATE.json]

A loopback index of small wheels (tests/test_lock_support.py) stands in for PyPI and the
PyTorch index. Measured: ``cuda-resolve lock`` for 1, 10 and 50 profiles (machine classes
cycling through A100/V100/H100 on 535/550, RTX 4090/3090 on 580, CPU boxes) with the index pages
cached (a warm-up lock first); ``sync --check`` on a venv that matches; ``sync`` of a profile
whose files are all cached, beside plain ``pip install --no-deps`` of the same files, the same
with pip's hash-checking mode (``--require-hashes -r``, as sync runs pip), and ``uv pip install -r
pylock.toml --extra P`` (with --uv, its own cache warmed first), each into a fresh venv,
interleaved, medians of --runs, wall and CPU seconds (CPU time hardly moves with the load of a
shared machine). With --real-torch, the same for a CPU profile of a real torch wheel and its
closure (--real-deps: ``pip download --only-binary=:all: -d DIR`` of its requirements), served
by a loopback stand-in of the PyTorch index.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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
    done = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", *words], env=env, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in expect:
        raise SystemExit(f"cuda-resolve {' '.join(words)} failed: {done.stderr}")
    return elapsed


def _venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    return folder / "bin" / "python"


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children): CPU time hardly moves with
    the machine's load, wall time does."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(command[:6])} failed: {done.stdout[-800:]} {done.stderr[-800:]}"
        )
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _compare_sync(
    scratch: Path,
    lock: Path,
    profile: str,
    env: dict[str, str],
    url: str,
    runs: int,
    uv: str | None,
) -> dict[str, object]:
    """``sync`` of ``profile`` (its files all cached) into fresh venvs, beside pip and uv given the
    same files, interleaved; medians of wall and CPU seconds, and every run."""
    scratch.mkdir(parents=True, exist_ok=True)
    cache = Path(env["CUDA_RESOLVE_CACHE_DIR"]) / "lock-wheels"
    _cli(
        "sync", str(lock), "--name", profile, "--python", str(_venv(scratch / "warm")), env=env
    )  # fills the cache
    files = sorted(cache.rglob("*.whl"))  # the cache holds this profile's files only
    hashed = scratch / "hashed.txt"
    hashed.write_text(
        "".join(f"{path.as_uri()} --hash=sha256:{path.parent.name}\n" for path in files)
    )
    mirrored = scratch / "pylock.mirrored.toml"  # uv knows nothing of cuda-resolve's mirror rules
    mirrored.write_text(
        lock.read_text().replace("https://download.pytorch.org/whl/", f"{url}/whl/")
    )
    uv_env = dict(env, UV_CACHE_DIR=str(scratch / "uv-cache"))

    def uv_install(folder: Path) -> list[str]:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
        return [
            str(uv),
            "pip",
            "install",
            "--python",
            str(folder / "bin" / "python"),
            "-r",
            str(mirrored),
            "--extra",
            profile,
        ]

    if uv:
        _timed(uv_install(scratch / "uv-warm"), uv_env)  # uv's own cache gets the files first
    measured: dict[str, list[tuple[float, float]]] = {
        "sync": [],
        "pip": [],
        "pip_require_hashes": [],
        "uv": [],
    }
    loads = []
    for attempt in range(runs):
        loads.append(round(os.getloadavg()[0], 2))
        fresh = _venv(scratch / f"sync{attempt}")
        measured["sync"].append(
            _timed(
                [
                    sys.executable,
                    "-m",
                    "cuda_resolve",
                    "sync",
                    str(lock),
                    "--name",
                    profile,
                    "--python",
                    str(fresh),
                ],
                env,
            )
        )
        plain = _venv(scratch / f"pip{attempt}")
        measured["pip"].append(
            _timed(
                [
                    str(plain),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--no-index",
                    "--quiet",
                    *map(str, files),
                ],
                env,
            )
        )
        checked = _venv(scratch / f"hashed{attempt}")
        measured["pip_require_hashes"].append(
            _timed(
                [
                    str(checked),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--no-index",
                    "--quiet",
                    "--require-hashes",
                    "-r",
                    str(hashed),
                ],
                env,
            )
        )
        if uv:
            measured["uv"].append(_timed(uv_install(scratch / f"uv{attempt}"), uv_env))
        for folder in ("sync", "pip", "hashed", "uv"):  # a real torch is 1 GB installed
            shutil.rmtree(scratch / f"{folder}{attempt}", ignore_errors=True)
    out: dict[str, object] = {
        "files": len(files),
        "bytes": sum(path.stat().st_size for path in files),
        "load_average_before_each": loads,
    }
    for name, pairs in measured.items():
        if pairs:
            out[f"{name}_wall_seconds"] = round(statistics.median(w for w, _ in pairs), 3)
            out[f"{name}_cpu_seconds"] = round(statistics.median(c for _, c in pairs), 3)
            out[f"{name}_runs"] = [[round(w, 3), round(c, 3)] for w, c in pairs]
    for base in ("pip", "pip_require_hashes"):
        out[f"sync_over_{base}_wall"] = round(
            statistics.median(w for w, _ in measured["sync"])
            / statistics.median(w for w, _ in measured[base]),
            2,
        )
        out[f"sync_over_{base}_cpu"] = round(
            statistics.median(c for _, c in measured["sync"])
            / statistics.median(c for _, c in measured[base]),
            2,
        )
    return out


def _real_torch(args: argparse.Namespace, *, scratch_base: Path) -> dict[str, object]:
    """A CPU profile of this Python locking a real torch wheel (from a stand-in PyTorch index that
    serves it and its closure's wheels), then :func:`_compare_sync` on it."""
    from packaging.utils import parse_wheel_filename

    scratch = scratch_base.absolute() / "real"
    index = StaticIndex(scratch / "index")
    if not (scratch / "index" / "whl" / "cpu").is_dir():
        for wheel in [args.real_torch, *sorted(args.real_deps.glob("*.whl"))]:
            index.add(wheel, variant="cpu")
            index.add(wheel)
    version = str(parse_wheel_filename(args.real_torch.name)[1]).split("+")[0]
    python = f"{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"
    profile = write_profile(scratch / "cpu.toml", name="cpu", python=python)
    with serve(scratch / "index") as url:
        env = dict(
            os.environ,
            CUDA_RESOLVE_CONFIG=str(scratch / "config.toml"),
            CUDA_RESOLVE_CACHE_DIR=str(scratch / "cache"),
        )
        env.pop("PIP_FIND_LINKS", None)
        (scratch / "config.toml").write_text(
            f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n'
            f'[[rewrite]]\ncanonical = "https://download.pytorch.org/whl/"\nmirror = "{url}/whl/"\n'
        )
        lock = scratch / "pylock.toml"
        _cli(
            "lock",
            f"torch=={version}",
            "--index-url",
            f"{url}/simple",
            "--profile",
            str(profile),
            "-o",
            str(lock),
            env=env,
        )
        python_path = _venv(scratch / "checked")
        _cli("sync", str(lock), "--name", "cpu", "--python", str(python_path), env=env)
        check = [
            _timed(
                [
                    sys.executable,
                    "-m",
                    "cuda_resolve",
                    "sync",
                    str(lock),
                    "--name",
                    "cpu",
                    "--python",
                    str(python_path),
                    "--check",
                ],
                env,
            )
            for _ in range(args.runs)
        ]
        out = {
            "torch": args.real_torch.name,
            "sync_check_wall_seconds": round(statistics.median(w for w, _ in check), 3),
            "sync_check_cpu_seconds": round(statistics.median(c for _, c in check), 3),
        }
        out.update(_compare_sync(scratch / "runs", lock, "cpu", env, url, args.runs, args.uv))
        return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uv", help="a uv binary to compare with")
    parser.add_argument("--counts", default="1,10,50", help="numbers of profiles to lock")
    parser.add_argument(
        "--runs", type=int, default=5, help="runs of each sync measurement (median)"
    )
    parser.add_argument(
        "--real-torch",
        type=Path,
        metavar="WHEEL",
        help="also sync a CPU profile of this real torch wheel (and --real-deps)",
    )
    parser.add_argument(
        "--real-deps",
        type=Path,
        metavar="DIR",
        help="the wheels of that torch's closure (pip download ... -d DIR)",
    )
    parser.add_argument(
        "--scratch",
        type=Path,
        help="build the index, profiles, locks and venvs here and keep them (for profiling)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("bench/results") / f"lock-{time.strftime('%Y-%m-%d')}.json"
    )
    args = parser.parse_args()
    results: dict[str, object] = {
        "machine": os.uname().nodename,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "load_average_at_start": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory() as scratch_text:
        scratch = Path(scratch_text) if args.scratch is None else args.scratch.absolute()
        if args.real_torch and args.scratch is None:
            args.scratch = Path(scratch_text)
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
            index.add(
                make_wheel(built, "torch", f"2.14.1+{variant}", requires=requires), variant=variant
            )
        with serve(scratch / "index") as url:
            env = dict(
                os.environ,
                CUDA_RESOLVE_CONFIG=str(scratch / "config.toml"),
                CUDA_RESOLVE_CACHE_DIR=str(scratch / "cache"),
            )
            env.pop("PIP_FIND_LINKS", None)
            (scratch / "config.toml").write_text(
                f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n'
                '[[rewrite]]\ncanonical = "https://download.pytorch.org/whl/"\nmirror = '
                f'"{url}/whl/"\n'
            )
            profiles = []
            for number in range(50):
                driver, gpus = CLASSES[number % len(CLASSES)]
                profiles.append(
                    write_profile(scratch / f"class{number:02d}.toml", driver=driver, gpus=gpus)
                )
            lock_seconds: dict[str, float] = {}
            for count in (int(n) for n in args.counts.split(",") if n):
                words = [
                    "lock",
                    "torch==2.14.1",
                    "tinyutil",
                    "--index-url",
                    f"{url}/simple",
                    "-o",
                    str(scratch / f"pylock.p{count}.toml"),
                ]
                for path in profiles[:count]:
                    words += ["--profile", str(path)]
                _cli(*words, env=env)  # warm: index pages and file facts cached
                lock_seconds[str(count)] = round(
                    statistics.median(_cli(*words, env=env) for _ in range(2)), 3
                )
            results["lock_seconds_by_profiles"] = lock_seconds
            lock = scratch / "pylock.p10.toml"
            if not lock.is_file():  # the sync measurements use the 10-profile lock
                words = [
                    "lock",
                    "torch==2.14.1",
                    "tinyutil",
                    "--index-url",
                    f"{url}/simple",
                    "-o",
                    str(lock),
                ]
                _cli(
                    *words,
                    *(word for path in profiles[:10] for word in ("--profile", str(path))),
                    env=env,
                )
            python = _venv(scratch / "synced")
            _cli("sync", str(lock), "--name", "class00", "--python", str(python), env=env)
            results["sync_check_seconds"] = round(
                statistics.median(
                    _cli(
                        "sync",
                        str(lock),
                        "--name",
                        "class00",
                        "--python",
                        str(python),
                        "--check",
                        env=env,
                    )
                    for _ in range(args.runs)
                ),
                3,
            )
            results["small_profile"] = _compare_sync(
                scratch / "small", lock, "class00", env, url, args.runs, args.uv
            )
    if args.real_torch:
        results["real_torch_profile"] = _real_torch(args, scratch_base=args.scratch)
    results["load_average_at_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
