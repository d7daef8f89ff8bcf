"""uv installs the files that are already local (issue 30), with every guarantee pip's run has.

The lock of tests/test_lock.py (small wheels from a loopback index) is synced into copies of the
template venv with the real uv (the ``uv`` wheel, cuda-resolve[fast]) and the real pip: uv runs
offline over exactly the locked files, hash-checked, its cache where ``UV_CACHE_DIR`` says; the
output says which engine ran; an undo and a later pip uninstall or reinstall leave uv's cache as
it was and the environment exact; a cache uv cannot write makes pip install instead, with a note.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_lock import _installed, _venv, bench, configured, locked  # noqa: F401  (fixtures)
from test_lock_support import make_wheel

from cuda_resolve.cli import main
from cuda_resolve.errors import UsageError
from cuda_resolve.install import uv as uv_engine
from cuda_resolve.plan import PipStep

pytestmark = pytest.mark.skipif(uv_engine.find_uv(os.environ) is None, reason="uv not installed")


@pytest.fixture
def uv_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "uv-cache"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    return cache


def _sync(locked: Path, python: Path, *words: str) -> int:
    return main(["sync", str(locked), "--name", "a100", "--python", str(python), *words])


def _json_sync(
    locked: Path, python: Path, capsys: pytest.CaptureFixture[str], *words: str
) -> dict[str, object]:
    capsys.readouterr()
    assert _sync(locked, python, "--json", *words) == 0
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return document


def _site(python: Path) -> Path:
    return next((python.parent.parent / "lib").glob("python3*/site-packages"))


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (byte-code left out) -> its sha256: what "as it was" means."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_sync_installs_the_locked_files_with_uv_offline_hash_checked_and_says_so(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    uv_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = _venv(tmp_path / "venv")
    report = _json_sync(locked, python, capsys)
    assert report["installers"] == ["uv"]
    (command,) = report["pip_runs"]  # type: ignore[misc]
    assert command[1:3] == ["pip", "install"] and command[command.index("--python") + 1] == str(
        python
    )
    for word in ("--no-deps", "--offline", "--no-index", "--require-hashes", "--no-config"):
        assert word in command
    assert command[command.index("--link-mode") + 1] == "hardlink"
    installed = _installed(python)
    assert installed["torch"] == "2.14.1+cu126" and installed["tinyutil"] == "1.0"
    site = _site(python)
    assert (site / "torch-2.14.1+cu126.dist-info" / "INSTALLER").read_text().strip() == "uv"
    # uv's cache is where UV_CACHE_DIR says, and the environment's files are links into it.
    module = site / "torch" / "__init__.py"
    cached = [
        p for p in uv_cache.rglob("torch/__init__.py") if p.stat().st_ino == module.stat().st_ino
    ]
    assert cached, "the installed file is not a hard link into UV_CACHE_DIR"
    assert _sync(locked, python, "--check") == 0
    # The text output says it too.
    other = _venv(tmp_path / "other")
    capsys.readouterr()
    assert _sync(locked, other) == 0
    assert "installed by: uv" in capsys.readouterr().out


def test_installer_pip_runs_pip_and_dry_run_prints_the_uv_command_that_runs(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    uv_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = _venv(tmp_path / "venv")
    # uv's offline command is printed once the lock's files are cached (a pip sync fetches them;
    # with files still to fetch, pip's command is printed: tests/test_hints_sync_uv.py)
    assert _json_sync(locked, _venv(tmp_path / "fetch"), capsys, "--installer", "pip")["installers"]
    planned = _json_sync(locked, python, capsys, "--dry-run")
    assert planned["installers"] == ["uv"] and planned["dry_run"] is True
    (words,) = planned["pip_runs"]  # type: ignore[misc]
    assert words[1:3] == ["pip", "install"] and "--require-hashes" in words
    assert not uv_cache.exists() and "torch" not in _installed(python)  # nothing ran
    capsys.readouterr()
    assert _sync(locked, python, "--dry-run") == 0
    assert "would run (uv): " + " ".join(words[:3]) in capsys.readouterr().out
    report = _json_sync(locked, python, capsys, "--installer", "pip")
    assert report["installers"] == ["pip"]
    assert report["pip_runs"][0][1:4] == ["-m", "pip", "install"]  # type: ignore[index]
    site = _site(python)
    assert (site / "torch-2.14.1+cu126.dist-info" / "INSTALLER").read_text().strip() == "pip"
    assert not uv_cache.exists()


def test_installer_uv_without_uv_is_a_usage_error_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(uv_engine, "find_uv", lambda environ: None)
    with pytest.raises(UsageError) as caught:
        uv_engine.uv_for("uv", {})
    # This interpreter's pip: cuda-resolve itself is not on PyPI, uv is (user walk C13).
    assert f"{sys.executable} -m pip install uv" in str(caught.value.hint)
    assert uv_engine.uv_for("auto", {}) == (None, None)  # auto: pip, nothing to say
    found, note = uv_engine.uv_for("auto", {"PIP_TARGET": "/elsewhere"})
    assert found is None and note is not None and "PIP_TARGET" in note
    assert uv_engine.uv_for("auto", {"PIP_USER": "0"}) == (None, None)  # pip reads it as off


def test_only_steps_of_local_hashed_wheels_go_to_uv(tmp_path: Path) -> None:
    sha = "a" * 64
    good = tmp_path / "locked.txt"
    good.write_text(f"file:///c/torch-1-py3-none-any.whl --hash=sha256:{sha}\n")
    words = ("--no-deps", "--no-index", "--require-hashes", "--quiet", "-r", str(good))
    local = uv_engine.local_requirements(PipStep(purpose="locked files", args=words), [])
    assert local is not None and local.file == good and len(local.lines) == 1
    remote = tmp_path / "remote.txt"
    remote.write_text(f"https://host/torch-1-py3-none-any.whl --hash=sha256:{sha}\n")
    for args in (
        (*words[:-1], str(remote)),  # a file on a server: pip fetches it
        ("--no-deps", "--require-hashes", "-r", str(good)),  # an index may be asked
        ("--no-deps", "--no-index", "--require-hashes", "--find-links", "x", "-r", str(good)),
        ("torch==2.1",),
    ):
        assert uv_engine.local_requirements(PipStep(purpose="p", args=args), []) is None
    wheel = make_wheel(tmp_path, "pointnet2-ops", "3.0+pt21cu121")
    built = PipStep(purpose="built wheels", args=("--no-deps",), built=("d1",))
    step = uv_engine.local_requirements(built, [("pointnet2_ops", wheel, sha)])
    assert step is not None and step.file is None
    assert step.lines == (f"pointnet2-ops @ {wheel.as_uri()} --hash=sha256:{sha}",)
    pip_args = PipStep(purpose="p", args=("--no-deps", "--user"), built=("d1",))
    assert uv_engine.local_requirements(pip_args, [("pointnet2_ops", wheel, sha)]) is None


def test_a_file_whose_hash_differs_is_refused_by_uv_and_the_right_one_goes_in(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    uv_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The engine itself checks: the lines it is given carry a hash that is not the file's."""
    python = _venv(tmp_path / "venv")
    wheel = make_wheel(tmp_path / "w", "tinyutil", "1.0")
    line = f"tinyutil @ {wheel.as_uri()} --hash=sha256:{'0' * 64}"
    engine = uv_engine.UvInstaller(
        str(uv_engine.find_uv(os.environ)),
        str(python),
        prefix=str(python.parent.parent),
        environ=dict(os.environ),
        log_path=tmp_path / "log",
    )
    _, status, tail = engine.install(uv_engine.LocalStep(lines=(line,)), tmp_path / "uv-step-1.txt")
    assert status != 0 and any("Hash mismatch" in text for text in tail)
    assert "tinyutil" not in _installed(python)
    right = line.replace("0" * 64, hashlib.sha256(wheel.read_bytes()).hexdigest())
    words, status, tail = engine.install(
        uv_engine.LocalStep(lines=(right,)), tmp_path / "uv-step-2.txt"
    )
    assert status == 0, tail
    assert (tmp_path / "uv-step-2.txt").read_text() == right + "\n" and words[-1].endswith("2.txt")
    assert _installed(python)["tinyutil"] == "1.0"


