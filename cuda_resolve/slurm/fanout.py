"""Decide the array's tasks, write the job scripts and the run's folder, follow the jobs.

Tasks with the same sbatch options (a profile's ``[slurm]`` table and the command line's, see
:mod:`.resources`) are one job array; each distinct set of options is an array of its own. A
task keeps its index across the run's arrays (``--array=0,2``), so its files are named alike
whichever array runs it.

The run's folder (under ``$CUDA_RESOLVE_SLURM_DIR``, else the user's cache folder's
``slurm/``; a cluster's home is shared, so the tasks write there from any node) holds the job
script, ``manifest.json`` (what each task builds), and per task ``task-N.log`` (its output),
``task-N.json`` (its ``build --json`` answer) and ``task-N.rc`` (its exit status). The files
decide a task's outcome; the queue only says pending or running, and ``scontrol`` names how a
task that left no exit status ended (cancelled, timed out, its node failed).
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._bounded import read_text
from .._dist_metadata import normalized_name
from .._frozen import frozen
from ..errors import UsageError
from ..paths import user_cache_dir, write_atomic
from . import scheduler

__all__ = [
    "MIN_POLL_SECONDS",
    "ArrayJob",
    "Outcome",
    "Run",
    "Task",
    "already_built",
    "follow",
    "groups",
    "job_script",
    "load_run",
    "outcomes",
    "plan_tasks",
    "poll_seconds",
    "prepare_run",
    "record_submission",
]

#: Never ask the controller more often: a cluster's slurmctld serves everybody.
MIN_POLL_SECONDS = 2.0
_DEFAULT_POLL_SECONDS = 5.0
_LOG_LIMIT = 4 * 1024 * 1024
_DONE = ("built", "failed")


@frozen
class Task:
    index: int
    package: str
    requirement: str
    profile: str  # absolute path of the profile file
    sbatch: tuple[
        str, ...
    ] = ()  # its sbatch options (resources): tasks with equal ones share an array


@frozen
class ArrayJob:
    job_id: str
    tasks: tuple[int, ...]  # the run's task indices this array runs
    sbatch: tuple[str, ...] = ()


@frozen
class Already:
    package: str
    profile: str
    wheel: str


@frozen
class Run:
    folder: Path
    tasks: tuple[Task, ...]
    already: tuple[Already, ...] = ()
    jobs: tuple[ArrayJob, ...] = ()  # one per distinct set of sbatch options, in submission order

    @property
    def job_ids(self) -> tuple[str, ...]:
        return tuple(job.job_id for job in self.jobs)

    @property
    def label(self) -> str:
        """``slurm job 12`` or ``slurm jobs 12, 13``."""
        return f"slurm job{'s' if len(self.jobs) > 1 else ''} {', '.join(self.job_ids)}"

    def job_of(self, task: Task) -> str | None:
        return next((job.job_id for job in self.jobs if task.index in job.tasks), None)

    def log(self, task: Task) -> Path:
        return self.folder / f"task-{task.index}.log"

    def result(self, task: Task) -> Path:
        return self.folder / f"task-{task.index}.json"

    def status_file(self, task: Task) -> Path:
        return self.folder / f"task-{task.index}.rc"


@frozen
class Outcome:
    task: Task
    state: str  # "pending", "running", "built", "failed"
    wheel: str | None = None
    log: str | None = None
    diagnosis: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "package": self.task.package,
            "profile": self.task.profile,
            "task": self.task.index,
            "state": self.state,
            "sbatch": list(self.task.sbatch),
            "wheel": self.wheel,
            "log": self.log,
            "diagnosis": self.diagnosis,
        }


def poll_seconds(environ: Mapping[str, str]) -> float:
    """``CUDA_RESOLVE_SLURM_POLL`` seconds (default 5), never below :data:`MIN_POLL_SECONDS`."""
    text = environ.get("CUDA_RESOLVE_SLURM_POLL", "")
    try:
        wanted = float(text) if text else _DEFAULT_POLL_SECONDS
    except ValueError:
        raise UsageError(
            f"CUDA_RESOLVE_SLURM_POLL={text!r} is not a number of seconds", hint="for example 5"
        ) from None
    return max(wanted, MIN_POLL_SECONDS)


def runs_root(environ: Mapping[str, str]) -> Path:
    override = environ.get("CUDA_RESOLVE_SLURM_DIR")
    return Path(override) if override else user_cache_dir(environ) / "slurm"


def _requirement_for(package: str, requests: Sequence[str]) -> str:
    """The request that names ``package`` (``kaolin==0.17.0`` for kaolin), else the bare name."""
    for request in requests:
        name = re.split(r"[\s\[<>=!~;@(]", request.strip(), maxsplit=1)[0]
        if normalized_name(name) == normalized_name(package):
            return request
    return package


def already_built(profile: str, prepared: Mapping[str, Any]) -> list[Already]:
    return [
        Already(
            package=str(b["package"]), profile=profile, wheel=f"{b['package']} {b['wheel_version']}"
        )
        for b in prepared.get("builds", [])
        if b.get("reused")
    ]


def plan_tasks(
    requests: Sequence[str],
    prepared_by_profile: Mapping[str, Mapping[str, Any]],
    resources: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[list[Task], list[Already]]:
    """One task per (package, profile) whose build the profile's dry run did not find in the
    wheelhouse. ``prepared_by_profile``: each profile's ``build --dry-run --json`` "prepared";
    ``resources``: each profile's sbatch options (:func:`.resources.profile_resources`)."""
    tasks: list[Task] = []
    already: list[Already] = []
    for profile, prepared in prepared_by_profile.items():
        already += already_built(profile, prepared)
        for build in prepared.get("builds", []):
            if build.get("reused"):
                continue
            package = str(build["package"])
            tasks.append(
                Task(
                    index=len(tasks),
                    package=package,
                    requirement=_requirement_for(package, requests),
                    profile=profile,
                    sbatch=(resources or {}).get(profile, ()),
                )
            )
    return tasks, already


