"""A recipe's source archive: downloaded once, checked against its sha256, kept by that hash,
and unpacked without trusting anything it says about paths.

The download goes through :class:`cuda_resolve.net.HttpClient` (the OS trust store, mirrors,
proxies, size cap, deadline) into ``<cache root>/sources/<sha256>``, where it appears only once
its hash matched; a second build opens it from there and downloads nothing. Every open re-reads
the file's hash from the same handle that is then unpacked, so a cached file that changed is
fetched again, never unpacked.

Unpacking (tar, tar.gz, tar.bz2, tar.xz, zip) first reads the whole member list and refuses the
archive, before writing anything, if a member's path is absolute or climbs with ``..``, if it is a
device, FIFO or socket, if a link points outside the tree, or if the members or their sizes pass
:class:`ArchiveLimits`. Members are then written without following links: a path under a
symbolic link is refused, files are created exclusively, and every link is checked again once
all are in place.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import posixpath
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from .._frozen import frozen
from ..errors import BuildError, NetworkError

if TYPE_CHECKING:
    from ..index.model import SourceArchive
    from ..net import HttpClient

__all__ = ["ArchiveLimits", "archive_cache_dir", "open_archive", "unpack_archive"]

_CHUNK = 1 << 20
_LINK_TARGET_MAX = 4096  # a zip stores a symlink's target as the member's content


@frozen
class ArchiveLimits:
    """The most an archive may unpack to; kaolin's source is ~3,000 files and ~60 MB."""

    members: int = 200_000
    total_bytes: int = 8 << 30


def archive_cache_dir() -> Path:
    """``<cache root>/sources``: verified archives, one file per sha256."""
    from ..paths import cache_root

    return cache_root() / "sources"


# -- fetching --------------------------------------------------------------------------------


def _open_verified(path: Path, sha256: str) -> IO[bytes] | None:
    """``path`` opened for reading, its content hashed from that handle and equal to ``sha256``,
    rewound; None when it is missing, not a regular file, or different."""
    try:
        handle = open(path, "rb")  # returned open: the caller closes it
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            handle.close()
            return None
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
        if digest.hexdigest() != sha256:
            handle.close()
            return None
        handle.seek(0)
        return handle
    except OSError:
        handle.close()
        return None


