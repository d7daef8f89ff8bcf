"""Slurm's own programs, run bounded: sbatch, squeue, scontrol, scancel."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._bounded import Ran
from .._bounded import run as run_bounded
from ..errors import BuildError, UsageError

__all__ = ["cancel", "final_states", "queued_states", "submit"]

_TIMEOUT_S = 60.0
_JOB_ID = re.compile(r"^\d+$")


def _run(argv: Sequence[str], environ: Mapping[str, str]) -> Ran:
    ran = run_bounded(argv, timeout=_TIMEOUT_S, env=environ)
    if ran is None:
        raise UsageError(
            f"{argv[0]} cannot be run: Slurm's client programs are not on PATH here",
            hint="run this on a login node of the cluster (where sbatch works), or load "
            "Slurm's module",
        )
    return ran


def _said(ran: Ran) -> str:
    return (
        ran.stderr.strip() or ran.stdout.strip() or f"exit status {ran.returncode}"
    ).splitlines()[-1]


#: What sbatch says when this machine is no Slurm client (no slurm.conf, no configless DNS
#: record) or its controller cannot be reached: no --sbatch-arg value is at fault then.
_NO_CONTROLLER = (
    "Could not establish a configuration source",
    "Unable to contact slurm controller",
    "resolve_ctls_from_dns_srv",
    "fetch_config",
)


def submit(script: Path, sbatch_args: Sequence[str], environ: Mapping[str, str]) -> str:
    """Submit ``script`` (its ``#SBATCH`` lines, then ``sbatch_args``, which win); the job id."""
    ran = _run(["sbatch", "--parsable", *sbatch_args, str(script)], environ)
    job_id = ran.stdout.strip().split(";", 1)[0] if ran.ok else ""
    if not _JOB_ID.match(job_id):
        said = f"{ran.stdout}\n{ran.stderr}"
        if any(marker in said for marker in _NO_CONTROLLER):
            hint = (
                "sbatch reaches no Slurm controller from here (no Slurm configuration on this "
                "machine, or slurmctld is down): run the command on the cluster's login node, "
                "where `sinfo` answers, or build here without --slurm, one --profile at a time"
            )
        else:
            hint = "check the --sbatch-arg values (partition, account, time) against `sinfo`"
        raise BuildError(f"sbatch refused the build job: {_said(ran)}", hint=hint)
    return job_id


def queued_states(job_id: str, environ: Mapping[str, str]) -> dict[int, str] | None:
    """The arrays' tasks still in the queue, by task index (``PENDING``, ``RUNNING`` ...);
    ``job_id`` may be a comma-separated list. None when squeue did not answer (the controller
    busy: ask again later)."""
    ran = _run(["squeue", "-h", "-r", "-j", job_id, "-o", "%K|%T"], environ)
    if not ran.ok:
        # A job that left the controller's memory is an error for squeue, not an empty answer.
        return {} if "Invalid job id" in ran.stderr else None
    states: dict[int, str] = {}
    for line in ran.stdout.splitlines():
        index, _, state = line.strip().partition("|")
        if index.isdigit():
            states[int(index)] = state
    return states


def final_states(job_id: str, environ: Mapping[str, str]) -> dict[int, str]:
    """The state each task ended in, as ``scontrol show job`` remembers it (for MinJobAge
    seconds after it ended; no accounting database is needed)."""
    ran = _run(["scontrol", "-o", "show", "job", job_id], environ)
    if not ran.ok:
        return {}
    states: dict[int, str] = {}
    for line in ran.stdout.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        index, state = fields.get("ArrayTaskId", ""), fields.get("JobState", "")
        if index.isdigit() and state:
            states[int(index)] = state
    return states


def cancel(job_ids: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """``scancel JOBID...``; what it said when it failed, else None."""
    ran = _run(["scancel", *job_ids], environ)
    return None if ran.ok else _said(ran)
