"""Decisions that survived a mutant until issue 25 (item 5): each test here fails when the guarding
code is broken that way (the mutation and its failing run are in the issue's report).

Every test drives the real path where it is cheap: the Slurm job script is run by bash with a
stand-in build command, the credentials are read from real ``~/.pypirc`` and netrc files (and a
stand-in ``keyring`` module) by ``wheelhouse publish`` against a loopback server, plans are made
and applied by the CLI on machines described by ``CUDA_RESOLVE_DRIVER`` /
``CUDA_RESOLVE_CUDA_ARCH``, and locks are made and synced against loopback indexes with real pip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from _torch_env import standin_cuda_toolkit, torch_venv_template  # noqa: F401  (a fixture)
from test_wheelhouse import make_key
from test_wheelhouse import make_wheel as make_built_wheel

from cuda_resolve.cli import main
from cuda_resolve.errors import UsageError
from cuda_resolve.lock.document import (
    LockDocument,
    LockedFile,
    LockedPackage,
    ProfileRecord,
    render,
)
from cuda_resolve.redaction import clear_secrets
from cuda_resolve.slurm import fanout
from cuda_resolve.wheelhouse import Wheelhouse

# -- Slurm: the job script's lines, and a failed task's answer ------------------------------------

#: A stand-in for ``cuda-resolve build ... --json``: its answer names the words it was given and
#: the wheel it "built"; it exits with $STANDIN_RC (a build that failed after writing its answer).
STANDIN_BUILD = """\
import json, os, sys
print(json.dumps({
    "argv": sys.argv[1:],
    "builds": [{"package": "demo-ext", "wheel": "/wheelhouse/demo_ext-1.0-cp311-cp311-linux.whl"}],
}))
sys.exit(int(os.environ.get("STANDIN_RC", "0")))
"""

#: A requirement and a profile path with words the shell reads: ``>`` redirects, ``;`` ends a
#: command, ``'``, ``(``, ``$`` and spaces.
ODD_REQUIREMENT = "demo-ext>=1.0; python_version >= '3.8'"
ODD_PROFILE_NAME = "lab's A100 (80 GB) $HOME.toml"


def _slurm_run(tmp_path: Path) -> tuple[fanout.Run, list[str]]:
    folder = tmp_path / "runs of the lab" / "run 1"
    folder.mkdir(parents=True)
    profile = tmp_path / "profiles dir" / ODD_PROFILE_NAME
    task = fanout.Task(
        index=0, package="demo-ext", requirement=ODD_REQUIREMENT, profile=str(profile)
    )
    standin = tmp_path / "stand-in build.py"
    standin.write_text(STANDIN_BUILD, encoding="utf-8")
    command = [sys.executable, str(standin), "build", "--json"]
    return fanout.Run(folder=folder, tasks=(task,)), command


def _run_task(run: fanout.Run, command: list[str], rc: int) -> subprocess.CompletedProcess[str]:
    """What a Slurm node does with the array script for task 0 (the #SBATCH lines are comments)."""
    script = run.folder / "job.sh"
    script.write_text(fanout.job_script(run, command), encoding="utf-8")
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(run.folder),
        "SLURM_ARRAY_TASK_ID": "0",
        "STANDIN_RC": str(rc),
    }
    return subprocess.run(
        ["bash", str(script)],
        cwd=run.folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_each_word_of_a_task_line_reaches_the_build_as_one_argument(tmp_path: Path) -> None:
    """A requirement with ``>=`` and ``;`` and a profile path with spaces, a quote and ``$`` reach
    the build command word for word; joined without quoting, bash would redirect, split and
    expand them."""
    run, command = _slurm_run(tmp_path)
    [task] = run.tasks
    done = _run_task(run, command, rc=0)
    assert done.returncode == 0, done.stderr
    answer = json.loads(run.result(task).read_text(encoding="utf-8"))
    assert answer["argv"] == ["build", "--json", ODD_REQUIREMENT, "--profile", task.profile]
    assert run.status_file(task).read_text(encoding="utf-8").strip() == "0"
    assert sorted(p.name for p in run.folder.iterdir()) == ["job.sh", "task-0.json", "task-0.rc"]


def test_a_task_that_failed_after_naming_a_wheel_is_failed_not_built(tmp_path: Path) -> None:
    """The exit status decides: a build that wrote an answer listing its wheel and then failed
    (exit 1) is a failed task; the same answer with exit 0 is a built one."""
    run, command = _slurm_run(tmp_path)
    [task] = run.tasks
    assert _run_task(run, command, rc=1).returncode == 1
    assert run.status_file(task).read_text(encoding="utf-8").strip() == "1"
    assert "demo_ext-1.0" in run.result(task).read_text(encoding="utf-8")
    failed = fanout.outcome(run, task, {}, {})
    assert failed.state == "failed" and failed.wheel is None, failed
    assert _run_task(run, command, rc=0).returncode == 0
    built = fanout.outcome(run, task, {}, {})
    assert built.state == "built" and built.wheel is not None and "demo_ext-1.0" in built.wheel


# -- credentials read for wheelhouse publish are registered as secrets ----------------------------

PASSWORD = "s3cret-upload-pass"


class _EchoingServer(BaseHTTPRequestHandler):
    """An index server that fails an upload and, badly, says the password it was given."""

    def do_POST(self) -> None:
        import base64

        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        said = self.headers.get("Authorization", "").partition(" ")[2]
        user, _, password = base64.b64decode(said).decode().partition(":")
        body = f"cannot store the file for {user} (password {password})\n".encode()
        self.send_response(500)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def echoing_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def publisher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home folder with a wheelhouse of one entry; no secret registered before or after."""
    home = tmp_path / "home"
    home.mkdir()
    house = tmp_path / "wheelhouse"
    Wheelhouse(house).publish(make_key(), make_built_wheel(tmp_path / "built"), strip_debug=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(house))
    monkeypatch.setenv("NETRC", str(home / "no-netrc"))
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "keyring", None)  # none unless a test puts one there
    clear_secrets()
    yield home
    clear_secrets()


def _publish(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    code = main(["wheelhouse", "publish", *words])
    shown = capsys.readouterr()
    return code, shown.out + shown.err


@pytest.mark.parametrize("source", ["pypirc", "netrc", "keyring"])
def test_a_password_read_for_publish_is_never_shown_even_where_a_server_echoes_it(
    source: str,
    publisher: Path,
    echoing_server: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The password is registered the moment it is read, so it is masked in any text, not only
    in a URL's user info: here the server's error line repeats it."""
    if source == "pypirc":
        (publisher / ".pypirc").write_text(
            textwrap.dedent(f"""\
                [distutils]
                index-servers = lab
                [lab]
                repository = {echoing_server}
                username = lab
                password = {PASSWORD}
            """),
            encoding="utf-8",
        )
    elif source == "netrc":
        netrc = publisher / "netrc"
        netrc.write_text(f"machine 127.0.0.1 login lab password {PASSWORD}\n", encoding="utf-8")
        netrc.chmod(0o600)
        monkeypatch.setenv("NETRC", str(netrc))
    else:
        keyring = types.ModuleType("keyring")
        found = types.SimpleNamespace(username="lab", password=PASSWORD)
        setattr(keyring, "get_credential", lambda url, user: found)  # noqa: B010 (a stand-in)
        monkeypatch.setitem(sys.modules, "keyring", keyring)
    code, shown = _publish(capsys, "--to", echoing_server)
    assert code != 0 and "answered HTTP 500" in shown, shown
    assert "cannot store the file for lab (password ***)" in shown, shown
    assert PASSWORD not in shown


# -- hash-checking mode and the files a plan is pinned to ------------------------------------------

H200 = Path(__file__).parent / "data" / "profiles" / "h200-detected-2026-12-02.toml"
SHA_A = "a" * 64
SHA_B = "b" * 64

#: A curated package whose wheels sit on a find-links page (kaolin's way), that page on loopback.
CURATED_FIND_LINKS = """\
format = 1

[sources]
fixture = "cuda-resolve's test fixture (tests/test_mutants_killed_25.py)"

[package]
name = "demo-ext"
import_name = "demo_ext"
find_links = "{url}/torch-{{torch}}_cu{{cuda_nodot}}.html"
source = "[fixture]"

[[wheels]]
version = "1.0"
python = ["3.12"]
platforms = ["linux_x86_64"]
torch = [{{ versions = ["2.11.0"], variants = ["cu130"] }}]
source = "[fixture]"
"""

#: The H200 profile's page: torch 2.11.0, CUDA 13.0.
PAGE = "torch-2.11.0_cu130.html"


@pytest.fixture
def find_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """(the folder served on loopback, its URL); the page is written by each test."""
    from test_lock_support import serve

    served = tmp_path / "served"
    served.mkdir()
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with serve(served) as url:
        yield served, url


def _page(folder: Path, url: str, *links: tuple[str, str | None]) -> None:
    """The find-links page, one link per (wheel file name, its sha256 or None)."""
    lines = [
        f'<a href="{url}/files/{name}{f"#sha256={sha}" if sha else ""}">{name}</a><br>'
        for name, sha in links
    ]
    (folder / PAGE).write_text("<html><body>\n" + "\n".join(lines) + "\n</body></html>\n")


def _dry_run(
    tmp_path: Path,
    url: str,
    requirements: tuple[str, ...] = ("demo-ext",),
    *,
    pip_args: tuple[str, ...] = ("--require-hashes",),
    lines: str | None = None,
) -> list[list[str]]:
    """``cuda-pip install REQ... PIP_ARGS --dry-run`` for the H200 profile, its pages read from
    loopback by the CLI's own reader; the pip commands it would run. ``lines``: a -r file's."""
    from cuda_resolve.cli.install import _read_page
    from cuda_resolve.index.load import load_index
    from cuda_resolve.install.options import InstallOptions
    from cuda_resolve.install.reqfile import read_requirement_files, requirement_file_options
    from cuda_resolve.install.run import InstallRequest, run
    from cuda_resolve.profile import load_profile

    (tmp_path / "index" / "packages").mkdir(parents=True, exist_ok=True)
    recipe = tmp_path / "index" / "packages" / "demo-ext.toml"
    recipe.write_text(CURATED_FIND_LINKS.format(url=url), encoding="utf-8")
    if lines is not None:
        (tmp_path / "req.txt").write_text(lines, encoding="utf-8")
        pip_args = (*pip_args, "-r", str(tmp_path / "req.txt"))
    reading = read_requirement_files(requirement_file_options(pip_args), environ={})
    result = run(
        InstallRequest(
            requirements=requirements,
            file_requirements=tuple(reading.requirements),
            dry_run=True,
        ),
        load_profile(H200),
        load_index([tmp_path / "index"], include_user=False),
        InstallOptions(pip_args=pip_args),
        read_page=_read_page,
        wheelhouse=Wheelhouse(tmp_path / "wheelhouse"),
        environ={},
    )
    return [list(command) for command in result.pip_runs]


WHEEL_10 = "demo_ext-1.0-cp312-cp312-linux_x86_64.whl"


@pytest.mark.parametrize("where", ["command line", "requirements file"])
def test_a_direct_url_without_a_sha256_is_not_hashed(
    tmp_path: Path, find_links: tuple[Path, str], where: str
) -> None:
    """``name @ URL`` is pip's to download with nothing to check unless the URL carries
    ``#sha256=``: refused in hash-checking mode before anything is built; with the fragment the
    same requirement goes to pip as written."""
    folder, url = find_links
    _page(folder, url, (WHEEL_10, SHA_A))
    direct = "six @ https://files.example.org/six-1.16.0-py2.py3-none-any.whl"

    def attempt(requirement: str) -> list[list[str]]:
        if where == "command line":
            return _dry_run(tmp_path, url, ("demo-ext", requirement))
        return _dry_run(tmp_path, url, lines=f"{requirement}\n")

    with pytest.raises(UsageError) as refused:
        attempt(direct)
    assert (
        "hash-checking mode is on (--require-hashes on the command line)" in refused.value.message
    )
    said = "(on the command line) has no hash" if where == "command line" else "has no --hash"
    assert f"{direct} {said}" in refused.value.message, refused.value.message
    [command] = attempt(f"{direct}#sha256={SHA_B}")
    assert "--require-hashes" in command
    if where == "command line":
        assert f"{direct}#sha256={SHA_B}" in command


def test_an_index_wheel_whose_page_lists_no_hash_is_refused_in_hash_mode(
    tmp_path: Path, find_links: tuple[Path, str]
) -> None:
    """The page lists the wheel without a sha256: nothing to pin it to, so hash-checking mode
    refuses it (by name) before pip runs; with the page's hash it is pinned and goes ahead."""
    folder, url = find_links
    _page(folder, url, (WHEEL_10, None))
    with pytest.raises(UsageError) as refused:
        _dry_run(tmp_path, url)
    assert "demo-ext 1.0: its index page lists no sha256 for it" in refused.value.message
    _page(folder, url, (WHEEL_10, SHA_A))
    [command] = _dry_run(tmp_path, url)
    assert f"demo-ext @ {url}/files/{WHEEL_10}#sha256={SHA_A}" in command


@pytest.mark.parametrize("hash_mode", [True, False], ids=["hash mode", "plain"])
def test_a_wheel_is_pinned_to_its_own_versions_file_never_another_versions(
    tmp_path: Path, find_links: tuple[Path, str], hash_mode: bool
) -> None:
    """The page lists demo-ext 1.1 with a better tag for the H200 (cp312) beside the planned 1.0
    (py3): the pin is 1.0's file. A page with 1.1 alone pins nothing (and hash-checking mode then
    refuses the wheel)."""
    folder, url = find_links
    newer = "demo_ext-1.1-cp312-cp312-linux_x86_64.whl"
    planned = "demo_ext-1.0-py3-none-any.whl"
    pip_args = ("--require-hashes",) if hash_mode else ()
    _page(folder, url, (newer, SHA_B), (planned, SHA_A))
    [command] = _dry_run(tmp_path, url, pip_args=pip_args)
    assert f"demo-ext @ {url}/files/{planned}#sha256={SHA_A}" in command, command
    assert not any(newer in word for word in command)
    _page(folder, url, (newer, SHA_B))
    if hash_mode:
        with pytest.raises(UsageError, match=r"demo-ext 1\.0: its index page lists no sha256"):
            _dry_run(tmp_path, url, pip_args=pip_args)
    else:
        [command] = _dry_run(tmp_path, url, pip_args=pip_args)
        assert "demo-ext==1.0" in command and not any(newer in word for word in command)


# -- a plan applied on another machine than the one it was made on ---------------------------------

DATA = Path(__file__).parent / "data"
QUICKEXT_INDEX = DATA / "index" / "quickext"
QUICKEXT_SOURCE = DATA / "packages" / "quickext"


def _cli(*words: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_resolve", *words],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.fixture(scope="module")
def planned_on_an_h200(
    tmp_path_factory: pytest.TempPathFactory, torch_venv_template: Path
) -> tuple[Path, Path, dict[str, str]]:
    """(the plan file, the target's python, the environment of the machine it was made on): a
    build of the fixture extension for an H200 (9.0) on driver 580, against a stand-in torch
    2.14.1+cu130 and a stand-in CUDA 13.0 toolkit."""
    from _torch_env import copy_venv

    tmp_path = tmp_path_factory.mktemp("made-on-an-h200")
    python = copy_venv(tmp_path / "target", torch_venv_template)
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        CUDA_RESOLVE_DRIVER="580.95.05",
        CUDA_RESOLVE_CUDA_ARCH="9.0",
    )
    made = _cli(
        "plan", "quickext", "--index", str(QUICKEXT_INDEX), "--python", str(python), "--json",
        env=env,
        cwd=tmp_path,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    [build] = json.loads(made.stdout)["builds"]
    assert build["wheel_key"]["arch_list"] == "9.0", build
    plan = tmp_path / "plan.json"
    plan.write_text(made.stdout, encoding="utf-8")
    return plan, python, env


@pytest.mark.parametrize(
    ("machine", "said"),
    [
        (
            {"CUDA_RESOLVE_DRIVER": "570.86.10"},
            "the plan was made for NVIDIA driver 580.95.05 (CUDA 13.0); this machine has 570.86.10",
        ),
        (
            {"CUDA_RESOLVE_CUDA_ARCH": "9.0,12.0"},
            "the plan was made for quickext's arch list 9.0; this machine has GPU 1",
        ),
    ],
    ids=["older driver", "GPU the build does not cover"],
)
def test_a_plan_is_refused_on_a_machine_whose_driver_or_gpus_it_does_not_fit(
    tmp_path: Path,
    planned_on_an_h200: tuple[Path, Path, dict[str, str]],
    machine: dict[str, str],
    said: str,
) -> None:
    """Applied where it was made, the plan goes ahead (a dry run); on a machine with an older
    driver, or with a GPU its build has no kernels for, it is refused naming that fact, before
    anything is built."""
    plan, python, env = planned_on_an_h200
    words = (
        "apply", str(plan), "--index", str(QUICKEXT_INDEX), "--source", str(QUICKEXT_SOURCE),
        "--python", str(python), "--dry-run",
    )  # fmt: skip
    here = _cli(*words, env=env, cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    elsewhere = _cli(*words, env={**env, **machine}, cwd=tmp_path)
    assert elsewhere.returncode == 1, elsewhere.stdout + elsewhere.stderr
    assert said in elsewhere.stderr and "Traceback" not in elsewhere.stderr, elsewhere.stderr
    # The way out decides again here, with the same recipes and source (issue 29).
    assert (
        f"then apply it: cuda-resolve plan torch quickext --index {QUICKEXT_INDEX} --python "
        f"{python} --json > plan.here.json && cuda-resolve apply plan.here.json --index "
        f"{QUICKEXT_INDEX} "
        f"--source {QUICKEXT_SOURCE} --python {python}"
    ) in " ".join(elsewhere.stderr.split())
    assert not list(Path(env["CUDA_RESOLVE_WHEELHOUSE"]).rglob("*.whl"))


# -- sync --name auto and the driver the locked torch needs ----------------------------------------


def _record(name: str, **facts: object) -> ProfileRecord:
    fields: dict[str, object] = {
        "name": name,
        "source": f"{name}.toml",
        "digest": "0" * 64,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "os": "linux",
        "arch": "x86_64",
        "glibc": "2.35",
        "driver": None,
        "driver_cuda": None,
        "gpus": (),
        "capabilities": (),
        "torch": None,
        "torch_cuda": None,
        "torch_arch_list": None,
        "toolkit": None,
        "decision": (),
        "interpreter": sys.executable,
    }
    fields.update(facts)
    return ProfileRecord(**fields)  # type: ignore[arg-type]


def _torch(version: str, profile: str) -> LockedPackage:
    variant = version.split("+")[1]
    name = f"torch-{version}-py3-none-any.whl"
    return LockedPackage(
        name="torch",
        version=version,
        profiles=(profile,),
        index=f"https://download.pytorch.org/whl/{variant}",
        wheels=(
            LockedFile(
                name=name,
                url=f"https://download.pytorch.org/whl/{variant}/{name}",
                size=1,
                sha256="c" * 64,
            ),
        ),
        requested=True,
    )


@pytest.fixture
def two_profile_lock(tmp_path: Path) -> Path:
    """A lock (written by the lock's own writer) of torch for an A100 on driver 535 (torch
    2.14.1+cu126) and for a CPU box."""
    a100 = _record(
        "a100",
        driver="535.183.01",
        driver_cuda="12.2",
        gpus=("NVIDIA A100-SXM4-80GB (8.0)",),
        capabilities=("8.0",),
        torch="2.14.1+cu126",
        torch_cuda="12.6",
        torch_arch_list="5.0;6.0;7.0;7.5;8.0;8.6;9.0",
    )
    cpu = _record("cpu", torch="2.14.1+cpu")
    document = LockDocument(
        profiles=(a100, cpu),
        packages=(_torch("2.14.1+cpu", "cpu"), _torch("2.14.1+cu126", "a100")),
        requests=("torch==2.14.1",),
        created_by="cuda-resolve",
        resolver="cuda-resolve (test)",
        index_url="https://pypi.org/simple",
    )
    path = tmp_path / "pylock.toml"
    path.write_text(render(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("driver", "chosen"), [("535.183.01", "a100"), ("470.239.06", None)], ids=["535", "470"]
)
def test_sync_auto_takes_no_profile_whose_torch_the_driver_cannot_run(
    two_profile_lock: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    driver: str,
    chosen: str | None,
) -> None:
    """An A100 on the a100 profile's driver (535) gets that profile; the same A100 on driver 470
    (CUDA 11.4) cannot run its torch (CUDA 12.6): no profile fits, and sync says why and installs
    nothing, instead of installing a torch that cannot start."""
    from _torch_env import copy_venv

    python = copy_venv(tmp_path / "venv")
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", driver)
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "8.0")
    words = ["sync", str(two_profile_lock), "--name", "auto", "--python", str(python)]
    code = main([*words, "--check", "--json"])
    shown = capsys.readouterr()
    if chosen is not None:
        assert code == 1, shown.err  # --check: the profile's torch is not installed here
        assert json.loads(shown.out).get("profile") == chosen, shown.out
        return
    assert code == 1, shown.out + shown.err  # a LockError, not drift: no "profile" is reported
    said = json.loads(shown.out).get("error", shown.out)
    assert "no profile of" in said, said
    assert "a100: driver 470.239.06 supports CUDA <= 11.4; CUDA 12.6 needs driver" in said, said


# -- two indexes serving different files under one name ------------------------------------------


@pytest.mark.parametrize(
    ("hashes", "cpu_file"),
    [("both pages", "its own"), ("one page", "its own"), ("one page", "the same")],
    ids=["different, hashes on both pages", "different, one page without", "the same file"],
)
def test_two_indexes_serving_different_files_under_one_name_are_refused_by_lock(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    hashes: str,
    cpu_file: str,
) -> None:
    """The CUDA and the CPU variant's index each serve filelock-3.20.0-py3-none-any.whl, with
    different contents. One lock entry cannot name both, and keeping the first would hand the
    CPU profile a file its index never served: the lock is refused naming both URLs, and no lock
    file is written. Also where the CPU index's page lists no hashes (pip's report then has none
    for its file): the file's own hash decides, so the same file there is locked once."""
    import re

    from test_lock_support import StaticIndex, make_wheel, serve, write_profile

    built = tmp_path / "built"
    index = StaticIndex(tmp_path / "index")
    index.add(make_wheel(built / "simple", "filelock", "3.20.0"))
    index.add(make_wheel(built / "cu126", "filelock", "3.20.0"), variant="cu126")
    contents = {"filelock/__init__.py": "CPU = True\n"} if cpu_file == "its own" else None
    index.add(make_wheel(built / "cpu", "filelock", "3.20.0", files=contents), variant="cpu")
    index.add(make_wheel(built, "torch", "2.14.1+cu126", requires=["filelock"]), variant="cu126")
    index.add(make_wheel(built, "torch", "2.14.1+cpu", requires=["filelock"]), variant="cpu")
    if hashes == "one page":
        page = tmp_path / "index" / "whl" / "cpu" / "filelock" / "index.html"
        page.write_text(re.sub(r"#sha256=[0-9a-f]+", "", page.read_text(encoding="utf-8")))
    a100 = write_profile(
        tmp_path / "a100.toml", driver="535.183.01", gpus=[("NVIDIA A100-SXM4-80GB", "8.0")]
    )
    cpu = write_profile(tmp_path / "cpu-box.toml", name="cpu")
    output = tmp_path / "pylock.toml"
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    with serve(tmp_path / "index") as url:
        config = tmp_path / "config.toml"
        config.write_text(f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n', encoding="utf-8")
        monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
        code = main(
            [
                "lock", "torch==2.14.1", "--index-url", f"{url}/simple", "-o", str(output),
                "--profile", str(a100), "--profile", str(cpu),
            ]
        )  # fmt: skip
    said = capsys.readouterr().err
    wheel = "filelock-3.20.0-py3-none-any.whl"
    if cpu_file == "the same":
        assert code == 0, said
        from cuda_resolve.lock.read import read_lock

        packages = read_lock(output).pylock.packages
        [filelock] = [p for p in packages if p.name == "filelock"]
        assert [w.name for w in filelock.wheels or ()] == [wheel] and filelock.marker is None
        return
    assert code == 1, said
    assert f"{wheel} differs between {url}/whl/cu126/{wheel} and {url}/whl/cpu/{wheel}" in said
    assert "two indexes serve different files under one name" in said
    assert not output.exists()


def test_a_plan_without_builds_is_refused_on_a_machine_with_a_gpu_it_was_not_made_for(
    tmp_path: Path, planned_on_an_h200: tuple[Path, Path, dict[str, str]]
) -> None:
    """Nothing is built, so no arch list speaks for the new GPU: a plan made for the H200 alone
    (keep the installed torch) is refused on a machine with a GPU of another compute
    capability; where it was made it goes ahead."""
    _, python, env = planned_on_an_h200
    made = _cli("plan", "torch", "--python", str(python), "--json", env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert [(i["name"], i["kind"]) for i in json.loads(made.stdout)["install"]] == [
        ("torch", "installed")
    ]
    plan = tmp_path / "plan.json"
    plan.write_text(made.stdout, encoding="utf-8")
    words = ("apply", str(plan), "--python", str(python), "--dry-run")
    assert _cli(*words, env=env, cwd=tmp_path).returncode == 0
    elsewhere = _cli(*words, env={**env, "CUDA_RESOLVE_CUDA_ARCH": "9.0,12.0"}, cwd=tmp_path)
    assert elsewhere.returncode == 1, elsewhere.stdout + elsewhere.stderr
    said = "the plan was made for GPUs of compute capability 9.0; this machine has GPU 1"
    assert said in elsewhere.stderr, elsewhere.stderr
