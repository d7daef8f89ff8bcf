"""A lock's sync takes what the installs' download folder already holds (user walk F16,
:mod:`cuda_resolve.lock.wheelcache`): a first install (real pip, through the folder) then the
sync's fetch of the same files asks the loopback index for nothing; a folder file whose content
is not the one recorded is not used (the sync downloads the lock's file and says so); the
folder's files stay where they are."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_download_folder import CUDA, TORCH, _folder, _Index, _install, _pip, index
from test_lock import bench, configured, locked

from cuda_resolve.lock.select import Wanted
from cuda_resolve.lock.wheelcache import cached_files, fetch_all
from cuda_resolve.net.client import HttpClient

__all__ = ["bench", "configured", "index", "locked"]


class _Said:
    def __init__(self) -> None:
        self.steps: list[str] = []
        self.notes: list[str] = []

    def step(self, text: str) -> None:
        self.steps.append(text)

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        pass

    def note(self, text: str) -> None:
        self.notes.append(text)


@pytest.fixture
def filled(tmp_path: Path, index: _Index, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Index]:
    """The folder under this test's cache root, filled by a first install (real pip)."""
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path))  # downloads/ is tmp_path's
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # not this machine's
    status, tail = _install(_pip(tmp_path, "first"), index)
    assert status == 0, tail
    assert dict(index.sent) == {TORCH: 1, CUDA: 1}
    yield index


def _wanted(index: _Index) -> list[Wanted]:
    served = index.index.root / "files"
    base = index.url.rsplit("/", 1)[0]
    return [
        Wanted(
            name=name.split("-")[0].replace("_", "-"),
            version=name.split("-")[1],
            file=name,
            url=f"{base}/files/{name}",
            size=(served / name).stat().st_size,
            sha256=hashlib.sha256((served / name).read_bytes()).hexdigest(),
        )
        for name in (TORCH, CUDA)
    ]


def _sync_fetch(tmp_path: Path, wanted: list[Wanted], said: _Said) -> dict[str, Path]:
    """As sync fetches: what the cache (or a download folder) has, then the rest."""
    paths, missing = cached_files(wanted, tmp_path / "lock-wheels")
    if missing:
        with HttpClient(use_cache=False) as client:
            paths.update(fetch_all(missing, client, tmp_path / "lock-wheels", said))
    return paths


def test_a_sync_after_an_install_fetches_nothing_the_folder_holds(
    tmp_path: Path, filled: _Index
) -> None:
    wanted, said = _wanted(filled), _Said()
    assert [p.name for p in cached_files(wanted, tmp_path / "lock-wheels")[0].values()] == [
        TORCH,
        CUDA,
    ]  # taken before any client is made: no connection opened, no HTTP layer loaded
    paths = _sync_fetch(tmp_path, wanted, said)
    assert dict(filled.sent) == {TORCH: 1, CUDA: 1}  # nothing asked of the index
    folder = _folder(tmp_path, filled)
    for item in wanted:
        taken, kept = paths[item.name], folder.files / item.file
        assert taken.read_bytes() == (filled.index.root / "files" / item.file).read_bytes()
        assert kept.is_file() and os.path.samefile(taken, kept)  # linked, never moved
    assert not said.notes and not any(s.startswith("fetching") for s in said.steps), said.steps
    # Checked and stamped: the next sync reads no file's content and opens no connection.
    assert cached_files(wanted, tmp_path / "lock-wheels") == (paths, [])


def test_a_folder_file_that_changed_is_not_taken(tmp_path: Path, filled: _Index) -> None:
    folder = _folder(tmp_path, filled)
    kept = folder.files / TORCH
    with kept.open("r+b") as stream:  # the folder's copy written after it was recorded,
        stream.seek(100)  # its size unchanged: only its hash tells
        stream.write(b"tampered")
    tampered = kept.read_bytes()
    wanted, said = _wanted(filled), _Said()
    paths = _sync_fetch(tmp_path, wanted, said)
    assert dict(filled.sent) == {TORCH: 2, CUDA: 1}  # torch downloaded, the CUDA wheel taken
    torch = next(item for item in wanted if item.file == TORCH)
    assert paths["torch"].read_bytes() == (filled.index.root / "files" / TORCH).read_bytes()
    assert hashlib.sha256(paths["torch"].read_bytes()).hexdigest() == torch.sha256
    assert not os.path.samefile(paths["torch"], kept) and kept.read_bytes() == tampered
    assert len(said.notes) == 1 and said.notes[0].startswith(f"{kept} has sha256 "), said.notes
    assert f"not the lock's {torch.sha256}" in said.notes[0]
    assert not list(paths["torch"].parent.glob(".*.part"))  # the refused copy is gone


def test_sync_of_a_lock_after_an_install_of_its_torch_downloads_only_what_the_folder_lacks(
    configured: dict[str, Path | str],
    locked: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CLI's sync (test_lock's bench: a PyTorch-like mirror on loopback), after an install
    of the same torch went through the download folder (F16)."""
    from test_lock import _installed, _venv

    from cuda_resolve.cli import main
    from cuda_resolve.install.downloads import DownloadingPip, downloads_root

    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))  # nothing synced yet
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    installed = DownloadingPip(
        str(_venv(tmp_path / "installed")),
        environ={**environ, "PIP_CONFIG_FILE": os.devnull},
        log_path=tmp_path / "install.log",
        downloads=downloads_root(),
    )
    index = f"{configured['url']}/whl/cu126/"
    status, tail = installed.install(
        ["torch==2.14.1+cu126", "--index-url", index], torch_index_only=True
    )
    assert status == 0, tail
    held = {p.name for p in (tmp_path / "cache" / "downloads").glob("*/files/*")}
    assert "torch-2.14.1+cu126-py3-none-any.whl" in held, held
    fetched: list[str] = []
    download = HttpClient.download

    def recording(self: HttpClient, url: str, dest: Path | str, **kwargs: object) -> Path:
        fetched.append(Path(dest).name)
        return download(self, url, dest, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(HttpClient, "download", recording)
    target = _venv(tmp_path / "synced")
    assert main(["sync", str(locked), "--name", "a100", "--python", str(target)]) == 0
    assert fetched and not set(fetched) & held, (fetched, held)  # tinyutil: not in the folder
    assert _installed(target)["torch"] == "2.14.1+cu126"
