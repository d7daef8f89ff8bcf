"""Issue 26: the restore is complete; partial publish results are reported as partial; a bad
``--python-for`` interpreter is bad input.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

# The tiny-wheel and venv helpers of the stash tests: the same real pip into a real venv.
from test_install_stash import _pip, _wheel
from test_wheelhouse import make_key, make_wheel

from cuda_resolve.cli import main
from cuda_resolve.install.stash import Stash, pending, recover
from cuda_resolve.wheelhouse import Wheelhouse

# -- the restore is complete -------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("restore") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    return venv


@pytest.fixture
def venv(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "venv"
    shutil.copytree(template, copy, symlinks=True)
    return Path(os.path.realpath(copy))


def _site(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def _imports(venv: Path, name: str) -> bool:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", f"import {name}"],
        cwd="/",
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0


def test_half_written_bytecode_of_a_removed_package_is_removed(venv: Path, tmp_path: Path) -> None:
    """pip was killed while compiling ghost 2.0 over 1.0: importlib's atomic write leaves
    ``X.pyc.<id>`` beside the finished ``.pyc`` files. The restore removes them with the rest of
    2.0, so its new subpackage does not stay importable (a folder left holding only
    ``__pycache__`` imports as a namespace package)."""
    python, site = venv / "bin" / "python", _site(venv)
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "ghost", "1.0", {"ghost/__init__.py": b"V = 1\n"})
    new = {
        "ghost/__init__.py": b"V = 2\n",
        "ghost/newsub/__init__.py": b"",
        "ghost/newsub/m.py": b"",
    }
    _wheel(links, "ghost", "2.0", new)
    _pip(python, "install", "--no-index", "--find-links", str(links), "ghost==1.0")
    journal_dir = tmp_path / "journal"
    Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)  # then "killed"
    _pip(python, "install", "--no-index", "--find-links", str(links), "ghost==2.0")
    cache = site / "ghost" / "newsub" / "__pycache__"
    tag = sys.implementation.cache_tag
    (cache / f"m.{tag}.pyc.140234112").write_bytes(b"half")
    (cache / f"__init__.{tag}.opt-1.pyc.99").write_bytes(b"half")
    assert _imports(venv, "ghost.newsub")

    (journal,) = pending(journal_dir)
    report = recover(journal)
    assert report.complete, report.not_restored
    assert report.restored == ("ghost 1.0 put back (the install had put 2.0 in its place)",)
    assert not (site / "ghost" / "newsub").exists()
    assert not _imports(venv, "ghost.newsub") and _imports(venv, "ghost")


def test_a_package_written_before_its_metadata_is_removed(venv: Path, tmp_path: Path) -> None:
    """pip was killed while extracting a wheel, before its ``.dist-info`` (the last entries of a
    wheel): no RECORD names the files, yet they were not there when the install began."""
    python, site = venv / "bin" / "python", _site(venv)
    (site / "keep.py").write_text("K = 1\n")  # there before: stays
    journal_dir = tmp_path / "journal"
    Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)
    (site / "ghost").mkdir()
    (site / "ghost" / "__init__.py").write_text("")
    (site / "ghostmod.py").write_text("G = 1\n")
    assert _imports(venv, "ghost") and _imports(venv, "ghostmod")

    (journal,) = pending(journal_dir)
    report = recover(journal)
    assert report.complete, report.not_restored
    why = "removed (written since the install began; no installed package lists it)"
    assert sorted(report.restored) == [f"{site / 'ghost'} {why}", f"{site / 'ghostmod.py'} {why}"]
    assert not _imports(venv, "ghost") and not _imports(venv, "ghostmod")
    assert (site / "keep.py").exists() and _imports(venv, "keep")


# -- partial publish results are reported as partial ------------------------------------------


class _Uploads:
    """A loopback stand-in for an index server's upload API: the first ``ok`` uploads are taken
    (200), an upload of a file it holds is 409, every later one is answered ``status``."""

    def __init__(self, ok: int, status: int) -> None:
        self.ok, self.status = ok, status
        self.stored: list[str] = []
        self.authorizations: list[str] = []


def _upload_server(
    uploads: _Uploads, host: str = "127.0.0.1"
) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            uploads.authorizations.append(self.headers.get("Authorization", ""))
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            name = re.search(rb'filename="([^"]+)"', body)
            filename = name.group(1).decode() if name else "?"
            if filename in uploads.stored:
                code = 409
            elif len(uploads.stored) < uploads.ok:
                uploads.stored.append(filename)
                code = 200
            else:
                code = uploads.status
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = Server((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    shown = f"[{host}]" if ":" in host else host
    return server, f"http://{shown}:{server.server_address[1]}/"


@pytest.fixture
def house(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A wheelhouse of three entries; their file names, in publish order."""
    root = tmp_path / "house"
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(root))
    store = Wheelhouse(root)
    for package in ("alpha_ext", "beta_ext", "gamma_ext"):
        store.publish(make_key(package=package), make_wheel(tmp_path / package, name=package))
    return [entry.path.name for entry in store.entries()]


