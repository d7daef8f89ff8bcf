"""A wheelhouse hit installed by uv, end to end (issue 30): the real ``cuda-pip install`` of the
quick extension (tests/data/packages/quickext: an in-tree build backend, no compiler), first a
build with pip that fills the wheelhouse, then into fresh venvs a hit with ``--installer uv`` and
with the default (``auto``).

Checked: the output says uv ran, and ``timings`` names the phase "uv install" (pip's run names it
"pip install"); nothing listens to any index or proxy during the hits (a loopback listener that
counts connections is every index URL and proxy the run could use); the files landed exactly as
the wheel holds them (RECORD, the files' hashes, ``pip list`` as pip's own install gives it); an
install killed with SIGKILL after uv linked the files in is undone by ``cuda-resolve undo --last``
to the environment as it was, file by file, and uv's cache is left exactly as it was.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import copy_venv, standin_cuda_toolkit, torch_venv_template  # noqa: F401

from cuda_resolve.install import uv as uv_engine

pytestmark = pytest.mark.skipif(uv_engine.find_uv(os.environ) is None, reason="uv not installed")

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "packages" / "quickext"
INDEX = DATA / "index" / "quickext"
_CUDA_PIP = (sys.executable, "-m", "pip_plugin", "install", "quickext", "--index", str(INDEX))
_CUDA_PIP += ("--source", str(SOURCE))

#: Loaded by the target's interpreter at start: with QUICKEXT_HOLD set, importing quickext (the
#: import check, after uv installed it) writes the importer's pid there and waits to be killed.
_HOLD = """\
import os, sys, time
class _Hold:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "quickext" and os.environ.get("QUICKEXT_HOLD"):
            with open(os.environ["QUICKEXT_HOLD"], "w") as out:
                out.write(str(os.getpid()))
            time.sleep(120)
        return None
sys.meta_path.insert(0, _Hold)
"""


class _Tripwire:
    """A loopback listener that accepts and counts connections (any protocol), closing each."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.count = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.count += 1
            connection.close()

    def close(self) -> None:
        self.socket.close()


@pytest.fixture
def tripwire() -> Iterator[_Tripwire]:
    listener = _Tripwire()
    try:
        yield listener
    finally:
        listener.close()


def _cuda_pip(
    python: Path, environ: dict[str, str], *words: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_CUDA_PIP, "--python", str(python), *words],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _site(python: Path) -> Path:
    return next((python.parent.parent / "lib").glob("python3*/site-packages"))


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (byte-code left out) -> its sha256; links by their target.
    uv's own lock file at a venv's top (empty, made by its first run there, never an installed
    file: it stays, as after a plain ``uv pip install``) is left out too."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if "__pycache__" in path.parts or path.suffix == ".pyc" or path == folder / ".lock":
            continue
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = "-> " + os.readlink(path)
        elif path.is_file():
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _kept(before: dict[str, str], after: dict[str, str]) -> bool:
    """Every file of ``before`` is in ``after`` with the same content."""
    return all(after.get(name) == digest for name, digest in before.items())


def _pip_list(python: Path) -> list[dict[str, str]]:
    done = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
    )
    listed: list[dict[str, str]] = json.loads(done.stdout)
    return sorted(listed, key=lambda item: item["name"])


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _landed_exactly(wheel: Path, python: Path, added: set[str]) -> None:
    """Every file of ``wheel`` is in the target with its bytes, RECORD lists each file the
    install added with its hash, and nothing else was added."""
    site = _site(python)
    with zipfile.ZipFile(wheel) as archive:
        payload = {
            name: archive.read(name)
            for name in archive.namelist()
            if ".dist-info/" not in name and not name.endswith("/")
        }
    for name, data in payload.items():
        assert (site / name).read_bytes() == data, name
    [record] = site.glob("quickext-*.dist-info/RECORD")
    rows = list(csv.reader(io.StringIO(record.read_text())))
    listed = {row[0]: row[1] for row in rows if row}
    assert set(payload) <= set(listed)
    for name, digest in listed.items():
        if digest:  # RECORD lists itself without a hash
            assert _record_hash((site / name).read_bytes()) == digest, name
    site_prefix = str(site.relative_to(python.parent.parent)) + "/"
    landed = {name.removeprefix(site_prefix) for name in added}
    assert landed == set(listed), landed ^ set(listed)
    assert (record.parent / "INSTALLER").read_text().strip() == "uv"


