"""Warm medians of the installed commands against one torch environment (issue 28), side by side.

    python3 bench/installed_speed.py --bin VENV/bin --python TARGET [--runs 15]
        [--collect-env-runs 3] [--out FILE]

``--bin`` is the bin folder of the venv cuda-resolve is installed in (not editable: what users
run, ``VENV/bin/cuda-resolve``); ``--python`` the target interpreter, one that sees a real torch.
Each command is a whole process, started from ``/``. Two warm-up rounds first (probe caches,
the parsed index, byte code; PYTHONDONTWRITEBYTECODE is dropped), then ``--runs`` rounds, each
running every command once, one after the other, so a load that comes and goes slows all alike:

- ``VENV/bin/python -c pass``: the interpreter's start, for scale;
- ``cuda-resolve detect --json --python TARGET``;
- ``cuda-resolve plan pointnet2_ops kaolin --python TARGET`` (``--arch-list 9.0`` where no GPU
  is seen: plan refuses to build for no GPU otherwise);
- ``cuda-resolve doctor --json --python TARGET``;

then ``TARGET -m torch.utils.collect_env`` ``--collect-env-runs`` times (when TARGET has torch).
Each sample is the wall time and the CPU time of the process and its children (``wait4``), so
a loaded machine shows as wall above CPU.

The goals (issue 28): on the H200 plan <= 0.2 s and doctor --json <= 0.1 s (medians); on any
machine plan <= 2.5x detect --json and collect_env >= 40x doctor --json. The JSON records them
with the machine (CPUs, load, GPUs, driver, Pythons, torch) and doctor's check ids (every check
ran). A measurement: it asserts nothing, and exits 0 unless a command fails.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PLAN_TO_DETECT_GOAL = 2.5
COLLECT_ENV_TO_DOCTOR_GOAL = 40.0
H200_PLAN_S = 0.2
H200_DOCTOR_S = 0.1


def _environment() -> dict[str, str]:
    environ = dict(os.environ)
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return environ


def _timed(argv: list[str], environ: dict[str, str], timeout: float) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the process and the children it waited for, exit status)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ, cwd="/"
    )
    deadline = started + timeout
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            child.kill()
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.0005)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, child.returncode


def _summary(walls: list[float], cpus: list[float]) -> dict[str, Any]:
    return {
        "median_s": round(statistics.median(walls), 4),
        "min_s": round(min(walls), 4),
        "max_s": round(max(walls), 4),
        "cpu_median_s": round(statistics.median(cpus), 4),
        "runs": len(walls),
        "samples_s": [round(s, 4) for s in walls],
    }


def _json_of(argv: list[str], environ: dict[str, str]) -> tuple[int, Any]:
    ran = subprocess.run(argv, capture_output=True, env=environ, check=False, timeout=300, cwd="/")
    try:
        return ran.returncode, json.loads(ran.stdout)
    except ValueError:
        tail = (ran.stderr or ran.stdout).decode(errors="replace").strip()[-600:]
        raise SystemExit(f"{' '.join(argv)}: no JSON (exit {ran.returncode}): {tail}") from None


def _text_of(argv: list[str]) -> str | None:
    try:
        ran = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    except OSError:
        return None
    return (ran.stdout or ran.stderr).strip() or None


def _wheel(bin_dir: Path) -> dict[str, Any]:
    """Where cuda_resolve is imported from in the venv, and the installed wheel's RECORD hash
    (which build of it ran)."""
    code = (
        "import cuda_resolve, importlib.metadata as m, os\n"
        "d = m.distribution('cuda-resolve')\n"
        "print(os.path.dirname(cuda_resolve.__file__))\n"
        "print(d.read_text('direct_url.json') or '')\n"
        "print(d.read_text('RECORD') or '')\n"
    )
    text = _text_of([str(bin_dir / "python"), "-c", code]) or ""
    lines = text.splitlines()
    return {
        "package_dir": lines[0] if lines else None,
        "direct_url": lines[1] if len(lines) > 1 else None,
        "record_sha256": hashlib.sha256("\n".join(lines[2:]).encode()).hexdigest()[:16],
    }


def measure(bin_dir: Path, python: str, runs: int, collect_env_runs: int) -> dict[str, Any]:
    environ = _environment()
    tool = str(bin_dir / "cuda-resolve")
    status, detected = _json_of([tool, "detect", "--json", "--python", python], environ)
    if status != 0:
        raise SystemExit(f"detect --json failed (exit {status})")
    gpus = [str(g.get("name")) for g in detected.get("gpu", ()) if isinstance(g, dict)]
    plan = [tool, "plan", "pointnet2_ops", "kaolin", "--python", python]
    if not gpus:
        plan += ["--arch-list", "9.0"]
    commands = {
        "python_startup": [str(bin_dir / "python"), "-c", "pass"],
        "detect_json": [tool, "detect", "--json", "--python", python],
        "plan": plan,
        "doctor_json": [tool, "doctor", "--json", "--python", python],
    }
    ok = {"python_startup": (0,), "detect_json": (0,), "plan": (0,), "doctor_json": (0, 1)}
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for round_number in range(runs + 2):
        for name, argv in commands.items():
            wall, cpu, code = _timed(argv, environ, timeout=300)
            if code not in ok[name]:
                raise SystemExit(f"{' '.join(argv)} failed (exit {code})")
            if round_number >= 2:  # rounds 0 and 1 warm the caches and byte code
                walls[name].append(wall)
                cpus[name].append(cpu)
    results = {name: _summary(walls[name], cpus[name]) for name in commands}
    _, doctor = _json_of(commands["doctor_json"], environ)
    collect_env = _collect_env(python, collect_env_runs, environ)
    plan_s, detect_s = results["plan"]["median_s"], results["detect_json"]["median_s"]
    doctor_s = results["doctor_json"]["median_s"]
    plan_to_detect = round(plan_s / detect_s, 2)
    collect_to_doctor = (
        round(collect_env["median_s"] / doctor_s, 1) if collect_env.get("available") else None
    )
    on_h200 = any("H200" in name for name in gpus)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": _machine(bin_dir, python, detected),
        "wheel": _wheel(bin_dir),
        "commands": {name: " ".join(argv) for name, argv in commands.items()},
        **results,
        "collect_env": collect_env,
        "plan_to_detect": plan_to_detect,
        "collect_env_to_doctor": collect_to_doctor,
        "doctor_checks": [
            f.get("check") for f in doctor.get("findings", ()) if isinstance(f, dict)
        ],
        "doctor_status": doctor.get("status"),
        "goals": {
            "plan_to_detect_max": PLAN_TO_DETECT_GOAL,
            "plan_to_detect_met": plan_to_detect <= PLAN_TO_DETECT_GOAL,
            "collect_env_to_doctor_min": COLLECT_ENV_TO_DOCTOR_GOAL,
            "collect_env_to_doctor_met": (
                None if collect_to_doctor is None else collect_to_doctor >= 40.0
            ),
            "h200_plan_median_max_s": H200_PLAN_S,
            "h200_doctor_median_max_s": H200_DOCTOR_S,
            "on_h200": on_h200,
            "h200_plan_met": plan_s <= H200_PLAN_S if on_h200 else None,
            "h200_doctor_met": doctor_s <= H200_DOCTOR_S if on_h200 else None,
        },
    }


def _collect_env(python: str, runs: int, environ: dict[str, str]) -> dict[str, Any]:
    if runs <= 0:
        return {"available": False, "why": "not asked (--collect-env-runs 0)"}
    has_torch = _text_of(
        [python, "-c", "import importlib.util as u; print(u.find_spec('torch') is not None)"]
    )
    if has_torch != "True":
        return {"available": False, "why": f"{python} has no torch"}
    argv = [python, "-m", "torch.utils.collect_env"]
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        wall, cpu, code = _timed(argv, environ, timeout=600)
        if code != 0:
            return {"available": False, "why": f"collect_env exited {code}"}
        walls.append(wall)
        cpus.append(cpu)
    return {"available": True, "command": " ".join(argv), **_summary(walls, cpus)}


def _machine(bin_dir: Path, python: str, detected: dict[str, Any]) -> dict[str, Any]:
    torch = detected.get("torch") or {}
    driver = detected.get("driver") or {}
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "tool_python": _text_of([str(bin_dir / "python"), "-VV"]),
        "target": python,
        "target_python": (detected.get("python") or {}).get("version"),
        "torch": torch.get("version") if isinstance(torch, dict) else None,
        "gpus": [str(g.get("name")) for g in detected.get("gpu", ()) if isinstance(g, dict)],
        "driver": driver.get("version") if isinstance(driver, dict) else None,
    }


def _print(result: dict[str, Any], out: Path) -> None:
    machine = result["machine"]
    print(
        f"{machine['host']}: {machine['cpus']} CPUs, load {machine['load_average_at_start']}, "
        f"GPUs {', '.join(machine['gpus']) or 'none'}, torch {machine['torch']}"
    )
    for name in ("python_startup", "detect_json", "plan", "doctor_json"):
        row = result[name]
        print(
            f"{name:15} median {row['median_s']:.3f} s (min {row['min_s']:.3f}, max "
            f"{row['max_s']:.3f}; CPU {row['cpu_median_s']:.3f} s; {row['runs']} runs)"
        )
    collect = result["collect_env"]
    if collect.get("available"):
        print(f"collect_env     median {collect['median_s']:.3f} s ({collect['runs']} runs)")
    else:
        print(f"collect_env     unavailable: {collect['why']}")
    goals = result["goals"]
    print(
        f"plan / detect --json = {result['plan_to_detect']}x (goal <= {PLAN_TO_DETECT_GOAL}x: "
        f"{'met' if goals['plan_to_detect_met'] else 'NOT met'}); collect_env / doctor = "
        f"{result['collect_env_to_doctor']}x (goal >= {COLLECT_ENV_TO_DOCTOR_GOAL:g}x)"
    )
    if goals["on_h200"]:
        print(
            f"H200: plan {'met' if goals['h200_plan_met'] else 'NOT met'} (<= {H200_PLAN_S} s), "
            f"doctor {'met' if goals['h200_doctor_met'] else 'NOT met'} (<= {H200_DOCTOR_S} s)"
        )
    print(f"doctor ran {len(result['doctor_checks'])} checks; wrote {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, required=True, help="the tool venv's bin folder")
    parser.add_argument("--python", required=True, help="the target interpreter (with torch)")
    parser.add_argument("--runs", type=int, default=15, help="timed rounds (default 15)")
    parser.add_argument("--collect-env-runs", type=int, default=3, help="default 3; 0 skips")
    parser.add_argument("--out", type=Path, required=True, help="where the JSON goes")
    args = parser.parse_args(argv)
    result = measure(args.bin, args.python, args.runs, args.collect_env_runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    _print(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
