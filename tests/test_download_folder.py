"""The download folder's guarantees (issue 28, :mod:`cuda_resolve.install.downloads`), with the
target's real pip and a loopback index that counts the files it sends.

A file whose hash changed is refused, in the folder or served anew under a recorded name; what a
killed run left (a half-written file, a download cut off mid-transfer) is never used; two first
installs at once fetch each file once; ``--no-cache-dir`` keeps the folder out; the commands are
the step's own (its index alone, the options ``pip download`` takes, a pinned file pinned to the
folder's copy); the folders are the owner's only; the torch-landed check names the file taken.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_support import StaticIndex, _Handler, serve
from test_speed_download_once import _wheel

from cuda_resolve.errors import InstallError
from cuda_resolve.install import downloads
from cuda_resolve.install.downloads import DownloadFolder, DownloadingPip
from cuda_resolve.install.pipoptions import _INSTALL_ONLY, step_words

TORCH = "torch-2.14.1-py3-none-any.whl"
CUDA = "nvidia_standin_cu13-13.0.1-py3-none-any.whl"


@dataclass
class _Index:
    url: str
    index: StaticIndex
    built: Path
    sent: Counter[str]
    #: while set, the torch file is sent half, then held until ``release`` is set
    stall: threading.Event = field(default_factory=threading.Event)
    stalled: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    delay: float = 0.0  # seconds before each wheel is sent

    def publish(self, *, torch_padding: int = 0) -> None:
        """Serve torch and the CUDA wheel; with ``torch_padding``, another torch file under the
        same name (the CUDA wheel stays as it was)."""
        if not torch_padding:
            self.index.add(_wheel(self.built, "nvidia-standin-cu13", "13.0.1"))
        torch = _wheel(self.built, "torch", "2.14.1", ["nvidia-standin-cu13==13.0.1"])
        torch.write_bytes(torch.read_bytes() + b"\0" * torch_padding)
        self.index.add(torch)


class _CountingHandler(_Handler):
    state: _Index

    def do_GET(self) -> None:
        if not self.path.endswith(".whl"):
            super().do_GET()
            return
        name = self.path.rsplit("/", 1)[-1]
        self.state.sent[name] += 1
        time.sleep(self.state.delay)
        if name == TORCH and self.state.stall.is_set():
            body = Path(self.translate_path(self.path)).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.state.stalled.set()
            self.state.release.wait(60)
            return
        super().do_GET()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[_Index]:
    state = _Index(
        url="", index=StaticIndex(tmp_path / "index"), built=tmp_path / "built", sent=Counter()
    )
    state.built.mkdir()
    state.publish()
    handler = type("Handler", (_CountingHandler,), {"state": state})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(state.index.root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


def _environ(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1")
    # pip killed on purpose leaves its temporary folders: in the test's folder, not in /tmp.
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    environ.update(TMPDIR=str(scratch), TEMP=str(scratch), TMP=str(scratch))
    return environ


def _pip(tmp_path: Path, name: str, notes: list[str] | None = None) -> DownloadingPip:
    python = copy_venv(tmp_path / name)
    return DownloadingPip(
        str(python),
        environ=_environ(tmp_path),
        log_path=tmp_path / f"{name}.log",
        downloads=tmp_path / "downloads",
        on_note=None if notes is None else notes.append,
    )


def _install(pip: DownloadingPip, index: _Index) -> tuple[int, list[str]]:
    return pip.install(["torch==2.14.1", "--index-url", index.url], torch_index_only=True)


def _folder(tmp_path: Path, index: _Index) -> DownloadFolder:
    return DownloadFolder(tmp_path / "downloads", ["--index-url", index.url])


def _imports_torch(pip: DownloadingPip) -> bool:
    done = subprocess.run(
        [pip.python, "-c", "import torch, nvidia_standin_cu13"], capture_output=True, check=False
    )
    return done.returncode == 0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_that_changed_in_the_folder_is_refused(tmp_path: Path, index: _Index) -> None:
    first = _pip(tmp_path, "first")
    assert _install(first, index)[0] == 0
    folder = _folder(tmp_path, index)
    for path in (folder.root, folder.path, folder.files, folder.records):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    kept = folder.files / TORCH
    recorded = json.loads((folder.records / f"{TORCH}.json").read_text())
    assert recorded["sha256"] == _sha(kept) == _sha(index.index.root / "files" / TORCH)
    with kept.open("ab") as stream:  # a write into the folder's copy, after it was recorded
        stream.write(b"tampered")
    later = _pip(tmp_path, "later")
    with pytest.raises(InstallError) as refused:
        _install(later, index)
    assert f"{kept} has sha256 {_sha(kept)}, not the {recorded['sha256']}" in str(refused.value)
    assert "the file changed since" in str(refused.value)
    assert str(folder.records / f"{TORCH}.json") in str(refused.value.hint)
    assert not _imports_torch(later)  # nothing was installed from it


def test_a_recorded_name_served_with_another_hash_is_refused(tmp_path: Path, index: _Index) -> None:
    assert _install(_pip(tmp_path, "first"), index)[0] == 0
    folder = _folder(tmp_path, index)
    (folder.files / TORCH).unlink()  # gone from the folder, its record kept
    index.publish(torch_padding=64)  # the index now serves another file under the same name
    later = _pip(tmp_path, "later")
    with pytest.raises(InstallError) as refused:
        _install(later, index)
    assert f"{TORCH}, downloaded again from {index.url.rsplit('/', 1)[0]}" in str(refused.value)
    assert "the index now serves another file under that name" in str(refused.value)
    assert not (folder.files / TORCH).exists() and not _imports_torch(later)
    assert index.sent[TORCH] == 2


def test_what_a_killed_run_left_half_written_is_never_used(tmp_path: Path, index: _Index) -> None:
    folder = _folder(tmp_path, index)
    served = index.index.root / "files"
    # Pages that list no hashes (pip cannot tell a half file from the real one by itself).
    for page in index.index.root.glob("simple/*/index.*"):
        if page.suffix == ".json":
            page.unlink()
        else:
            page.write_text(re.sub(r"#sha256=[0-9a-f]+", "", page.read_text()))
    # A run killed while pip copied torch into incoming/, and a file in files/ that no finished
    # download put there (no record), both cut short.
    folder.incoming.mkdir(parents=True)
    folder.files.mkdir()
    (folder.incoming / TORCH).write_bytes((served / TORCH).read_bytes()[:1000])
    (folder.files / CUDA).write_bytes((served / CUDA).read_bytes()[:1000])
    pip = _pip(tmp_path, "target")
    status, tail = _install(pip, index)
    assert status == 0, tail
    assert index.sent == Counter({TORCH: 1, CUDA: 1})  # both fetched whole
    assert _sha(folder.files / TORCH) == _sha(served / TORCH)
    assert _sha(folder.files / CUDA) == _sha(served / CUDA)
    assert not folder.incoming.exists() and _imports_torch(pip)


_INSTALL = """
import os, sys
from pathlib import Path
from cuda_resolve.install.downloads import DownloadingPip
python, log, root, url = sys.argv[1:]
pip = DownloadingPip(python, environ=dict(os.environ), log_path=Path(log), downloads=Path(root),
                     on_note=lambda text: print(text, flush=True))