def _publish_json(url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["wheelhouse", "publish", "--to", url, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("status", [500, 403])
def test_publish_json_that_fails_part_way_lists_what_is_on_the_server(
    house: list[str], status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    uploads = _Uploads(ok=1, status=status)
    server, url = _upload_server(uploads)
    try:
        code, first = _publish_json(url, capsys)  # alpha taken, beta refused
        uploads.ok = 2
        again, second = _publish_json(url, capsys)  # alpha there (409), beta taken, gamma refused
    finally:
        server.shutdown()
        server.server_close()
    assert code == again == 1
    for document in (first, second):
        assert document["partial"] is True and f"HTTP {status}" in document["error"]
        assert document["hint"]
    assert [(w["file"], w["status"]) for w in first["wheels"]] == [(uploads.stored[0], "uploaded")]
    assert first["failed"] == house[1] and first["not_tried"] == [house[2]]
    assert "1 wheel already on the server" in first["error"]
    assert [(w["file"], w["status"]) for w in second["wheels"]] == [
        (uploads.stored[0], "already there"),
        (uploads.stored[1], "uploaded"),
    ]
    assert second["failed"] == house[2] and second["not_tried"] == []
    assert "2 wheels already on the server" in second["error"]


def test_publish_text_that_fails_first_says_nothing_was_published(
    house: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, url = _upload_server(_Uploads(ok=0, status=500))
    try:
        assert main(["wheelhouse", "publish", "--to", url]) == 1
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert "HTTP 500" in err and "no wheel was published, 2 not tried" in err


def test_publish_to_an_ipv6_host_with_user_info_posts_there_with_the_credentials(
    house: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The upload URL keeps its host as written (``[::1]`` with its brackets) and loses only its
    user info, which travels as the Authorization header."""
    uploads = _Uploads(ok=3, status=500)
    server, url = _upload_server(uploads, host="::1")
    try:
        with_user = url.replace("http://", "http://lab:s3cret-token@")
        code, document = _publish_json(with_user, capsys)
    finally:
        server.shutdown()
        server.server_close()
    assert code == 0, document
    assert sorted(uploads.stored) == sorted(house)
    expected = "Basic " + base64.b64encode(b"lab:s3cret-token").decode()
    assert uploads.authorizations == [expected] * 3
    assert "s3cret-token" not in json.dumps(document)


# -- bad interpreters are bad input ------------------------------------------------------------


def _bad_interpreters(folder: Path) -> dict[str, str]:
    script = folder / "not-python"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    failing = folder / "failing"
    failing.write_text("#!/bin/sh\necho 'no such option -c' >&2\nexit 3\n")
    failing.chmod(0o755)
    text = folder / "text-file"
    text.write_text("print('hi')\n")  # not executable
    garbage = folder / "garbage"
    garbage.write_bytes(b"\x00\x01 not a program")
    garbage.chmod(0o755)
    return {
        str(folder / "no-such-python"): "no such file",
        "python9.99-nowhere": "no such file",
        str(folder): "not an executable program",
        str(text): "not an executable program",
        str(script): "not a Python interpreter (answered something else than a Python does)",
        str(failing): "not a Python interpreter (exited with status 3: no such option -c)",
        str(garbage): "not a Python interpreter (could not be started)",
    }


def test_lock_python_for_a_bad_interpreter_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, why in _bad_interpreters(tmp_path).items():
        argv = ["lock", "six", "--profile", "this", "--python-for", f"this={path}"]
        argv += ["--index-url", "http://127.0.0.1:9/simple", "-o", str(tmp_path / "pylock.toml")]
        assert main(argv) == 2, path
        err = capsys.readouterr().err
        assert f"error: --python-for this={path}: {why}" in err, err
        assert "hint: --python-for this=PATH: the path of a Python interpreter" in err
        assert "did not finish" not in err and not (tmp_path / "pylock.toml").exists()


def test_a_real_interpreter_passes_the_check() -> None:
    from cuda_resolve.lock.closure import check_interpreter

    assert check_interpreter(sys.executable, "--python-for x", os.environ) == sys.executable
    name = os.path.basename(sys.executable)
    on_path = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    assert check_interpreter(name, "--python-for x", on_path) == name
