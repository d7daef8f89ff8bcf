"""``cuda-resolve build REQ...``: the source builds of a plan, into the wheelhouse (see
:mod:`.install`).

With ``--slurm`` the builds for several node classes (``--profile A.toml --profile B.toml``)
are Slurm job arrays, a task per (package, profile) not yet in the wheelhouse, one array per
distinct set of sbatch options (a profile's ``[slurm]`` table, ``--sbatch-arg``,
``--sbatch-arg-for``; :mod:`cuda_resolve.slurm`); ``--status JOBID`` reports on such a run later.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from ..errors import BuildError, UsageError
from . import _output
from .install import handle_build, register_build

__all__ = ["register"]

#: Options of `build` that the array's tasks and the dry runs must not inherit.
_OWN = frozenset(
    {
        "requests",
        "profile",
        "slurm",
        "sbatch_arg",
        "sbatch_arg_for",
        "no_wait",
        "status",
        "json",
        "dry_run",
        "help",
        "handler",
        "debug",
    }
)


def register(subparsers: Any) -> None:
    register_build(subparsers)
    parser: argparse.ArgumentParser = subparsers.choices["build"]
    # REQ... is optional for --status; several --profile only with --slurm (checked in handle).
    next(action for action in parser._actions if action.dest == "requests").nargs = "*"
    # build installs nothing: --python names the torch the builds compile against (issue 29).
    next(action for action in parser._actions if action.dest == "python").help = (
        "the interpreter whose torch (and Python) the builds compile against; nothing is "
        "installed into it (the wheels go to the wheelhouse). Default: the target environment's"
    )
    # register_build's --profile takes one file; this one replaces it ("resolve": argparse drops the
    # old).
    parser._optionals.conflict_handler = "resolve"
    parser.add_argument(
        "--profile",
        metavar="FILE",
        type=Path,
        action="append",
        default=[],
        help="build for the GPUs this profile describes (cross-building); with --slurm "
        "repeatable, one task per profile",
    )
    slurm = parser.add_argument_group("Slurm")
    slurm.add_argument(
        "--slurm",
        action="store_true",
        help="build on the cluster: one Slurm array task per (package, --profile) not already in "
        "the wheelhouse, each into the shared wheelhouse; follow them and end with a table",
    )
    slurm.add_argument(
        "--sbatch-arg",
        metavar="ARG",
        action="append",
        default=[],
        help="an option for sbatch, for every task (repeatable): --sbatch-arg=--partition=cpu "
        "--sbatch-arg=--time=1:00:00",
    )
    slurm.add_argument(
        "--sbatch-arg-for",
        metavar="PROFILE=ARG",
        action="append",
        default=[],
        help="an option for sbatch for one profile's tasks (repeatable; PROFILE is its file name "
        "without .toml, or its path): "
        "--sbatch-arg-for h100=--time=4:00:00. A profile's own [slurm] sbatch = [...] list comes "
        "first, then --sbatch-arg, "
        "then these (sbatch takes the last of an option given twice); tasks with different "
        "options are separate job arrays",
    )
    slurm.add_argument(
        "--no-wait",
        action="store_true",
        help="with --slurm: submit, print the job id (one per line: one per array) and return",
    )
    slurm.add_argument(
        "--status",
        metavar="JOBID",
        help="report on a run `build --slurm` submitted earlier (any of its job ids)",
    )
    parser.set_defaults(handler=handle, build_parser=parser)


def handle(args: argparse.Namespace) -> int:
    profiles: list[Path] = list(args.profile or [])
    if args.status is not None:
        # Every other option decides a build; a report on a submitted one takes none of them.
        parser: argparse.ArgumentParser = args.build_parser
        others = [
            action.option_strings[-1]
            for action in parser._actions
            if action.option_strings
            and action.dest not in ("status", "json", "help")
            and getattr(args, action.dest, None) not in (action.default, None)
        ]
        if args.requests or others:
            raise UsageError(
                "--status JOBID reports on a submitted job: name no requirements and no "
                f"{' '.join(others) or 'other option'} beside it",
                hint=f"cuda-resolve build --status {args.status}"
                + (" --json" if args.json else ""),
            )
        return _status(args)
    if not args.requests:
        raise UsageError(
            "cuda-resolve build: name at least one requirement (REQ)",
            hint="for example: cuda-resolve build pointnet2_ops",
        )
    if not args.slurm:
        for flag, given in (
            ("--no-wait", args.no_wait),
            ("--sbatch-arg", bool(args.sbatch_arg)),
            ("--sbatch-arg-for", bool(args.sbatch_arg_for)),
        ):
            if given:
                raise UsageError(
                    f"{flag} is an option of Slurm builds", hint="add --slurm, or drop it"
                )
        if len(profiles) > 1:
            raise UsageError(
                f"{len(profiles)} --profile options: building for several machines at once is "
                "a Slurm array",
                hint="add --slurm (one task per profile), or build one profile at a time",
            )
        args.profile = profiles[0] if profiles else None
        return handle_build(args)
    if not profiles:
        raise UsageError(
            "--slurm builds for the node classes --profile FILE describes (the login node's GPUs "
            "are not the nodes')",
            hint="save each node class's profile with `cuda-resolve detect --save-profile FILE` "
            "on one of its nodes",
        )
    if args.dry_run:
        raise UsageError(
            "--slurm with --dry-run: run `build REQ --profile FILE --dry-run` per profile instead",
            hint="drop --slurm to see one profile's builds",
        )
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
        flag = (
            action.option_strings[-1]
            if action.option_strings[-1].startswith("--")
            else action.option_strings[0]
        )
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
    argv = [
        sys.executable,
        "-m",
        "cuda_resolve",
        "build",
        *requests,
        "--profile",
        str(profile),
        "--dry-run",
        "--json",
        *options,
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    try:
        document = json.loads(done.stdout)
    except ValueError:
        document = None
    if done.returncode != 0 or not isinstance(document, dict) or "prepared" not in document:
        said = document.get("error") if isinstance(document, dict) else None
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        # Exit status 2 is bad input (a missing or broken profile, a bad option): so is this.
        error = UsageError if done.returncode == 2 else BuildError
        raise error(
            f"--profile {profile}: the build cannot be planned: "
            f"{said or (lines[-1] if lines else f'exit status {done.returncode}')}",
            hint=f"run `cuda-resolve build {' '.join(requests)} --profile {profile} "
            "--dry-run` to see why",
        )
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


def _resources(args: argparse.Namespace, profiles: list[Path]) -> dict[Path, tuple[str, ...]]:
    """Each profile's sbatch options (slurm.resources); bad values are UsageErrors naming them."""
    from ..profile import load_sbatch_resources
    from ..slurm.resources import profile_resources

    return profile_resources(
        profiles,
        {profile: load_sbatch_resources(profile) for profile in profiles},
        args.sbatch_arg,
        args.sbatch_arg_for,
    )


