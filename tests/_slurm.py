"""A real single-node Slurm for tests: munged, slurmctld and slurmd of Debian's slurm-wlm,
configured in a temporary folder (proctrack/linuxproc, task/none, no accounting), this
machine's real CPUs and memory, jobs run as the current user.

:func:`start_slurm` returns a :class:`Cluster` once ``sinfo`` shows the node idle, or raises
:class:`SlurmUnavailable` with the reason it cannot start (the fixture turns that into a
skip). Clients find the cluster through ``SLURM_CONF`` (:attr:`Cluster.environ`).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "PATIENCE",
    "Cluster",
    "SlurmUnavailable",
    "running_slurm",
    "start_slurm",
    "wait_for_output",
]

_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "scancel")
#: The longest a test waits for one event (a daemon up, a line printed, a job gone, a command's
#: answer): only a hang comes near it, never a machine busy with other work.
PATIENCE = 300.0
_START_SECONDS = PATIENCE


class SlurmUnavailable(RuntimeError):
    """Slurm cannot start here; the message says why."""


@dataclass
class Cluster:
    root: Path
    conf: Path
    partition: str
    node: str
    environ: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(
        self, *argv: str, check: bool = True, timeout: float = PATIENCE
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, env=self.environ, capture_output=True, text=True, check=check, timeout=timeout
        )

    def logs(self) -> str:
        parts = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log"):
            path = self.root / name
            if path.exists():
                parts.append(f"--- {name}\n" + path.read_text(errors="replace")[-4000:])
        return "\n".join(parts)

    def wait_job(self, job_id: str, timeout: float = 2 * PATIENCE) -> str:
        """Wait until the job (or all of an array's tasks) left the queue; its final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            queued = self.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False)
            if queued.returncode == 0 and not queued.stdout.strip():
                shown = self.run("scontrol", "show", "job", job_id, check=False)
                for word in shown.stdout.split():
                    if word.startswith("JobState="):
                        return word.split("=", 1)[1]
                return "GONE"
            time.sleep(1.0)
        raise TimeoutError(f"job {job_id} still queued after {timeout} s\n{self.logs()}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=PATIENCE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self.processes.clear()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node_line() -> tuple[str, int, int]:
    """(hostname, CPUs, memory MiB) as slurmd itself measures them."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=PATIENCE).stdout
    fields = dict(word.split("=", 1) for word in out.split() if "=" in word)
    try:
        return fields["NodeName"], int(fields["CPUs"]), int(fields["RealMemory"])
    except (KeyError, ValueError):
        raise SlurmUnavailable(
            f"`slurmd -C` did not describe this node: {out.strip()[:200]!r}"
        ) from None


def _wait_for(
    check: Callable[[], bool], what: str, cluster: Cluster, timeout: float = _START_SECONDS
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in cluster.processes:
            if process.poll() is not None:
                raise SlurmUnavailable(
                    f"{process.args!r} exited with {process.returncode} while waiting for "
                    f"{what}\n{cluster.logs()}"
                )
        if check():
            return
        time.sleep(0.5)
    raise SlurmUnavailable(f"timed out after {timeout:.0f} s waiting for {what}\n{cluster.logs()}")


def wait_for_output(
    path: Path,
    process: subprocess.Popen[Any],
    ready: Callable[[str], bool],
    what: str,
    timeout: float = PATIENCE,
) -> str:
    """The text of ``path`` (a command's stderr) once ``ready(text)``; fails, showing the text so
    far, when the command exits first or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not ready(text := path.read_text()):
        assert process.poll() is None, f"exited {process.returncode} before {what}:\n{text}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s:\n{text}"
        time.sleep(0.1)
    return text


def _spawn(argv: list[str], environ: dict[str, str], err: Path) -> subprocess.Popen[bytes]:
    with open(err, "wb") as stream:
        return subprocess.Popen(
            argv, env=environ, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stream
        )


def start_slurm(root: Path) -> Cluster:
    missing = [
        name
        for name in _PROGRAMS
        if shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None
    ]
    if missing:
        raise SlurmUnavailable(
            f"Slurm is not installed ({', '.join(missing)} missing; apt-get install "
            "slurm-wlm munge)"
        )
    user = getpass.getuser()
    node, cpus, memory = _node_line()
    for name in ("state", "spool", "munge"):
        (root / name).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    munge_socket = root / "munge" / "munge.socket"
    conf = root / "slurm.conf"
    partition = "crtest"
    conf.write_text(
        f"""ClusterName=crtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=600
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={max(memory - 512, 256)} State=UNKNOWN
PartitionName={partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""
    )
    environ = {
        **os.environ,
        "SLURM_CONF": str(conf),
        "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin",
    }
    cluster = Cluster(root=root, conf=conf, partition=partition, node=node, environ=environ)
    try:
        munged = [
            "munged",
            "--foreground",
            "--force",
            f"--socket={munge_socket}",
            f"--key-file={key}",
            f"--pid-file={root}/munge/munged.pid",
            f"--log-file={root}/munged.log",
            f"--seed-file={root}/munge/seed",
        ]
        cluster.processes.append(_spawn(munged, environ, root / "munged.err"))
        _wait_for(munge_socket.exists, "munged's socket", cluster)
        cluster.processes.append(
            _spawn(["slurmctld", "-D", "-i", "-f", str(conf)], environ, root / "slurmctld.err")
        )
        cluster.processes.append(
            _spawn(["slurmd", "-D", "-f", str(conf)], environ, root / "slurmd.err")
        )

        def idle() -> bool:
            shown = cluster.run("sinfo", "-h", "-N", "-o", "%T", check=False, timeout=15)
            return shown.returncode == 0 and shown.stdout.strip() == "idle"

        _wait_for(idle, f"node {node} to be idle in sinfo", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextmanager
def running_slurm(root: Path) -> Iterator[Cluster]:
    cluster = start_slurm(root)
    try:
        yield cluster
    finally:
        cluster.stop()


def cluster_fixture(tmp_path_factory: object) -> Iterator[Cluster]:
    """The body of a module-scoped ``slurm`` fixture: a cluster, or a skip saying why not."""
    import pytest

    try:
        cluster = start_slurm(tmp_path_factory.mktemp("slurm"))  # type: ignore[attr-defined]
    except SlurmUnavailable as exc:
        pytest.skip(f"Slurm cannot start here: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()
