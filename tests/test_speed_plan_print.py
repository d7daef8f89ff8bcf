"""A huge plan prints in linear time (issue 28): ``apply PLAN --dry-run`` of a 12 MB plan took
minutes in text mode, a rich print (and a rich table row) per line at about a millisecond each.

The plan here has every bulky shape at once: thousands of items (the table), thousands of builds
with variables and notes, thousands of reasons, one pip step of tens of thousands of words and
a word longer than any line. It is printed at one size and at twice that size: the larger must
print within a generous bound and take less than three times as long (best of three, so a
loaded machine's pauses do not decide).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import sys
import time
from pathlib import Path

import pytest
from test_builder_runner import _spec

from cuda_resolve.build.builder import wheel_key
from cuda_resolve.cli.install import _render_dry_run
from cuda_resolve.plan import PipStep, Plan, PlanItem, PlannedBuild
from cuda_resolve.profile import load_profile

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"
#: Seconds the doubled plan may take at most (about one here on a loaded machine; with a rich
#: table row and a rich print a line it took more than 20).
BOUND = 8.0


def _plan(scale: int) -> tuple[Plan, list[list[str]]]:
    spec = _spec()
    spec = dataclasses.replace(spec, notes=("a note that says a good deal about this build " * 8,))
    items = [PlanItem(name="torch", version="2.11.0+cu130", kind="installed", variant="cu130")]
    items += [
        PlanItem(
            name=f"package-{i}",
            version="1.0",
            kind="wheel",
            url=f"https://files.example/packages/package_{i}-1.0-py3-none-any.whl",
        )
        for i in range(4000 * scale)
    ]
    builds = [
        PlannedBuild(spec=spec, key=wheel_key(spec), source="git clone https://example/x at 0abc")
        for _ in range(400 * scale)
    ]
    words: list[str] = []
    for i in range(8000 * scale):
        words += [f"package-{i}==1.0", f"--hash=sha256:{i:064x}"]
    reasons = [f"reason {i}: " + "a few words about why " * 10 for i in range(2000 * scale)]
    reasons.append("x" * (20_000 * scale))  # one word longer than any terminal line
    plan = Plan(
        environment=load_profile(PROFILE),
        items=tuple(items),
        pass_through=(),
        reasons=tuple(reasons),
        rejected=(),
        complete=True,
        builds=tuple(builds),
        steps=(PipStep(purpose="the wheels", args=tuple(words)),),
    )
    return plan, [["/venv/bin/python", "-m", "pip", "install", *words]]


def _seconds(
    plan: Plan, commands: list[list[str]], monkeypatch: pytest.MonkeyPatch, *, json: bool = False
) -> float:
    best = float("inf")
    for _ in range(3):
        out = io.StringIO()
        with monkeypatch.context() as patch:
            patch.setattr(sys, "stdout", out)
            started = time.perf_counter()
            _render_dry_run(
                argparse.Namespace(json=json), plan, commands, "/venv/bin/python", "install"
            )
            best = min(best, time.perf_counter() - started)
        text = out.getvalue()
        assert f"package-{len(plan.items) - 2}" in text  # the last item is there
        if not json:
            assert text.endswith("dry run: nothing was built or installed\n")
    return best


def test_a_huge_plan_prints_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    one = _plan(1)
    two = _plan(2)
    _seconds(*one, monkeypatch)  # imports and first-use costs are not the plan's
    single = _seconds(*one, monkeypatch)
    double = _seconds(*two, monkeypatch)
    as_json = _seconds(*two, monkeypatch, json=True)
    print(f"printed in {single:.2f} s at 1x, {double:.2f} s at 2x, {as_json:.2f} s as JSON")
    assert double < BOUND, f"the doubled plan took {double:.1f} s to print"
    # Measured in the same minute as --json of the same plan (a loaded machine slows both): text
    # takes about 0.6 times as long; a rich print a line took 3 times, rich's table 10 times.
    assert double < 2 * as_json, f"text {double:.2f} s, --json {as_json:.2f} s"
    assert double / max(single, 1e-3) < 3.0, (
        f"printing is not linear: {single:.2f} s at 1x, {double:.2f} s at 2x"
    )
