"""The stash that makes an install undoable: hard links taken before pip runs, put back after.

Real pip changes a real venv (made once per module with ``--without-pip``; the outer pip installs
into it with ``pip --python``) from tiny wheels written here; no network. Each test copies the
template venv, which has a fake ``torch`` 1.0 installed (a module, a "library", a console script).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_resolve.errors import InstallError
from cuda_resolve.install.journal import default_journal_dir
from cuda_resolve.install.stash import STASH_PREFIX, Stash, pending, recover, target_lock

# -- fixtures: wheels and a venv -------------------------------------------------------------------


def _wheel(
    folder: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    *,
    scripts: dict[str, str] | None = None,
) -> Path:
    """A valid py3-none-any wheel with a correct RECORD (and console scripts if given)."""
    dist = f"{name}-{version}.dist-info"
    contents = dict(files)
    contents[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    contents[f"{dist}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if scripts:
        lines = "".join(f"{k} = {v}\n" for k, v in scripts.items())
        contents[f"{dist}/entry_points.txt"] = f"[console_scripts]\n{lines}".encode()
    record = []
    for member, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{member},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    contents[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, data in contents.items():
            archive.writestr(member, data)
    path.write_bytes(buffer.getvalue())
    return path


def _torch(folder: Path, version: str, only: str) -> None:
    _wheel(
        folder,
        "torch",
        version,
        {
            "torch/__init__.py": (
                f"VERSION = {version!r}\n\ndef main():\n    print(VERSION)\n"
            ).encode(),
            f"torch/{only}.py": b"X = 1\n",
            "torch/lib/libtorch.so": f"not really a library {version}\n".encode() * 512,
        },
        scripts={"torchrun": "torch:main"},
    )


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            *args,
            "--disable-pip-version-check",
            "-q",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _freeze(python: Path) -> str:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "freeze",
            "--all",
            "--disable-pip-version-check",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("links")
    _torch(folder, "1.0", "only_in_one")
    _torch(folder, "2.0", "only_in_two")
    _wheel(
        folder,
        "foo",
        "1.0",
        {"foo/__init__.py": b"", "foo-1.0.data/data/share/foo/notes.txt": b"foo\n"},
    )
    _wheel(folder, "bar", "1.0", {"bar.py": b"B = 1\n"})
    return folder


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, links: Path) -> Path:
    """A venv (no pip) holding torch 1.0."""
    venv = tmp_path_factory.mktemp("template") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    _pip(venv / "bin" / "python", "install", "--no-index", "--find-links", str(links), "torch==1.0")
    return venv


@pytest.fixture
def venv(tmp_path: Path, template: Path) -> Path:
    """A fresh copy of the template venv (links kept: bin/python stays a link to the base)."""
    copy = tmp_path / "venv"
    shutil.copytree(template, copy, symlinks=True)
    return Path(os.path.realpath(copy))


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _site(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def _stash_folders(venv: Path) -> list[Path]:
    return sorted(venv.glob(f"{STASH_PREFIX}*"))


@pytest.fixture
def journal_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "journal"


# -- scenarios -------------------------------------------------------------------------------------


def test_a_replaced_package_is_put_back_from_hard_links(
    venv: Path, links: Path, journal_dir: Path
) -> None:
    python, site = _python(venv), _site(venv)
    before = _freeze(python)
    init, library = site / "torch" / "__init__.py", site / "torch" / "lib" / "libtorch.so"
    inodes = {path: path.stat().st_ino for path in (init, library, venv / "bin" / "torchrun")}

    stash = Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)
    # Hard links, never copies: the stash holds the very inodes, each now linked twice.
    for path, inode in inodes.items():
        kept = stash.folder / path.relative_to(venv)
        assert kept.stat().st_ino == inode and path.stat().st_nlink == 2
    assert not list(stash.folder.rglob("__pycache__"))
    assert [j.id for j in pending(journal_dir)] == [stash.journal.id]  # on disk before pip runs

    _pip(python, "install", "--no-index", "--find-links", str(links), "torch==2.0")
    assert "torch==2.0" in _freeze(python) and "'2.0'" in init.read_text()
    assert init.stat().st_ino != inodes[init]

    report = stash.restore()  # as the executor does when the import check fails
    assert report.restored == ("torch 1.0 put back (the install had put 2.0 in its place)",)
    assert report.not_restored == () and report.kept is None
    assert _freeze(python) == before
    assert {path: path.stat().st_ino for path in inodes} == inodes  # the old files themselves
    assert init.read_text().startswith("VERSION = '1.0'") and library.read_text().endswith(
        "library 1.0\n"
    )
    assert (
        not (site / "torch" / "only_in_two.py").exists()
        and (site / "torch" / "only_in_one.py").exists()
    )
    assert (
        not list(site.glob("torch/__pycache__/only_in_two.*"))
        and not (site / "torch-2.0.dist-info").exists()
    )
    done = subprocess.run(
        [str(python), "-c", "import torch; print(torch.VERSION)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "1.0"
    # Finished: no stash, no journal, no second link left.
    assert _stash_folders(venv) == [] and pending(journal_dir) == [] and init.stat().st_nlink == 1


def test_added_packages_are_removed(venv: Path, links: Path, journal_dir: Path) -> None:
    python = _python(venv)
    before = _freeze(python)
    stash = Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)
    _pip(python, "install", "--no-index", "--find-links", str(links), "foo", "bar")
    assert (venv / "share" / "foo" / "notes.txt").is_file()

    report = stash.restore()
    assert sorted(report.restored) == [
        "bar 1.0 removed (the install had added it)",
        "foo 1.0 removed (the install had added it)",
    ]
    assert report.not_restored == ()
    assert _freeze(python) == before
    site = _site(venv)
    assert (
        not any(site.glob("foo*"))
        and not any(site.glob("bar*"))
        and not (site / "__pycache__").exists()
    )
    assert not (venv / "share").exists()  # the folders the install made, emptied, are gone too
    assert (venv / "include").is_dir()  # an empty folder that was there stays


def test_an_install_killed_by_sigkill_is_undone_by_the_cli(venv: Path, links: Path) -> None:
    python = _python(venv)
    before = _freeze(python)
    child = textwrap.dedent(f"""
        import os, signal, subprocess, sys
        from cuda_resolve.install.journal import default_journal_dir
        from cuda_resolve.install.stash import Stash
        Stash.begin({str(python)!r}, environ=os.environ, journal_dir=default_journal_dir())
        subprocess.run([sys.executable, "-m", "pip", "--python", {str(python)!r}, "install", "-q",
                        "--no-index", "--find-links", {str(links)!r}, "torch==2.0", "foo"],
                       check=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    killed = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, check=False, timeout=120
    )
    assert killed.returncode == -9, killed.stderr
    assert "torch==2.0" in _freeze(python)
    (journal,) = pending(default_journal_dir())
    assert journal.prefix == str(venv) and journal.ready

    undo = [
        sys.executable,
        "-m",
        "cuda_resolve",
        "undo",
        "--last",
        "--python",
        str(python),
        "--json",
    ]
    done = subprocess.run(undo, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["journal"] == str(journal.path) and answer["not_restored"] == []
    assert sorted(answer["restored"]) == [
        "foo 1.0 removed (the install had added it)",
        "torch 1.0 put back (the install had put 2.0 in its place)",
    ]
    assert _freeze(python) == before
    assert pending(default_journal_dir()) == [] and _stash_folders(venv) == []

    again = subprocess.run(undo, capture_output=True, text=True, check=False, timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout)["journal"] is None
    plain = subprocess.run(undo[:-1], capture_output=True, text=True, check=False, timeout=120)
    assert plain.returncode == 0 and "nothing to undo" in plain.stdout


def test_a_crash_half_way_through_pip_is_recovered(
    venv: Path, links: Path, journal_dir: Path
) -> None:
    """The state a pip killed mid-install leaves: the old metadata moved to pip's ``~`` folder,
    the new version's files written but its RECORD not yet."""
    python, site = _python(venv), _site(venv)
    before = _freeze(python)
    Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)  # then the process "dies"
    _pip(python, "install", "--no-index", "--find-links", str(links), "torch==2.0")
    shutil.copytree(site / "torch-2.0.dist-info", site / "~orch-1.0.dist-info")
    (site / "torch-2.0.dist-info" / "RECORD").unlink()
    assert "torch==2.0" in _freeze(python)

    (journal,) = pending(journal_dir)
    report = recover(journal)
    assert report.restored == ("torch 1.0 put back (the install had put 2.0 in its place)",)
    assert (
        len(report.not_restored) == 1 and "no RECORD" in report.not_restored[0]
    )  # said, not hidden
    assert _freeze(python) == before
    assert not list(site.glob("~*")) and not (site / "torch-2.0.dist-info").exists()
    assert "'1.0'" in (site / "torch" / "__init__.py").read_text()
    assert pending(journal_dir) == []