def test_a_wheelhouse_hit_goes_in_through_uv_offline_exactly_and_undo_keeps_uvs_cache(
    tmp_path: Path, torch_venv_template: Path, tripwire: _Tripwire
) -> None:
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    uv_cache = tmp_path / "uv-cache"
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "CONDA_PREFIX") and not k.startswith(("PIP_", "UV_"))
    }
    base.update(
        {
            "CUDA_HOME": str(cuda),
            "PATH": f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
            "CUDA_RESOLVE_DRIVER": "580.95.05",
            "CUDA_RESOLVE_CUDA_ARCH": "9.0",
            "CUDA_RESOLVE_WHEELHOUSE": str(tmp_path / "wheelhouse"),
            "CUDA_RESOLVE_CACHE_DIR": str(tmp_path / "cache"),
            "CUDA_RESOLVE_CONFIG": str(tmp_path / "none.toml"),
            "UV_CACHE_DIR": str(uv_cache),
        }
    )
    built_venv = copy_venv(tmp_path / "built", torch_venv_template)
    built = _cuda_pip(built_venv, {**base, "PIP_NO_INDEX": "1"}, "--installer", "pip", "--json")
    assert built.returncode == 0, built.stderr
    first = json.loads(built.stdout)["result"]
    assert [b["cache_hit"] for b in first["builds"]] == [False]
    assert first["installers"] == ["pip"] and "uv install" not in first["timings"]
    assert "pip install" in first["timings"]
    wheel = Path(first["builds"][0]["wheel"])

    # From here every index and proxy a run could use is the listener.
    offline = {
        **base,
        "PIP_INDEX_URL": f"{tripwire.url}/simple",
        "PIP_EXTRA_INDEX_URL": f"{tripwire.url}/extra",
        "UV_INDEX_URL": f"{tripwire.url}/uv",
        "UV_DEFAULT_INDEX": f"{tripwire.url}/uv",
        **{name: tripwire.url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
        **{name.lower(): tripwire.url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
    }
    hit_venv = copy_venv(tmp_path / "hit", torch_venv_template)
    before = _tree(hit_venv.parent.parent)
    hit = _cuda_pip(hit_venv, offline, "--installer", "uv", "--json")
    assert hit.returncode == 0, hit.stderr
    result = json.loads(hit.stdout)["result"]
    assert [b["cache_hit"] for b in result["builds"]] == [True]
    assert result["installers"] == ["uv"], result
    assert "uv install" in result["timings"] and "pip install" not in result["timings"]
    [command] = result["pip_runs"]
    assert command[1:3] == ["pip", "install"]
    for word in ("--offline", "--no-index", "--require-hashes", "--no-deps", "--no-config"):
        assert word in command
    assert tripwire.count == 0, "a wheelhouse hit contacted an index or a proxy"
    after = _tree(hit_venv.parent.parent)
    assert not set(before) - set(after) and all(after[k] == v for k, v in before.items())
    _landed_exactly(wheel, hit_venv, set(after) - set(before))
    assert _pip_list(hit_venv) == _pip_list(built_venv)  # as pip's own install of it

    # With the default installer (auto), held in the import check after uv linked the files in
    # (hard links into its cache), the run is killed; undo puts the target back.
    held_venv = copy_venv(tmp_path / "held", torch_venv_template)
    (_site(held_venv) / "sitecustomize.py").write_text(_HOLD)
    held_before = _tree(held_venv.parent.parent)
    cache_before = _tree(uv_cache)
    marker, log = tmp_path / "importing.pid", tmp_path / "held.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [*_CUDA_PIP, "--python", str(held_venv)],
            env={**offline, "QUICKEXT_HOLD": str(marker), "TMPDIR": str(tmp_path)},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not (marker.is_file() and marker.read_text()) and process.poll() is None:
            assert time.monotonic() < deadline, "the import check never started"
            time.sleep(0.05)
        assert process.poll() is None, log.read_text()
        linked = _site(held_venv) / "quickext" / "__init__.py"
        assert [p for p in uv_cache.rglob("*") if p.stat().st_ino == linked.stat().st_ino]
    finally:
        process.kill()  # SIGKILL: no handler runs, the journal is what undo reads
        process.wait(30)
        if marker.is_file() and marker.read_text():
            os.kill(int(marker.read_text()), signal.SIGKILL)
    assert "installing into" in log.read_text()
    # uv's run added what it caches about the new venv's interpreter; nothing it had changed.
    cache_killed = _tree(uv_cache)
    assert _kept(cache_before, cache_killed)
    undo = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "undo", "--last", "--python", str(held_venv)],
        env=offline,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert _tree(held_venv.parent.parent) == held_before
    assert _tree(uv_cache) == cache_killed
    assert tripwire.count == 0

    auto_venv = copy_venv(tmp_path / "auto", torch_venv_template)
    done = _cuda_pip(auto_venv, offline)
    assert done.returncode == 0, done.stderr
    text = " ".join((done.stdout + done.stderr).split())  # the lines as wrapped, joined
    assert "installed by: uv" in text
    timings = text[text.index("done in ") :]
    assert "uv install" in timings and "pip install" not in timings, timings
    assert _pip_list(auto_venv) == _pip_list(built_venv)
    assert _kept(cache_killed, _tree(uv_cache)) and tripwire.count == 0
