"""The files a lock names, in a cache keyed by their sha256, checked once.

Every file to install is fetched (through the configured mirror, by rewriting the locked URL's
prefix) and its sha256 and size checked before anything is installed; a file already in the cache
was checked when it came and is not hashed again while its stamp (size, mtime, ctime, inode
recorded then) still holds, so a cached sync opens no connection.

A file that a download folder of the installs holds (:mod:`cuda_resolve.install.downloads`,
its record giving the lock's sha256: a build overlay's or a torch step's download of the same
torch) is taken from there instead of downloaded again (user walk F16): hard-linked (else
copied) beside its place here, hashed, and put in place only where the hash and size are the
lock's; the folder's file is never moved, and one whose content is not the lock's is said and
not used (the file is then downloaded). A source build locked at a served wheelhouse's URL
(``.../wheels/NAME/DIGEST/FILE``) is taken the same way from the local wheelhouses' entry of that
name and digest, where one holds it: the lab member who built and published it syncs without the
server (user walk C9).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import LockError
from ..paths import file_facts
from ..reporting import NullReporter, Reporter
from .select import Wanted


class LockedFileMismatch(LockError):
    """A fetched file is not the one the lock records: another sha256 or size."""


if TYPE_CHECKING:  # `sync --check` imports none of the acting layers
    from ..net.client import HttpClient

__all__ = ["LockedFileMismatch", "cache_path", "cached_files", "fetch_all", "local_copy"]


def cache_path(cache_dir: Path, item: Wanted) -> Path:
    """Where ``item``'s file is kept: under its sha256, so two locks never share a wrong file."""
    return cache_dir / item.sha256[:2] / item.sha256 / item.file


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp(path: Path, sha256: str) -> None:
    """Record that ``path`` was found to have ``sha256``, with the file's stat as it was then."""
    from ..paths import write_atomic

    try:
        write_atomic(_stamp_path(path), json.dumps({"sha256": sha256, **file_facts(path)}) + "\n")
    except OSError:
        pass  # no stamp: the next sync hashes the file again


def _stamped(path: Path, item: Wanted) -> bool:
    """True when ``path`` was checked against ``item``'s sha256 and is unchanged since: same size,
    mtime, ctime (which no write can leave as it was), inode and device. pip's hash-checking mode
    still hashes the file before installing anything, so a stamp saves our pass, not the check."""
    try:
        recorded = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
        now = file_facts(path)
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict) or recorded.get("sha256") != item.sha256:
        return False
    if item.size is not None and now["size"] != item.size:
        return False
    return all(recorded.get(key) == value for key, value in now.items())


def cached_files(wanted: Sequence[Wanted], cache_dir: Path) -> tuple[dict[str, Path], list[Wanted]]:
    """The files already in the cache and checked (by name), and the items still to fetch or
    check. Reads no file's content: a sync whose files are all here opens no connection and
    hashes nothing. A file a download folder holds with the lock's hash is taken here (hashed
    once, then stamped), so a sync after an install of the same files opens no connection
    either; one that is not the lock's stays to fetch (:func:`fetch_all` says why)."""
    paths: dict[str, Path] = {}
    missing: list[Wanted] = []
    for item in wanted:
        target = cache_path(cache_dir, item)
        if _stamped(target, item):
            paths[item.name] = target
        elif not target.exists() and _from_download_folders(item, target, NullReporter()):
            _stamp(target, item.sha256)  # hashed just now: the lock's
            paths[item.name] = target
        else:
            missing.append(item)
    return paths, missing


def _from_download_folders(item: Wanted, target: Path, report: Reporter) -> bool:
    """``item``'s file taken from a download folder into ``target`` (see the module); False where
    none holds it with the lock's hash."""
    from ..install.downloads import recorded_files

    for source in recorded_files(item.file, item.sha256):
        if _taken(source, item, target, report, "its record names", "since it was downloaded"):
            report.step(f"took {item.file} from {source.parent.parent} (not downloaded again)")
            return True
    return False


#: A served wheelhouse's URL of an entry's file (wheelhouse/store.py's layout, which publish
#: copies): the folder of the package, the key's digest, the file.
_SERVED = re.compile(r"/wheels/([^/]+)/([0-9a-f]{16})/([^/]+)$")