status, tail = pip.install(["torch==2.14.1", "--index-url", url], torch_index_only=True)
sys.exit(status)
"""


def _start(tmp_path: Path, python: Path, index: _Index) -> subprocess.Popen[str]:
    """Another process's install of torch through the folder (its notes on its stdout)."""
    arguments = [str(python), str(python.parent.parent) + ".log", str(tmp_path / "downloads")]
    return subprocess.Popen(
        [sys.executable, "-c", _INSTALL, *arguments, index.url],
        env=_environ(tmp_path),
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_download_killed_midway_leaves_nothing_used_and_the_next_run_completes(
    tmp_path: Path, index: _Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = copy_venv(tmp_path / "target")
    index.stall.set()
    killed = _start(tmp_path, python, index)
    try:
        assert index.stalled.wait(120), "the download never started"
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
    index.stall.clear()
    index.release.set()
    folder = _folder(tmp_path, index)
    assert not (folder.files / TORCH).exists()
    monkeypatch.setattr(downloads, "LOCK_WAIT_SECONDS", 20.0)  # a lock left held: an error
    pip = DownloadingPip(
        str(python),
        environ=_environ(tmp_path),
        log_path=tmp_path / "again.log",
        downloads=tmp_path / "downloads",
    )
    status, tail = _install(pip, index)
    assert status == 0, tail
    assert index.sent[TORCH] == 2 and _imports_torch(pip)
    assert _sha(folder.files / TORCH) == _sha(index.index.root / "files" / TORCH)


def test_two_first_installs_at_once_fetch_each_file_once(tmp_path: Path, index: _Index) -> None:
    pythons = [copy_venv(tmp_path / "one"), copy_venv(tmp_path / "two")]
    index.delay = 1.0  # the first holds the folder while the second arrives
    runs = []
    for python in pythons:
        runs.append(_start(tmp_path, python, index))
        time.sleep(0.5)
    said = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], said
    assert index.sent == Counter({TORCH: 1, CUDA: 1})
    assert any("waiting for another run that is downloading into" in text for text in said)
    for python in pythons:
        done = subprocess.run([python, "-c", "import torch, nvidia_standin_cu13"], check=False)
        assert done.returncode == 0


def test_the_commands_are_the_steps_own_with_the_folder_for_its_index(tmp_path: Path) -> None:
    environ = {"PIP_CONFIG_FILE": os.devnull}
    pip = DownloadingPip(
        sys.executable,
        environ=environ,
        trust=("--use-feature=truststore",),
        log_path=tmp_path / "log",
        downloads=tmp_path / "downloads",
    )
    url = "https://user:token@mirror.test/whl/cu130/"
    pinned = (
        "torch @ https://mirror.test/whl/cu130/torch-2.14.1%2Bcu130-cp311-cp311-linux_x86_64.whl"
    )
    args = ["--target", "/overlay", "--proxy", "http://proxy:3128", "-cLIMITS", "-U"]
    args += ["--index-url", url, f"{pinned}#sha256={'a' * 64}", "torchvision==0.29.1"]
    args += ["triton@https://mirror.test/whl/triton-3.5.0-py3-none-any.whl ; python_version>'3'"]
    download, install = pip.commands(args, torch_index_only=True)
    folder = DownloadFolder(tmp_path / "downloads", ["--index-url", url])
    assert download == [
        sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
        "--use-feature=truststore", "--dest", str(folder.incoming), "--proxy",
        "http://proxy:3128", "-cLIMITS", "--index-url", url, f"{pinned}#sha256={'a' * 64}",
        "torchvision==0.29.1", args[-1],
    ]  # fmt: skip
    local = (folder.files / "torch-2.14.1+cu130-cp311-cp311-linux_x86_64.whl").as_uri()
    assert install == [
        sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
        "--use-feature=truststore", "--target", "/overlay", "--proxy", "http://proxy:3128",
        "-cLIMITS", "-U", "--no-index", "--find-links", str(folder.files),
        f"torch @ {local}#sha256={'a' * 64}", "torchvision==0.29.1",
        f"triton@{(folder.files / 'triton-3.5.0-py3-none-any.whl').as_uri()} ; python_version>'3'",
    ]  # fmt: skip
    # One folder per index, named without its credentials.
    assert folder.index == ("--index-url", "https://mirror.test/whl/cu130/")
    assert (
        folder.path
        == DownloadFolder(tmp_path / "downloads", ["--index-url", url[:8] + url[19:]]).path
    )
    assert folder.path != DownloadFolder(tmp_path / "downloads", ["--index-url", url + "x/"]).path
    # What asks its index itself: not a torch step, a local index, pip told to keep no cache.
    plain = [pip.install_command(args)]
    assert pip.commands(args) == plain
    # PyPI's torch step (F8): through the folder of the index it asks: the one its words name
    # (the user's -i), else pip's variables and files, else PyPI; with no-index, asks itself.
    assert pip.commands(args, torch_index_only=True, pypi_index=True) == [download, install]
    torch = ["torch==2.14.1"]
    for variable, value, index in [
        (None, None, "https://pypi.org/simple/"),  # the slash: one folder with or without
        ("PIP_INDEX_URL", "https://u:p@pypi.mirror.test/simple", "https://pypi.mirror.test/simple"),
    ]:
        if variable and value:
            pip.environ[variable] = value
            pip._pypi.clear()
        fetch, put = pip.commands(torch, torch_index_only=True, pypi_index=True)
        assert fetch[-1] == "torch==2.14.1" and not any("index" in w for w in fetch), fetch
        files = DownloadFolder(tmp_path / "downloads", ["--index-url", index]).files
        assert put[-4:] == ["--no-index", "--find-links", str(files), "torch==2.14.1"]
    pip.environ["PIP_NO_INDEX"] = "1"
    pip._pypi.clear()
    no_index = pip.commands(torch, torch_index_only=True, pypi_index=True)
    assert no_index == [pip.install_command(torch)]
    del pip.environ["PIP_NO_INDEX"], pip.environ["PIP_INDEX_URL"]
    local_index = ["--index-url", "/srv/wheels", "torch==2.14.1"]
    assert len(pip.commands(local_index, torch_index_only=True)) == 1
    no_cache = [*args, "--no-cache"]  # an abbreviation pip accepts
    assert len(pip.commands(no_cache, torch_index_only=True)) == 1
    pip.environ["PIP_NO_CACHE_DIR"] = "off"  # pip takes any value as "no cache"
    pip._cache_off.clear()
    assert pip.commands(args, torch_index_only=True) == plain


_DUMP = """
import json, pip
from pip._internal.commands import create_command
def names(command):
    parser = create_command(command).parser
    return sorted({n for g in [parser, *parser.option_groups] for o in g.option_list
                   for n in o._long_opts})
print(json.dumps([pip.__version__, names("install"), names("download")]))
"""


def test_what_pip_download_is_not_given_is_what_it_lacks_in_every_installed_pip() -> None:
    pythons = [sys.executable]
    pyenv = Path.home() / ".pyenv" / "versions"
    if pyenv.is_dir():
        pythons += [str(p / "bin" / "python") for p in sorted(pyenv.iterdir())]
    checked = []
    for python in dict.fromkeys(pythons):
        if not os.path.exists(python):
            continue
        done = subprocess.run([python, "-c", _DUMP], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            continue
        version, install, download = json.loads(done.stdout)
        if int(version.split(".")[0]) < 22:
            continue
        assert set(install) - set(download) <= _INSTALL_ONLY, version
        assert not _INSTALL_ONLY & set(download), version
        checked.append(version)
    assert checked
    words = step_words(["--user", "--prefer-binary", "-i", "https://x.test/", "torch"])
    assert words.download_options == ("--prefer-binary",)
    assert words.options == ("--user", "--prefer-binary")


@dataclass
class _Recorded:
    runs: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)

    def __call__(
        self,
        command: Sequence[str],
        *,
        environ: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        self.runs.append((list(command), dict(environ)))
        return 0, []


def test_the_download_asks_the_steps_index_alone_with_the_users_trust_settings(
    tmp_path: Path,
) -> None:
    user = {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_FIND_LINKS": "/wheels/cpu-torch",
        "PIP_EXTRA_INDEX_URL": "https://extra.test/simple",
        "PIP_INDEX_URL": "https://mirror.test/simple",
        "PIP_CERT": "/etc/ssl/lab-ca.pem",
        "PIP_PROXY": "http://proxy.test:3128",
    }
    runner = _Recorded()
    pip = DownloadingPip(
        sys.executable,
        environ=user,
        log_path=tmp_path / "log",
        runner=runner,
        downloads=tmp_path / "downloads",
    )
    args = ["--index-url", "https://download.test/whl/cu130/", "torch==2.14.1"]
    assert pip.install(args, torch_index_only=True) == (0, [])
    assert [command[3] for command, _ in runner.runs] == ["download", "install"]
    for _, environ in runner.runs:
        assert not {"PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL"} & set(environ)
        assert environ["PIP_CERT"] == user["PIP_CERT"]
        assert environ["PIP_PROXY"] == user["PIP_PROXY"]


@pytest.fixture
def cpu_torch_index(tmp_path: Path) -> Iterator[str]:
    """A PyTorch-style index whose torch-2.6.0+cu126 is a CPU build inside (its version.py)."""
    from test_install_unit import _wheel as plain_wheel

    project = tmp_path / "served" / "whl" / "cu126" / "torch"
    project.mkdir(parents=True)
    wheel = plain_wheel(
        project,
        "torch",
        "2.6.0+cu126",
        files={
            "torch/__init__.py": "__version__ = '2.6.0+cpu'\n",
            "torch/version.py": "__version__ = '2.6.0+cpu'\ncuda = None\n",
        },
    )
    (project / "index.html").write_text(f'<a href="{wheel.name}#sha256={_sha(wheel)}">x</a>')
    with serve(tmp_path / "served") as url:
        yield f"{url}/whl/"


def test_the_torch_landed_check_names_the_file_taken_from_the_folder(
    tmp_path: Path, cpu_torch_index: str
) -> None:
    from test_install_unit import _cuda_pip, _env_with_torch_index

    python = copy_venv(tmp_path / "venv")
    env = _env_with_torch_index(tmp_path, cpu_torch_index)
    done = _cuda_pip("install", "torch==2.6.0+cu126", "--python", str(python), "--json", env=env)
    assert done.returncode == 1, done.stdout
    error = json.loads(done.stdout)["error"]
    assert "(a CPU build)" in error, error
    taken = Path(env["CUDA_RESOLVE_CACHE_DIR"]) / "downloads"
    assert f"{taken}/" in error and "/files/torch-2.6.0+cu126-py3-none-any.whl" in error, error


def test_the_folder_is_under_the_first_cache_folder_where_it_can_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_resolve import paths

    shared, own = tmp_path / "shared", tmp_path / "own"
    monkeypatch.setattr(paths, "own_cache_roots", lambda: (shared, own))
    assert downloads.downloads_root() == shared / "downloads"
    # Another user's downloads folder in a lab's shared cache (theirs only): the user's own.
    monkeypatch.setattr(paths, "writable", lambda folder: folder != shared / "downloads")
    assert downloads.downloads_root() == own / "downloads"
    monkeypatch.setattr(paths, "writable", lambda folder: False)
    assert downloads.downloads_root() is None


def test_a_wait_for_the_folder_is_said_once_moves_the_status_line_and_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filelock import FileLock

    folder = DownloadFolder(tmp_path / "downloads", ["--index-url", "https://x.test/simple"])
    folder._make()
    other = FileLock(str(folder.lock_path))  # another run downloading into the folder
    other.acquire()
    monkeypatch.setattr(downloads, "_TICK_SECONDS", 0.05)
    monkeypatch.setattr(downloads, "LOCK_WAIT_SECONDS", 0.5)
    notes: list[str] = []
    ticks: list[float] = []
    with pytest.raises(InstallError, match="another run has been downloading into"):
        with folder._locked(notes.append, lambda: ticks.append(time.monotonic())):
            pass
    assert notes == [f"waiting for another run that is downloading into {folder.path}"]
    assert len(ticks) >= 2  # each 0.05 s while it waited (0.5 s)
    other.release()
    with folder._locked(notes.append, lambda: ticks.append(time.monotonic())):
        assert len(notes) == 1  # free: taken at once, nothing said