def test_a_file_that_could_not_be_stashed_is_reported(
    venv: Path, links: Path, journal_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python, site = _python(venv), _site(venv)
    real_link = os.link

    def refusing(source: str, target: str, *, follow_symlinks: bool = True) -> None:
        if source.endswith("libtorch.so"):
            raise PermissionError(1, "Operation not permitted")
        real_link(source, target, follow_symlinks=follow_symlinks)

    with monkeypatch.context() as patch:
        patch.setattr(os, "link", refusing)
        stash = Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)
    assert [u[0] for u in stash.journal.unstashed] == [str(site / "torch" / "lib" / "libtorch.so")]
    _pip(python, "install", "--no-index", "--find-links", str(links), "torch==2.0")

    report = stash.restore()
    assert report.restored == ("torch 1.0 put back (the install had put 2.0 in its place)",)
    (line,) = report.not_restored
    assert (
        "libtorch.so could not be hard-linked: Operation not permitted" in line
        and "reinstall torch==1.0" in line
    )
    assert "torch==1.0" in _freeze(python)


def test_a_changed_editable_is_reported_not_touched(venv: Path, journal_dir: Path) -> None:
    link = _site(venv) / "devpkg.egg-link"
    link.write_text("/src/devpkg\n.")
    stash = Stash.begin(str(_python(venv)), environ=os.environ, journal_dir=journal_dir)
    link.unlink()
    report = stash.restore()
    assert report.restored == ()
    assert report.not_restored == (
        f"devpkg (an editable install, {link}) was changed and is not restored by "
        "cuda-pip: pip install -e /src/devpkg",
    )