def _keeps_running(run: Any) -> str:
    ids = " ".join(run.job_ids)
    return (
        f"{run.label} keep{'' if len(run.jobs) > 1 else 's'} running: `cuda-resolve build "
        f"--status {run.job_ids[0]}` reports on it, `scancel {ids}` cancels it"
    )


def _submit(args: argparse.Namespace, profiles: list[Path]) -> int:
    from .._frozen import replace
    from ..slurm import fanout, scheduler

    parser: argparse.ArgumentParser = args.build_parser
    options = _passthrough(parser, args)
    environ = dict(os.environ)
    resources = _resources(args, profiles)  # bad sbatch options fail before any dry run
    prepared = {str(profile): _dry_run(args.requests, profile, options) for profile in profiles}
    tasks, already = fanout.plan_tasks(
        args.requests, prepared, {str(p): r for p, r in resources.items()}
    )
    if not tasks:
        run = fanout.Run(folder=Path(), tasks=(), already=tuple(already))
        _say("nothing to submit: every (package, profile) build is already in the wheelhouse")
        return _report(args, run, [])
    poll = fanout.poll_seconds(
        environ
    )  # a bad CUDA_RESOLVE_SLURM_POLL fails before anything is submitted
    run = fanout.prepare_run(tasks, already, environ)
    command = [sys.executable, "-m", "cuda_resolve", "build", "--json", *options]
    arrays = fanout.groups(run.tasks)
    scripts = []
    for number, (_, members) in enumerate(arrays):
        script = run.folder / ("build.sbatch" if len(arrays) == 1 else f"build-{number}.sbatch")
        script.write_text(fanout.job_script(run, command, tasks=members))
        scripts.append(script)
    from .._signals import deferred_interrupts

    # Once sbatch has a job, its id is recorded and said before any interrupt is taken; an
    # interrupt then stops the submission: no further array is queued.
    with deferred_interrupts(_say, doing="submitting a build job") as held:
        for script, (sbatch, members) in zip(scripts, arrays, strict=True):
            if held:
                break
            try:
                job_id = scheduler.submit(script, ["--export=ALL", *sbatch], environ)
            except BuildError as exc:
                if not run.jobs:
                    raise
                # The run is what was submitted: --status must not wait for tasks no array holds.
                unsubmitted = [t for t in run.tasks if run.job_of(t) is None]
                run = replace(run, tasks=tuple(t for t in run.tasks if run.job_of(t) is not None))
                fanout.record_submission(run, environ)
                names = ", ".join(f"{t.package} for {Path(t.profile).name}" for t in unsubmitted)
                raise BuildError(
                    f"{exc} (not submitted: {names}); {_keeps_running(run)}", hint=exc.hint
                ) from None
            job = fanout.ArrayJob(
                job_id=job_id, tasks=tuple(t.index for t in members), sbatch=sbatch
            )
            run = replace(run, jobs=(*run.jobs, job))
            fanout.record_submission(run, environ)
            resources_said = f" with {' '.join(sbatch)}" if sbatch else ""
            _say(
                f"submitted slurm job {job_id}: {len(members)} task(s) "
                f"({', '.join(f'{t.package} for {Path(t.profile).name}' for t in members)})"
                f"{resources_said}; logs in {run.folder}"
            )
    if held:
        if not run.jobs:
            raise held[0]
        unsubmitted = [t for t in run.tasks if run.job_of(t) is None]
        if unsubmitted:
            # As when sbatch refuses: the run is what was submitted.
            run = replace(run, tasks=tuple(t for t in run.tasks if run.job_of(t) is not None))
            fanout.record_submission(run, environ)
            names = ", ".join(f"{t.package} for {Path(t.profile).name}" for t in unsubmitted)
            _say(
                f"{_interrupt_name(held[0])} received: no further array submitted (not "
                f"submitted: {names})"
            )
        _cancel_or_keep(run, held[0], environ)
    if args.no_wait:
        if args.json:
            _output.print_json(
                {
                    "job_id": run.job_ids[0],
                    "job_ids": list(run.job_ids),
                    "folder": str(run.folder),
                    "tasks": len(tasks),
                }
            )
        else:
            print("\n".join(run.job_ids), flush=True)
        return 0
    try:
        found = fanout.follow(run, environ, say=_say, every=poll)
    except KeyboardInterrupt as interrupt:
        _cancel_or_keep(run, interrupt, environ)
    return _report(args, run, found)


