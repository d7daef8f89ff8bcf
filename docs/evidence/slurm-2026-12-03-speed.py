"""Speed notes for ``cuda-resolve build --slurm`` on this machine's single-node Slurm (tests/_slurm.py).

Run from the repository root: ``.venv/bin/python docs/evidence/slurm-2026-12-03-speed.py``
(docs/evidence/slurm-2026-12-03.md). The package is the tests' quickext (its build takes a moment)
against a stand-in torch and CUDA toolkit, so the numbers are Slurm's and cuda-resolve's overhead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, "tests")
from _slurm import running_slurm
from _torch_env import copy_venv
from test_install_unit import _wheel

root = Path(tempfile.mkdtemp(prefix="slurm-speed-"))
links = root / "links"
links.mkdir()
_wheel(
    links,
    "torch",
    "2.14.1",
    files={
        "torch/__init__.py": "__version__ = '2.14.1'\nfrom . import version\n",
        "torch/version.py": "__version__ = '2.14.1'\ncuda = '13.0'\n",
    },
)
python = copy_venv(root / "venv")
clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"}
subprocess.run(
    [
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--find-links",
        str(links),
        "torch==2.14.1",
    ],
    check=True,
    env=clean,
)
cuda = root / "cuda"
(cuda / "bin").mkdir(parents=True)
(cuda / "include").mkdir()
for header in ("cuda_runtime_api.h", "cusparse.h", "cublas_v2.h", "cusolverDn.h"):
    (cuda / "include" / header).write_text("")
(cuda / "bin" / "nvcc").write_text(
    "#!/bin/sh\n[ \"$1\" = --version ] && printf 'Cuda compilation tools, release 13.0, V13.0.88\\n' && exit 0\nexit 1\n"
)
(cuda / "bin" / "nvcc").chmod(0o755)
data = Path("tests/data")
base = [
    sys.executable,
    "-m",
    "cuda_resolve",
    "build",
    "quickext",
    "--index",
    str(data / "index/quickext"),
    "--python",
    str(python),
    "--source",
    str(data / "packages/quickext"),
]
a100, h100 = str(data / "slurm/node-a100.toml"), str(data / "slurm/node-h100.toml")

with running_slurm(root / "slurm") as cluster:

    def env(name: str) -> dict[str, str]:
        return {
            **cluster.environ,
            **{k: v for k, v in clean.items() if k != "PATH"},
            "CUDA_HOME": str(cuda),
            "PATH": f"{cuda}/bin:{cluster.environ['PATH']}",
            "CUDA_RESOLVE_WHEELHOUSE": str(root / f"wh-{name}"),
            "CUDA_RESOLVE_SLURM_DIR": str(root / "runs"),
            "CUDA_RESOLVE_SLURM_POLL": "2",
        }

    said: list[str] = []

    def timed(argv: list[str], environ: dict[str, str]) -> float:
        started = time.monotonic()
        done = subprocess.run(argv, env=environ, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        said.append(done.stdout.strip())
        return time.monotonic() - started

    one = timed([*base, "--profile", a100], env("local"))
    submit = timed(
        [*base, "--profile", a100, "--profile", h100, "--slurm", "--no-wait"], env("nowait")
    )
    cluster.wait_job(said[-1])  # the --no-wait job's tasks leave the node's CPUs first
    both = timed([*base, "--profile", a100, "--profile", h100, "--slurm"], env("wait"))
    started = time.monotonic()
    follower = subprocess.Popen(
        [*base, "--profile", a100, "--profile", h100, "--slurm"],
        env=env("trace"),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert follower.stderr is not None
    for line in follower.stderr:
        print(f"  +{time.monotonic() - started:4.1f} s  {line.rstrip()[:110]}")
    follower.wait()
    for line in cluster.run("scontrol", "-o", "show", "job").stdout.splitlines()[-2:]:
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        print(
            "  task",
            fields.get("ArrayTaskId"),
            "submit",
            fields.get("SubmitTime"),
            "start",
            fields.get("StartTime"),
            "end",
            fields.get("EndTime"),
        )
    rerun = timed([*base, "--profile", a100, "--profile", h100, "--slurm"], env("wait"))
    print(f"one build, locally (no Slurm):                  {one:5.1f} s")
    print(f"2 tasks, --no-wait (2 dry runs + sbatch):       {submit:5.1f} s")
    print(f"2 tasks, submit + follow to the end (poll 2 s): {both:5.1f} s")
    print(f"rerun, everything already there (submits 0):    {rerun:5.1f} s")
    print("node:", cluster.run("sinfo", "-h", "-N", "-o", "%N %c CPUs %m MiB").stdout.strip())

shutil.rmtree(root, ignore_errors=True)
