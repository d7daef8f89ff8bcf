"""The install after a download into the folder sees only that download's files (issue 28,
:meth:`cuda_resolve.install.downloads.DownloadFolder.view`), with the target's real pip and a
loopback index.

torch here requires its CUDA wheel unpinned (``>=13.0``), as it requires sympy, networkx or
filelock. A first install takes the newest, 13.0.2; the index then yanks 13.0.2, so a later
``pip download`` resolves 13.0.1. ``--find-links FOLDER/files`` would still offer the install the
13.0.2 the first run left there (a local file carries no yank), and pip would take it; the run's
view holds only what its own download chose. Where pip names none of the files it chose
(``-q``), the install takes the whole folder, as before, and says so.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_download_folder import _environ
from test_lock_support import StaticIndex, make_wheel, serve

from cuda_resolve.install.downloads import DownloadFolder, DownloadingPip

DEP = "nvidia-standin-cu13"
NEWER = "nvidia_standin_cu13-13.0.2-py3-none-any.whl"
OLDER = "nvidia_standin_cu13-13.0.1-py3-none-any.whl"
TORCH = "torch-2.14.1-py3-none-any.whl"


class _Served:
    def __init__(self, index: StaticIndex, url: str) -> None:
        self.index = index
        self.url = url

    def yank(self, file: str) -> None:
        """Mark ``file`` yanked on its project's pages (PEP 592 in HTML, PEP 691 in JSON)."""
        project = self.index.root / "simple" / DEP
        page = project / "index.html"
        text = page.read_text()
        anchor = re.compile(rf'<a (href="[^"]*/{re.escape(file)}#[^"]*")')
        assert anchor.search(text), text
        page.write_text(anchor.sub(r'<a \1 data-yanked="broken build"', text))
        data = json.loads((project / "index.json").read_text())
        for record in data["files"]:
            if record["filename"] == file:
                record["yanked"] = "broken build"
        (project / "index.json").write_text(json.dumps(data))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[_Served]:
    built = tmp_path / "built"
    index = StaticIndex(tmp_path / "index")
    index.add(make_wheel(built, DEP, "13.0.1"))
    index.add(make_wheel(built, DEP, "13.0.2"))
    index.add(make_wheel(built, "torch", "2.14.1", requires=[f"{DEP}>=13.0"]))
    with serve(index.root) as url:
        yield _Served(index, f"{url}/simple")


def _pip(tmp_path: Path, name: str, notes: list[str]) -> DownloadingPip:
    return DownloadingPip(
        str(copy_venv(tmp_path / name)),
        environ=_environ(tmp_path),
        log_path=tmp_path / f"{name}.log",
        downloads=tmp_path / "downloads",
        on_note=notes.append,
    )