def _interrupt_name(interrupt: KeyboardInterrupt) -> str:
    from .._signals import Terminated

    return interrupt.name if isinstance(interrupt, Terminated) else "Ctrl-C"


def _cancel_or_keep(run: Any, interrupt: KeyboardInterrupt, environ: dict[str, str]) -> NoReturn:
    """Ctrl-C at a terminal asks before cancelling the run's arrays; otherwise they keep running.
    A scheduler's kill or a closed terminal (Terminated) ends this process, never the builds."""
    from .._signals import Terminated
    from ..slurm import scheduler

    if (
        not isinstance(interrupt, Terminated)
        and sys.stdin.isatty()
        and _ask(f"cancel {run.label} ({len(run.tasks)} build task(s))? [y/N]")
    ):
        failed = scheduler.cancel(run.job_ids, environ)
        _say(f"scancel {' '.join(run.job_ids)}: {failed}" if failed else f"cancelled {run.label}")
    else:
        _say(_keeps_running(run))
    raise interrupt


def _status(args: argparse.Namespace) -> int:
    from ..slurm import fanout

    environ = dict(os.environ)
    run = fanout.load_run(str(args.status), environ)
    found = fanout.outcomes(run, environ)
    if found is None:
        raise BuildError(
            f"squeue did not answer about {run.label}", hint="try again in a few seconds"
        )
    return _report(args, run, found)


def _report(args: argparse.Namespace, run: Any, found: Sequence[Any]) -> int:
    failed = [o for o in found if o.state == "failed"]
    if args.json:
        _output.print_json(
            {
                "job_id": run.job_ids[0] if run.jobs else None,
                "job_ids": list(run.job_ids),
                "jobs": [
                    {"job_id": j.job_id, "tasks": list(j.tasks), "sbatch": list(j.sbatch)}
                    for j in run.jobs
                ],
                "folder": str(run.folder) if run.tasks else None,
                "tasks": [{**o.to_json(), "job_id": run.job_of(o.task)} for o in found],
                "already": [
                    {"package": a.package, "profile": a.profile, "wheel": a.wheel}
                    for a in run.already
                ],
            }
        )
        return 1 if failed else 0
    from rich.table import Table

    table = Table(title=run.label if run.jobs else None, show_lines=False)
    for column in ("package", "profile", "result", "wheel / log"):
        table.add_column(column, overflow="fold")
    for a in run.already:
        table.add_row(a.package, Path(a.profile).name, "already there", a.wheel)
    for o in found:
        result = {"built": "built", "failed": "FAILED"}.get(o.state, o.state)
        detail = (
            o.wheel
            if o.state == "built"
            else (f"{o.log}\n{o.diagnosis}" if o.state == "failed" else o.log)
        )
        table.add_row(o.task.package, Path(o.task.profile).name, result, detail or "")
    console = _output.console()
    console.print(table)
    done = sum(1 for o in found if o.state == "built")
    console.print(
        f"{done} built, {len(run.already)} already there, {len(failed)} failed"
        + (
            f", {len(found) - done - len(failed)} not finished"
            if len(found) - done - len(failed)
            else ""
        ),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return 1 if failed else 0
