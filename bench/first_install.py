"""A first install from the real indexes, with every byte downloaded counted (issue 28): torch
and a pointnet2_ops source build into a fresh venv, then the same into a second fresh venv on the
same machine (its download folder and wheelhouse now filled).

    python bench/first_install.py --source DIR [--torch 2.11.0] [--arch-list 9.0]
        [--cuda-pip PATH] [--json OUT]

Every command runs with HTTPS_PROXY pointing at a loopback CONNECT proxy in this process
(bench/side_by_side.py's) that relays to the real hosts and counts the bytes they send back, and
with a home, pip cache, cuda-resolve cache and wheelhouse of its own, empty at first;
``PIP_FIND_LINKS`` is dropped (CI's folder holds a CPU torch). On a machine without a GPU, set
``CUDA_RESOLVE_DRIVER`` and ``CUDA_RESOLVE_CUDA_ARCH`` (the build needs nvcc, not a GPU). Before
the download folder, the first install fetched torch and its CUDA wheels twice (the build's
overlay, then the target): about 2x the bytes of the files.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import side_by_side  # the counting proxy


def _file_bytes(folder: Path) -> dict[str, int]:
    """The wheels in the download folder's ``files/`` (its per-run views are links to them)."""
    return {p.name: p.stat().st_size for p in folder.glob("*/files/*.whl")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--torch", default="2.11.0")
    parser.add_argument("--arch-list", default="9.0")
    parser.add_argument("--cuda-pip", default=shutil.which("cuda-pip") or "cuda-pip")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    proxy = side_by_side.CountingProxy(byte_cap=40 * 10**9)  # a first install is several GB
    work = Path(tempfile.mkdtemp(prefix="first-install-"))
    env = proxy.routed(
        {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    )
    env.update(
        HOME=str(work / "home"),
        XDG_CACHE_HOME=str(work / "home/.cache"),
        CUDA_RESOLVE_CACHE_DIR=str(work / "cache"),
        CUDA_RESOLVE_WHEELHOUSE=str(work / "wheelhouse"),
        CUDA_RESOLVE_CONFIG=str(work / "home/config.toml"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONUNBUFFERED="1",
    )
    (work / "home").mkdir()
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "driver_override": env.get("CUDA_RESOLVE_DRIVER"),
            "arch_override": env.get("CUDA_RESOLVE_CUDA_ARCH"),
        },
        "command": f"cuda-pip install torch=={args.torch} pointnet2_ops --source DIR "
        f"--arch-list {args.arch_list} --python VENV --json",
    }
    try:
        for name in ("first", "second"):
            venv = work / name
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            proxy.reset()
            log = work / f"{name}.log"
            started = time.monotonic()
            with log.open("w") as stderr:
                done = subprocess.run(
                    [args.cuda_pip, "install", f"torch=={args.torch}", "pointnet2_ops",
                     "--source", str(args.source), "--arch-list", args.arch_list,
                     "--python", str(venv / "bin/python"), "--json"],
                    env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, check=False,
                )  # fmt: skip
            seconds = time.monotonic() - started
            counted = proxy.snapshot()
            hosts = sorted({r.split(" ", 1)[1] for r in counted["proxy_requests"]})
            entry: dict[str, Any] = {
                "exit": done.returncode,
                "wall_s": round(seconds, 1),
                "bytes_downloaded": counted["bytes_downloaded"],
                "connections": len(counted["proxy_requests"]),
                "hosts": hosts,
            }
            try:
                report = json.loads(done.stdout)
                entry["timings"] = report.get("result", {}).get("timings")
            except ValueError:
                entry["stdout_tail"] = done.stdout[-2000:]
            entry["log_tail"] = log.read_text()[-1500:]
            result[name] = entry
            print(
                json.dumps({name: {k: v for k, v in entry.items() if k != "log_tail"}}), flush=True
            )
        files = _file_bytes(work / "cache" / "downloads")
        result["download_folder"] = {"files": len(files), "bytes": sum(files.values())}
        first = result["first"]["bytes_downloaded"]
        result["first_over_files"] = round(first / max(sum(files.values()), 1), 3)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
