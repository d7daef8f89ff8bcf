"""Secrets never land in files others read (issue 26).

A lab's index behind a login, served on loopback (every request needs Basic auth): ``lock
--index-url http://USER:PASSWORD@...`` writes a lock without the password or the user (it says
where credentials come from instead), and ``sync`` still authenticates, from ``$NETRC``. What
cuda-resolve caches on disk holds the URL only in the user's own 0600 files. A short password is
masked like a long one."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest
from _torch_env import copy_venv
from test_lock_support import StaticIndex, _Handler, make_wheel, write_profile

from cuda_resolve.cli import main
from cuda_resolve.lock.document import CREDENTIALS_NOTE
from cuda_resolve.net.cache import CacheEntry, HttpCache
from cuda_resolve.redaction import MASK, clear_secrets, redact_urls, register_secret

USER, PASSWORD = "labuser", "pw1"  # a short password: under four characters
GOOD = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


class _LoginHandler(_Handler):
    """The index of tests/test_lock_support.py, behind Basic auth."""

    def send_head(self):  # type: ignore[no-untyped-def]
        if self.headers.get("Authorization") != GOOD:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="lab"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return super().send_head()  # type: ignore[no-untyped-call]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("lab")
    index = StaticIndex(root / "index")
    index.add(make_wheel(root / "built", "filelock", "3.20.0"))
    index.add(make_wheel(root / "built", "tinyutil", "1.0", requires=["filelock>=3"]))
    write_profile(root / "cpu-box.toml", name="cpu")
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_LoginHandler, directory=str(root / "index"))
    )
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield {"root": root, "host": f"127.0.0.1:{server.server_address[1]}"}
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def locked(lab: dict[str, Any]) -> dict[str, Any]:
    """The lock written from the index with the credentials in its URL, and the cache root."""
    root: Path = lab["root"]
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PIP_FIND_LINKS", raising=False)
        patch.setenv("CUDA_RESOLVE_CACHE_DIR", str(root / "cache"))
        url = f"http://{USER}:{PASSWORD}@{lab['host']}/simple"
        output = root / "out" / "pylock.toml"
        output.parent.mkdir()
        words = ["lock", "tinyutil", "--index-url", url, "-o", str(output)]
        assert main([*words, "--profile", str(root / "cpu-box.toml")]) == 0
    return {"lock": output, "cache": root / "cache"}


def test_a_lock_carries_no_user_info_and_says_where_credentials_come_from(
    locked: dict[str, Any], lab: dict[str, Any]
) -> None:
    text = locked["lock"].read_text(encoding="utf-8")
    assert PASSWORD not in text and f"{USER}:" not in text and "@" not in text, text
    assert f'index-url = "http://{lab["host"]}/simple"' in text
    assert CREDENTIALS_NOTE in text


def test_cached_pages_and_facts_with_the_password_are_the_users_own(
    locked: dict[str, Any],
) -> None:
    holding = [
        path
        for path in Path(locked["cache"]).rglob("*")
        if path.is_file() and PASSWORD.encode() in path.read_bytes()
    ]
    assert holding, "the lock read no page through the URL with the password: nothing tested"
    for path in holding:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == 0o600 and path.stat().st_uid == os.getuid(), (path, oct(mode))
    for folder in {path.parent for path in holding if path.parent.parent.name == "http"}:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_a_replaced_cache_entry_is_made_private(tmp_path: Path) -> None:
    cache = HttpCache(tmp_path / "http")
    url = f"https://{USER}:{PASSWORD}@mirror.example/simple/six/"
    entry = CacheEntry(
        url=url,
        final_url=url,
        fetched_at=0.0,
        content_type="text/html",
        etag=None,
        last_modified=None,
        body=b"<html></html>",
    )
    cache.put(entry, None)
    written = list((tmp_path / "http").rglob("*.*"))
    assert len(written) == 2
    for path in written:
        path.chmod(0o644)  # as a cache written before this release left it
    cache.put(entry, None)
    assert {stat.S_IMODE(path.stat().st_mode) for path in written} == {0o600}
    assert cache.get(url, None) is not None


def test_sync_authenticates_from_netrc(
    locked: dict[str, Any],
    lab: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = copy_venv(tmp_path / "venv")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    words = ["sync", str(locked["lock"]), "--name", "cpu", "--python", str(python)]
    assert main(words) == 1  # the index wants a login, and the lock brings none
    assert "401" in capsys.readouterr().err
    netrc = tmp_path / "netrc"
    host = lab["host"].split(":")[0]
    netrc.write_text(f"machine {host} login {USER} password {PASSWORD}\n", encoding="utf-8")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    assert main(words) == 0, capsys.readouterr().err
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    assert any(name.startswith("tinyutil-1.0") for name in os.listdir(site))


def test_sync_authenticates_through_a_configured_mirror_url(
    locked: dict[str, Any],
    lab: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = copy_venv(tmp_path / "venv")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[rewrite]]\ncanonical = "http://{lab["host"]}/"\n'
        f'mirror = "http://{USER}:{PASSWORD}@{lab["host"]}/"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    words = ["sync", str(locked["lock"]), "--name", "cpu", "--python", str(python)]
    assert main(words) == 0, capsys.readouterr().err
    assert PASSWORD not in capsys.readouterr().err


@pytest.fixture
def registry() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"login {USER}/{PASSWORD} refused", f"login {USER}/{MASK} refused"),
        (f"password: {PASSWORD}.", f"password: {MASK}."),
        (f"{PASSWORD}x and x{PASSWORD}", f"{PASSWORD}x and x{PASSWORD}"),  # not inside a word
    ],
)
def test_a_short_password_is_masked_like_a_long_one(registry: None, text: str, shown: str) -> None:
    register_secret(PASSWORD)
    assert redact_urls(text) == shown


def test_a_remembered_file_fact_is_the_users_own(tmp_path: Path) -> None:
    from cuda_resolve.lock.files import FileFacts, FileFinder
    from cuda_resolve.net.client import HttpClient

    url = f"https://{USER}:{PASSWORD}@mirror.example/files/six-1.17.0-py3-none-any.whl"
    with HttpClient(use_cache=False) as client:
        finder = FileFinder(client, cache_dir=tmp_path / "facts")
        finder._remember(FileFacts(url=url, size=9, sha256="a" * 64))
        [written] = list((tmp_path / "facts").iterdir())
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        assert finder._remembered(url) == FileFacts(url=url, size=9, sha256="a" * 64)
