"""``cuda-resolve build REQ...``: the source builds of a plan, into the wheelhouse (see :mod:`.install`).

With ``--slurm`` the builds for several node classes (``--profile A.toml --profile B.toml``)
are one Slurm job array, a task per (package, profile) not yet in the wheelhouse
(:mod:`cuda_resolve.slurm`); ``--status JOBID`` reports on such a job later.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BuildError, UsageError
from . import _output
from .install import handle_build, register_build

__all__ = ["register"]

#: Options of `build` that the array's tasks and the dry runs must not inherit.
_OWN = frozenset({"requests", "profile", "slurm", "sbatch_arg", "no_wait", "status", "json", "dry_run", "help", "handler", "debug"})


def register(subparsers: Any) -> None:
    register_build(subparsers)
    parser: argparse.ArgumentParser = subparsers.choices["build"]
    # REQ... is optional for --status; several --profile only with --slurm (checked in handle).
    next(action for action in parser._actions if action.dest == "requests").nargs = "*"
    # register_build's --profile takes one file; this one replaces it ("resolve": argparse drops the old).
    parser._optionals.conflict_handler = "resolve"
    parser.add_argument("--profile", metavar="FILE", type=Path, action="append", default=[],
                        help="build for the GPUs this profile describes (cross-building); with --slurm repeatable, one task per profile")
    slurm = parser.add_argument_group("Slurm")
    slurm.add_argument("--slurm", action="store_true",
                       help="build on the cluster: one Slurm array task per (package, --profile) not already in the wheelhouse, each into the shared wheelhouse; follow them and end with a table")
    slurm.add_argument("--sbatch-arg", metavar="ARG", action="append", default=[],
                       help="an option for sbatch (repeatable): --sbatch-arg=--partition=cpu --sbatch-arg=--time=1:00:00")
    slurm.add_argument("--no-wait", action="store_true", help="with --slurm: submit, print the job id and return")
    slurm.add_argument("--status", metavar="JOBID", help="report on a job `build --slurm` submitted earlier")
    parser.set_defaults(handler=handle, build_parser=parser)


def handle(args: argparse.Namespace) -> int:
    profiles: list[Path] = list(args.profile or [])
    if args.status is not None:
        if args.requests or args.slurm:
            raise UsageError("--status JOBID reports on a submitted job: name no requirements and no --slurm beside it",
                             hint=f"cuda-resolve build --status {args.status}")
        return _status(args)
    if not args.requests:
        raise UsageError("cuda-resolve build: name at least one requirement (REQ)", hint="for example: cuda-resolve build pointnet2_ops")
    if not args.slurm:
        for flag, given in (("--no-wait", args.no_wait), ("--sbatch-arg", bool(args.sbatch_arg))):
            if given:
                raise UsageError(f"{flag} is an option of Slurm builds", hint="add --slurm, or drop it")
        if len(profiles) > 1:
            raise UsageError(f"{len(profiles)} --profile options: building for several machines at once is a Slurm array",
                             hint="add --slurm (one task per profile), or build one profile at a time")
        args.profile = profiles[0] if profiles else None
        return handle_build(args)
    if not profiles:
        raise UsageError("--slurm builds for the node classes --profile FILE describes (the login node's GPUs are not the nodes')",
                         hint="save each node class's profile with `cuda-resolve detect --save-profile FILE` on one of its nodes")
    if args.dry_run:
        raise UsageError("--slurm with --dry-run: run `build REQ --profile FILE --dry-run` per profile instead",
                         hint="drop --slurm to see one profile's builds")
    return _submit(args, [p.resolve() for p in profiles])


def _passthrough(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The build options given (other than this module's), as words for the tasks' command line."""
    words: list[str] = []
    for action in parser._actions:
        if action.dest in _OWN or not action.option_strings:
            continue
        value = getattr(args, action.dest, None)
        if value == action.default or value is None:
            continue
        flag = action.option_strings[-1] if action.option_strings[-1].startswith("--") else action.option_strings[0]
        if isinstance(value, bool):
            words.append(flag)
            continue
        for item in value if isinstance(value, list) else [value]:
            words += [flag, _absolute(item)]
    return words


def _absolute(value: object) -> str:
    """A path the tasks (started in another folder, on another node) still find."""
    text = str(value)
    if isinstance(value, Path) or os.path.exists(text):
        return os.path.abspath(text)
    name, sep, folder = text.partition("=")
    if sep and os.path.exists(folder):  # --source PKG=DIR
        return f"{name}={os.path.abspath(folder)}"
    return text


def _dry_run(requests: Sequence[str], profile: Path, options: Sequence[str]) -> dict[str, Any]:
    """That profile's ``build --dry-run --json`` (the same decision its task makes): "prepared"."""
    argv = [sys.executable, "-m", "cuda_resolve", "build", *requests, "--profile", str(profile), "--dry-run", "--json", *options]
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    try:
        document = json.loads(done.stdout)
    except ValueError:
        document = None
    if done.returncode != 0 or not isinstance(document, dict) or "prepared" not in document:
        said = document.get("error") if isinstance(document, dict) else None
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        # Exit status 2 is bad input (a missing or broken profile, a bad option): so is this.
        error = UsageError if done.returncode == 2 else BuildError
        raise error(f"--profile {profile}: the build cannot be planned: {said or (lines[-1] if lines else f'exit status {done.returncode}')}",
                         hint=f"run `cuda-resolve build {' '.join(requests)} --profile {profile} --dry-run` to see why")
    prepared: dict[str, Any] = document["prepared"]
    return prepared


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _ask(question: str) -> bool:
    _say(question)
    try:
        return sys.stdin.readline().strip().lower() in ("y", "yes")
    except (OSError, ValueError, KeyboardInterrupt):
        return False