def groups(tasks: Sequence[Task]) -> list[tuple[tuple[str, ...], tuple[Task, ...]]]:
    """The tasks by their sbatch options, each set once, in the order the tasks first name it."""
    found: dict[tuple[str, ...], list[Task]] = {}
    for task in tasks:
        found.setdefault(task.sbatch, []).append(task)
    return [(options, tuple(members)) for options, members in found.items()]


def _array(indices: Sequence[int]) -> str:
    """``0-3`` for a run of indices, else ``0,2,5``: the --array list Slurm reads."""
    ordered = sorted(indices)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}" if len(ordered) > 1 else str(ordered[0])
    return ",".join(map(str, ordered))


def job_script(
    run: Run,
    command: Sequence[str],
    *,
    tasks: Sequence[Task] | None = None,
    job_name: str = "cuda-resolve-build",
) -> str:
    """A bash array script for ``tasks`` (default: all the run's): task N runs ``command REQ
    --profile P`` (its --json answer, log and exit status into the run's folder)."""
    chosen = run.tasks if tasks is None else tuple(tasks)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --array={_array([t.index for t in chosen])}",
        f"#SBATCH --output={run.folder}/task-%a.log",
        "# Written by cuda-resolve build --slurm: one task per (package, profile) not yet in "
        "the wheelhouse.",
        'case "$SLURM_ARRAY_TASK_ID" in',
    ]
    for task in chosen:
        argv = [*command[:1], *command[1:], task.requirement, "--profile", task.profile]
        lines.append(
            f"  {task.index}) {shlex.join(argv)} > {shlex.quote(str(run.result(task)))} ;;"
        )
    lines += [
        '  *) echo "cuda-resolve: no task $SLURM_ARRAY_TASK_ID in this array" >&2; exit 2 ;;',
        "esac",
        "status=$?",
        f'echo "$status" > {shlex.quote(str(run.folder))}/task-"$SLURM_ARRAY_TASK_ID".rc',
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


def prepare_run(
    tasks: Sequence[Task], already: Sequence[Already], environ: Mapping[str, str]
) -> Run:
    root = runs_root(environ)
    folder = root / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
    try:
        folder.mkdir(parents=True, mode=0o700)
    except OSError as exc:
        raise UsageError(
            f"cannot make the build run's folder {folder}: {exc.strerror or exc}",
            hint="set CUDA_RESOLVE_SLURM_DIR to a writable folder every node sees",
        ) from None
    return Run(folder=folder, tasks=tuple(tasks), already=tuple(already))


def _manifest(run: Run) -> dict[str, Any]:
    return {
        "format": 2,
        "folder": str(run.folder),
        "jobs": [
            {"job_id": j.job_id, "tasks": list(j.tasks), "sbatch": list(j.sbatch)} for j in run.jobs
        ],
        "tasks": [
            {
                "index": t.index,
                "package": t.package,
                "requirement": t.requirement,
                "profile": t.profile,
                "sbatch": list(t.sbatch),
            }
            for t in run.tasks
        ],
        "already": [
            {"package": a.package, "profile": a.profile, "wheel": a.wheel} for a in run.already
        ],
    }


def record_submission(run: Run, environ: Mapping[str, str]) -> None:
    """The manifest in the run's folder, and ``jobs/JOBID`` naming that folder for each of its
    jobs (for --status); written again after each array is submitted."""
    write_atomic(run.folder / "manifest.json", json.dumps(_manifest(run), indent=1) + "\n")
    for job_id in run.job_ids:
        write_atomic(runs_root(environ) / "jobs" / job_id, str(run.folder) + "\n")


def load_run(job_id: str, environ: Mapping[str, str]) -> Run:
    if not job_id.isdigit():
        raise UsageError(
            f"--status {job_id!r}: a Slurm job id is a number",
            hint="the id `build --slurm --no-wait` printed",
        )
    pointer = runs_root(environ) / "jobs" / job_id
    try:
        folder = Path(read_text(pointer, limit=4096).strip())
        document = json.loads(read_text(folder / "manifest.json", limit=_LOG_LIMIT))
        tasks = tuple(
            Task(
                index=int(t["index"]),
                package=str(t["package"]),
                requirement=str(t["requirement"]),
                profile=str(t["profile"]),
                sbatch=tuple(map(str, t.get("sbatch", ()))),
            )
            for t in document["tasks"]
        )
        already = tuple(
            Already(package=str(a["package"]), profile=str(a["profile"]), wheel=str(a["wheel"]))
            for a in document["already"]
        )
        if "jobs" in document:
            jobs = tuple(
                ArrayJob(
                    job_id=str(j["job_id"]),
                    tasks=tuple(int(i) for i in j["tasks"]),
                    sbatch=tuple(map(str, j["sbatch"])),
                )
                for j in document["jobs"]
            )
        else:  # format 1: one array of every task
            jobs = (ArrayJob(job_id=str(document["job_id"]), tasks=tuple(t.index for t in tasks)),)
    except (OSError, UnicodeDecodeError):
        raise UsageError(
            f"--status {job_id}: no build run of that job id is recorded under "
            f"{runs_root(environ)}",
            hint="give the id `build --slurm` printed, as the same user (or with the same "
            "CUDA_RESOLVE_SLURM_DIR)",
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"--status {job_id}: {folder / 'manifest.json'} is damaged ({exc})",
            hint="look at the task logs in that folder",
        ) from None
    return Run(folder=folder, tasks=tasks, already=already, jobs=jobs)


def _diagnosis(log: str, ended: str | None) -> str:
    """The task log's own verdict: its last ``error:`` line (and ``hint:``), else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    if errors:
        said = lines[errors[-1]]
        after = lines[errors[-1] + 1] if errors[-1] + 1 < len(lines) else ""
        return f"{said} ({after})" if after.startswith("hint:") else said
    if ended:
        return f"the task ended {ended} before it finished"
    return lines[-1] if lines else "the task left no output"


def _reported_error(answer: str | None) -> tuple[str, str | None] | None:
    """(diagnosis, the build's full log) from a task's ``--json`` error document: the message's
    first line and the first compiler ``error:`` line it quotes; the log its hint names."""
    try:
        document = json.loads(answer or "")
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("error"), str):
        return None
    lines = [line.strip() for line in document["error"].splitlines() if line.strip()]
    quoted = next((line for line in lines[1:] if "error" in line.lower()), None)
    diagnosis = f"{lines[0]} {quoted}" if quoted else (lines[0] if lines else "failed")
    hint = document.get("hint") if isinstance(document.get("hint"), str) else ""
    found = re.search(r"read the full log: (\S+)", hint or "")
    return diagnosis, found.group(1) if found else None


def _read(path: Path) -> str | None:
    try:
        return read_text(path, limit=_LOG_LIMIT)
    except (OSError, UnicodeDecodeError):
        return None


def outcome(run: Run, task: Task, queued: Mapping[int, str], ended: Mapping[int, str]) -> Outcome:
    log = str(run.log(task))
    status = _read(run.status_file(task))
    if status is not None and status.strip():
        answer = _read(run.result(task))
        if status.strip() == "0" and answer:
            try:
                builds = json.loads(answer).get("builds", [])
            except ValueError:
                builds = []
            wheel = next(
                (str(b["wheel"]) for b in builds if b.get("package") == task.package), None
            )
            if wheel is not None:
                return Outcome(task=task, state="built", wheel=wheel, log=log)
        reported = _reported_error(answer)
        if reported is not None:
            return Outcome(task=task, state="failed", log=reported[1] or log, diagnosis=reported[0])
        return Outcome(
            task=task,
            state="failed",
            log=log,
            diagnosis=_diagnosis(_read(run.log(task)) or "", None),
        )
    if task.index in queued:
        state = queued[task.index]
        return Outcome(task=task, state="pending" if state == "PENDING" else "running", log=log)
    how = ended.get(task.index)
    if how in (None, "PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
        # Left the queue a moment ago; its exit status is being written (or the file system lags).
        return Outcome(task=task, state="running", log=log)
    return Outcome(
        task=task, state="failed", log=log, diagnosis=_diagnosis(_read(run.log(task)) or "", how)
    )


def outcomes(run: Run, environ: Mapping[str, str]) -> list[Outcome] | None:
    """Every task's outcome now; None when the queue could not be read."""
    assert run.jobs
    # One squeue for all the run's arrays: task indices are the run's, unique across them.
    queued = scheduler.queued_states(",".join(run.job_ids), environ)
    if queued is None:
        return None
    pending = [t for t in run.tasks if t.index not in queued and not _read(run.status_file(t))]
    ended: dict[int, str] = {}
    for job in run.jobs:
        if any(t.index in job.tasks for t in pending):
            ended.update(scheduler.final_states(job.job_id, environ))
    found = [outcome(run, task, queued, ended) for task in run.tasks]
    if pending and not ended and all(o.state == "running" for o in found if o.task in pending):
        # Neither queued nor remembered by scontrol, and no exit status: the job is long gone.
        found = [
            Outcome(
                task=o.task,
                state="failed",
                log=o.log,
                diagnosis=_diagnosis(
                    _read(run.log(o.task)) or "",
                    "without an exit status (killed, or its node lost)",
                ),
            )
            if o.task in pending
            else o
            for o in found
        ]
    return found


def counts(found: Sequence[Outcome]) -> str:
    order = ("pending", "running", "built", "failed")
    return ", ".join(f"{sum(1 for o in found if o.state == s)} {s}" for s in order)


def follow(
    run: Run,
    environ: Mapping[str, str],
    *,
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    every: float | None = None,
) -> list[Outcome]:
    """Ask the queue every ``every`` seconds (:func:`poll_seconds`) until every task is built or
    failed; a line through ``say`` whenever the counts change."""
    interval = max(every if every is not None else poll_seconds(environ), MIN_POLL_SECONDS)
    last = ""
    while True:
        found = outcomes(run, environ)
        if found is not None:
            line = f"{run.label}: {counts(found)}"
            if line != last:
                say(line)
                last = line
            if all(o.state in _DONE for o in found):
                return found
        sleep(interval)
