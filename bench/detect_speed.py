"""How long detection takes: in process, per probe, and as ``cuda-resolve`` commands.

Run on the machine being measured (the targets are for the H200: in-process detection
<= 15 ms, ``cuda-resolve doctor --json`` <= 0.3 s wall):

    python bench/detect_speed.py [--python PATH] [--runs 10] [--collect-env]

"cold" is the first detection with an empty probe cache (nvcc, compilers and NVML answers are
then cached on disk); "warm" is the median of the following runs, which is what a user sees
from the second command on. NVML is asked through pynvml only on a cache miss, so its import
is timed on its own, in fresh interpreters. This is a measurement script, not a test: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def _timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def _median_of(runs: int, function: Callable[[], Any]) -> float:
    return statistics.median(_timed(function)[0] for _ in range(runs))


def _phases(python: str | None, cache_dir: Path, runs: int) -> None:
    from cuda_resolve.detect import _find_extensions
    from cuda_resolve.detect._cache import ProbeCache
    from cuda_resolve.detect.compilers import find_compilers
    from cuda_resolve.detect.extensions import find_extensions
    from cuda_resolve.detect.nvidia import probe_nvidia
    from cuda_resolve.detect.target import probe_target, resolve_python
    from cuda_resolve.detect.toolkits import find_toolkits

    environ = dict(os.environ)
    cache = ProbeCache(cache_dir)
    target_python = resolve_python(python, environ) if python else None
    target = probe_target(target_python, environ=environ, timeout=5.0)
    site = target.python.site_packages
    phases: dict[str, Callable[[], Any]] = {
        "driver + GPUs": lambda: probe_nvidia(
            root=Path("/"), environ=environ, timeout=5.0, cache=cache
        ),
        "driver + GPUs, no cache": lambda: probe_nvidia(
            root=Path("/"), environ=environ, timeout=5.0, cache=ProbeCache(None)
        ),
        "target interpreter": lambda: probe_target(target_python, environ=environ, timeout=5.0),
        "compilers": lambda: find_compilers(environ=environ, timeout=5.0, cache=cache),
        "toolkits": lambda: find_toolkits(
            environ=environ, root=Path("/"), site_packages=site, timeout=5.0, cache=cache
        ),
        "extension scan, full": lambda: find_extensions(site, environ=environ),
        "extension scan, cached": lambda: _find_extensions(site, environ, cache),
    }
    print("per probe, warm (median; in detect_environment the first three overlap in threads):")
    for name, function in phases.items():
        function()  # fill the cache
        print(f"  {name:<24}{_ms(_median_of(runs, function))}")


def _pynvml_import(runs: int) -> list[float]:
    """Seconds ``import pynvml`` took in each of *runs* fresh interpreters (``-X importtime``)."""
    seconds: list[float] = []
    for _ in range(runs):
        ran = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import pynvml"],
            capture_output=True,
            text=True,
            check=False,
        )
        for line in ran.stderr.splitlines():
            fields = [field.strip() for field in line.removeprefix("import time:").split("|")]
            if len(fields) == 3 and fields[2] == "pynvml" and fields[1].isdigit():
                seconds.append(int(fields[1]) / 1e6)
    return seconds


def _command(arguments: list[str], runs: int, cache_home: str) -> float | None:
    environ = {**os.environ, "XDG_CACHE_HOME": cache_home}
    argv = [sys.executable, "-m", "cuda_resolve", *arguments]
    first = subprocess.run(argv, capture_output=True, env=environ, check=False)
    if first.returncode not in (0, 1):
        print(
            f"  {' '.join(arguments)}: exit {first.returncode}: "
            f"{first.stderr.decode(errors='replace').strip()[:200]}"
        )
        return None
    return _median_of(
        runs, lambda: subprocess.run(argv, capture_output=True, env=environ, check=False)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", help="target interpreter (default: this one, probed in process)"
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--collect-env", action="store_true", help="also time python -m torch.utils.collect_env"
    )
    args = parser.parse_args()

    import_time, _ = _timed(lambda: __import__("cuda_resolve.detect"))
    from cuda_resolve.detect import detect_environment

    print(f"python {sys.version.split()[0]} at {sys.executable}")
    print(f"import cuda_resolve.detect      {_ms(import_time)}")
    with tempfile.TemporaryDirectory() as scratch:
        cache_dir = Path(scratch) / "cache"
        cold, env = _timed(lambda: detect_environment(python=args.python, cache_dir=cache_dir))
        warm = _median_of(
            args.runs, lambda: detect_environment(python=args.python, cache_dir=cache_dir)
        )
        driver = (
            f"driver {env.driver.version} (CUDA {env.driver.cuda}, via {env.driver.source})"
            if env.driver
            else "no driver"
        )
        print(
            f"machine: {driver}; {len(env.gpus)} GPU(s); {len(env.toolkits)} toolkit(s); torch "
            f"{env.torch.version if env.torch else 'absent'}"
        )
        print(f"detect_environment, cold cache {_ms(cold)}")
        print(f"detect_environment, warm       {_ms(warm)}   (median of {args.runs})")
        _phases(args.python, cache_dir, args.runs)
        imports = _pynvml_import(args.runs + 1)
        if imports:
            print(
                "import pynvml (only on an NVML cache miss), fresh interpreter: first "
                f"{_ms(imports[0]).strip()}, then "
                f"{_ms(statistics.median(imports[1:] or imports)).strip()} (median)"
            )
        else:
            print("import pynvml: not importable here (NVML is then skipped)")

        print("commands, wall (median, after one warm-up run):")
        python_arguments = ["--python", args.python] if args.python else []
        for arguments in (["detect", "--json"], ["doctor", "--json"]):
            wall = _command([*arguments, *python_arguments], args.runs, scratch)
            if wall is not None:
                print(f"  cuda-resolve {' '.join(arguments):<16}{_ms(wall)}")
        startup = _median_of(
            args.runs, lambda: subprocess.run([sys.executable, "-c", "pass"], check=False)
        )
        print(f"  (python -c pass               {_ms(startup)})")
        if args.collect_env:
            target = args.python or sys.executable
            seconds, _ = _timed(
                lambda: subprocess.run(
                    [target, "-m", "torch.utils.collect_env"], capture_output=True, check=False
                )
            )
            print(f"  python -m torch.utils.collect_env {_ms(seconds)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
