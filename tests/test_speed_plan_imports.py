"""``plan`` loads what deciding needs and nothing of the executor (issue 28: plan at interactive
speed). Each module named here cost plan measurable start-up time (a few to tens of
milliseconds, bench/results/plan-doctor-speed-*.json) and is needed only to build, download,
take a wheelhouse lock or install. Also: plan starts the target's probes before it loads the
resolver, the index model and the install modules, so they run while those load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"

#: Modules ``plan`` (text or --json) must not import.
NOT_ON_PLANS_PATH = (
    "filelock",  # a wheelhouse lock: publishing, never a lookup
    "cuda_resolve.build.runner",  # running a build
    "cuda_resolve.build.diagnose",
    "cuda_resolve.build.archive",  # unpacking a source archive
    "tarfile",
    "cuda_resolve.install.transaction",  # the executor
    "cuda_resolve.install.stash",
    "cuda_resolve.install.pins",
    "cuda_resolve.net",  # HTTP: plan downloads nothing
    "requests",
    "urllib3",
    "truststore",
    "ssl",
    "pynvml",
    "cuda_resolve.lock",
    "cuda_resolve.conda",
    "cuda_resolve.doctor.checks",
    "zipfile",  # reading a built wheel (1.5 ms on Python 3.12)
    "cuda_resolve.wheelhouse.rewrite",  # storing a wheel (csv, base64)
)

_RUN_PLAN = """
import contextlib, io, json, runpy, sys
sys.argv = ["cuda-resolve", "plan", "pointnet2_ops", "kaolin", "--profile", PROFILE, *EXTRA]
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        runpy.run_module("cuda_resolve", run_name="__main__")
except SystemExit as exc:
    assert exc.code == 0, exc.code
assert "pointnet2_ops" in out.getvalue()  # the command did run
print(json.dumps(sorted(name for name in NAMES if name in sys.modules)))
"""


def _imported_by_plan(names: tuple[str, ...], extra: list[str], cwd: Path) -> list[str]:
    code = f"NAMES = {list(names)!r}\nPROFILE = {str(PROFILE)!r}\nEXTRA = {extra!r}\n{_RUN_PLAN}"
    environ = dict(os.environ)
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=cwd,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    imported: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return imported


def test_plan_imports_no_executor_network_or_lock_code(tmp_path: Path) -> None:
    assert _imported_by_plan(NOT_ON_PLANS_PATH, [], tmp_path) == []
    assert _imported_by_plan(NOT_ON_PLANS_PATH, ["--json"], tmp_path) == []


def test_plan_does_not_load_rich_in_text_or_json(tmp_path: Path) -> None:
    """rich cost about a quarter of a warm plan in text (its import and one table's layout):
    the table is cli/_table.py's."""
    assert _imported_by_plan(("rich",), ["--json"], tmp_path) == []
    assert _imported_by_plan(("rich",), [], tmp_path) == []


def test_plan_module_defers_deciding_imports() -> None:
    """Importing ``cli.plan`` (what building the parser does) loads none of what deciding
    needs: the handler starts the target's probes first, then loads them."""
    code = (
        "import json, sys\nimport cuda_resolve.cli.plan\n"
        "print(json.dumps(sorted(m for m in DEFERRED if m in sys.modules)))\n"
    )
    deferred = [
        "cuda_resolve.resolve",
        "cuda_resolve.plan",
        "cuda_resolve.index.model",
        "cuda_resolve.install.run",
        "cuda_resolve.install.prepare",
        "cuda_resolve.wheelhouse.store",
        "resolvelib",
        "rich",
    ]
    done = subprocess.run(
        [sys.executable, "-c", f"DEFERRED = {deferred!r}\n{code}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