def _submit(args: argparse.Namespace, profiles: list[Path]) -> int:
    from ..slurm import fanout, scheduler

    parser: argparse.ArgumentParser = args.build_parser
    options = _passthrough(parser, args)
    environ = dict(os.environ)
    prepared = {str(profile): _dry_run(args.requests, profile, options) for profile in profiles}
    tasks, already = fanout.plan_tasks(args.requests, prepared)
    if not tasks:
        run = fanout.Run(folder=Path(), tasks=(), already=tuple(already))
        _say("nothing to submit: every (package, profile) build is already in the wheelhouse")
        return _report(args, run, [])
    poll = fanout.poll_seconds(environ)  # a bad CUDA_RESOLVE_SLURM_POLL fails before anything is submitted
    run = fanout.prepare_run(tasks, already, environ)
    command = [sys.executable, "-m", "cuda_resolve", "build", "--json", *options]
    script = run.folder / "build.sbatch"
    script.write_text(fanout.job_script(run, command))
    from .._signals import Terminated, deferred_interrupts

    # Once sbatch has the job, its id is recorded and said before any interrupt is taken.
    with deferred_interrupts(_say, doing="submitting the build job") as held:
        job_id = scheduler.submit(script, ["--export=ALL", *args.sbatch_arg], environ)
        run = fanout.Run(folder=run.folder, tasks=run.tasks, already=run.already, job_id=job_id)
        fanout.record_submission(run, environ)
        _say(f"submitted slurm job {job_id}: {len(tasks)} task(s) ({', '.join(f'{t.package} for {Path(t.profile).name}' for t in tasks)}); logs in {run.folder}")
    if held:
        _say(f"slurm job {job_id} keeps running: `cuda-resolve build --status {job_id}` reports on it, `scancel {job_id}` cancels it")
        raise held[0]
    if args.no_wait:
        if args.json:
            _output.print_json({"job_id": job_id, "folder": str(run.folder), "tasks": len(tasks)})
        else:
            print(job_id, flush=True)
        return 0
    try:
        found = fanout.follow(run, environ, say=_say, every=poll)
    except Terminated:
        # A scheduler's kill or a closed terminal ends this follower, never the builds.
        _say(f"slurm job {job_id} keeps running: `cuda-resolve build --status {job_id}` reports on it")
        raise
    except KeyboardInterrupt:
        if sys.stdin.isatty() and _ask(f"cancel slurm job {job_id} ({len(tasks)} build task(s))? [y/N]"):
            failed = scheduler.cancel(job_id, environ)
            _say(f"scancel {job_id}: {failed}" if failed else f"cancelled slurm job {job_id}")
        else:
            _say(f"slurm job {job_id} keeps running: `cuda-resolve build --status {job_id}` reports on it, `scancel {job_id}` cancels it")
        raise
    return _report(args, run, found)


def _status(args: argparse.Namespace) -> int:
    from ..slurm import fanout

    environ = dict(os.environ)
    run = fanout.load_run(str(args.status), environ)
    found = fanout.outcomes(run, environ)
    if found is None:
        raise BuildError(f"squeue did not answer about job {run.job_id}", hint="try again in a few seconds")
    return _report(args, run, found)


def _report(args: argparse.Namespace, run: Any, found: Sequence[Any]) -> int:
    failed = [o for o in found if o.state == "failed"]
    if args.json:
        _output.print_json({
            "job_id": run.job_id, "folder": str(run.folder) if run.tasks else None,
            "tasks": [o.to_json() for o in found],
            "already": [{"package": a.package, "profile": a.profile, "wheel": a.wheel} for a in run.already],
        })
        return 1 if failed else 0
    from rich.table import Table

    table = Table(title=f"slurm job {run.job_id}" if run.job_id else None, show_lines=False)
    for column in ("package", "profile", "result", "wheel / log"):
        table.add_column(column, overflow="fold")
    for a in run.already:
        table.add_row(a.package, Path(a.profile).name, "already there", a.wheel)
    for o in found:
        result = {"built": "built", "failed": "FAILED"}.get(o.state, o.state)
        detail = o.wheel if o.state == "built" else (f"{o.log}\n{o.diagnosis}" if o.state == "failed" else o.log)
        table.add_row(o.task.package, Path(o.task.profile).name, result, detail or "")
    console = _output.console()
    console.print(table)
    done = sum(1 for o in found if o.state == "built")
    console.print(f"{done} built, {len(run.already)} already there, {len(failed)} failed"
                  + (f", {len(found) - done - len(failed)} not finished" if len(found) - done - len(failed) else ""),
                  markup=False, highlight=False, soft_wrap=True)
    return 1 if failed else 0
