"""How long ``cuda-resolve doctor --json`` takes, beside ``python -m torch.utils.collect_env``.

    python3 bench/doctor_speed.py [--runs 15] [--collect-env-runs 3] [--json FILE]

Each measure is the wall time of a whole process, as a user sees it: ``<this python> -m
cuda_resolve doctor --json`` after one warm-up run (which fills the probe and parsed-index
caches and writes byte code, as an installed package has it), then ``--runs`` runs; the
interpreter's bare start-up (``-c pass``) for scale; and ``-m torch.utils.collect_env`` with
the same interpreter when torch is installed there (found without importing it), else reported
as unavailable. The goals (issue 28, raised from issue 8's 0.3 s and 20x): doctor's median
<= 0.1 s on the H200, collect_env / doctor >= 40 (every check doctor has run).

PYTHONDONTWRITEBYTECODE is dropped from the children's environment: with it every run would
compile every module again, which no installed package does. The doctor runs describe whatever
target they pick themselves (the active virtualenv or conda env, else python3 on PATH); the
report shows which, since a target read in process is faster than one probed in a subprocess.
A measurement script: it asserts nothing and exits 0 unless doctor itself fails.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BUDGET_S = 0.1  # on the H200
RATIO_GOAL = 40.0


def _child_environment() -> dict[str, str]:
    environ = dict(os.environ)
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return environ


def _timed(
    argv: list[str], environ: dict[str, str], *, timeout: float
) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    # From "/": in a checkout, `-m cuda_resolve` would import the working directory's copy
    # (without index_data, which only an install maps) instead of the installed package.
    started = time.perf_counter()
    ran = subprocess.run(
        argv, capture_output=True, env=environ, check=False, timeout=timeout, cwd="/"
    )
    return time.perf_counter() - started, ran


def _summary(samples: list[float]) -> dict[str, Any]:
    return {
        "median_s": round(statistics.median(samples), 4),
        "min_s": round(min(samples), 4),
        "max_s": round(max(samples), 4),
        "runs": len(samples),
        "samples_s": [round(s, 4) for s in samples],
    }


def _doctor(runs: int, environ: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    argv = [sys.executable, "-m", "cuda_resolve", "doctor", "--json"]
    _, first = _timed(argv, environ, timeout=120)  # warm-up: caches and byte code
    try:
        report: dict[str, Any] | None = json.loads(first.stdout)
    except ValueError:
        report = None
    if first.returncode not in (0, 1) or report is None or "environment" not in report:
        said = (first.stdout or first.stderr).decode(errors="replace").strip()[:400]
        raise SystemExit(f"doctor --json failed (exit {first.returncode}): {said}")
    samples = [_timed(argv, environ, timeout=120)[0] for _ in range(runs)]
    return _summary(samples), report


def _collect_env(runs: int, environ: dict[str, str]) -> dict[str, Any]:
    if runs <= 0:
        return {"available": False, "why": "not asked (--collect-env-runs 0)"}
    if importlib.util.find_spec("torch") is None:
        return {"available": False, "why": f"torch is not installed for {sys.executable}"}
    argv = [sys.executable, "-m", "torch.utils.collect_env"]
    samples = []
    for _ in range(runs):
        seconds, ran = _timed(argv, environ, timeout=600)
        if ran.returncode != 0:
            said = ran.stderr.decode(errors="replace").strip().splitlines()
            return {
                "available": False,
                "why": f"collect_env exited {ran.returncode}: {said[-1] if said else ''}"[:300],
            }
        samples.append(seconds)
    return {"available": True, **_summary(samples)}


def _machine(report: dict[str, Any]) -> dict[str, Any]:
    env = report.get("environment", {})
    target = next(
        (note for note in env.get("notes", ()) if note.startswith("target interpreter:")), None
    )
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cuda_resolve": str(Path(importlib.util.find_spec("cuda_resolve").origin or "?").parent),  # type: ignore[union-attr]
        "doctor_target": target,
        "driver": (env.get("driver") or {}).get("version"),
        "gpus": [gpu.get("name") for gpu in env.get("gpu", ())],
        "torch": (env.get("torch") or {}).get("version"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        type=int,
        default=15,
        help="timed doctor --json runs after the warm-up (default 15)",
    )
    parser.add_argument(
        "--collect-env-runs", type=int, default=3, help="collect_env runs (default 3; 0 skips it)"
    )
    parser.add_argument(
        "--json", metavar="FILE", type=Path, help="also write the numbers as JSON to FILE"
    )
    args = parser.parse_args(argv)

    environ = _child_environment()
    doctor, report = _doctor(args.runs, environ)
    startup = _summary(
        [_timed([sys.executable, "-c", "pass"], environ, timeout=60)[0] for _ in range(args.runs)]
    )
    collect_env = _collect_env(args.collect_env_runs, environ)
    ratio = (
        round(collect_env["median_s"] / doctor["median_s"], 1) if collect_env["available"] else None
    )
    # collect_env's first run, with cold caches, is far slower than the next: show both ends.
    ratio_warm = (
        round(collect_env["min_s"] / doctor["median_s"], 1) if collect_env["available"] else None
    )
    budget_met = doctor["median_s"] <= BUDGET_S
    ratio_met = None if ratio is None else ratio >= RATIO_GOAL
    machine = _machine(report or {})
    result: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"{sys.executable} -m cuda_resolve doctor --json",
        "machine": machine,
        "doctor_json": doctor,
        "python_startup": startup,
        "collect_env": collect_env,
        "ratio_collect_env_to_doctor": ratio,
        "ratio_fastest_collect_env_to_doctor": ratio_warm,
        "goals": {
            "doctor_median_budget_s": BUDGET_S,
            "doctor_median_met": budget_met,
            "ratio_goal": RATIO_GOAL,
            "ratio_met": ratio_met,
        },
    }
    print(
        f"python {machine['python']} at {machine['executable']}; {machine['cpus']} CPUs; "
        f"cuda_resolve from {machine['cuda_resolve']}"
    )
    print(
        f"doctor described: {machine['doctor_target'] or '?'}; GPUs: "
        f"{', '.join(machine['gpus']) or 'none'}; torch {machine['torch'] or 'absent'}"
    )
    print(
        f"doctor --json       median {doctor['median_s']:.3f} s  (min {doctor['min_s']:.3f}, max "
        f"{doctor['max_s']:.3f}, {doctor['runs']} runs; budget {BUDGET_S} s: "
        f"{'met' if budget_met else 'NOT met'})"
    )
    print(f"python -c pass      median {startup['median_s']:.3f} s")
    if collect_env["available"]:
        print(
            f"collect_env         median {collect_env['median_s']:.3f} s  (min "
            f"{collect_env['min_s']:.3f}, max {collect_env['max_s']:.3f}, "
            f"{collect_env['runs']} runs)"
        )
        print(
            f"ratio               {ratio}x at collect_env's median, {ratio_warm}x at its fastest "
            f"run  (goal {RATIO_GOAL:g}x at the median: {'met' if ratio_met else 'NOT met'})"
        )
    else:
        print(f"collect_env         unavailable: {collect_env['why']}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