def _dep_version(pip: DownloadingPip) -> str:
    done = subprocess.run(
        [pip.python, "-c", f"import importlib.metadata as m; print(m.version('{DEP}'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _folder(tmp_path: Path, served: _Served) -> DownloadFolder:
    return DownloadFolder(tmp_path / "downloads", ["--index-url", served.url])


def _after_a_yank(tmp_path: Path, served: _Served) -> DownloadFolder:
    """A first install left 13.0.2 in the folder; the index has yanked it since."""
    notes: list[str] = []
    first = _pip(tmp_path, "first", notes)
    status, tail = first.install(
        ["torch==2.14.1", "--index-url", served.url], torch_index_only=True
    )
    assert status == 0, tail
    assert _dep_version(first) == "13.0.2" and not notes, notes
    served.yank(NEWER)
    return _folder(tmp_path, served)


def test_the_install_takes_what_its_own_download_chose_not_an_earlier_runs_file(
    tmp_path: Path, served: _Served
) -> None:
    folder = _after_a_yank(tmp_path, served)
    notes: list[str] = []
    later = _pip(tmp_path, "later", notes)
    seen: list[tuple[list[str], int, list[str]]] = []
    lines: list[str] = []

    def on_line(text: str) -> None:
        lines.append(text)
        views = sorted(folder.views.iterdir()) if folder.views.is_dir() else []
        if text.startswith("Processing") and len(views) == 1:
            view = views[0]
            targets = [os.readlink(entry) for entry in sorted(view.iterdir())]
            seen.append((targets, stat.S_IMODE(view.stat().st_mode), [view.name]))

    status, tail = later.install(
        ["torch==2.14.1", "--index-url", served.url], torch_index_only=True, on_line=on_line
    )
    assert status == 0, tail
    assert _dep_version(later) == "13.0.1"  # the download's choice; files/ holds 13.0.2 too
    assert sorted(p.name for p in folder.files.iterdir()) == [OLDER, NEWER, TORCH]
    assert not notes, notes
    # While pip ran: one private view of links to exactly this run's files in files/.
    targets, mode, (name,) = seen[0]
    assert targets == [str(folder.files / OLDER), str(folder.files / TORCH)]
    assert mode == 0o700 and name.startswith(f"{socket.gethostname()}.{os.getpid()}.")
    # pip's log has the words it ran; the view is gone once the run ended.
    log = (tmp_path / "later.log").read_text()
    assert f"--no-index --find-links {folder.views / name} torch==2.14.1" in log, log
    assert not list(folder.views.iterdir())
    # The lines shown name the folder's file (the view is gone), with where it came from.
    processing = [line for line in lines if line.startswith("Processing")]
    assert any(
        f"Processing {folder.files / TORCH} (downloaded from http://" in line for line in processing
    ), processing
    assert not any(str(folder.views) in line for line in processing)


def test_pip_naming_none_of_its_files_installs_from_the_whole_folder_and_says_so(
    tmp_path: Path, served: _Served
) -> None:
    folder = _after_a_yank(tmp_path, served)
    notes: list[str] = []
    quiet = _pip(tmp_path, "quiet", notes)
    args = ["-q", "torch==2.14.1", "--index-url", served.url]
    status, tail = quiet.install(args, torch_index_only=True)
    assert status == 0, tail
    assert notes == [
        "pip download named none of the files it chose (no 'Saved' or 'File was already "
        "downloaded' line: pip told to be quiet?); the install takes any file in "
        f"{folder.files}, not only this run's"
    ]
    assert _dep_version(quiet) == "13.0.2"  # the wart the view removes, said in the note
    log = (tmp_path / "quiet.log").read_text()
    assert f"--no-index --find-links {folder.files} torch==2.14.1" in log, log
    assert not folder.views.exists() or not list(folder.views.iterdir())


def test_the_view_is_removed_when_the_install_is_interrupted_and_a_day_old_view_too(
    tmp_path: Path, served: _Served
) -> None:
    """A view a killed run left is removed once it is a day old, whatever its name says: a host
    name and a process id that is gone here do not prove its run is gone (machines sharing the
    folder under one host name, containers' process ids; review 2026-12-05)."""
    folder = _folder(tmp_path, served)
    folder.views.mkdir(parents=True)
    host = socket.gethostname()
    old = folder.views / f"other-host.{os.getpid() + 1}.abcd1234"  # a killed run's, two days on
    old.mkdir()
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    fresh = folder.views / f"{host}.{_ended_pid()}.abcd1234"  # its process is not seen here
    fresh.mkdir()
    live = folder.views / f"{host}.{os.getpid()}.live0000"  # a view of a run still going
    live.mkdir()
    pip = _pip(tmp_path, "target", [])

    def interrupt(text: str) -> None:
        if text.startswith("Processing"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pip.install(
            ["torch==2.14.1", "--index-url", served.url], torch_index_only=True, on_line=interrupt
        )
    assert sorted(folder.views.iterdir()) == sorted([fresh, live])


def _ended_pid() -> int:
    """The id of a process that has ended."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def _filled(tmp_path: Path) -> DownloadFolder:
    folder = DownloadFolder(tmp_path / "downloads", ["--index-url", "https://x.test/simple"])
    folder._make()
    for name in (OLDER, NEWER):
        (folder.files / name).write_bytes(name.encode())
    return folder


def test_a_view_falls_back_to_hard_links_then_the_whole_folder_never_to_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _filled(tmp_path)
    notes: list[str] = []

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    folder._choose({OLDER}, [OLDER])
    monkeypatch.setattr(os, "symlink", refused)
    with folder.view(notes.append) as view:
        made = view / OLDER
        assert not made.is_symlink() and made.stat().st_ino == (folder.files / OLDER).stat().st_ino
        assert [p.name for p in view.iterdir()] == [OLDER]
    monkeypatch.setattr(os, "link", refused)
    copied: list[object] = []
    monkeypatch.setattr(shutil, "copyfile", lambda *args, **kwargs: copied.append(args))
    with folder.view(notes.append) as view:
        assert view == folder.files
    assert notes == [
        f"no view of this run's files could be made in {folder.views}: "
        f"{os.strerror(errno.EPERM)}; the install takes any file in {folder.files}, not only "
        "this run's"
    ]
    assert not list(folder.views.iterdir()) and copied == []


def test_a_relative_cache_folder_gives_views_whose_links_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA_RESOLVE_CACHE_DIR=./cache: a symbolic link to a relative path is read from the
    view's own folder, where it names nothing, and pip failed on it (review 2026-12-05)."""
    monkeypatch.chdir(tmp_path)
    folder = DownloadFolder(Path("cache") / "downloads", ["--index-url", "https://x.test/simple"])
    folder._make()
    (folder.files / OLDER).write_bytes(OLDER.encode())
    folder._choose({OLDER}, [OLDER])
    with folder.view(lambda note: None) as view:
        assert view.is_absolute()
        assert (view / OLDER).read_bytes() == OLDER.encode()


def test_a_closure_that_does_not_add_up_installs_from_the_whole_folder(tmp_path: Path) -> None:
    folder = _filled(tmp_path)
    notes: list[str] = []
    folder._choose({OLDER}, [OLDER, NEWER])  # pip saved a file it did not name
    with folder.view(notes.append) as view:
        assert view == folder.files
    folder._choose({OLDER, TORCH}, [OLDER])  # pip named a file the folder does not hold
    with folder.view(notes.append) as view:
        assert view == folder.files
    whole = f"; the install takes any file in {folder.files}, not only this run's"
    assert notes == [
        f"pip download saved {NEWER} without naming it{whole}",
        f"pip download named {TORCH}, which is not in {folder.files}{whole}",
    ]
