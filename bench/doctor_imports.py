"""What ``cuda-resolve doctor --json`` imports, and what each import costs.

    python bench/doctor_imports.py [--runs 5] [--top 15]

Runs ``python -X importtime -m cuda_resolve doctor --json`` (after one warm-up run, so the probe
cache and the parsed-index cache are filled and byte code is compiled), then prints the median
wall time, the total import time, the slowest modules by their own import time, and whether
modules that ``doctor --json`` must never need (the index's TOML parser, rich, the network
layer, packaging.requirements), or needs only when a cache misses (NVML, nvidia-smi's parser,
the ELF reader of the extension scan), were imported. A measurement script: it asserts nothing.
``bench/doctor_speed.py`` measures the whole command against ``torch.utils.collect_env``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

NEVER_NEEDED = (
    "cuda_resolve.index._parse",
    "packaging.requirements",
    "rich",
    "cuda_resolve.net",
    "cuda_resolve.resolve",
    "resolvelib",
)
#: Imported only when the probe cache misses (the warm-up run fills it).
NOT_NEEDED_WARM = (
    "pynvml",
    "cuda_resolve.detect._nvml",
    "cuda_resolve.detect.nvidia_smi",
    "cuda_resolve.elf",
    "cuda_resolve.index.model",  # doctor reads the cached CUDA facts (index/cuda.py)
    "packaging.specifiers",
    "platformdirs",
    "cuda_resolve.config",
    "importlib.metadata",
)


def _run(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, result.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    doctor = [sys.executable, "-m", "cuda_resolve", "doctor", "--json"]
    _run(doctor)  # warm-up: caches and byte code
    walls = [_run(doctor)[0] for _ in range(args.runs)]
    _, trace = _run([sys.executable, "-X", "importtime", *doctor[1:]])
    modules: list[tuple[int, str]] = []
    for line in trace.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        modules.append((int(own), name.strip()))
    names = {name for _, name in modules}
    print(f"doctor --json wall, median of {args.runs}: {statistics.median(walls) * 1000:.0f} ms")
    print(f"imports: {len(modules)} modules, {sum(own for own, _ in modules) / 1000:.1f} ms in all")
    for own, name in sorted(modules, reverse=True)[: args.top]:
        print(f"  {own / 1000:6.1f} ms  {name}")
    for name in (*NEVER_NEEDED, *NOT_NEEDED_WARM):
        hit = sorted(n for n in names if n == name or n.startswith(name + "."))
        print(f"  {'IMPORTED' if hit else 'not imported':12} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
