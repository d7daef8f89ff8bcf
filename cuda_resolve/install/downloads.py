"""One download folder per machine for the installs that ask the PyTorch index (issue 28).

A first install that builds an extension installs torch twice: into the build's overlay and
into the target. download.pytorch.org sends no caching headers, so pip's HTTP cache keeps
nothing from it, and each of those installs downloaded torch and its CUDA wheels again (about
3 GB). Every install that asks one index alone for torch (the torch step that installs torch,
the overlay's torch), the PyTorch index or PyPI, now runs as two commands of the target's pip (a
torch step from PyPI names no index: its download asks the one pip's variables and files name,
else PyPI, and its folder is that index's, the one the overlay's torch from PyPI filled)::

    python -m pip download --dest FOLDER/incoming OPTIONS --index-url INDEX REQUIREMENTS
    python -m pip install OPTIONS --no-index --find-links FOLDER/views/RUN REQUIREMENTS

pip downloads and resolves with the step's own index options and environment (the user's
find-links and extra indexes left out, as for the step itself; trust, certificate and proxy
options kept: pip verifies TLS exactly as it does for an install); the install takes the same
requirements from the files that download chose and nothing else (a requirement pinned to a
file, ``name @ https://.../NAME.whl#sha256=H``, is pinned to the folder's copy of that file, hash
included). ``views/RUN`` holds links to exactly the files pip download named ("Saved PATH",
"File was already downloaded PATH"), so a file an earlier run left in ``files/`` (another
release's, one the index has since yanked, one another Python's download fetched) is never taken
for a dependency the requirements do not pin. It exists only while the run runs: the commands
printed beforehand (``--dry-run``) name ``FOLDER/files``, which pasted after the download takes
any file of the folder; pip's log holds the view's words.

pip is the engine throughout: no index is resolved by anything else. ``pip download`` fetches the
whole closure, whatever the target has (it ignores what is installed), so a step that does not
install torch (torchvision added beside an installed torch) asks its index itself, as before:
through the folder it would fetch torch and its CUDA wheels again only to leave them unused.

``cache_root()/downloads/KEY/``, one folder per index (KEY names the index options, credentials
and secret URL parameters left out: a CPU index's file never stands beside a CUDA index's build
of the same release):

- ``files/``: complete files, each with its record; what the views link to.
- ``records/NAME.json``: the file's sha256 taken when it was downloaded, where it came from, and
  the file's stat when it was last checked.
- ``incoming/``: where ``pip download`` writes; it holds a link to every file already in
  ``files/``, so pip fetches only what is missing ("File was already downloaded").
- ``views/HOST.PID.RANDOM/``: one install's view, symbolic links to the files in ``files/`` its
  download chose (hard links where a symbolic link cannot be made: a hard link changes the
  file's ctime, so the folder hashes it once more on its next use; never copies); removed when
  the install ends, failed or interrupted included, and by a later run once a day old (a killed
  run's).
- ``.lock``: held while the folder is filled.

What holds:

- A file reaches ``files/`` only whole: pip writes into ``incoming/`` (a run killed there leaves
  it behind, and the next holder of the lock empties it); after pip succeeded each new file is
  hashed, its record written, and it is renamed into ``files/``. A file in ``files/`` without a
  record did not come that way and is removed.
- Each use checks every file of the folder against its record (the stat recorded then, else
  the hash again) and refuses one whose hash changed; a name downloaded again must have the hash
  recorded the first time (an index serving another file under a released name is refused).
- Two processes: the lock serialises the downloads into one folder; the second finds the first
  one's files and downloads nothing. Installs read ``files/`` (through their views) without the
  lock: anything they can see there is whole.
- Its folders are the owner's only (0700), as the logs' folder; each view too.
- Where pip names none of the files it chose (told ``-q``, or worded otherwise) or what it named
  does not add up, or no view can be made, the install takes the whole ``files/`` (any file an
  earlier run left there), said in a note; that never fails the install.

pip's own ``--no-cache-dir`` (on the command line, ``PIP_NO_CACHE_DIR`` or in its
configuration) keeps the folder out: the install then asks the index itself, as before. So does a
folder that cannot take the files (its disk full, its quota spent, a folder that cannot be
written: a lab's home quota is often far smaller than its scratch space): the install is said
and asks the index itself, as before, where it would otherwise have failed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InstallError
from ..paths import file_facts
from .pip import TargetPip
from .pipoptions import StepWords, cache_turned_off, step_words

if TYPE_CHECKING:
    from ..build.runner import ProcessRunner

__all__ = ["LOCK_WAIT_SECONDS", "DownloadFolder", "DownloadingPip", "downloads_root"]

#: How long a run waits for another one that is downloading into the same folder.
LOCK_WAIT_SECONDS = 3600.0
#: pip's line for a file it fetches: "Downloading URL (SIZE)".
_DOWNLOADING = re.compile(r"^Downloading (\S+)")
#: pip download's line for each file of the closure it resolved: one it wrote into ``--dest``
#: ("Saved PATH"), one it found there ("File was already downloaded PATH"); pip 18 to 26.
_CHOSEN = re.compile(r"^(?:Saved|File was already downloaded) (.+)$")
_CHUNK = 1024 * 1024
#: A run's view older than this was left by a run that was killed (a view lives for one install).
_STALE_VIEW_SECONDS = 24 * 3600.0
#: While waiting for the lock, the caller's status line moves this often.
_TICK_SECONDS = 5.0
#: pip's words for a disk that is full (ENOSPC) or a quota spent (EDQUOT).
_NO_SPACE = ("No space left on device", "Disk quota exceeded")


class _Unwritable(InstallError):
    """The download folder cannot be written (the install then asks the index itself)."""


def downloads_root() -> Path | None:
    """``downloads/`` under the first cache folder where this process can write it (a lab's
    shared cache folder may hold another user's, which is theirs only); None where there is none
    (the installs then ask the index themselves)."""
    from ..paths import own_cache_roots, writable

    found = (root / "downloads" for root in own_cache_roots())
    return next((folder for folder in found if writable(folder)), None)


def recorded_files(name: str, sha256: str, roots: Sequence[Path] | None = None) -> list[Path]:
    """The download folders' files named ``name`` whose record holds ``sha256`` (under
    ``roots``, default every cache folder's ``downloads/``): where another cache (a lock's
    files) may take a file instead of downloading it again. A record is a hint, never trusted:
    the caller hashes the file it takes. Never raises; a folder it cannot read gives nothing."""
    from ..paths import own_cache_roots

    found: list[Path] = []
    for root in roots if roots is not None else [r / "downloads" for r in own_cache_roots()]:
        try:
            folders = sorted(entry.path for entry in os.scandir(root) if entry.is_dir())
        except OSError:
            continue
        for folder in folders:
            file = Path(folder) / "files" / name
            try:
                record = json.loads((Path(folder) / "records" / f"{name}.json").read_text())
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and record.get("sha256") == sha256 and file.is_file():
                found.append(file)
    return found


def _private_folder(path: Path) -> None:
    """``path`` made (0700), or narrowed to 0700 where it is ours and wider."""
    path.mkdir(mode=0o700, exist_ok=True)
    info = os.stat(path)
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)


def _sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _shown(word: str) -> str:
    """An index option's word (or a URL) without the user and password of a URL in it, and with
    the value of a secret parameter in it hidden (``?token=***``): what the folder's records,
    its ``index.txt`` and its messages may hold."""
    from ..redaction import redact, url_without_userinfo

    if word.startswith("--") and "=" in word:
        name, _, value = word.partition("=")
        return f"{name}={redact(url_without_userinfo(value))}"
    return redact(url_without_userinfo(word))


def _installs_torch(requirements: Sequence[str]) -> bool:
    """True where one of the step's requirements names torch."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    for requirement in requirements:
        try:
            if canonicalize_name(Requirement(requirement).name) == "torch":
                return True
        except InvalidRequirement:
            continue
    return False