def test_nothing_changed_restores_nothing(venv: Path, journal_dir: Path) -> None:
    python = _python(venv)
    before = _freeze(python)
    report = Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir).restore()
    assert report.restored == () and report.not_restored == () and report.complete
    assert report.to_json() == {"restored": [], "not_restored": [], "kept": None}
    assert _freeze(python) == before and _stash_folders(venv) == [] and pending(journal_dir) == []


def test_commit_removes_the_stash_and_the_journal(
    venv: Path, links: Path, journal_dir: Path
) -> None:
    python = _python(venv)
    init = _site(venv) / "torch" / "__init__.py"
    stash = Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)
    assert stash.folder.is_dir() and stash.journal.path.is_file() and init.stat().st_nlink == 2
    _pip(python, "install", "--no-index", "--find-links", str(links), "torch==2.0")
    stash.commit()
    assert (
        not stash.folder.exists() and not stash.journal.path.exists() and pending(journal_dir) == []
    )
    assert _stash_folders(venv) == [] and init.stat().st_nlink == 1
    assert "torch==2.0" in _freeze(python)  # the install stays
    stash.commit()  # twice is harmless


def test_a_second_install_into_the_same_target_waits_then_fails_clearly(
    venv: Path, tmp_path: Path
) -> None:
    python = str(_python(venv))
    locks = tmp_path / "locks"
    with target_lock(python, locks, timeout=5) as prefix:
        assert prefix == str(venv)
        # The same environment through another path to its interpreter is the same lock.
        other = tmp_path / "alias"
        other.symlink_to(venv)
        with (
            pytest.raises(InstallError) as caught,
            target_lock(str(other / "bin" / "python"), locks, timeout=0.2),
        ):
            pass
        assert (
            str(venv) in caught.value.message and "still held after 0.2 s" in caught.value.message
        )
        assert "taken by pid" in caught.value.message
        assert (
            caught.value.hint is not None
            and "another cuda-pip is installing into this environment" in caught.value.hint
        )
    with target_lock(python, locks, timeout=0.2):  # released at the end of the block
        pass


def test_undo_says_nothing_to_undo_for_a_clean_target(venv: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "undo", "--last", "--python", str(_python(venv))],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0 and "nothing to undo" in done.stdout
    assert default_journal_dir().is_relative_to(Path(os.environ["CUDA_RESOLVE_CACHE_DIR"]))


def test_a_journal_without_its_stash_changes_nothing(
    venv: Path, links: Path, journal_dir: Path
) -> None:
    """A discard interrupted between its steps: the journal must not remove what was installed."""
    python = _python(venv)
    stash = Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir)
    _pip(python, "install", "--no-index", "--find-links", str(links), "foo")
    after = _freeze(python)
    stash.folder.rename(f"{stash.folder}.discarded")  # where discard() was when the power went

    (journal,) = pending(journal_dir)
    report = recover(journal)
    assert report.restored == () and report.not_restored == (
        f"the stash {stash.folder} is gone: nothing was changed, the journal was removed",
    )
    assert _freeze(python) == after and pending(journal_dir) == []
    Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir).commit()
    assert _stash_folders(venv) == []  # the next begin removed the leftover


def test_a_stash_for_named_distributions_links_only_theirs_and_reports_a_change_to_another(
    venv: Path, links: Path, journal_dir: Path
) -> None:
    """``only``: what a --no-deps install of named files (sync) can replace. The other
    distributions' files are not linked (linking torch's 20,000 files costs most of a small
    install) but kept by identity: a change to one of them is reported, never hidden."""
    python, site = _python(venv), _site(venv)
    _pip(python, "install", "--no-index", "--find-links", str(links), "bar")
    before = _freeze(python)
    stash = Stash.begin(str(python), environ=os.environ, journal_dir=journal_dir, only=["Bar"])
    stashed = sorted(
        str(p.relative_to(stash.folder)) for p in stash.folder.rglob("*") if p.is_file()
    )
    assert stashed and all("bar" in name for name in stashed), stashed
    assert (site / "torch" / "__init__.py").stat().st_nlink == 1  # torch's files were not linked
    unstashed = {path for path, _why, _identity in stash.journal.unstashed}
    assert str(site / "torch" / "__init__.py") in unstashed

    (site / "bar.py").unlink()
    (site / "bar.py").write_text("B = 2\n")  # bar replaced: put back from the stash
    (site / "torch" / "only_in_one.py").write_text(
        "X = 2\n"
    )  # another distribution's file: only reported
    report = stash.restore()
    assert (site / "bar.py").read_text() == "B = 1\n"
    (line,) = report.not_restored
    assert (
        "only_in_one.py was not stashed: this run was to change only Bar" in line
        and "reinstall torch==1.0" in line
    )
    assert _freeze(python) == before