def _wheelhouse_files(item: Wanted) -> list[Path]:
    """The local wheelhouses' files of the entry a served wheelhouse's URL names (same package,
    digest and file name), where they exist; none for any other URL."""
    from urllib.parse import unquote

    found = _SERVED.search(item.url.split("?", 1)[0].split("#", 1)[0])
    if found is None or unquote(found.group(3)) != item.file:  # a URL writes "+" as %2B
        return []
    from ..wheelhouse.store import Wheelhouse

    house = Wheelhouse.default()
    roots = (*(shared.root for shared in house.shared), house.root)
    files = (
        root / "wheels" / unquote(found.group(1)) / found.group(2) / item.file for root in roots
    )
    return [file for file in files if file.is_file()]


def _from_wheelhouses(item: Wanted, target: Path, report: Reporter) -> bool:
    """``item``'s file taken from a local wheelhouse's entry of the same package and digest into
    ``target`` (see the module); False where none holds it with the lock's hash."""
    for source in _wheelhouse_files(item):
        if _taken(source, item, target, report, "its entry", "since it was built"):
            report.step(
                f"took {item.file} from the wheelhouse {source.parents[3]} (not downloaded)"
            )
            return True
    return False


def local_copy(item: Wanted) -> Path | None:
    """Where this machine holds ``item``'s file outside the cache, by its records: a download
    folder whose record, or a local wheelhouse entry whose ``entry.json``, names the lock's
    sha256. What a sync takes instead of downloading (then hashing it); a dry run says so
    without hashing anything. None: a sync downloads it."""
    from ..install.downloads import recorded_files
    from ..wheelhouse.store import ENTRY_FILE

    downloaded = recorded_files(item.file, item.sha256)
    if downloaded:
        return downloaded[0]
    for source in _wheelhouse_files(item):
        try:
            record = json.loads((source.parent / ENTRY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("sha256") == item.sha256:
            return source
    return None


def _taken(
    source: Path, item: Wanted, target: Path, report: Reporter, whose: str, since: str
) -> bool:
    """``source`` put at ``target`` (hard-linked, else copied; never moved) where its sha256 and
    size are the lock's; otherwise said, and False."""
    from ..net.download import file_sha256

    part = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        part.unlink(missing_ok=True)
        try:
            os.link(source, part)  # the same bytes, no second copy on the disk
        except OSError:
            shutil.copyfile(source, part)
        digest = file_sha256(part)
        size = part.stat().st_size
        if digest != item.sha256 or (item.size is not None and size != item.size):
            report.note(
                f"{source} has sha256 {digest} ({size} bytes), not the lock's {item.sha256}"
                f" {whose}: not used (it changed {since})"
            )
            part.unlink()
            return False
        os.replace(part, target)
    except OSError:
        part.unlink(missing_ok=True)
        return False
    return True


def fetch_all(
    wanted: Sequence[Wanted], client: HttpClient, cache_dir: Path, reporter: Reporter | None = None
) -> dict[str, Path]:
    """Every file in the cache, its sha256 (and size) checked and stamped (:func:`cached_files`);
    one failure stops before any install."""
    from ..errors import NetworkError

    report = reporter or NullReporter()
    paths: dict[str, Path] = {}
    for item in wanted:
        target = cache_path(cache_dir, item)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            if _from_download_folders(item, target, report) or _from_wheelhouses(
                item, target, report
            ):
                _stamp(target, item.sha256)  # hashed just now: the lock's
                paths[item.name] = target
                continue
            report.step(f"fetching {item.file}")
        try:
            client.download(item.url, target, sha256=item.sha256, size=item.size)
        except NetworkError as exc:
            mismatch = getattr(exc, "kind", None) in ("integrity", "size")
            raise (LockedFileMismatch if mismatch else LockError)(
                f"{item.file}: {exc}; nothing was installed",
                hint=exc.hint
                or "a file whose hash differs from the lock is never installed: check the mirror,"
                " or lock again",
            ) from None
        size = target.stat().st_size
        if item.size is not None and size != item.size:
            target.unlink()
            raise LockedFileMismatch(
                f"{item.file}: {size} bytes, the lock says {item.size}; nothing was installed",
                hint="the index serves another file than the one locked: lock again",
            )
        _stamp(target, item.sha256)
        paths[item.name] = target
    return paths
