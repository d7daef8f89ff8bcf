"""uv as sync's engine (issue 30), recorded, not asserted: run from the repo root.

    .venv/bin/python bench/uv_engine.py [--runs N] [--profiles small,medium,torch]
        [--engines sync,sync_no_verify,sync_pip,pip,uv,uv_import] [--real-torch WHEEL]
        [--real-deps DIR]
        [--out bench/results/uv-engine-DATE-MACHINE.json]

On the same files in one run, each into a fresh copy of one venv (pip, nothing else), interleaved,
medians of --runs (wall and CPU seconds; CPU time hardly moves with a shared machine's load):

- ``sync``: ``cuda-resolve sync`` of a lock whose files are cached (``--installer auto``: uv);
- ``sync_no_verify``: the same with ``--no-verify`` (no import check after installing);
- ``sync_pip``: the same with ``--installer pip``;
- ``pip``: plain ``pip install --no-deps --no-index --quiet`` of the same wheel files;
- ``uv``: plain ``uv pip install --no-deps --offline -r FILE`` of them, its cache warmed (the
  same ``UV_CACHE_DIR`` sync uses, filled by a first sync);
- ``uv_import``: that, then ``python -c "import torch"`` in the venv: the least any install that
  checks its import can take (sync's import check is that import, in one fresh interpreter).

Sync's own ``timings`` (its ``--json``: read and decide, stash, uv install, installed list,
import check, ...) are kept per run, and their medians, so the gap to plain uv is explained.

Profiles: ``small`` (a stand-in torch and 9 small wheels, kB), ``medium`` (10 wheels of 200
files of incompressible text each: tens of MB), ``torch`` (a real torch wheel and its closure,
--real-torch and --real-deps: ``pip download --no-deps -d DIR`` of its requirements), each locked
for one CPU profile from a loopback stand-in of PyPI and the PyTorch index.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _torch_env import copy_venv
from test_lock_support import StaticIndex, make_wheel, serve, write_profile

from cuda_resolve.install.uv import find_uv

ROOT = Path(__file__).resolve().parent.parent


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children)."""
    wall, cpu, _ = _timed_output(command, env)
    return wall, cpu


