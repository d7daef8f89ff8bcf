"""What the download folder (issue 28, :mod:`cuda_resolve.install.downloads`) takes in, and what
it writes down: a step that does not install torch asks its index itself (``pip download``
ignores what the target has, so it would fetch the installed torch and its CUDA wheels again),
and no secret of an index or file URL reaches the folder's ``index.txt`` or its records.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from test_download_folder import CUDA, TORCH, _environ, _imports_torch, _Index, _pip, index
from test_speed_download_once import _wheel

from cuda_resolve.install.downloads import DownloadFolder, DownloadingPip

__all__ = ["index"]  # the loopback index fixture, counting the files it sends

VISION = "torchvision-0.29.1-py3-none-any.whl"


def test_torchvision_beside_an_installed_torch_fetches_torchvision_alone(
    tmp_path: Path, index: _Index
) -> None:
    index.index.add(_wheel(index.built, "torchvision", "0.29.1", ["torch==2.14.1"]))
    pip = _pip(tmp_path, "venv")
    subprocess.run(
        [pip.python, "-m", "pip", "install", "-q", "torch==2.14.1", "--index-url", index.url],
        env=_environ(tmp_path),
        check=True,
    )  # the image's torch, or one a plain pip installed: not in this machine's folder
    index.sent.clear()
    args = ["--index-url", index.url, "torchvision==0.29.1"]
    assert len(pip.commands(args, torch_index_only=True)) == 1  # no pip download
    status, tail = pip.install(args, torch_index_only=True)
    assert status == 0, tail
    assert dict(index.sent) == {VISION: 1}  # not torch's nor its CUDA wheel's ~3 GB again
    # A step that installs torch still goes through the folder, and fetches each file once.
    second = _pip(tmp_path, "second")
    torch_args = ["--index-url", index.url, "torch==2.14.1", "torchvision==0.29.1"]
    assert [c[3] for c in second.commands(torch_args, torch_index_only=True)] == [
        "download",
        "install",
    ]
    assert second.install(torch_args, torch_index_only=True)[0] == 0
    assert dict(index.sent) == {VISION: 2, TORCH: 1, CUDA: 1}


SECRET = "s3cr3t-v4lue-0123456789"


def test_no_secret_of_a_url_reaches_the_folders_files(tmp_path: Path) -> None:
    served = f"https://files.mirror.test/{TORCH}?X-Amz-Signature={SECRET}&X-Amz-Expires=300"

    def runner(
        command: Sequence[str],
        *,
        environ: object,
        log_path: Path,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        if command[3] == "download":  # pip saving the file it names
            dest = Path(command[command.index("--dest") + 1])
            (dest / TORCH).write_bytes(b"torch")
            on_line(f"Downloading {served} (5 bytes)")
        return 0, []

    pip = DownloadingPip(
        sys.executable,
        environ={"PIP_CONFIG_FILE": os.devnull},
        log_path=tmp_path / "log",
        runner=runner,
        downloads=tmp_path / "downloads",
    )
    url = f"https://user:{SECRET}@mirror.test/whl/cu130/?token={SECRET}"
    assert pip.install(["--index-url", url, "torch==2.14.1"], torch_index_only=True) == (0, [])
    folder = DownloadFolder(tmp_path / "downloads", ["--index-url", url])
    assert (folder.files / TORCH).read_bytes() == b"torch"
    written = [p for p in folder.path.rglob("*") if p.is_file() and p.name != ".lock"]
    assert {p.name for p in written} >= {"index.txt", f"{TORCH}.json", TORCH}
    for path in written:
        assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
    record = json.loads((folder.records / f"{TORCH}.json").read_text(encoding="utf-8"))
    assert record["from"].startswith(f"https://files.mirror.test/{TORCH}?X-Amz-Signature=")
    # The folder is the index's, whatever its secrets: another token, the same folder.
    assert folder.path == DownloadFolder(tmp_path / "downloads", ["--index-url", url[:-3]]).path


# pip download's last lines where the cache's disk is full (an OSError it does not catch).
_FULL = [
    "ERROR: Exception:",
    "OSError: [Errno 28] No space left on device",
]


def test_a_full_disk_under_the_folder_falls_back_to_asking_the_index(tmp_path: Path) -> None:
    runs: list[list[str]] = []

    def runner(
        command: Sequence[str],
        *,
        environ: object,
        log_path: Path,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        runs.append(list(command))
        return (2, list(_FULL)) if command[3] == "download" else (0, [])

    notes: list[str] = []
    pip = DownloadingPip(
        sys.executable,
        environ={"PIP_CONFIG_FILE": os.devnull},
        log_path=tmp_path / "log",
        runner=runner,
        on_note=notes.append,
        downloads=tmp_path / "downloads",
    )
    args = ["--index-url", "https://download.test/whl/cu130/", "torch==2.14.1"]
    assert pip.install(args, torch_index_only=True) == (0, [])
    assert [command[3] for command in runs] == ["download", "install"]
    assert runs[1] == pip.install_command(args)  # the step's own words: its index, as before
    folder = DownloadFolder(tmp_path / "downloads", args[:2])
    assert notes == [
        f"the download into {folder.path} failed: No space left on device; installing without "
        "the download folder (pip asks the index itself)"
    ]
    # Any other failure of the download is the step's failure, as pip said it.
    runs.clear()
    pip._runner = lambda command, **_: (1, ["ERROR: No matching distribution found for torch"])
    assert pip.install(args, torch_index_only=True) == (
        1,
        ["ERROR: No matching distribution found for torch"],
    )


def test_a_folder_that_cannot_be_written_falls_back_to_asking_the_index(
    tmp_path: Path, index: _Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unwritable(self: DownloadFolder, sources: object) -> None:
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))  # the quota spent recording

    monkeypatch.setattr(DownloadFolder, "_take_new", unwritable)
    notes: list[str] = []
    pip = _pip(tmp_path, "venv", notes)
    status, tail = pip.install(["torch==2.14.1", "--index-url", index.url], torch_index_only=True)
    assert status == 0, tail
    assert _imports_torch(pip)
    folder = DownloadFolder(tmp_path / "downloads", ["--index-url", index.url])
    assert notes == [
        f"the download folder {folder.path} cannot be written: {os.strerror(errno.EDQUOT)}; "
        "installing without the download folder (pip asks the index itself)"
    ]
    assert not list(folder.files.iterdir()) and not folder.incoming.exists()
