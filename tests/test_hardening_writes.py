"""Writes that cannot hurt: only regular files are replaced (never a device, FIFO or what a
symlink to one points at), modes are kept, credential files are created 0600, concurrent
``mirror set`` runs are serialised and never share a backup, and a killed run's temporary files
are cleaned by the next run. One atomic writer (:mod:`cuda_resolve.paths`) serves everyone."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from test_mirror_set import Home

from cuda_resolve._bounded import NotRegularFileError
from cuda_resolve.cli import main
from cuda_resolve.mirrors import writes
from cuda_resolve.mirrors.writes import PendingWrite, make_backup, write_all
from cuda_resolve.paths import write_atomic

REPO = Path(__file__).resolve().parent.parent
PROFILE = '[python]\nversion = "3.11"\n'
NOW = datetime(2026, 12, 2, 15, 30, 0)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    root = tmp_path / "home"
    root.mkdir()
    for name in list(os.environ):
        if name.startswith(("PIP_", "CONDA_")) or name in ("VIRTUAL_ENV", "CONDARC"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "xdg"))
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(root / "cr" / "config.toml"))
    return Home(root)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _device(tmp_path: Path) -> Path:
    """A private copy of /dev/null (same major/minor) to aim at: never the real one, which a
    broken writer run as root would replace for the whole machine."""
    path = tmp_path / "null-device"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError):
        pytest.skip("creating a device node needs root (CAP_MKNOD); the FIFO cases cover the rest")
    return path


# -- only regular files are replaced --------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "device", "link-to-device"])
def test_save_profile_never_replaces_a_device_or_fifo(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "in.toml"
    profile.write_text(PROFILE, encoding="utf-8")
    if kind == "fifo":
        target = tmp_path / "out.toml"
        os.mkfifo(target)
    elif kind == "device":
        target = _device(tmp_path)
    else:
        target = tmp_path / "out.toml"
        target.symlink_to(_device(tmp_path))
    assert main(["detect", "--profile", str(profile), "--save-profile", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --save-profile {target}: cannot write: is a ")
    assert "not a regular file" in err and "Traceback" not in err
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(target).st_mode)
    else:  # as root, os.replace would have made the device a regular file
        assert stat.S_ISCHR(os.stat(target).st_mode)
    if kind == "link-to-device":
        assert os.path.islink(target)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_write_atomic_refuses_anything_but_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "cache.json"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFileError):
        write_atomic(fifo, "x")
    with pytest.raises(IsADirectoryError):
        write_atomic(tmp_path, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(p.name for p in tmp_path.iterdir()) == [
        "cache.json"
    ]


def test_write_atomic_keeps_the_mode_writes_through_links_and_makes_private_files_0600(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real.toml"
    real.write_text("old\n", encoding="utf-8")
    real.chmod(0o640)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    write_atomic(link, "new\n")
    assert (
        link.is_symlink() and real.read_text(encoding="utf-8") == "new\n" and _mode(real) == 0o640
    )
    secret = tmp_path / "secret.toml"
    write_atomic(secret, "token\n", private=True)
    assert _mode(secret) == 0o600
    write_atomic(secret, "token 2\n")  # an existing file keeps its mode, private or not
    assert _mode(secret) == 0o600


def test_mirror_set_refuses_a_pip_conf_linked_to_a_device(
    home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    device = _device(tmp_path)
    home.pip.parent.mkdir(parents=True)
    home.pip.symlink_to(device)
    before = home.snapshot()
    assert main(["mirror", "set", "tuna"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {home.pip}: is a character device, not a regular file"), err
    assert stat.S_ISCHR(os.stat(device).st_mode) and home.pip.is_symlink()
    assert home.snapshot() == before and not home.config.exists() and not home.condarc.exists()


def test_write_all_refuses_a_fifo_target_before_writing_anything(tmp_path: Path) -> None:
    first = tmp_path / "pip.conf"
    first.write_text("[global]\n", encoding="utf-8")
    fifo = tmp_path / ".condarc"
    os.mkfifo(fifo)
    with pytest.raises(Exception, match="not a regular file"):
        write_all(
            [
                PendingWrite(path=first, target=first, text="x\n", hint="h"),
                PendingWrite(path=fifo, target=fifo, text="y\n", hint="h"),
            ]
        )
    assert first.read_text(encoding="utf-8") == "[global]\n" and stat.S_ISFIFO(
        os.lstat(fifo).st_mode
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [".condarc", "pip.conf"]


# -- modes and credentials ------------------------------------------------------------------


def test_mirror_set_keeps_modes_and_backs_up_with_the_same_mode(home: Home) -> None:
    home.seed()
    home.pip.chmod(0o640)
    home.config.chmod(0o600)
    assert main(["mirror", "set", "tuna"]) == 0
    assert _mode(home.pip) == 0o640 and _mode(home.config) == 0o600
    backups = {path.name.split(".")[0] or path.name: path for path in home.backups()}
    pip_backup = next(path for path in home.backups() if path.name.startswith("pip.conf."))
    config_backup = next(path for path in home.backups() if path.name.startswith("config.toml."))
    assert backups and _mode(pip_backup) == 0o640 and _mode(config_backup) == 0o600


def test_new_files_holding_credentials_are_created_0600(home: Home) -> None:
    url = "https://lab:t0ken@pypi.lab.example.edu/simple/"
    assert main(["mirror", "set", "custom", "--pypi", url]) == 0
    assert "t0ken" in home.pip.read_text(encoding="utf-8")
    assert _mode(home.pip) == 0o600 and _mode(home.config) == 0o600
    assert main(["mirror", "set", "custom", "--pytorch", "https://wheels.lab.example.edu/whl"]) == 0
    assert _mode(home.pip) == 0o600  # kept, not loosened


def test_new_files_without_credentials_are_0644(home: Home) -> None:
    assert main(["mirror", "set", "tuna"]) == 0
    assert _mode(home.pip) == 0o644 and _mode(home.config) == 0o644


# -- backups and leftovers ------------------------------------------------------------------


def test_backups_are_created_exclusively_with_unique_names(tmp_path: Path) -> None:
    target = tmp_path / "pip.conf"
    target.write_text("[global]\n", encoding="utf-8")
    taken = tmp_path / "pip.conf.20261202-153000.bak"
    taken.write_text("someone else's backup\n", encoding="utf-8")
    trap = tmp_path / "pip.conf.20261202-153000-1.bak"
    trap.symlink_to(tmp_path / "elsewhere")  # a link planted at the next name is not followed
    made = [make_backup(target, NOW) for _ in range(3)]
    assert [path.name for path in made] == [f"pip.conf.20261202-153000-{n}.bak" for n in (2, 3, 4)]
    assert taken.read_text(encoding="utf-8") == "someone else's backup\n"
    assert not (tmp_path / "elsewhere").exists()
    assert all(path.read_text(encoding="utf-8") == "[global]\n" for path in made)


def test_leftover_temporary_files_of_a_killed_run_are_removed_by_the_next(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    target = tmp_path / "pip.conf"
    target.write_text("[global]\n", encoding="utf-8")
    leftover = tmp_path / f".pip.conf.{dead.pid}.k1ll3d.tmp"
    leftover.write_text("half", encoding="utf-8")
    running = tmp_path / f".pip.conf.{os.getppid()}.alive.tmp"  # a live writer's file stays
    running.write_text("in progress", encoding="utf-8")
    other = tmp_path / f"..condarc.{dead.pid}.k1ll3d.tmp"  # another file's: not ours to judge now
    other.write_text("half", encoding="utf-8")
    write_all(
        [PendingWrite(path=target, target=target, text="[global]\ntimeout = 1\n", hint="h")],
        now=NOW,
    )
    assert not leftover.exists() and running.exists() and other.exists()
    write_atomic(tmp_path / ".condarc", "channels: []\n")
    assert not other.exists()


def test_a_killed_mirror_set_leaves_no_temporary_file_after_the_next_run(home: Home) -> None:
    home.seed()
    code = (
        "import os, sys\n"
        "from cuda_resolve.mirrors import writes\n"
        "real = writes.os.replace\n"
        "writes.os.replace = lambda *a: os._exit(9)  # killed between writing and replacing\n"
        "from cuda_resolve.cli import main\n"
        "main(['mirror', 'set', 'tuna'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    killed = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, timeout=60, check=False
    )
    assert killed.returncode == 9
    assert list(home.root.rglob("*.tmp")), (
        "the killed run left nothing to clean: the test proves nothing"
    )
    assert main(["mirror", "set", "tuna"]) == 0
    assert not list(home.root.rglob("*.tmp"))


# -- concurrency ----------------------------------------------------------------------------


def test_concurrent_mirror_set_runs_are_serialised(home: Home) -> None:
    """Ten runs at once, alternating two mirrors: pip and cuda-resolve end on the same one, and
    every run reports its own backups (no two share a name)."""
    home.seed()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    presets = ["tuna", "ustc"] * 5
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "cuda_resolve", "mirror", "set", name, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for name in presets
    ]
    reported: list[str] = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        reported += [entry["backup"] for entry in json.loads(out)["files"] if entry.get("backup")]
    assert len(reported) == len(set(reported)), "two runs reported the same backup file"
    assert all(Path(name).exists() for name in reported)
    pip_text = home.pip.read_text(encoding="utf-8")
    config_text = home.config.read_text(encoding="utf-8")
    winner = "tuna" if "tuna" in pip_text else "ustc"
    assert f'preset = "{winner}"' in config_text, (pip_text, config_text)
    assert not list(home.root.rglob("*.tmp"))


def test_the_lock_is_held_around_planning_and_writing(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filelock import FileLock, Timeout

    from cuda_resolve.paths import cache_root

    seen: list[bool] = []
    real = writes.write_all

    def spy(*args: object, **kwargs: object) -> object:
        probe = FileLock(str(cache_root() / "mirror-set.lock"), timeout=0)
        try:
            with probe:
                seen.append(False)  # another holder could take it: not locked
        except Timeout:
            seen.append(True)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    import cuda_resolve.mirrors.apply as apply

    monkeypatch.setattr(apply, "write_all", spy)
    assert main(["mirror", "set", "tuna"]) == 0
    assert seen == [True]
