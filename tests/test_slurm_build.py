"""``cuda-resolve build REQ --profile A --profile B --slurm`` against a real single-node Slurm
(tests/_slurm.py): one array task per (package, profile) not yet in the wheelhouse, both wheels
in the shared wheelhouse, a rerun submits nothing; a failed task is named with its log and
diagnosis (also by ``--status`` after ``--no-wait``); SIGTERM and Ctrl-C of the follower leave
the job running. The package is tests/data/packages/quickext (its backend writes a wheel in a
moment) built against a stand-in torch and CUDA toolkit, as tests/test_signals.py does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _slurm import PATIENCE, Cluster, cluster_fixture, wait_for_output
from _torch_env import standin_cuda_toolkit, standin_torch_venv

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "packages" / "quickext"
INDEX = DATA / "index" / "quickext"
PROFILES = [DATA / "slurm" / "node-a100.toml", DATA / "slurm" / "node-h100.toml"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a venv holding a stand-in torch 2.14.1 for CUDA 13.0, a stand-in CUDA 13.0 toolkit)."""
    folder = tmp_path_factory.mktemp("target")
    return standin_torch_venv(folder), standin_cuda_toolkit(folder / "cuda")


def _setup(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path, **extra: str
) -> tuple[list[str], dict[str, str]]:
    python, cuda = target
    env = {k: v for k, v in slurm.environ.items() if k != "VIRTUAL_ENV"}
    env.update(
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin:/usr/sbin",
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        CUDA_RESOLVE_SLURM_DIR=str(tmp_path / "runs"),
        CUDA_RESOLVE_SLURM_POLL="2",
        **extra,
    )
    argv = [
        sys.executable,
        "-m",
        "cuda_resolve",
        "build",
        "quickext",
        "--index",
        str(INDEX),
        "--python",
        str(python),
        "--source",
        str(SOURCE),
        "--profile",
        str(PROFILES[0]),
        "--profile",
        str(PROFILES[1]),
        "--slurm",
    ]
    return argv, env


def _run(
    argv: list[str], env: dict[str, str], timeout: float = 2 * PATIENCE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd="/",
    )


def _jobs(slurm: Cluster) -> list[str]:
    shown = slurm.run("scontrol", "-o", "show", "jobs", check=False).stdout
    return sorted(
        {word.split("=", 1)[1] for word in shown.split() if word.startswith("ArrayJobId=")}
    )


