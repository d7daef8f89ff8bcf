"""``mirror set --scope env`` on an environment several users share (issue 8).

The lock that serialises runs on one environment lives beside its files
(``<prefix>/.cuda-resolve-mirror.lock``), not in each user's cache: two users (here: processes
with their own cache folder, config and HOME) wait for each other, an edit one made after the
other planned is kept, the lock file is shared the way the folder is, and a lock file this user
cannot write is an error naming it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock
from test_mirror_set import CONDARC, PIP_CONF

from cuda_resolve.mirrors.apply import apply_plan, plan_set
from cuda_resolve.mirrors.locks import ENVIRONMENT_LOCK
from cuda_resolve.mirrors.presets import load_presets
from cuda_resolve.mirrors.targets import resolve_targets

REPO = Path(__file__).resolve().parent.parent

#: Run first in a child that plays a user without root's power over file permissions: as root,
#: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (capset), so mode bits apply to it as to anyone.
AS_AN_ORDINARY_USER = """\
import ctypes, os, sys
if os.geteuid() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    header, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        sys.exit(97)
    for item in data:
        item.effective &= ~0b110
        item.permitted &= ~0b110
    if libc.capset(ctypes.byref(header), data) != 0:
        sys.exit(98)
"""


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A conda environment with the lab's pip.conf and .condarc."""
    path = tmp_path / "envs" / "shared"
    (path / "conda-meta").mkdir(parents=True)
    (path / "pip.conf").write_text(PIP_CONF, encoding="utf-8")
    (path / ".condarc").write_text(CONDARC, encoding="utf-8")
    return path


def _user(tmp_path: Path, name: str) -> dict[str, str]:
    """The environment of another user: own HOME, cache folder and cuda-resolve config."""
    home = tmp_path / "users" / name
    home.mkdir(parents=True, exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PIP_", "CONDA_")) and key not in ("VIRTUAL_ENV", "CONDARC")
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "xdg"),
        CUDA_RESOLVE_CACHE_DIR=str(home / "cache"),
        CUDA_RESOLVE_CONFIG=str(home / "cr" / "config.toml"),
        PYTHONPATH=str(REPO),
    )
    return env


def _set(
    preset: str, prefix: Path, env: dict[str, str], *, prelude: str = ""
) -> subprocess.Popen[str]:
    code = prelude + (
        "import sys\nfrom cuda_resolve.cli import main\n"
        f"sys.exit(main(['mirror', 'set', {preset!r}, '--scope', 'env', '--prefix', "
        f"{str(prefix)!r}]))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_run_waits_while_another_user_holds_the_environment_lock(
    prefix: Path, tmp_path: Path
) -> None:
    with FileLock(str(prefix / ENVIRONMENT_LOCK)):  # another user's run, between plan and write
        process = _set("tuna", prefix, _user(tmp_path, "bob"))
        time.sleep(2.0)
        assert process.poll() is None, process.communicate()
        assert (prefix / "pip.conf").read_text(encoding="utf-8") == PIP_CONF
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "pypi.tuna.tsinghua.edu.cn" in (prefix / "pip.conf").read_text(encoding="utf-8")


def test_an_edit_made_after_the_plan_is_kept(
    prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "cr" / "config.toml"))
    presets = load_presets()
    targets = resolve_targets("env", prefix=prefix)
    plan = plan_set(presets["tuna"], targets, all_presets=presets.values())
    # Another user's `mirror set ustc` (or a hand edit) lands while this one was planning.
    other = plan_set(presets["ustc"], targets, all_presets=presets.values())
    apply_plan(other)
    (prefix / "pip.conf").write_text(
        (prefix / "pip.conf").read_text(encoding="utf-8") + "retries = 7\n", encoding="utf-8"
    )
    applied = apply_plan(plan)
    pip_text = (prefix / "pip.conf").read_text(encoding="utf-8")
    assert "retries = 7" in pip_text  # their edit survives
    assert "pypi.tuna.tsinghua.edu.cn" in pip_text and "ustc" not in pip_text
    assert "tuna" in (prefix / ".condarc").read_text(encoding="utf-8")
    assert "ustc" not in (prefix / ".condarc").read_text(encoding="utf-8")
    assert [result.change.path for result in applied] == [change.path for change in plan.changes]


def test_the_lock_file_is_shared_the_way_the_folder_is(prefix: Path, tmp_path: Path) -> None:
    group = _another_group()
    os.chmod(prefix, 0o775)  # group-writable, no setgid: new files get the creator's group
    if group is not None:
        os.chown(prefix, -1, group)
    process = _set("tuna", prefix, _user(tmp_path, "alice"))
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    info = os.stat(prefix / ENVIRONMENT_LOCK)
    assert stat.S_IMODE(info.st_mode) == 0o664
    if group is not None:
        assert info.st_gid == group


def _another_group() -> int | None:
    """A group other than this process's own that it may give files to (root: any)."""
    if os.geteuid() == 0:
        return 65534 if os.getegid() != 65534 else 65533
    others = [gid for gid in os.getgroups() if gid != os.getegid()]
    return others[0] if others else None


def test_a_lock_file_this_user_cannot_write_is_an_error_naming_it(
    prefix: Path, tmp_path: Path
) -> None:
    lock = prefix / ENVIRONMENT_LOCK
    lock.write_bytes(b"")
    os.chmod(lock, 0o444)  # made by someone whose group this user is not in
    before = {path.name: path.read_bytes() for path in prefix.iterdir() if path.is_file()}
    process = _set("tuna", prefix, _user(tmp_path, "bob"), prelude=AS_AN_ORDINARY_USER)
    _out, err = process.communicate(timeout=60)
    if process.returncode in (97, 98):
        pytest.skip("cannot drop root's power over file permissions here (capset refused)")
    assert process.returncode == 2, err
    assert f"error: {lock}: the lock file of `mirror set` is not writable by you" in err
    assert f"chmod g+w {lock}" in err and "Traceback" not in err
    after = {path.name: path.read_bytes() for path in prefix.iterdir() if path.is_file()}
    assert after == before  # nothing written, no backup, no temporary file


def test_the_user_scope_leaves_no_lock_file_beside_the_users_files(tmp_path: Path) -> None:
    env = _user(tmp_path, "carol")
    code = (
        "import sys\nfrom cuda_resolve.cli import main\nsys.exit(main(['mirror', 'set', 'tuna']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    home = Path(env["HOME"])
    assert (home / "xdg" / "pip" / "pip.conf").exists()
    assert not list(home.rglob(ENVIRONMENT_LOCK))


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(
    prefix: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.chmod(victim, 0o600)
    (prefix / ENVIRONMENT_LOCK).symlink_to(victim)
    process = _set("tuna", prefix, _user(tmp_path, "alice"))
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2, err
    assert "is a symbolic link" in err and "Traceback" not in err
    assert victim.read_text() == "precious\n" and stat.S_IMODE(os.stat(victim).st_mode) == 0o600
