"""Issue 26: the undo survives SIGKILL.

pip runs in a session of its own; when the process that started it is killed with SIGKILL, pip
must die too (PR_SET_PDEATHSIG), and ``undo --last`` must not restore while a process of that
install (pip, or a process pip started) still runs and writes to the target.

The last test kills the real cuda-pip while the target's real pip installs a wheel (slowed down
by a ``sitecustomize``). The others drive the acting layer directly: a process takes the target's
lock, stashes it (``Stash.begin``) and runs pip through
:class:`~cuda_resolve.install.pip.TargetPip` and the real runner, as cuda-pip does, with a
stand-in pip on PYTHONPATH that installs a package slowly (one file every 50 ms for 30 s) and
may leave a process of its own running; that process is killed with a real ``kill -9``. A pip
that went on would be seen going on. Linux only (/proc, prctl).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_resolve._lifeline import running, start_time
from cuda_resolve.install.journal import default_journal_dir
from cuda_resolve.install.stash import pending

if not sys.platform.startswith("linux"):
    pytest.skip("prctl and /proc are Linux's", allow_module_level=True)

STANDIN_PIP = r"""
import os, subprocess, sys, sysconfig, time
marks = os.environ["STANDIN_MARKS"]
site = sysconfig.get_paths()["purelib"]
with open(os.path.join(marks, "pip.pid"), "w") as f:
    f.write(str(os.getpid()))
if os.environ.get("STANDIN_CHILD"):  # a process pip starts (a build backend) that outlives it
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(os.path.join(marks, "child.pid"), "w") as f:
        f.write(str(child.pid))
meta = os.path.join(site, "ghost-1.0.dist-info")
os.makedirs(meta)
os.makedirs(os.path.join(site, "ghost"))
files = ["ghost/__init__.py"] + [f"ghost/mod_{i}.py" for i in range(600)]
with open(os.path.join(meta, "METADATA"), "w") as f:
    f.write("Metadata-Version: 2.1\nName: ghost\nVersion: 1.0\n")
with open(os.path.join(meta, "RECORD"), "w") as f:
    f.write("".join(f"{name},,\n" for name in files + ["ghost-1.0.dist-info/METADATA"]))
for name in files:
    with open(os.path.join(site, name), "w") as f:
        f.write("X = 1\n")
    if name.endswith("mod_3.py"):
        open(os.path.join(marks, "started"), "w").close()
    time.sleep(0.05)
"""

DRIVER = """
import os, sys
from pathlib import Path
from cuda_resolve.install.journal import default_journal_dir
from cuda_resolve.install.pip import TargetPip
from cuda_resolve.install.stash import Stash, default_lock_dir, target_lock
python, standin, log = sys.argv[1:4]
with target_lock(python, default_lock_dir(), timeout=30):
    stash = Stash.begin(python, environ=os.environ, journal_dir=default_journal_dir())
    pip = TargetPip(python, environ={**os.environ, "PYTHONPATH": standin}, log_path=Path(log))
    pip.install(["ghost"])
    stash.commit()
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("kill") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    return venv


@pytest.fixture
def target(template: Path, tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """(python, site-packages, marks folder) of a fresh copy of the venv; whatever the stand-in
    left running is ended afterwards."""
    import shutil

    venv = tmp_path / "venv"
    shutil.copytree(template, venv, symlinks=True)
    venv = Path(os.path.realpath(venv))
    (site,) = venv.glob("lib/python3*/site-packages")
    marks = tmp_path / "marks"
    marks.mkdir()
    standin = tmp_path / "standin" / "pip"
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text("")
    (standin / "__main__.py").write_text(textwrap.dedent(STANDIN_PIP))
    yield venv / "bin" / "python", site, marks
    for name in ("pip.pid", "child.pid"):
        if (marks / name).exists():
            pid = int((marks / name).read_text())
            if start_time(pid) is not None:
                os.kill(pid, signal.SIGKILL)


def _install_and_kill(python: Path, marks: Path, *, child: bool) -> None:
    """Start the install, wait until pip writes the target, then ``kill -9`` the installer."""
    # TMPDIR: the killed run's temporary folder stays in this test's folder, not in /tmp.
    environ = {**os.environ, "STANDIN_MARKS": str(marks), "TMPDIR": str(marks)}
    if child:
        environ["STANDIN_CHILD"] = "1"
    standin = marks.parent / "standin"
    installer = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(python), str(standin), str(marks / "pip.log")],
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not (marks / "started").exists():
        assert installer.poll() is None, installer.communicate()[1].decode()
        assert time.monotonic() < deadline, "the stand-in pip never started writing"
        time.sleep(0.02)
    os.kill(installer.pid, signal.SIGKILL)  # kill -9 of the process that runs pip
    installer.communicate(timeout=30)
    assert installer.returncode == -signal.SIGKILL


def _gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if start_time(pid) is None:
            return True
        time.sleep(0.02)
    return False