def test_an_undo_and_a_later_uninstall_leave_uvs_cache_intact_and_the_environment_exact(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    uv_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The environment's files are hard links into uv's cache: the undo (a failed import check
    after uv installed a profile over one uv installed), pip's uninstall and reinstall, and a
    file replaced in the environment change nothing in the cache."""
    from cuda_resolve.install import transaction

    python = _venv(tmp_path / "venv")
    assert main(["sync", str(locked), "--name", "cpu", "--python", str(python)]) == 0
    assert _sync(locked, _venv(tmp_path / "warm")) == 0  # the a100 files in uv's cache too
    site = _site(python)
    env_before, cache_before = _tree(python.parent.parent), _tree(uv_cache)
    monkeypatch.setattr(transaction, "_verify_imports", lambda *args: "torch: boom")
    assert _sync(locked, python) != 0  # uv installed the a100 profile; the check failed
    monkeypatch.undo()
    assert _tree(uv_cache) == cache_before
    assert _tree(python.parent.parent) == env_before  # exact: the cpu profile, file by file
    assert _installed(python)["torch"] == "2.14.1+cpu"
    # pip reinstalls one file's package and uninstalls another: unlinks, never writes through.
    wheel = make_wheel(tmp_path / "w", "tinyutil", "1.0", files={"tinyutil/__init__.py": "X=1\n"})
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--force-reinstall", str(wheel)], check=True)
    subprocess.run([*pip, "uninstall", "-y", "torch"], check=True)
    replaced = site / "filelock" / "__init__.py"  # an editor that writes a new file, then renames
    (site / "filelock" / "new").write_text("changed\n")
    os.replace(site / "filelock" / "new", replaced)
    assert _tree(uv_cache) == cache_before


def test_with_link_mode_copy_a_file_written_in_place_does_not_change_the_cache(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    uv_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``UV_LINK_MODE=copy`` (uv's own setting): an in-place write into an installed file, which a
    hard link would carry into uv's cache and every environment linked from it, stays in the
    environment."""
    monkeypatch.setenv("UV_LINK_MODE", "copy")
    python = _venv(tmp_path / "venv")
    report = _json_sync(locked, python, capsys)
    command = report["pip_runs"][0]  # type: ignore[index]
    assert command[command.index("--link-mode") + 1] == "copy"
    cache_before = _tree(uv_cache)
    with open(_site(python) / "torch" / "__init__.py", "a", encoding="utf-8") as edited:
        edited.write("EDITED = True\n")  # through the file, as an editor that keeps links does
    assert _tree(uv_cache) == cache_before


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """``folder`` and what is in it cannot be written, for root too (chattr +i) where it can."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder, *folder.rglob("*")]
    chattr = shutil.which("chattr") if os.geteuid() == 0 else None
    for path in paths:
        if chattr:
            subprocess.run([chattr, "+i", str(path)], check=False, capture_output=True)
        else:
            path.chmod(path.stat().st_mode & ~0o222)
    try:
        try:
            (folder / "probe").write_text("x")
        except OSError:
            pass
        else:
            pytest.skip("this machine cannot make a folder read-only for this user")
        yield
    finally:
        for path in reversed(paths):
            if chattr:
                subprocess.run([chattr, "-i", str(path)], check=False, capture_output=True)
            else:
                path.chmod(path.stat().st_mode | 0o200)


def test_a_cache_uv_cannot_write_makes_pip_install_instead_with_a_note(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    uv_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = _venv(tmp_path / "venv")
    with _read_only(uv_cache):
        report = _json_sync(locked, python, capsys)
    assert report["installers"] == ["pip"], report
    installed = _installed(python)
    assert installed["torch"] == "2.14.1+cu126" and installed["tinyutil"] == "1.0"
    site = _site(python)
    assert (site / "torch-2.14.1+cu126.dist-info" / "INSTALLER").read_text().strip() == "pip"
    assert _sync(locked, python, "--check") == 0
    # The note says why, in text.
    other = _venv(tmp_path / "other")
    capsys.readouterr()
    with _read_only(uv_cache):
        assert _sync(locked, other) == 0
    captured = capsys.readouterr()
    assert "installed by: pip" in captured.out
    assert "uv could not install the local files" in captured.err


def test_a_uv_configuration_cannot_move_the_install(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    uv_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """uv reads ``[pip] target`` from the user's uv.toml, and from UV_CONFIG_FILE even with
    --no-config: neither may send the locked files anywhere but the target."""
    elsewhere = tmp_path / "elsewhere"
    config = tmp_path / "uv.toml"
    config.write_text(f'[pip]\ntarget = "{elsewhere}"\n')
    user_config = Path(os.environ["XDG_CONFIG_HOME"]) / "uv" / "uv.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text(config.read_text())
    for how in ("user", "variable"):
        if how == "variable":
            user_config.unlink()
            monkeypatch.setenv("UV_CONFIG_FILE", str(config))
        python = _venv(tmp_path / how)
        assert _json_sync(locked, python, capsys)["installers"] == ["uv"]
        assert _installed(python)["tinyutil"] == "1.0", how
        assert not elsewhere.exists(), how


def test_sigterm_while_uv_runs_ends_it_restores_the_target_and_its_lines_are_redacted(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    uv_cache: Path,
) -> None:
    """uv runs through pip's process runner: SIGTERM to cuda-resolve ends uv (its own session)
    and what it had written is removed by the undo; a credential uv prints is redacted in the
    log. A stand-in uv writes a package into the target, prints a URL with a password, sleeps."""
    import signal
    import sys
    import time

    python = _venv(tmp_path / "venv")
    site = _site(python)
    before = _tree(python.parent.parent)
    pid_file = tmp_path / "uv.pid"
    fake = tmp_path / "fake-uv"
    fake.write_text(
        "#!/bin/sh\n"
        f"mkdir -p '{site}/half_written' && echo x > '{site}/half_written/__init__.py'\n"
        "echo 'error: fetching https://alice:s3cret-token@mirror.example/simple/'\n"
        f"echo $$ > '{pid_file}'\n"
        "exec sleep 120\n"
    )
    fake.chmod(0o755)
    script = (
        "import sys\nfrom cuda_resolve.install import uv\n"
        f"uv.find_uv = lambda environ: {str(fake)!r}\n"
        "from cuda_resolve.cli import main\n"
        f"words = ['sync', {str(locked)!r}, '--name', 'a100', '--python', {str(python)!r}]\n"
        "sys.exit(main(words))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.1)
    uv_pid = int(pid_file.read_text())
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode != 0
    with contextlib.suppress(ChildProcessError):
        os.waitpid(uv_pid, os.WNOHANG)
    for _ in range(100):  # the stand-in uv (and its sleep) end with the session
        if not Path(f"/proc/{uv_pid}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{uv_pid}").exists(), "uv was left running"
    assert not (site / "half_written").exists()
    assert _tree(python.parent.parent) == before
    logs = list((Path(os.environ["CUDA_RESOLVE_CACHE_DIR"]) / "logs").glob("sync-*.log"))
    text = "".join(log.read_text() for log in logs)
    assert "mirror.example" in text and "s3cret-token" not in text
    assert "s3cret-token" not in err


def test_a_step_of_wheelhouse_wheels_goes_to_uv_with_each_wheels_sha256(tmp_path: Path) -> None:
    """A reused build's step (``--no-deps`` and the wheelhouse file, its requirements installed):
    uv's command in the dry run, and the file it reads names the wheel with its sha256."""
    from cuda_resolve.index import default_index
    from cuda_resolve.install import transaction
    from cuda_resolve.install.options import InstallOptions
    from cuda_resolve.install.prepare import complete_plan
    from cuda_resolve.plan import make_plan
    from cuda_resolve.profile import load_profile
    from cuda_resolve.resolve import Options, resolve
    from cuda_resolve.wheelhouse.store import Wheelhouse

    env = load_profile(
        Path(__file__).parent / "data" / "profiles" / "h200-detected-2026-12-02.toml"
    )
    decided = make_plan(resolve(["pointnet2_ops"], env, default_index(), Options()), env)
    plan = complete_plan(
        decided,
        env,
        default_index(),
        InstallOptions(),
        pip=None,
        installed={"torch": "2.11.0+cu130"},
    )
    [step] = plan.steps
    assert step.args == ("--no-deps",) and len(step.built) == 1
    house = Wheelhouse(tmp_path / "wheelhouse")
    python = str(tmp_path / "venv" / "bin" / "python")
    [uv_words] = transaction.planned_commands(plan, python, house, installer="auto")
    [pip_words] = transaction.planned_commands(plan, python, house, installer="pip")
    assert uv_engine.installer_of(uv_words) == "uv" and "--require-hashes" in uv_words
    assert uv_engine.installer_of(pip_words) == "pip" and pip_words[-1].endswith(".whl")
    engine = transaction._uv_engine("auto", python, None, os.environ, tmp_path / "log")
    wheel = Path(pip_words[-1])
    digest = step.built[0]
    local = transaction._local_step(engine, step, plan, {digest: wheel}, {digest: "ab" * 32})
    assert local is not None and local.lines == (
        f"pointnet2-ops @ {wheel.resolve().as_uri()} --hash=sha256:{'ab' * 32}",
    )


def test_a_cache_on_another_filesystem_is_copied_from_and_the_users_link_mode_is_kept(
    tmp_path: Path,
) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second filesystem here")
    elsewhere = {"UV_CACHE_DIR": str(shm / "no-such-uv-cache")}  # its nearest parent decides
    assert uv_engine.link_mode(elsewhere, str(tmp_path)) == "copy"
    here = {"UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    assert uv_engine.link_mode(here, str(tmp_path)) == "hardlink"
    assert uv_engine.link_mode({**here, "UV_LINK_MODE": "copy"}, str(tmp_path)) == "copy"
    assert uv_engine.link_mode({**here, "UV_LINK_MODE": "symlink"}, str(tmp_path)) == "hardlink"
    default = {"HOME": str(tmp_path / "home")}  # uv's default: ~/.cache/uv
    assert uv_engine.cache_dir(default) == tmp_path / "home" / ".cache" / "uv"
    assert uv_engine.cache_dir({**default, "XDG_CACHE_HOME": "/x"}) == Path("/x/uv")


def test_cuda_pip_takes_installer_as_its_own_option_and_pip_never_sees_it() -> None:
    from pip_plugin.__main__ import split_arguments

    own, pip_args, requirements = split_arguments(
        ["--installer", "uv", "--no-cache-dir", "pointnet2_ops"]
    )
    assert own == ["--installer", "uv"] and pip_args == ["--no-cache-dir"]
    assert requirements == ["pointnet2_ops"]
    assert split_arguments(["--installer=pip", "kaolin"])[0] == ["--installer=pip"]
