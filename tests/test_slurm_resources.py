"""Per-profile sbatch resources for ``cuda-resolve build --slurm``: a profile's ``[slurm] sbatch``
list and ``--sbatch-arg-for PROFILE=ARG``; tasks with different options are separate job arrays.

Fast tests: parsing (path-aware errors, exit 2 naming the value), the order options are given
in, the grouping and the array lists, a run of several arrays read back. The ``slurm`` tests
run the real single-node Slurm of tests/_slurm.py, with the fixtures of test_slurm_build."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import test_slurm_build
from _slurm import PATIENCE, Cluster, wait_for_output
from test_slurm_build import INDEX, PROFILES, SOURCE, _jobs, _run

from cuda_resolve.errors import ProfileError, UsageError
from cuda_resolve.profile import load_profile, load_sbatch_resources, parse_profile
from cuda_resolve.slurm import fanout
from cuda_resolve.slurm.resources import check_sbatch_arg, profile_resources, split_arg_for

BASE = PROFILES[0].read_text()


def _profile(folder: Path, name: str, slurm: str = "", base: str = BASE) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(base + (f"\n[slurm]\n{slurm}\n" if slurm else ""))
    return path


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["--partition=a100", "-pa100", "--time=2:00:00", "--gres=gpu:0", "--job-name=x y"]
)
def test_sbatch_options_as_one_word_are_accepted(text: str) -> None:
    assert check_sbatch_arg(text) == text


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a100", "expected an sbatch option as one word"),
        ("-", "expected an sbatch option"),
        ("--time=1\n#SBATCH --wrap=x", "no control characters"),
        ("--array=0-9", "--array sets the array's task list"),
        ("-a0-9", "-a sets the array's task list"),
        ("--output=/tmp/x", "--output sets each task's log path"),
        ("--parsable", "--parsable sets the way the job id is read"),
    ],
)
def test_bad_sbatch_options_say_why(text: str, said: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_sbatch_arg(text)
    assert said in str(caught.value)


def test_the_profile_table_is_read_and_checked_where_it_stands(tmp_path: Path) -> None:
    good = _profile(tmp_path, "a100", 'sbatch = ["--partition=a100", "--cpus-per-task=8"]')
    assert load_sbatch_resources(good) == ("--partition=a100", "--cpus-per-task=8")
    assert load_profile(good).gpus[0].compute_capability.major == 8  # the machine is read as before
    assert load_sbatch_resources(PROFILES[0]) == ()
    for slurm, said in [
        (
            'sbatch = ["--partition=a100", "a100"]',
            "slurm.sbatch[1] = 'a100': expected an sbatch option as one word",
        ),
        ('sbatch = ["--array=3"]', "slurm.sbatch[0] = '--array=3': --array sets"),
        (
            'sbatch = "--partition=a100"',
            "slurm.sbatch = '--partition=a100': expected a list of strings",
        ),
        ("sbatch = [8]", "slurm.sbatch[0] = 8: expected a string"),
        ('partition = "a100"', "slurm.partition: unknown key"),
    ]:
        bad = _profile(tmp_path, "bad", slurm)
        for read in (load_sbatch_resources, load_profile):
            with pytest.raises(ProfileError) as caught:
                read(bad)
            assert str(caught.value) == f"{bad}: {said}" or str(caught.value).startswith(
                f"{bad}: {said}"
            ), str(caught.value)
    with pytest.raises(ProfileError, match="slurm = 3: expected a table"):
        parse_profile("slurm = 3\n" + BASE)


def test_arg_for_splits_at_the_first_equals_sign() -> None:
    assert split_arg_for("a100=--partition=a100") == ("a100", "--partition=a100")
    for text, said in [
        ("a100", "expected PROFILE=ARG"),
        ("=--time=1", "expected PROFILE=ARG"),
        ("a100=", "expected PROFILE=ARG"),
        ("a100=partition", "'partition': expected an sbatch option"),
    ]:
        with pytest.raises(UsageError) as caught:
            split_arg_for(text)
        assert f"--sbatch-arg-for {text!r}" in str(caught.value) and said in str(caught.value)


def test_file_then_common_then_per_profile_in_that_order(tmp_path: Path) -> None:
    a100, h100 = tmp_path / "a100.toml", tmp_path / "h100.toml"
    resources = profile_resources(
        [a100, h100],
        {a100: ("--partition=a100",)},
        ["--time=1:00:00"],
        ["h100=--time=4:00:00", f"{a100}=--cpus-per-task=8", "h100.toml=--mem=8G"],
    )
    assert resources == {
        a100: ("--partition=a100", "--time=1:00:00", "--cpus-per-task=8"),
        h100: ("--time=1:00:00", "--time=4:00:00", "--mem=8G"),
    }
    with pytest.raises(
        UsageError, match=r"--sbatch-arg-for 'v100=--time=1': no --profile is named 'v100'"
    ) as caught:
        profile_resources([a100, h100], {}, [], ["v100=--time=1"])
    assert caught.value.hint is not None and "a100, h100" in caught.value.hint
    twin = tmp_path / "other" / "a100.toml"
    with pytest.raises(UsageError, match="'a100' names 2 profiles"):
        profile_resources([a100, twin], {}, [], ["a100=--time=1"])
    with pytest.raises(UsageError, match="--sbatch-arg 'cpu'"):
        profile_resources([a100], {}, ["cpu"], [])


# --- grouping and the run's files ------------------------------------------------------------


def _task(index: int, profile: str, *sbatch: str) -> fanout.Task:
    return fanout.Task(
        index=index, package="quickext", requirement="quickext", profile=profile, sbatch=sbatch
    )


def test_tasks_with_equal_options_share_an_array_and_keep_their_index(tmp_path: Path) -> None:
    tasks = [
        _task(0, "/p/a.toml", "--partition=a"),
        _task(1, "/p/b.toml"),
        _task(2, "/p/c.toml", "--partition=a"),
        _task(3, "/p/d.toml"),
    ]
    found = fanout.groups(tasks)
    assert [(options, [t.index for t in members]) for options, members in found] == [
        (("--partition=a",), [0, 2]),
        ((), [1, 3]),
    ]
    run = fanout.Run(folder=tmp_path, tasks=tuple(tasks))
    script = fanout.job_script(run, ["cuda-resolve", "build"], tasks=found[0][1])
    assert (
        "#SBATCH --array=0,2\n" in script
        and "  2) cuda-resolve build quickext --profile /p/c.toml" in script
    )
    assert "  1) " not in script
    assert "#SBATCH --array=0-3\n" in fanout.job_script(run, ["cuda-resolve", "build"])
    assert "#SBATCH --array=3\n" in fanout.job_script(run, ["x"], tasks=tasks[3:])


def test_plan_tasks_gives_each_task_its_profiles_options() -> None:
    prepared = {
        "/p/a.toml": {"builds": [{"package": "quickext"}]},
        "/p/b.toml": {"builds": [{"package": "quickext"}]},
    }
    tasks, _ = fanout.plan_tasks(["quickext"], prepared, {"/p/a.toml": ("--partition=a",)})
    assert [(t.profile, t.sbatch) for t in tasks] == [
        ("/p/a.toml", ("--partition=a",)),
        ("/p/b.toml", ()),
    ]


def test_a_run_of_several_arrays_is_found_by_any_of_its_job_ids(tmp_path: Path) -> None:
    environ = {"CUDA_RESOLVE_SLURM_DIR": str(tmp_path / "runs")}
    tasks = (_task(0, "/p/a.toml", "--partition=a"), _task(1, "/p/b.toml"))
    run = fanout.prepare_run(tasks, [], environ)
    run = fanout.Run(
        folder=run.folder,
        tasks=run.tasks,
        jobs=(
            fanout.ArrayJob(job_id="41", tasks=(0,), sbatch=("--partition=a",)),
            fanout.ArrayJob(job_id="42", tasks=(1,)),
        ),
    )
    fanout.record_submission(run, environ)
    for job_id in ("41", "42"):
        loaded = fanout.load_run(job_id, environ)
        assert loaded.job_ids == ("41", "42") and loaded.tasks == tasks and loaded.jobs == run.jobs
    assert run.label == "slurm jobs 41, 42" and run.job_of(tasks[1]) == "42"
    # A run recorded before there were several arrays (format 1) reads as one array of every task.
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(
        json.dumps(
            {
                "format": 1,
                "job_id": "7",
                "folder": str(old),
                "already": [],
                "tasks": [{"index": 0, "package": "q", "requirement": "q", "profile": "/p/a.toml"}],
            }
        )
    )
    (tmp_path / "runs" / "jobs" / "7").write_text(str(old) + "\n")
    loaded = fanout.load_run("7", environ)
    assert (
        loaded.jobs == (fanout.ArrayJob(job_id="7", tasks=(0,)),) and loaded.label == "slurm job 7"
    )


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (
            ["--sbatch-arg-for", "v100=--time=1"],
            "--sbatch-arg-for 'v100=--time=1': no --profile is named 'v100'",
        ),
        (["--sbatch-arg-for", "node-a100"], "--sbatch-arg-for 'node-a100': expected PROFILE=ARG"),
        (
            ["--sbatch-arg-for", "node-a100=--array=1-3"],
            "'--array=1-3': --array sets the array's task list",
        ),
        (["--sbatch-arg=cpu"], "--sbatch-arg 'cpu': expected an sbatch option as one word"),
    ],
    ids=["unknown-profile", "no-equals", "reserved", "sbatch-arg-not-an-option"],
)
def test_bad_values_are_usage_errors_before_anything_runs(
    words: list[str], said: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "CUDA_RESOLVE_SLURM_DIR": str(tmp_path / "runs"),
        "PATH": "/usr/bin:/bin",
    }  # no sbatch reachable
    done = _run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "build",
            "quickext",
            "--slurm",
            "--profile",
            str(PROFILES[0]),
            "--profile",
            str(PROFILES[1]),
            *words,
        ],
        env,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_bad_profile_table_is_a_usage_error_naming_the_file_and_key(tmp_path: Path) -> None:
    bad = _profile(tmp_path, "bad", 'sbatch = ["--partition=a100", "gpu"]')
    done = _run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "build",
            "quickext",
            "--slurm",
            "--profile",
            str(bad),
        ],
        {**os.environ, "CUDA_RESOLVE_SLURM_DIR": str(tmp_path / "runs")},
    )
    assert done.returncode == 2, done.stderr
    assert (
        f"{bad}: slurm.sbatch[1] = 'gpu': expected an sbatch option as one word" in done.stderr
    ), done.stderr


def test_sbatch_arg_for_without_slurm_is_a_usage_error() -> None:
    done = _run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "build",
            "quickext",
            "--sbatch-arg-for",
            "a=--time=1",
        ],
        dict(os.environ),
    )
    assert (
        done.returncode == 2 and "--sbatch-arg-for is an option of Slurm builds" in done.stderr
    ), done.stderr


def test_help_names_the_flag_and_the_profile_table() -> None:
    done = _run(
        [sys.executable, "-m", "cuda_resolve", "build", "--help"], {**os.environ, "COLUMNS": "200"}
    )
    text = " ".join(done.stdout.split())
    assert "--sbatch-arg-for PROFILE=ARG" in text and "[slurm] sbatch = [...]" in text, done.stdout


# --- Ctrl-C while the arrays are submitted (a stand-in sbatch) ----------------------------------

_FAKE_SBATCH = """#!/bin/sh
# A stand-in sbatch: job 101, 102 ... in turn; the first submission is followed by Ctrl-C (SIGINT
# to cuda-resolve, its parent), as a user pressing it while sbatch runs.
count=$(( $(cat "$FAKE_SLURM/count" 2>/dev/null || echo 0) + 1 ))
echo "$count" > "$FAKE_SLURM/count"
echo "$*" >> "$FAKE_SLURM/sbatch.log"
[ "$count" = 1 ] && kill -INT "$PPID"
echo "$(( 100 + count ))"
"""


def _fake_slurm(folder: Path) -> Path:
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name, text in (
        ("sbatch", _FAKE_SBATCH),
        ("scancel", '#!/bin/sh\necho "$*" >> "$FAKE_SLURM/scancel.log"\n'),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("answer", ["y", "n"])
def test_ctrl_c_during_submission_submits_no_further_array_and_asks_about_those_submitted(
    answer: str, tmp_path: Path
) -> None:
    import pty

    env = {
        **os.environ,
        "PATH": f"{_fake_slurm(tmp_path)}:{os.environ['PATH']}",
        "FAKE_SLURM": str(tmp_path),
        "CUDA_RESOLVE_SLURM_DIR": str(tmp_path / "runs"),
        "CUDA_RESOLVE_WHEELHOUSE": str(tmp_path / "wheelhouse"),
    }
    argv = [
        sys.executable,
        "-m",
        "cuda_resolve",
        "build",
        "quickext",
        "--index",
        str(INDEX),
        "--source",
        str(SOURCE),
        "--profile",
        str(PROFILES[0]),
        "--profile",
        str(PROFILES[1]),
        "--slurm",
        "--sbatch-arg-for",
        "node-h100=--comment=h100",
    ]
    stderr = tmp_path / "stderr"
    leader, follower = pty.openpty()
    with open(stderr, "w") as err:
        process = subprocess.Popen(
            argv, env=env, stdin=follower, stdout=subprocess.DEVNULL, stderr=err, cwd="/"
        )
    os.close(follower)
    try:
        wait_for_output(stderr, process, lambda t: "? [y/N]" in t, "the question")
        os.write(leader, answer.encode() + b"\n")
        assert process.wait(timeout=PATIENCE) == 130, stderr.read_text()
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    said = stderr.read_text()
    assert (tmp_path / "sbatch.log").read_text().count("\n") == 1, (
        said
    )  # the second array was never submitted
    assert "submitted slurm job 101: 1 task(s) (quickext for node-a100.toml)" in said, said
    assert (
        "not submitted: quickext for node-h100.toml" in said
        and "cancel slurm job 101 (1 build task(s))? [y/N]" in said
    ), said
    assert "Traceback" not in said, said
    cancelled = (
        (tmp_path / "scancel.log").read_text() if (tmp_path / "scancel.log").exists() else ""
    )
    if answer == "y":
        assert cancelled == "101\n" and "cancelled slurm job 101" in said, said
    else:
        assert (
            cancelled == ""
            and "slurm job 101 keeps running: `cuda-resolve build --status 101`" in said
        ), said
    # The run is what was submitted: --status waits for no task that no array holds.
    run = fanout.load_run("101", {"CUDA_RESOLVE_SLURM_DIR": str(tmp_path / "runs")})
    assert [Path(t.profile).name for t in run.tasks] == ["node-a100.toml"] and run.job_ids == (
        "101",
    )


# --- the real Slurm --------------------------------------------------------------------------

# test_slurm_build's fixtures: the single-node Slurm and the stand-in torch venv and toolkit.
slurm = test_slurm_build.slurm
target = test_slurm_build.target


def _setup(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path, profiles: list[Path]
) -> tuple[list[str], dict[str, str]]:
    python, cuda = target
    env = {k: v for k, v in slurm.environ.items() if k != "VIRTUAL_ENV"}
    env.update(
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin:/usr/sbin",
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        CUDA_RESOLVE_SLURM_DIR=str(tmp_path / "runs"),
        CUDA_RESOLVE_SLURM_POLL="2",
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
        *(w for p in profiles for w in ("--profile", str(p))),
        "--slurm",
    ]
    return argv, env


def _shown(slurm: Cluster, job: str) -> dict[str, str]:
    words = slurm.run("scontrol", "-o", "show", "job", job).stdout.split()
    return dict(word.split("=", 1) for word in words if "=" in word)


def test_each_profiles_resources_are_an_array_of_their_own(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path
) -> None:
    a100 = _profile(
        tmp_path,
        "a100",
        f'sbatch = ["--partition={slurm.partition}", "--time=30", "--comment=from-the-profile"]',
    )
    h100 = _profile(tmp_path, "h100", base=PROFILES[1].read_text())
    argv, env = _setup(slurm, target, tmp_path, [a100, h100])
    done = _run(
        [
            *argv,
            "--sbatch-arg=--time=20",
            "--sbatch-arg-for",
            "h100=--time=45",
            "--sbatch-arg-for",
            "h100=--job-name=cr-h100",
            "--json",
        ],
        env,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(report["job_ids"]) == 2 and report["job_id"] == report["job_ids"][0], report
    first, second = report["jobs"]
    assert first["tasks"] == [0] and first["sbatch"] == [
        f"--partition={slurm.partition}",
        "--time=30",
        "--comment=from-the-profile",
        "--time=20",
    ]
    assert second["tasks"] == [1] and second["sbatch"] == [
        "--time=20",
        "--time=45",
        "--job-name=cr-h100",
    ]
    # What Slurm made of them: the last --time wins, each array has its own.
    a_job, h_job = _shown(slurm, first["job_id"]), _shown(slurm, second["job_id"])
    assert (a_job["TimeLimit"], a_job["Comment"], a_job["ArrayTaskId"]) == (
        "00:20:00",
        "from-the-profile",
        "0",
    ), a_job
    assert (h_job["TimeLimit"], h_job["JobName"], h_job["ArrayTaskId"]) == (
        "00:45:00",
        "cr-h100",
        "1",
    ), h_job
    assert "Comment" not in h_job or h_job["Comment"] in ("(null)", "")
    assert [(Path(t["profile"]).name, t["state"], t["job_id"]) for t in report["tasks"]] == [
        ("a100.toml", "built", first["job_id"]),
        ("h100.toml", "built", second["job_id"]),
    ]
    wheels = sorted(p.name for p in (tmp_path / "wheelhouse").rglob("quickext-*.whl"))
    assert len(wheels) == 2, wheels
    assert (
        f"slurm jobs {first['job_id']}, {second['job_id']}:" in done.stderr
    )  # one progress line for both
    # --status with either id reports both arrays' tasks.
    for job in (first["job_id"], second["job_id"]):
        status = _run([sys.executable, "-m", "cuda_resolve", "build", "--status", job], env)
        assert status.returncode == 0, status.stderr
        assert (
            f"slurm jobs {first['job_id']}, {second['job_id']}" in status.stdout
            and "2 built, 0 already there, 0 failed" in status.stdout
        ), status.stdout
    before = _jobs(slurm)
    again = _run([*argv, "--sbatch-arg=--time=20", "--sbatch-arg-for", "h100=--time=45"], env)
    assert again.returncode == 0 and "nothing to submit" in again.stderr, again.stderr
    assert _jobs(slurm) == before


def test_no_wait_prints_every_job_and_a_failed_task_is_found_by_status(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path
) -> None:
    argv, env = _setup(slurm, target, tmp_path, PROFILES)
    submitted = _run(
        [*argv, "--no-wait", "--sbatch-arg-for", "node-h100=--comment=h100"],
        {**env, "QUICKEXT_FAIL": "9.0"},
    )
    assert submitted.returncode == 0, submitted.stderr
    jobs = submitted.stdout.split()
    assert len(jobs) == 2 and all(j.isdigit() for j in jobs), submitted.stdout
    for job in jobs:
        slurm.wait_job(job)
    status = _run(
        [sys.executable, "-m", "cuda_resolve", "build", "--status", jobs[1], "--json"], env
    )
    assert status.returncode == 1, status.stderr
    tasks = {Path(t["profile"]).name: t for t in json.loads(status.stdout)["tasks"]}
    assert (tasks["node-a100.toml"]["state"], tasks["node-a100.toml"]["job_id"]) == (
        "built",
        jobs[0],
    )
    assert (tasks["node-h100.toml"]["state"], tasks["node-h100.toml"]["job_id"]) == (
        "failed",
        jobs[1],
    )
    assert "__nv_bfloat16" in tasks["node-h100.toml"]["diagnosis"]


def test_ctrl_c_cancels_every_array_after_asking(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path
) -> None:
    import pty

    argv, env = _setup(slurm, target, tmp_path, PROFILES)
    stderr = tmp_path / "stderr"
    leader, follower = pty.openpty()
    with open(stderr, "w") as err:
        process = subprocess.Popen(
            [*argv, "--sbatch-arg=--begin=now+600", "--sbatch-arg-for", "node-h100=--comment=h100"],
            env=env,
            stdin=follower,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            cwd="/",
        )
    os.close(follower)
    jobs: list[str] = []
    try:
        said = wait_for_output(
            stderr, process, lambda t: t.count("submitted slurm job") >= 2, "two jobs"
        )
        jobs = [part.split(":", 1)[0] for part in said.split("submitted slurm job ")[1:]]
        # Both arrays are asked about: each task is pending (held by --begin), none taken for
        # running.
        status = _run(
            [sys.executable, "-m", "cuda_resolve", "build", "--status", jobs[0], "--json"], env
        )
        assert [(t["job_id"], t["state"]) for t in json.loads(status.stdout)["tasks"]] == [
            (jobs[0], "pending"),
            (jobs[1], "pending"),
        ]
        process.send_signal(signal.SIGINT)
        question = f"cancel slurm jobs {jobs[0]}, {jobs[1]}"
        wait_for_output(stderr, process, lambda t: question in t, "the question")
        os.write(leader, b"y\n")
        assert process.wait(timeout=PATIENCE) == 130
        for job in jobs:
            assert (
                slurm.run("squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip() == ""
            ), stderr.read_text()
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
        for job in jobs:
            slurm.run("scancel", job, check=False)


def test_an_array_sbatch_refuses_after_another_was_submitted_names_the_running_one(
    slurm: Cluster, target: tuple[Path, Path], tmp_path: Path
) -> None:
    argv, env = _setup(slurm, target, tmp_path, PROFILES)
    done = _run(
        [
            *argv,
            "--sbatch-arg=--begin=now+600",
            "--sbatch-arg-for",
            "node-h100=--partition=no-such-partition",
        ],
        env,
    )
    job = ""
    try:
        assert done.returncode == 1, done.stderr
        assert "submitted slurm job " in done.stderr, done.stderr
        job = done.stderr.split("submitted slurm job ", 1)[1].split(":", 1)[0]
        assert (
            "sbatch refused the build job" in done.stderr
            and f"slurm job {job} keeps running" in done.stderr
        ), done.stderr
        assert f"scancel {job}" in done.stderr and "Traceback" not in done.stderr
        status = _run(
            [sys.executable, "-m", "cuda_resolve", "build", "--status", job, "--json"], env
        )
        assert [
            (Path(t["profile"]).name, t["state"]) for t in json.loads(status.stdout)["tasks"]
        ] == [("node-a100.toml", "pending")], status.stdout
    finally:
        if job:
            slurm.run("scancel", job, check=False)