def _undo(python: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "undo", "--last", "--python", str(python)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _ghost_files(site: Path) -> list[str]:
    return (
        sorted(p.name for p in (site / "ghost").glob("*.py")) if (site / "ghost").exists() else []
    )


def test_pip_dies_with_the_installer_and_undo_restores(target: tuple[Path, Path, Path]) -> None:
    python, site, marks = target
    _install_and_kill(python, marks, child=False)
    pip = int((marks / "pip.pid").read_text())
    assert _gone(pip), "pip went on after the process that started it was killed"
    written = _ghost_files(site)
    time.sleep(0.3)
    assert _ghost_files(site) == written  # nobody writes the target any more

    done = _undo(python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ghost 1.0 removed" in done.stdout
    assert not (site / "ghost").exists() and not (site / "ghost-1.0.dist-info").exists()
    assert pending(default_journal_dir()) == []
    assert not list(default_journal_dir().glob("*.procs"))  # the record goes with the journal


def test_undo_refuses_while_a_process_of_the_killed_install_runs(
    target: tuple[Path, Path, Path],
) -> None:
    """pip died with the installer, but a process pip started (a build backend) runs on in
    pip's session: undo changes nothing, names it, and says what to do."""
    python, site, marks = target
    _install_and_kill(python, marks, child=True)
    assert _gone(int((marks / "pip.pid").read_text()))
    child = int((marks / "child.pid").read_text())
    assert start_time(child) is not None

    refused = _undo(python)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"(pid {child})" in refused.stderr and "nothing was undone" in refused.stderr
    assert (
        f"kill {child}" in refused.stderr
        and "undo --last` (or the install) again" in refused.stderr
    )
    assert (site / "ghost-1.0.dist-info").exists()  # untouched
    (journal,) = pending(default_journal_dir())
    assert journal.processes.exists()

    os.kill(child, signal.SIGKILL)
    assert _gone(child)
    done = _undo(python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (site / "ghost").exists() and pending(default_journal_dir()) == []


def test_undo_json_refusal_is_an_error_document(target: tuple[Path, Path, Path]) -> None:
    python, _site, marks = target
    _install_and_kill(python, marks, child=True)
    child = int((marks / "child.pid").read_text())
    done = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "undo", "--last", "--python", str(python), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    document = json.loads(done.stdout or done.stderr)
    assert str(child) in document["error"] and "kill" in document["hint"]


def test_a_record_names_only_the_same_process(tmp_path: Path) -> None:
    """A pid in the record whose process has another start time is another process (the pid
    was reused): it does not hold undo back. The real one, and its session, do."""
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        when = start_time(sleeper.pid)
        assert when is not None
        record = tmp_path / "x.procs"
        record.write_text(f"{sleeper.pid} {when + 1}\n")
        assert running(record) == []
        record.write_text(f"garbage\n{sleeper.pid} {when}\n")
        assert [m.pid for m in running(record)] == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert running(record) == []


# A slow real pip: in the target's site-packages, imported at every start of its interpreter; with
# STANDIN_SLOW set, every file pip copies out of a wheel takes 50 ms more (pip writes each with
# shutil.copyfileobj), and the first copies leave marks (the pid of the pip, "started").
SLOW_SITECUSTOMIZE = r"""
import os, shutil, time
_marks = os.environ.get("STANDIN_SLOW")
if _marks:
    _copy, _count = shutil.copyfileobj, [0]
    def _slow(*args, **kwargs):
        _count[0] += 1
        if _count[0] == 1:
            with open(os.path.join(_marks, "pip.pid"), "w") as f:
                f.write(str(os.getpid()))
        if _count[0] == 4:
            open(os.path.join(_marks, "started"), "w").close()
        time.sleep(0.05)
        return _copy(*args, **kwargs)
    shutil.copyfileobj = _slow
"""


def _freeze(python: Path) -> str:
    return subprocess.run(
        [str(python), "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


def test_kill_9_of_the_real_cuda_pip_stops_pip_and_undo_restores(tmp_path: Path) -> None:
    """The real cuda-pip installs a 300-file wheel with the target's real pip (slowed down);
    ``kill -9`` of cuda-pip: pip dies with it, nothing more is written, and ``undo --last``
    puts the target back exactly."""
    from _torch_env import copy_venv
    from test_install_stash import _wheel

    python = copy_venv(tmp_path / "venv")
    (site,) = (tmp_path / "venv").glob("lib/python3*/site-packages")
    (site / "sitecustomize.py").write_text(SLOW_SITECUSTOMIZE)
    links, marks = tmp_path / "links", tmp_path / "marks"
    links.mkdir()
    marks.mkdir()
    files = {f"bigpkg/m{i}.py": b"X = 1\n" for i in range(300)}
    _wheel(links, "bigpkg", "1.0", {"bigpkg/__init__.py": b"", **files})
    before = _freeze(python)

    environ = {**os.environ, "STANDIN_SLOW": str(marks), "TMPDIR": str(marks)}
    environ.pop("VIRTUAL_ENV", None)
    argv = ["install", "--python", str(python), "--no-index", "--find-links", str(links)]
    cuda_pip = subprocess.Popen(
        [sys.executable, "-m", "pip_plugin", *argv, "bigpkg"],
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not (marks / "started").exists():
        assert cuda_pip.poll() is None, cuda_pip.communicate()[1].decode()
        assert time.monotonic() < deadline, "pip never started writing"
        time.sleep(0.02)
    os.kill(cuda_pip.pid, signal.SIGKILL)
    cuda_pip.communicate(timeout=30)
    pip = int((marks / "pip.pid").read_text())
    try:
        assert _gone(pip), "pip went on installing after cuda-pip was killed"
    finally:
        if start_time(pip) is not None:
            os.kill(pip, signal.SIGKILL)
    written = sorted((site / "bigpkg").glob("*.py"))
    time.sleep(0.3)
    assert sorted((site / "bigpkg").glob("*.py")) == written and len(written) < 300

    done = _undo(python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _freeze(python) == before
    assert not (site / "bigpkg").exists() and pending(default_journal_dir()) == []