def _file_name(url: str) -> str | None:
    """The file a direct URL names (its last path segment, unquoted), or None."""
    from urllib.parse import unquote, urlsplit

    try:
        path = urlsplit(url).path
    except ValueError:
        return None
    name = unquote(path.rsplit("/", 1)[-1])
    return name if name.endswith((".whl", ".tar.gz", ".zip")) and "/" not in name else None


class DownloadFolder:
    """One index's folder of downloaded files (see the module)."""

    def __init__(self, root: Path, index: Sequence[str], *, pypi_index: bool = False) -> None:
        self.index = tuple(_shown(word) for word in index)
        # ".../simple/" and ".../simple" are one index (pip.conf often has the slash, a plan not)
        key = hashlib.sha256("\n".join(w.rstrip("/") for w in self.index).encode())
        # Absolute: the view's symbolic links name their files by this path, and a relative one
        # (CUDA_RESOLVE_CACHE_DIR=./cache) would be read from the view's folder, not from here.
        self.root = Path(os.path.abspath(root))
        self.key = key.hexdigest()[:16]
        #: the download asks the user's PyPI index or mirror, from pip's variables and files
        #: where the words name none (a torch step from PyPI, issue 27)
        self.pypi_index = pypi_index
        self.path = self.root / self.key
        self.files = self.path / "files"
        self.records = self.path / "records"
        self.incoming = self.path / "incoming"
        self.views = self.path / "views"
        self.lock_path = self.path / ".lock"
        #: the files the last :meth:`fill` said pip download chose (its closure), None where it
        #: named none; what :meth:`view` links
        self.chosen: tuple[str, ...] | None = None
        #: where what :meth:`fill` saw does not add up: why its files cannot be told apart
        self._unsure: str | None = None

    # -- the commands ---------------------------------------------------------------------

    def download_command(self, pip: TargetPip, words: StepWords) -> list[str]:
        """The exact words of the step's ``pip download`` into ``incoming/``."""
        return [
            pip.python,
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            *pip.trust,
            "--dest",
            str(self.incoming),
            *words.download_options,
            *words.index,
            *words.requirements,
        ]

    def install_args(self, words: StepWords, find_links: Path | None = None) -> list[str]:
        """The step's ``pip install`` words with the folder's files for its index: ``find_links``
        (a run's :meth:`view`), default the whole ``files/``."""
        return [
            *words.options,
            "--no-index",
            "--find-links",
            str(find_links or self.files),
            *(self._local(requirement) for requirement in words.requirements),
        ]

    def _local(self, requirement: str) -> str:
        """``name @ https://.../FILE#sha256=H`` (any PEP 508 spelling) as ``name @
        file:///.../files/FILE#sha256=H``: the file the download saved, with the hash pip checks;
        any other requirement as given."""
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            url = Requirement(requirement).url
        except InvalidRequirement:
            return requirement
        location = (url or "").partition("#")[0]
        file = _file_name(location)
        if not location.lower().startswith(("http://", "https://")) or file is None:
            return requirement
        return requirement.replace(location, (self.files / file).absolute().as_uri(), 1)

    # -- filling it -----------------------------------------------------------------------

    def fill(
        self,
        pip: TargetPip,
        words: StepWords,
        *,
        environ: Mapping[str, str] | None,
        log_path: Path | None,
        on_line: Callable[[str], None],
        note: Callable[[str], None],
    ) -> tuple[int, list[str]]:
        """Run the step's ``pip download`` into the folder (under its lock); (pip's exit status,
        its last lines). Raises :class:`~cuda_resolve.errors.InstallError` for a file whose hash
        changed, and (a subclass the installer falls back on) where the folder cannot be
        written."""
        try:
            self._make()
            with self._locked(note, lambda: on_line("")):
                self._check_files()
                self._empty_incoming()
                for entry in os.scandir(self.files):
                    os.symlink(entry.path, self.incoming / entry.name)
                sources: dict[str, str] = {}
                chosen: set[str] = set()
                self.chosen, self._unsure = None, None

                def line(text: str) -> None:
                    said = text.strip()
                    found = _DOWNLOADING.match(said)
                    if found and (name := _file_name(found.group(1))) is not None:
                        sources[name] = _shown(found.group(1))
                    if kept := _CHOSEN.match(said):
                        chosen.add(os.path.basename(kept.group(1)))
                    on_line(text)

                try:
                    status, tail = pip.run(
                        self.download_command(pip, words)[3:],
                        torch_index_only=True,
                        pypi_index=self.pypi_index,
                        environ=environ,
                        log_path=log_path,
                        on_line=line,
                    )
                    if status == 0:
                        taken = self._take_new(sources)
                        self._choose(chosen, taken)
                    return status, tail
                finally:
                    shutil.rmtree(self.incoming, ignore_errors=True)
        except OSError as exc:
            raise _Unwritable(
                f"the download folder {self.path} cannot be written: {exc.strerror or exc}",
                hint="free some space there, or set CUDA_RESOLVE_CACHE_DIR to a folder you can "
                "write; pip's --no-cache-dir installs without the folder",
            ) from None

    def _choose(self, chosen: set[str], taken: Sequence[str]) -> None:
        """Keep what pip download said it chose (:attr:`chosen`) where it adds up: every file it
        saved among them, every one of them in ``files/``."""
        self.chosen, self._unsure = None, None
        if not chosen:
            return  # pip named none: said by view()
        unsaid = sorted(set(taken) - chosen)
        missing = sorted(name for name in chosen if not (self.files / name).is_file())
        if unsaid:
            self._unsure = f"pip download saved {unsaid[0]} without naming it"
        elif missing:
            self._unsure = f"pip download named {missing[0]}, which is not in {self.files}"
        else:
            self.chosen = tuple(sorted(chosen))

    @contextlib.contextmanager
    def view(self, note: Callable[[str], None]) -> Iterator[Path]:
        """A private folder (``views/HOST.PID.RANDOM``, 0700) of links to exactly the files the
        last :meth:`fill` chose, removed when the block ends however it ends; what the install's
        ``--find-links`` reads, so a file an earlier run left in ``files/`` (another release's,
        one the index has since yanked) is never taken in place of this run's. Symbolic links
        (a hard link would change the file's ctime, and the folder would hash it again on its next
        use), else hard links, never copies. Where the chosen files are not known or no view can be
        made, the whole ``files/``, said in a ``note``; never an error."""
        why = self._unsure
        if why is None and self.chosen is None:
            why = (
                "pip download named none of the files it chose (no 'Saved' or 'File was already "
                "downloaded' line: pip told to be quiet?)"
            )
        made: Path | None = None
        if why is None and self.chosen is not None:
            try:
                made = self._make_view(self.chosen)
            except OSError as exc:
                why = f"no view of this run's files could be made in {self.views}: " + (
                    exc.strerror or str(exc)
                )
        if made is None:
            note(f"{why}; the install takes any file in {self.files}, not only this run's")
            yield self.files
            return
        try:
            yield made
        finally:
            shutil.rmtree(made, ignore_errors=True)

    def _make_view(self, names: Sequence[str]) -> Path:
        import socket
        import tempfile

        _private_folder(self.views)
        self._remove_stale_views()
        host = socket.gethostname().replace(os.sep, "_") or "host"
        made = Path(tempfile.mkdtemp(prefix=f"{host}.{os.getpid()}.", dir=self.views))
        try:
            for name in names:
                source, link = self.files / name, made / name
                try:
                    os.symlink(source, link)
                except OSError:
                    # No copies: a view of copies would write torch's gigabytes again on every
                    # install; where no link can be made the whole files/ is read instead.
                    os.link(source, link)
        except BaseException:
            shutil.rmtree(made, ignore_errors=True)
            raise
        return made

    def _remove_stale_views(self) -> None:
        """Remove the views runs left when they were killed: those made over a day ago. A view
        lives for one pip install (minutes); its name's host and process id are no proof that
        its run is gone (machines that share this folder may share a host name, containers
        reuse process ids), its age is. What one holds is links, never the files' bytes."""
        import time

        now = time.time()
        for entry in os.scandir(self.views):
            try:
                made = entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            if now - made > _STALE_VIEW_SECONDS:
                shutil.rmtree(entry.path, ignore_errors=True)

    def _make(self) -> None:
        from ..paths import write_atomic

        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in (self.root, self.path, self.files, self.records):
            _private_folder(folder)
        about = self.path / "index.txt"
        if not about.exists():
            write_atomic(about, " ".join(self.index) + "\n", private=True)

    @contextlib.contextmanager
    def _locked(self, note: Callable[[str], None], tick: Callable[[], None]) -> Iterator[None]:
        """Hold the folder's lock; a wait is said once (``note``) and ticks the caller's status
        line every few seconds (``tick``: no silent minute)."""
        import time

        from filelock import FileLock, Timeout

        lock = FileLock(str(self.lock_path), mode=0o600)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            note(f"waiting for another run that is downloading into {self.path}")
            until = time.monotonic() + LOCK_WAIT_SECONDS
            while True:
                try:
                    lock.acquire(timeout=max(0.0, min(_TICK_SECONDS, until - time.monotonic())))
                    break
                except Timeout:
                    if time.monotonic() >= until:
                        raise InstallError(
                            f"another run has been downloading into {self.path} for "
                            f"{LOCK_WAIT_SECONDS:.0f} s; nothing was installed",
                            hint="wait for it to finish (or end it), then run the command again",
                        ) from None
                    tick()
        try:
            yield
        finally:
            lock.release()

    def _empty_incoming(self) -> None:
        shutil.rmtree(self.incoming, ignore_errors=True)
        _private_folder(self.incoming)

    def _record_path(self, name: str) -> Path:
        return self.records / f"{name}.json"

    def with_sources(
        self, on_line: Callable[[str], None], view: Path | None = None
    ) -> Callable[[str], None]:
        """``on_line`` given pip's ``Processing FOLDER/files/NAME`` lines with where the file was
        downloaded from (its record): what the torch-landed check names as torch's supplier. A
        line naming the run's ``view`` names the file in ``files/`` it links (the view is gone
        when the run ends)."""
        files = f"{self.files}{os.sep}"
        shown = f"{view}{os.sep}" if view is not None and view != self.files else None

        def line(text: str) -> None:
            said = text.strip()
            if shown is not None and said.startswith(f"Processing {shown}"):
                text = text.replace(shown, files, 1)
                said = text.strip()
            prefix = f"Processing {files}"
            if said.startswith(prefix) and (name := said[len(prefix) :].split()[0:1]):
                came = (self._record(name[0]) or {}).get("from")
                text = f"{text.rstrip()} (downloaded from {came})" if came else text
            on_line(text)

        return line

    def _record(self, name: str) -> dict[str, object] | None:
        try:
            data = json.loads(self._record_path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("sha256"), str):
            return None
        return data

    def _write_record(self, name: str, sha256: str, source: object, file: Path) -> None:
        from ..paths import write_atomic

        record = {"sha256": sha256, "from": source, **file_facts(file)}
        write_atomic(self._record_path(name), json.dumps(record) + "\n", private=True)

    def _check_files(self) -> None:
        """Every file in ``files/`` as recorded: its stat unchanged, else its hash; a file
        without a record is removed (it did not come through :meth:`_take_new`)."""
        for entry in sorted(os.scandir(self.files), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                continue
            record = self._record(entry.name)
            if record is None or not entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                continue
            if all(record.get(key) == value for key, value in file_facts(entry.path).items()):
                continue
            digest = _sha256(entry.path)
            if digest != record["sha256"]:
                raise _changed(Path(entry.path), self._record_path(entry.name), digest, record)
            self._write_record(entry.name, digest, record.get("from"), Path(entry.path))

    def _take_new(self, sources: Mapping[str, str]) -> list[str]:
        """Move what pip saved into ``incoming/`` to ``files/``: hashed, recorded first; the
        names moved."""
        taken: list[str] = []
        for entry in sorted(os.scandir(self.incoming), key=lambda e: e.name):
            if entry.is_symlink() or not entry.is_file():
                continue  # a link to a file already here, or pip's own folder
            digest = _sha256(entry.path)
            record = self._record(entry.name)
            source = sources.get(entry.name) or (record or {}).get("from")
            if record is not None and record["sha256"] != digest:
                raise _changed(
                    Path(entry.path),
                    self._record_path(entry.name),
                    digest,
                    record,
                    again=source or True,
                )
            self._write_record(entry.name, digest, source, Path(entry.path))
            placed = self.files / entry.name
            os.replace(entry.path, placed)
            self._write_record(entry.name, digest, source, placed)  # the stat where it lies
            taken.append(entry.name)
        return taken


def _changed(
    file: Path,
    record_path: Path,
    digest: str,
    record: Mapping[str, object],
    *,
    again: object = False,
) -> InstallError:
    """The refusal of a file whose hash is not the one recorded: ``again`` (True, or the URL it
    came from) for a name downloaded anew, else a file of the folder that changed."""
    came = record.get("from")
    where = f" from {came}" if came else ""
    if again:
        source = f" from {again}" if isinstance(again, str) else ""
        what = (
            f"{file.name}, downloaded again{source}, has sha256 {digest}, not the "
            f"{record['sha256']} it had when it was first downloaded{where}: the index now "
            "serves another file under that name"
        )
        remove = f"its record {record_path}"
    else:
        what = (
            f"{file} has sha256 {digest}, not the {record['sha256']} recorded when it was "
            f"downloaded{where}: the file changed since"
        )
        remove = f"{file} and its record {record_path}"
    return InstallError(
        f"{what}; nothing was installed from it",
        hint=f"if you know why, remove {remove}, then run the command again (the file is "
        "downloaded and checked anew); otherwise check the index or mirror "
        "(cuda-resolve mirror test)",
    )


class DownloadingPip(TargetPip):
    """The target's pip (:class:`~.pip.TargetPip`) whose installs of torch from the PyTorch index
    alone (``torch_index_only`` without ``pypi_index``: the torch step and a build overlay's
    torch) go through the download folder under ``downloads`` (see the module): ``pip download``
    first, then ``pip install`` from the folder. ``downloads`` None: every install asks its
    index."""

    def __init__(
        self,
        python: str,
        *,
        environ: Mapping[str, str],
        trust: Sequence[str] = (),
        log_path: Path,
        runner: ProcessRunner | None = None,
        on_note: Callable[[str], None] | None = None,
        downloads: Path | None,
    ) -> None:
        super().__init__(
            python, environ=environ, trust=trust, log_path=log_path, runner=runner, on_note=on_note
        )
        self.downloads = downloads
        self._cache_off: dict[tuple[str, ...], str | None] = {}
        self._pypi: dict[bool, str | None] = {}  # the PyPI index pip asks, by --isolated

    def folder_for(
        self, args: Sequence[str], *, torch_index_only: bool, pypi_index: bool
    ) -> tuple[DownloadFolder, StepWords] | None:
        """The folder ``pip install ARGS`` goes through, with its words taken apart; None for
        an install that asks its index itself (not one index alone, a local index, no torch among
        its requirements, pip told to keep no cache, no writable cache folder). A torch step
        from PyPI (``pypi_index``) whose words name no index goes through the folder of the index
        pip would ask (the user's PyPI mirror, else PyPI): the one a build overlay's torch from
        PyPI filled (F8)."""
        if self.downloads is None or not torch_index_only:
            return None
        words = step_words(args)
        index, locations = words.index, words.index_locations
        if pypi_index and not index:
            asked = self._pypi_index(words.options)
            index, locations = ("--index-url", asked) if asked else (), (asked,) if asked else ()
        if not locations or "--no-index" in index:
            return None
        if not all(where.lower().startswith(("http://", "https://")) for where in locations):
            return None
        if not _installs_torch(words.requirements):
            return None  # pip download would fetch the installed torch and its CUDA wheels too
        # pip's configuration is read once per runner, keyed by the words that change the answer
        key = tuple(w for w in words.options if w in ("--no-cache-dir", "--isolated"))
        if key not in self._cache_off:
            self._cache_off[key] = cache_turned_off(key, python=self.python, environ=self.environ)
        if self._cache_off[key] is not None:
            return None
        return DownloadFolder(self.downloads, index, pypi_index=pypi_index), words

    def _pypi_index(self, options: Sequence[str]) -> str | None:
        """The index a torch step from PyPI asks where its words name none: the user's
        ``index-url`` (``PIP_INDEX_URL``, pip's files), else PyPI; None where pip is told
        ``no-index`` or stops on its configuration."""
        from .pipconfig import pip_indexes

        isolated = "--isolated" in options
        if isolated not in self._pypi:
            environ = self.environ_for(torch_index_only=True, pypi_index=True)
            found = pip_indexes(self.python, environ, pip_args=["--isolated"] if isolated else [])
            usable = not found.no_index and found.error is None
            self._pypi[isolated] = found.index_url if usable else None
        return self._pypi[isolated]

    def commands(
        self, args: Sequence[str], *, torch_index_only: bool = False, pypi_index: bool = False
    ) -> list[list[str]]:
        """The commands :meth:`install` runs for ``args``, as they can be printed before it
        runs (``--dry-run``). Through the folder, the install's ``--find-links`` names the
        folder's ``files/``: pasted after the download, it takes its files from the whole folder.
        A run itself installs from its :meth:`~DownloadFolder.view`, a folder of only the files
        its own download chose, made once that download has said them and removed when the run
        ends (no command printed beforehand can name it; pip's log holds the words it ran)."""
        chosen = self.folder_for(args, torch_index_only=torch_index_only, pypi_index=pypi_index)
        if chosen is None:
            return [self.install_command(args)]
        folder, words = chosen
        return [
            folder.download_command(self, words),
            self.install_command(folder.install_args(words)),
        ]

    def install(
        self,
        args: Sequence[str],
        *,
        torch_index_only: bool = False,
        pypi_index: bool = False,
        environ: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        """``pip install ARGS``; through the download folder where :meth:`folder_for` says so
        (the status and lines are the download's where it failed), asking the index itself where
        the folder cannot take the files (its disk full or quota spent, said in a note)."""
        chosen = self.folder_for(args, torch_index_only=torch_index_only, pypi_index=pypi_index)
        if chosen is None:
            return super().install(
                args,
                torch_index_only=torch_index_only,
                pypi_index=pypi_index,
                environ=environ,
                log_path=log_path,
                on_line=on_line,
            )
        from ..build.runner import NOTE_PREFIX

        folder, words = chosen
        note = self.on_note or (lambda text: on_line(NOTE_PREFIX + text))
        why: str | None = None
        try:
            status, tail = folder.fill(
                self, words, environ=environ, log_path=log_path, on_line=on_line, note=note
            )
        except _Unwritable as error:
            status, tail, why = 1, [], str(error)
        else:
            full = next((w for w in _NO_SPACE if any(w in line for line in tail)), None)
            why = f"the download into {folder.path} failed: {full}" if full else None
        if status != 0 and why is not None:
            note(f"{why}; installing without the download folder (pip asks the index itself)")
            return super().install(
                args,
                torch_index_only=torch_index_only,
                pypi_index=pypi_index,  # a step from PyPI keeps the user's mirror (issue 27)
                environ=environ,
                log_path=log_path,
                on_line=on_line,
            )
        if status != 0:
            return status, tail
        with folder.view(note) as view:  # this run's files only, gone when it ends
            return super().install(
                folder.install_args(words, view),
                torch_index_only=True,
                environ=environ,
                log_path=log_path,
                on_line=folder.with_sources(on_line, view),
            )