def _timed_output(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the command and its children, its stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(command[:6])} failed: {done.stdout[-800:]} {done.stderr[-800:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _small(folder: Path, index: StaticIndex) -> str:
    """A stand-in torch needing filelock and 8 runtime wheels (as torch needs nvidia-*)."""
    built = folder / "built"
    index.add(make_wheel(built, "filelock", "3.20.0"), variant="cpu")
    for n in range(8):
        index.add(make_wheel(built, f"runtime-lib{n}", "1.0"), variant="cpu")
    requires = ["filelock", *(f"runtime-lib{n}==1.0" for n in range(8))]
    index.add(make_wheel(built, "torch", "2.14.1+cpu", requires=requires), variant="cpu")
    return "torch==2.14.1"


def _medium(folder: Path, index: StaticIndex) -> str:
    """The same closure, each wheel 200 files of incompressible text (about 30 MB in all)."""
    built = folder / "built"

    def payload(module: str) -> dict[str, str]:
        return {
            f"{module}/part{n:03d}.py": "DATA = '''"
            + base64.b64encode(os.urandom(15_000)).decode()
            + "'''\n"
            for n in range(200)
        } | {f"{module}/__init__.py": "VERSION = 1\n"}

    index.add(make_wheel(built, "filelock", "3.20.0", files=payload("filelock")), variant="cpu")
    for n in range(8):
        wheel = make_wheel(built, f"runtime-lib{n}", "1.0", files=payload(f"runtime_lib{n}"))
        index.add(wheel, variant="cpu")
    requires = ["filelock", *(f"runtime-lib{n}==1.0" for n in range(8))]
    torch = make_wheel(built, "torch", "2.14.1+cpu", requires=requires, files=payload("torch"))
    index.add(torch, variant="cpu")
    return "torch==2.14.1"


def _real(args: argparse.Namespace, index: StaticIndex) -> str:
    from packaging.utils import parse_wheel_filename

    for wheel in [args.real_torch, *sorted(args.real_deps.glob("*.whl"))]:
        index.add(wheel, variant="cpu")
        index.add(wheel)
    return "torch==" + str(parse_wheel_filename(args.real_torch.name)[1]).split("+")[0]


def _profile(
    name: str, args: argparse.Namespace, scratch: Path, runs: int, engines: list[str]
) -> dict[str, object]:
    folder = scratch / name
    index = StaticIndex(folder / "index")
    request = {"small": _small, "medium": _medium}.get(name, lambda f, i: _real(args, i))(
        folder, index
    )
    python = f"{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"
    profile = write_profile(folder / "cpu.toml", name="cpu", python=python)
    uv = find_uv(os.environ)
    if uv is None:
        raise SystemExit("uv is not installed: pip install 'cuda-resolve[fast]'")
    with serve(folder / "index") as url:
        env = dict(
            os.environ,
            CUDA_RESOLVE_CONFIG=str(folder / "config.toml"),
            CUDA_RESOLVE_CACHE_DIR=str(folder / "cache"),
            UV_CACHE_DIR=str(folder / "uv-cache"),
        )
        env.pop("PIP_FIND_LINKS", None)
        (folder / "config.toml").write_text(
            f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n'
            f'[[rewrite]]\ncanonical = "https://download.pytorch.org/whl/"\nmirror = "{url}/whl/"\n'
        )
        lock = folder / "pylock.toml"
        cli = [sys.executable, "-m", "cuda_resolve"]
        _timed([*cli, "lock", request, "--index-url", f"{url}/simple", "--profile", str(profile),
                "-o", str(lock)], env)  # fmt: skip
        # The first sync fetches the files into the lock cache and unpacks them into uv's.
        _timed([*cli, "sync", str(lock), "--python", str(copy_venv(folder / "warm"))], env)
        files = sorted((folder / "cache" / "lock-wheels").rglob("*.whl"))
        hashed = folder / "hashed.txt"
        hashed.write_text("".join(f"{p.as_uri()} --hash=sha256:{p.parent.name}\n" for p in files))
        commands = {
            "sync": lambda venv: [*cli, "sync", str(lock), "--python", str(venv), "--json"],
            "sync_no_verify": lambda venv: [
                *(*cli, "sync", str(lock), "--python", str(venv), "--json", "--no-verify")
            ],
            "sync_pip": lambda venv: [
                *(*cli, "sync", str(lock), "--python", str(venv), "--installer", "pip")
            ],
            "pip": lambda venv: [
                *(str(venv), "-m", "pip", "install", "--disable-pip-version-check"),
                *("--no-deps", "--no-index", "--quiet", *map(str, files)),
            ],
            "uv": lambda venv: [
                *(uv, "pip", "install", "--python", str(venv), "--no-deps", "--offline"),
                *("--require-hashes", "-r", str(hashed)),
            ],
        }
        unknown = set(engines) - {*commands, "uv_import"}
        if unknown:
            raise SystemExit(f"--engines: unknown {', '.join(sorted(unknown))}")
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in engines}
        phases: list[dict[str, float]] = []
        unchecked: list[dict[str, float]] = []  # sync --no-verify's timings
        loads = []
        for attempt in range(runs):
            loads.append(round(os.getloadavg()[0], 2))
            for engine in engines:
                venv = copy_venv(folder / f"{engine}{attempt}")
                if engine == "uv_import":  # plain uv, then the import sync's check makes
                    uv_wall, uv_cpu = _timed(commands["uv"](venv), env)
                    check = [str(venv), "-W", "ignore", "-c", "import torch"]
                    import_wall, import_cpu = _timed(check, env)
                    measured[engine].append((uv_wall + import_wall, uv_cpu + import_cpu))
                    measured.setdefault("import", []).append((import_wall, import_cpu))
                else:
                    wall, cpu, said = _timed_output(commands[engine](venv), env)
                    measured[engine].append((wall, cpu))
                    if engine == "sync":
                        phases.append(json.loads(said)["timings"])
                    elif engine == "sync_no_verify":
                        unchecked.append(json.loads(said)["timings"])
                shutil.rmtree(folder / f"{engine}{attempt}", ignore_errors=True)
    out: dict[str, object] = {
        "files": len(files),
        "bytes": sum(path.stat().st_size for path in files),
        "load_average_before_each": loads,
    }
    for engine, pairs in measured.items():
        out[f"{engine}_wall_seconds"] = round(statistics.median(w for w, _ in pairs), 3)
        out[f"{engine}_cpu_seconds"] = round(statistics.median(c for _, c in pairs), 3)
        out[f"{engine}_runs"] = [[round(w, 3), round(c, 3)] for w, c in pairs]
    medians = {
        f"{engine}_{kind}": statistics.median(pair[index] for pair in pairs)
        for engine, pairs in measured.items()
        for index, kind in enumerate(("wall", "cpu"))
    }
    if phases:
        out["sync_timings_runs"] = phases
        out["sync_timings_median"] = {
            name: round(statistics.median(run.get(name, 0.0) for run in phases), 3)
            for name in phases[0]
        }
    if unchecked:
        out["sync_no_verify_timings_median"] = {
            name: round(statistics.median(run.get(name, 0.0) for run in unchecked), 3)
            for name in unchecked[0]
        }
    for kind in ("wall", "cpu"):
        # sync (with its import check) against pip, uv and uv plus one import of torch;
        # sync --no-verify against plain uv, which checks no import either.
        for ours, others in (("sync", ("pip", "uv", "uv_import")), ("sync_no_verify", ("uv",))):
            mine = medians.get(f"{ours}_{kind}")
            if mine is None:
                continue
            for other in others:
                if f"{other}_{kind}" not in medians:
                    continue
                if other == "pip":
                    out[f"{ours}_over_pip_{kind}"] = round(mine / medians[f"pip_{kind}"], 3)
                else:
                    out[f"{ours}_minus_{other}_{kind}_seconds"] = round(
                        mine - medians[f"{other}_{kind}"], 3
                    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profiles", default="small,medium")
    parser.add_argument("--engines", default="sync,sync_no_verify,sync_pip,pip,uv,uv_import")
    parser.add_argument("--real-torch", type=Path, metavar="WHEEL")
    parser.add_argument("--real-deps", type=Path, metavar="DIR")
    parser.add_argument("--scratch", type=Path, help="work here and keep it")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    machine = os.environ.get("BENCH_MACHINE") or platform.node() or "unknown"
    uv = find_uv(os.environ)
    results: dict[str, object] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "uv": subprocess.run([str(uv), "--version"], capture_output=True, text=True).stdout.strip(),
        "load_average_at_start": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="uv-engine-bench-") as scratch_text:
        scratch = args.scratch.absolute() if args.scratch else Path(scratch_text)
        scratch.mkdir(parents=True, exist_ok=True)
        for name in args.profiles.split(","):
            if name == "torch" and (args.real_torch is None or args.real_deps is None):
                raise SystemExit("the torch profile needs --real-torch WHEEL and --real-deps DIR")
            results[name] = _profile(name, args, scratch, args.runs, args.engines.split(","))
            print(json.dumps({name: results[name]}, indent=2), flush=True)
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    out = args.out or ROOT / "bench" / "results" / (
        f"uv-engine-{time.strftime('%Y-%m-%d')}-{machine}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