@contextlib.contextmanager
def open_archive(
    archive: SourceArchive,
    *,
    label: str,
    client: HttpClient | None = None,
    cache_dir: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Iterator[IO[bytes]]:
    """The verified archive, open: from the cache when it is there, else downloaded into it.

    ``client`` defaults to one set up from the configuration (mirrors, proxies), made only when a
    download is needed. A download whose sha256 differs fails naming the URL and both hashes,
    and leaves no file behind."""
    folder = cache_dir if cache_dir is not None else archive_cache_dir()
    cached = folder / archive.sha256
    handle = _open_verified(cached, archive.sha256)
    if handle is not None:
        say(f"source archive {archive.sha256[:12]} from the cache ({cached})")
    else:
        say(f"downloading {archive.url}")
        _download(archive, cached, client, label)
        handle = _open_verified(cached, archive.sha256)
        if handle is None:
            raise BuildError(
                f"{label}: the downloaded archive {cached} changed before it could be read",
                hint="another process may be writing the cache; retry",
            )
        say(f"sha256 verified ({archive.sha256[:12]})")
    with handle:
        yield handle


def _download(archive: SourceArchive, dest: Path, client: HttpClient | None, label: str) -> None:
    from ..net import client_from_config

    try:
        if client is not None:
            client.download(archive.url, dest, sha256=archive.sha256)
            return
        with client_from_config() as own:
            own.download(archive.url, dest, sha256=archive.sha256)
    except NetworkError as exc:
        if getattr(exc, "kind", None) == "integrity":
            hint = (
                "the file at that URL is not the one the recipe pins (changed upstream, or a "
                "stale or tampered mirror); nothing was kept or unpacked. Fix the recipe's url or "
                "sha256 only after checking the new file, or pass --source DIR with a "
                "copy you trust"
            )
        else:
            hint = (
                exc.hint + "; " if exc.hint else ""
            ) + "or pass --source DIR with an unpacked copy of the source"
        raise BuildError(
            f"{label}: fetching the source archive failed: {exc.message}", hint=hint
        ) from exc


# -- listing and checking --------------------------------------------------------------------

Kind = Literal["file", "dir", "symlink", "hardlink"]


@frozen(kw_only=False)
class _Member:
    parts: tuple[str, ...]  # the path inside the tree, top-level folder not yet removed
    kind: Kind
    size: int
    executable: bool
    link: str  # a symlink's target as written, a hard link's member path; "" otherwise
    read: Callable[[], IO[bytes]]  # the content of a regular file


def _refuse(label: str, name: str, why: str) -> BuildError:
    return BuildError(
        f"{label}: the source archive's member {name!r} {why}; nothing was unpacked",
        hint="the archive is malformed or hostile: check the recipe's url and sha256",
    )


def _split(label: str, name: str) -> tuple[str, ...]:
    """``name`` as path components; absolute paths, ``..``, backslashes and NUL are refused."""
    if "\x00" in name or "\\" in name:
        raise _refuse(label, name, "has a backslash or NUL in its path")
    if name.startswith("/"):
        raise _refuse(label, name, "has an absolute path")
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if ".." in parts:
        raise _refuse(label, name, "climbs out of the tree with '..'")
    return parts


def _too_many(label: str, count: str, limits: ArchiveLimits) -> BuildError:
    return BuildError(
        f"{label}: the source archive has {count} members, more than the {limits.members} "
        "allowed; nothing was unpacked",
        hint="that is not a source tree: check the recipe's archive url and sha256",
    )


def _tar_infos(
    tar: tarfile.TarFile, label: str, limits: ArchiveLimits
) -> Iterator[tarfile.TarInfo]:
    """The tar's members, read one header at a time: past ``limits.members`` it is refused
    before the next header is read (``getmembers()`` would first list them all in memory)."""
    count = 0
    while True:
        try:
            info = tar.next()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise BuildError(
                f"{label}: the source archive is not a readable tar or zip archive: {exc}",
                hint="check the recipe's archive url (it must name a .tar.gz, .tar.bz2, "
                ".tar.xz or .zip)",
            ) from None
        if info is None:
            return
        count += 1
        if count > limits.members:
            raise BuildError(
                f"{label}: the source archive has more than the {limits.members} members allowed "
                "(refused at the first one past the limit); nothing was unpacked",
                hint="that is not a source tree: check the recipe's archive url and sha256",
            )
        yield info


def _tar_members(
    handle: IO[bytes], label: str, limits: ArchiveLimits
) -> tuple[tarfile.TarFile, list[_Member]]:
    try:
        tar = tarfile.open(fileobj=handle, mode="r:*")  # closed by the caller
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BuildError(
            f"{label}: the source archive is not a readable tar or zip archive: {exc}",
            hint="check the recipe's archive url (it must name a .tar.gz, .tar.bz2, "
            ".tar.xz or .zip)",
        ) from None
    members: list[_Member] = []
    for info in _tar_infos(tar, label, limits):
        if info.isreg():
            kind: Kind = "file"
        elif info.isdir():
            kind = "dir"
        elif info.issym():
            kind = "symlink"
        elif info.islnk():
            kind = "hardlink"
        else:
            what = (
                "a device"
                if info.ischr() or info.isblk()
                else "a FIFO"
                if info.isfifo()
                else f"of tar type {info.type!r}"
            )
            raise _refuse(label, info.name, f"is {what}, which a source tree never holds")

        def read(info: tarfile.TarInfo = info) -> IO[bytes]:
            extracted = tar.extractfile(info)
            if extracted is None:
                raise _refuse(label, info.name, "has no content")
            return extracted

        members.append(
            _Member(
                _split(label, info.name),
                kind,
                info.size if kind == "file" else 0,
                bool(info.mode & 0o111),
                info.linkname if kind in ("symlink", "hardlink") else "",
                read,
            )
        )
    return tar, members


#: A central directory entry is 46 bytes and a name; a source tree's average well under this.
_CENTRAL_ENTRY_BYTES = 1024


def _zip_directory_size(handle: IO[bytes]) -> tuple[int, int] | None:
    """(members, central directory bytes) that the zip's end record declares (the zip64 record's
    when there is one), read from the file's tail only; None when there is no end record."""
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    tail_start = max(0, size - (22 + 65535 + 20))  # the end record, its comment, a zip64 locator
    handle.seek(tail_start)
    tail = handle.read()
    handle.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        return None
    entries = int.from_bytes(tail[at + 10 : at + 12], "little")
    directory = int.from_bytes(tail[at + 12 : at + 16], "little")
    locator = at - 20
    if locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
        record = int.from_bytes(tail[locator + 8 : locator + 16], "little")
        if record + 56 <= size:
            handle.seek(record)
            zip64 = handle.read(56)
            handle.seek(0)
            if zip64[:4] == b"PK\x06\x06":
                entries = max(entries, int.from_bytes(zip64[32:40], "little"))
                directory = max(directory, int.from_bytes(zip64[40:48], "little"))
    return entries, directory


def _zip_members(
    handle: IO[bytes], label: str, limits: ArchiveLimits
) -> tuple[zipfile.ZipFile, list[_Member]]:
    declared = _zip_directory_size(handle)
    if declared is not None:
        entries, directory = declared
        # zipfile reads the whole central directory, then makes an object per entry: both are
        # checked against the limit first, from the numbers the end record declares.
        if entries > limits.members:
            raise _too_many(label, str(entries), limits)
        if directory > limits.members * _CENTRAL_ENTRY_BYTES:
            raise _too_many(label, f"a {directory}-byte list of", limits)
    try:
        archive = zipfile.ZipFile(handle)
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise BuildError(
            f"{label}: the source archive is not a readable zip archive: {exc}",
            hint="check the recipe's archive url and sha256",
        ) from None
    members: list[_Member] = []
    if len(infos) > limits.members:  # an end record that understated the count
        raise _too_many(label, str(len(infos)), limits)
    for info in infos:
        mode = info.external_attr >> 16
        kind_bits = stat.S_IFMT(mode)
        link = ""
        if info.is_dir():
            kind: Kind = "dir"
        elif kind_bits == stat.S_IFLNK:
            kind = "symlink"
            if info.file_size > _LINK_TARGET_MAX:
                raise _refuse(label, info.filename, "is a link with an implausibly long target")
            link = archive.read(info).decode("utf-8", "surrogateescape")
        elif kind_bits in (0, stat.S_IFREG):
            kind = "file"
        else:
            raise _refuse(
                label, info.filename, "is a device, FIFO or socket, which a source tree never holds"
            )

        def read(info: zipfile.ZipInfo = info) -> IO[bytes]:
            return archive.open(info)

        members.append(
            _Member(
                _split(label, info.filename),
                kind,
                info.file_size if kind == "file" else 0,
                bool(mode & 0o111),
                link,
                read,
            )
        )
    return archive, members


def _top_folder(members: list[_Member], strip: str | None, label: str) -> str | None:
    """The top-level folder to remove: ``strip`` when given (every member must be under it), or,
    when not given, the one folder that holds everything, if there is exactly one."""
    named = [m for m in members if m.parts]
    tops = {m.parts[0] for m in named}
    if strip == "":
        return None
    if strip is not None:
        outside = next((m for m in named if m.parts[0] != strip), None)
        if outside is not None or not named:
            found = ", ".join(sorted(tops)[:5]) or "nothing"
            raise BuildError(
                f"{label}: the recipe strips the archive's top-level folder {strip!r}, but the "
                f"archive holds {found}",
                hint="fix the recipe's archive.strip (leave it out to strip the one top-level "
                "folder automatically)",
            )
        return strip
    if len(tops) != 1:
        return None
    top = next(iter(tops))
    # A lone top-level *file* (an archive of one file) is content, not a wrapper folder.
    if any(m.parts == (top,) and m.kind != "dir" for m in named):
        return None
    return top


def _link_problem(parts: tuple[str, ...], target: str) -> str | None:
    """Why a symlink at ``parts`` pointing at ``target`` leaves the tree (judged by its text)."""
    if not target or target.startswith("/") or "\x00" in target:
        return f"is a link to {target!r}, outside the tree"
    resolved = posixpath.normpath(posixpath.join(*parts[:-1], target) if len(parts) > 1 else target)
    if resolved == ".." or resolved.startswith("../"):
        return f"is a link to {target!r}, outside the tree"
    return None


@frozen(kw_only=False)
class _Planned:
    member: _Member
    parts: tuple[str, ...]  # under the tree's root, top folder removed
    link_parts: tuple[str, ...]  # a hard link's source, top folder removed


def _plan(
    members: list[_Member], strip: str | None, limits: ArchiveLimits, label: str
) -> list[_Planned]:
    if len(members) > limits.members:
        raise _too_many(label, str(len(members)), limits)
    declared = sum(m.size for m in members)
    if declared > limits.total_bytes:
        raise BuildError(
            f"{label}: the source archive unpacks to {declared} bytes, more than the "
            f"{limits.total_bytes} allowed; nothing was unpacked",
            hint="that is not a source tree: check the recipe's archive url and sha256",
        )
    top = _top_folder(members, strip, label)
    planned: list[_Planned] = []
    seen: dict[tuple[str, ...], Kind] = {}
    for member in members:
        parts = member.parts[1:] if top is not None else member.parts
        name = "/".join(member.parts)
        if not parts:
            if member.kind != "dir":
                raise _refuse(label, name, "replaces the tree's root")
            continue
        earlier = seen.get(parts)
        if earlier is not None and not (earlier == "dir" and member.kind == "dir"):
            raise _refuse(label, name, "is listed twice")
        seen[parts] = member.kind
        link_parts: tuple[str, ...] = ()
        if member.kind == "symlink":
            problem = _link_problem(parts, member.link)
            if problem is not None:
                raise _refuse(label, name, problem)
        elif member.kind == "hardlink":
            try:
                source = _split(label, member.link)
            except BuildError:
                raise _refuse(
                    label, name, f"is a hard link to {member.link!r}, outside the tree"
                ) from None
            source = source[1:] if top is not None and source[:1] == (top,) else source
            if seen.get(source) != "file" or source == parts:
                raise _refuse(
                    label,
                    name,
                    f"is a hard link to {member.link!r}, which is not a file listed before it",
                )
            link_parts = source
        planned.append(_Planned(member, parts, link_parts))
    return planned


# -- writing ---------------------------------------------------------------------------------


def _unpack_failed(label: str, name: str, why: str) -> BuildError:
    return BuildError(
        f"{label}: the source archive's member {name!r} {why}; the unpacked files were removed",
        hint="the archive is malformed or hostile: check the recipe's url and sha256",
    )


def _parent(root: Path, parts: tuple[str, ...], label: str, name: str) -> Path:
    """The folder for ``parts`` under ``root``, made as needed; no component may be a link."""
    folder = root
    for depth, part in enumerate(parts[:-1], start=1):
        folder = folder / part
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            folder.mkdir(mode=0o755)
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise _unpack_failed(
                label, name, f"lies under {'/'.join(parts[:depth])!r}, which is not a folder"
            )
    return folder


def _write_file(
    path: Path, source: IO[bytes], executable: bool, budget: list[int], label: str, name: str
) -> None:
    # O_EXCL and O_NOFOLLOW: never through a link, never over something already there.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o755 if executable else 0o644)
    with os.fdopen(fd, "wb") as out:
        for block in iter(lambda: source.read(_CHUNK), b""):
            budget[0] -= len(block)
            if budget[0] < 0:
                raise _unpack_failed(label, name, "unpacks to more bytes than allowed")
            out.write(block)


def _write_member(root: Path, item: _Planned, budget: list[int], label: str) -> Path | None:
    """Write one member; returns the path of a symlink made (checked once all are in place)."""
    member, parts = item.member, item.parts
    name = "/".join(member.parts)
    path = _parent(root, parts, label, name) / parts[-1]
    if member.kind == "dir":
        if not os.path.lexists(path):
            path.mkdir(mode=0o755)
        elif not stat.S_ISDIR(os.lstat(path).st_mode):
            raise _unpack_failed(
                label, name, "is a folder where the archive already put something else"
            )
    elif member.kind == "file":
        with member.read() as source:
            _write_file(path, source, member.executable, budget, label, name)
    elif member.kind == "hardlink":
        fd = os.open(root.joinpath(*item.link_parts), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as source:
            _write_file(path, source, member.executable, budget, label, name)
    else:
        os.symlink(member.link, path)
        return path
    return None


def _write(root: Path, planned: list[_Planned], limits: ArchiveLimits, label: str) -> None:
    budget = [limits.total_bytes]
    links: list[tuple[Path, str]] = []
    for item in planned:
        name = "/".join(item.member.parts)
        try:
            link = _write_member(root, item, budget, label)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise BuildError(
                    f"{label}: the disk holding {root} filled up while unpacking {name!r} "
                    f"({exc.strerror}); the unpacked files were removed",
                    hint=f"free space in {root.parent}, or point TMPDIR at a folder with room",
                ) from None
            raise _unpack_failed(label, name, f"could not be written: {exc}") from None
        except (EOFError, tarfile.TarError, zipfile.BadZipFile) as exc:
            raise _unpack_failed(label, name, f"could not be written: {exc}") from None
        if link is not None:
            links.append((link, name))
    # Each link's text was checked to stay inside; a link through another link is judged here,
    # by where it really leads now that every member is in place.
    real_root = os.path.realpath(root)
    for path, name in links:
        real = os.path.realpath(path)
        if os.path.commonpath([real_root, real]) != real_root:
            raise _unpack_failed(
                label, name, f"leads to {real}, outside the tree (through another link)"
            )


def _free_bytes(folder: Path) -> tuple[Path, int, int] | None:
    """(the nearest existing folder at or above ``folder``, its free bytes, its block size)."""
    probe = folder
    while True:
        try:
            info = os.statvfs(probe)
        except FileNotFoundError:
            if probe.parent == probe:
                return None
            probe = probe.parent
            continue
        except OSError:
            return None
        return probe, info.f_bavail * info.f_frsize, max(info.f_frsize, 512)


def _check_free_space(dest: Path, planned: list[_Planned], label: str) -> None:
    """Refuse, before writing anything, an archive whose declared sizes (each file rounded up to
    whole blocks) do not fit in the free space of the folder it unpacks into."""
    found = _free_bytes(dest)
    if found is None:
        return
    folder, free, block = found
    needed = sum(-(-item.member.size // block) * block + block for item in planned)
    if needed > free:
        raise BuildError(
            f"{label}: unpacking the source archive needs about {_mib(needed)} in {folder}, which "
            f"has {_mib(free)} free; nothing was unpacked",
            hint=f"free space in {folder}, or point TMPDIR at a folder with room",
        )


def _mib(count: int) -> str:
    return f"{count / (1 << 20):.1f} MiB"


def unpack_archive(
    handle: IO[bytes],
    dest: Path,
    *,
    strip: str | None,
    label: str,
    limits: ArchiveLimits | None = None,
) -> None:
    """Unpack the tar or zip archive ``handle`` into the new folder ``dest``, its one top-level
    folder removed (see :class:`cuda_resolve.index.model.SourceArchive` ``strip``).

    Every member is checked before anything is written; on any failure ``dest`` is removed."""
    bounds = limits or ArchiveLimits()
    head = handle.read(4)
    handle.seek(0)
    opened: tarfile.TarFile | zipfile.ZipFile
    if head in (b"PK\x03\x04", b"PK\x05\x06"):
        opened, members = _zip_members(handle, label, bounds)
    else:
        opened, members = _tar_members(handle, label, bounds)
    with opened:
        planned = _plan(members, strip, bounds, label)
        _check_free_space(dest, planned, label)
        dest.mkdir(mode=0o755, parents=True)
        try:
            _write(dest, planned, bounds, label)
        except BaseException:
            import shutil

            shutil.rmtree(dest, ignore_errors=True)
            raise