def test_two_profiles_make_two_array_tasks_and_a_rerun_submits_nothing(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path
) -> None:
    argv, env = _setup(slurm, target, tmp_path)
    done = _run([*argv, "--json"], env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    job = report["job_id"]
    assert [(t["package"], Path(t["profile"]).name, t["state"]) for t in report["tasks"]] == [
        ("quickext", "node-a100.toml", "built"),
        ("quickext", "node-h100.toml", "built"),
    ]
    shown = slurm.run("scontrol", "-o", "show", "job", job).stdout
    assert sorted(w for w in shown.split() if w.startswith("ArrayTaskId=")) == [
        "ArrayTaskId=0",
        "ArrayTaskId=1",
    ]
    wheels = sorted(p.name for p in (tmp_path / "wheelhouse").rglob("quickext-*.whl"))
    assert (
        len(wheels) == 2
        and any(".sm80." in w for w in wheels)
        and any(".sm90." in w for w in wheels)
    ), wheels
    assert {Path(t["wheel"]).name for t in report["tasks"]} == set(wheels)
    assert f"slurm job {job}:" in done.stderr  # progress while following
    before = _jobs(slurm)

    again = _run(argv, env)
    assert again.returncode == 0, again.stderr
    assert "nothing to submit" in again.stderr
    assert "0 built, 2 already there, 0 failed" in again.stdout
    assert _jobs(slurm) == before


def test_a_failed_task_is_named_with_its_log_and_diagnosis_by_status(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path
) -> None:
    argv, env = _setup(slurm, target, tmp_path, QUICKEXT_FAIL="9.0")
    submitted = _run([*argv, "--no-wait"], env)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    assert job.isdigit(), submitted.stdout
    slurm.wait_job(job)
    status = _run([sys.executable, "-m", "cuda_resolve", "build", "--status", job, "--json"], env)
    assert status.returncode == 1, status.stderr
    tasks = {Path(t["profile"]).name: t for t in json.loads(status.stdout)["tasks"]}
    assert tasks["node-a100.toml"]["state"] == "built"
    failed = tasks["node-h100.toml"]
    assert failed["state"] == "failed"
    # The build's own full log, and the compiler's error line from it.
    assert Path(failed["log"]).is_file() and "__nv_bfloat16" in Path(failed["log"]).read_text()
    assert (
        failed["diagnosis"].startswith("building quickext 0.1.0 failed")
        and "__nv_bfloat16" in failed["diagnosis"]
    ), failed
    table = _run([sys.executable, "-m", "cuda_resolve", "build", "--status", job], env)
    assert "FAILED" in table.stdout and "1 built, 0 already there, 1 failed" in table.stdout, (
        table.stdout
    )
    # The failed one is submitted again, the built one is not.
    rerun = _run([*argv, "--json"], {**env, "QUICKEXT_FAIL": ""})
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert [Path(t["profile"]).name for t in report["tasks"]] == ["node-h100.toml"]
    assert [Path(a["profile"]).name for a in report["already"]] == ["node-a100.toml"]


@pytest.mark.parametrize(
    ("signum", "status"),
    [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)],
    ids=["SIGTERM", "SIGHUP", "SIGINT"],
)
def test_a_signal_to_the_follower_never_cancels_the_job(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path, signum: int, status: int
) -> None:
    argv, env = _setup(slurm, target, tmp_path)
    stderr = tmp_path / "stderr"
    with open(stderr, "w") as err:
        process = subprocess.Popen(
            [*argv, "--sbatch-arg=--begin=now+600"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            cwd="/",
        )
    job = ""
    try:
        said = wait_for_output(stderr, process, lambda t: "submitted slurm job" in t, "a job")
        job = said.split("submitted slurm job ", 1)[1].split(":", 1)[0]
        process.send_signal(signum)
        assert process.wait(timeout=PATIENCE) == status
        said = stderr.read_text()
        assert f"slurm job {job} keeps running" in said and f"build --status {job}" in said, said
        assert slurm.run("squeue", "-h", "-r", "-j", job, "-o", "%T").stdout.split() == [
            "PENDING",
            "PENDING",
        ]
    finally:
        if process.poll() is None:
            process.kill()
        if job:
            slurm.run("scancel", job, check=False)


@pytest.mark.parametrize(("answer", "cancelled"), [("y", True), ("n", False)], ids=["yes", "no"])
def test_ctrl_c_on_a_terminal_asks_before_scancel(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path, answer: str, cancelled: bool
) -> None:
    import pty

    argv, env = _setup(slurm, target, tmp_path)
    stderr = tmp_path / "stderr"
    leader, follower = pty.openpty()
    with open(stderr, "w") as err:
        process = subprocess.Popen(
            [*argv, "--sbatch-arg=--begin=now+600"],
            env=env,
            stdin=follower,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            cwd="/",
        )
    os.close(follower)
    job = ""
    try:
        said = wait_for_output(stderr, process, lambda t: "submitted slurm job" in t, "a job")
        job = said.split("submitted slurm job ", 1)[1].split(":", 1)[0]
        process.send_signal(signal.SIGINT)
        question = f"cancel slurm job {job}"
        wait_for_output(stderr, process, lambda t: question in t, "the question")
        assert slurm.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip(), (
            "cancelled before the answer"
        )
        os.write(leader, f"{answer}\n".encode())
        assert process.wait(timeout=PATIENCE) == 130
        queued = slurm.run("squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip()
        assert (queued == "") is cancelled, (queued, stderr.read_text())
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
        if job:
            slurm.run("scancel", job, check=False)


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["quickext", "--profile", "a.toml", "--profile", "b.toml"], "2 --profile options"),
        (["quickext", "--no-wait"], "--no-wait is an option of Slurm builds"),
        (["quickext", "--sbatch-arg=--time=1"], "--sbatch-arg is an option of Slurm builds"),
        (["quickext", "--slurm"], "--slurm builds for the node classes --profile FILE describes"),
        (
            ["quickext", "--slurm", "--profile", "/nonexistent/node.toml"],
            "/nonexistent/node.toml: no such file",
        ),
        (["--status", "abc"], "a Slurm job id is a number"),
        (["--status", "12345"], "no build run of that job id is recorded"),
        (["quickext", "--status", "12345"], "name no requirements"),
        ([], "name at least one requirement"),
    ],
    ids=[
        "profiles-without-slurm",
        "no-wait",
        "sbatch-arg",
        "slurm-without-profile",
        "missing-profile",
        "status-not-a-number",
        "status-unknown",
        "status-with-requirements",
        "nothing",
    ],
)
def test_bad_input_is_a_usage_error(words: list[str], said: str, tmp_path: Path) -> None:
    env = {**os.environ, "CUDA_RESOLVE_SLURM_DIR": str(tmp_path / "runs")}
    done = _run([sys.executable, "-m", "cuda_resolve", "build", *words], env)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
