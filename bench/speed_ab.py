"""Two installs of cuda-resolve timed against each other, interleaved (issue 28): a before and an
after measured in the same minutes, so that a loaded machine (2 cores shared with other work)
slows both alike.

    python3 bench/speed_ab.py --a VENV_A/bin --b VENV_B/bin --python TARGET [--runs 15]
        [--out FILE]

Each of ``--a`` and ``--b`` is the bin folder of a venv with cuda-resolve installed (not
editable). Every round runs, for each command, A then B: ``python -c pass``, ``cuda-resolve
detect --json``, ``plan pointnet2_ops kaolin`` (``--arch-list 9.0``: it runs where no GPU is)
and ``doctor --json``, all against ``--python TARGET`` (a venv with a real torch), from ``/``.
One warm-up round first. Samples are the wall time and the CPU time of the process and the
children it waited for (``wait4``): under load the wall times swell, the CPU times less, and the
A/B difference of either is what to read. Writes JSON with the machine; asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _timed(argv: list[str], environ: dict[str, str]) -> tuple[float, float, int]:
    started = time.perf_counter()
    child = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ, cwd="/"
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, child.returncode


def _row(walls: list[float], cpus: list[float]) -> dict[str, Any]:
    return {
        "wall_median_s": round(statistics.median(walls), 4),
        "wall_min_s": round(min(walls), 4),
        "cpu_median_s": round(statistics.median(cpus), 4),
        "cpu_min_s": round(min(cpus), 4),
        "runs": len(walls),
    }


def measure(a: Path, b: Path, python: str, runs: int) -> dict[str, Any]:
    environ = dict(os.environ)
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    commands = {
        "python_startup": ["{bin}/python", "-c", "pass"],
        "detect_json": ["{bin}/cuda-resolve", "detect", "--json", "--python", python],
        "plan": [
            "{bin}/cuda-resolve",
            *("plan", "pointnet2_ops", "kaolin", "--python", python, "--arch-list", "9.0"),
        ],
        "doctor_json": ["{bin}/cuda-resolve", "doctor", "--json", "--python", python],
    }
    sides = {"a": a, "b": b}
    samples: dict[tuple[str, str], tuple[list[float], list[float]]] = {
        (side, name): ([], []) for side in sides for name in commands
    }
    for round_number in range(runs + 1):
        for name, argv in commands.items():
            for side, folder in sides.items():
                command = [word.replace("{bin}", str(folder)) for word in argv]
                wall, cpu, code = _timed(command, environ)
                if code not in (0, 1):  # doctor: 1 = findings
                    raise SystemExit(f"{' '.join(command)} failed (exit {code})")
                if round_number:
                    samples[side, name][0].append(wall)
                    samples[side, name][1].append(cpu)
    result: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "host": platform.node(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "python": sys.version.split()[0],
            "target": python,
        },
        "a": str(a),
        "b": str(b),
    }
    for name in commands:
        rows = {side: _row(*samples[side, name]) for side in sides}
        result[name] = {
            **rows,
            "b_over_a_cpu": round(rows["b"]["cpu_median_s"] / rows["a"]["cpu_median_s"], 3),
            "b_over_a_wall": round(rows["b"]["wall_median_s"] / rows["a"]["wall_median_s"], 3),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="bin folder of the 'before' venv")
    parser.add_argument("--b", type=Path, required=True, help="bin folder of the 'after' venv")
    parser.add_argument("--python", required=True, help="the target interpreter (with torch)")
    parser.add_argument("--runs", type=int, default=15, help="timed rounds (default 15)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    result = measure(args.a, args.b, args.python, args.runs)
    for name in ("python_startup", "detect_json", "plan", "doctor_json"):
        row = result[name]
        print(
            f"{name:15} A: wall {row['a']['wall_median_s'] * 1000:6.1f} ms, CPU "
            f"{row['a']['cpu_median_s'] * 1000:6.1f} ms   B: wall "
            f"{row['b']['wall_median_s'] * 1000:6.1f} ms, CPU "
            f"{row['b']['cpu_median_s'] * 1000:6.1f} ms   B/A CPU {row['b_over_a_cpu']}"
        )
    print(f"load at the end: {result['machine']['load_average_at_end']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
