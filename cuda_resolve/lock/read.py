"""Reading a ``pylock.toml`` back: PEP 751 validation by ``packaging.pylock`` with the path in
the document that is wrong (``packages[3].wheels[0].hashes``), then cuda-resolve's own
``[tool.cuda-resolve]`` facts, read with the same path-aware errors as every other file."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from .._frozen import frozen
from .._toml import Table, shown
from ..errors import LockError, UsageError
from . import LOCK_VERSION
from .document import ProfileRecord

if TYPE_CHECKING:
    from packaging.pylock import Pylock

__all__ = [
    "LockFormatError",
    "LockedFile",
    "ReadLock",
    "locked_files",
    "parse_lock",
    "read_lock",
    "read_locked_files",
]

_HINT = (
    "write it again with `cuda-resolve lock ... -o pylock.toml`, or restore it from version control"
)


class LockFormatError(LockError, UsageError):
    """A lock file that is not a lock this cuda-resolve can honour; the message names the key
    path."""

    exit_code = 2


@frozen
class ReadLock:
    pylock: Pylock
    profiles: dict[str, ProfileRecord]  # by name, from [tool.cuda-resolve.profiles]
    requests: tuple[str, ...]
    index_url: str | None
    resolver: str | None
    origin: str
    notes: tuple[str, ...] = ()  # a newer minor lock-version, and the like
    #: The [[packages]] differ from what cuda-resolve wrote (its ``packages-digest``): edited by
    #: hand or by another tool. False for a lock written before the digest was.
    packages_edited: bool = False


def read_lock(path: Path) -> ReadLock:
    from .._bounded import read_user_text

    text = read_user_text(path, error=LockFormatError, hint=_HINT, what="a lock file")
    return parse_lock(text, origin=str(path))


def _lock_version(data: dict[str, Any], origin: str) -> tuple[Version, list[str]]:
    value = data.get("lock-version")
    if not isinstance(value, str):
        raise LockFormatError(
            f"{origin}: lock-version: is required (a string such as {LOCK_VERSION!r})", hint=_HINT
        )
    try:
        version = Version(value)
    except InvalidVersion:
        raise LockFormatError(
            f"{origin}: lock-version = {value!r}: not a version", hint=_HINT
        ) from None
    supported = Version(LOCK_VERSION)
    if version.major > supported.major:
        from .._upgrade import upgrade_hint

        raise LockFormatError(
            f"{origin}: lock-version = {value!r}: this cuda-resolve reads lock version "
            f"{supported.major}.x only",
            hint=f"{upgrade_hint()}, or lock again with this one",
        )
    notes = []
    if version > supported:
        notes.append(
            f"{origin}: lock-version {value} is newer than {LOCK_VERSION}: keys it "
            "added are ignored"
        )
    return version, notes


def _validated(text: str, origin: str) -> tuple[dict[str, Any], Pylock, list[str]]:
    """The TOML document, checked by ``packaging.pylock`` (any PEP 751 lock), and its notes."""
    try:
        from packaging.pylock import Pylock, PylockValidationError
    except ImportError:
        import packaging

        raise LockError(
            f"reading {origin} needs packaging >= 25 (its pylock module); this Python has "
            f"packaging {packaging.__version__}",
            hint="python -m pip install -U packaging",
        ) from None

    from .._toml import parse_toml_text

    data = parse_toml_text(text, origin=origin, error=LockFormatError, hint=_HINT).data
    _, notes = _lock_version(data, origin)
    try:
        # packaging says "pylock minor version 1.9 is not supported" through logging (printed
        # bare on stderr) and warnings: our note above says it, with what happens next.
        quiet = logging.getLogger("packaging.pylock")
        was = quiet.disabled
        quiet.disabled = True
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pylock = Pylock.from_dict(data)
        finally:
            quiet.disabled = was
    except PylockValidationError as exc:
        where = f"{exc.context}: " if exc.context else ""
        raise LockFormatError(f"{origin}: {where}{exc.message}", hint=_HINT) from None
    _check_hashes(data, origin)
    return data, pylock, notes


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _check_hashes(data: dict[str, Any], origin: str) -> None:
    """Every file's sha256 is 64 lower-case hex digits: the cache keeps a file under its hash
    (``sha256[:2]/sha256/name``), so a hash is checked before it is ever part of a path."""
    packages = data.get("packages")
    for position, package in enumerate(packages if isinstance(packages, list) else ()):
        if not isinstance(package, dict):
            continue
        files = [(f"wheels[{n}]", w) for n, w in enumerate(package.get("wheels") or ())]
        files += [(key, package.get(key)) for key in ("sdist", "archive")]
        for where, entry in files:
            hashes = entry.get("hashes") if isinstance(entry, dict) else None
            sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
            if sha256 is not None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
                raise LockFormatError(
                    f"{origin}: packages[{position}].{where}.hashes.sha256 = {shown(sha256)}:"
                    " expected 64 lower-case hex digits",
                    hint=_HINT,
                )


def parse_lock(text: str, *, origin: str = "<lock>") -> ReadLock:
    data, pylock, notes = _validated(text, origin)
    tool = Table(data, origin=origin, path="", error=LockFormatError, hint=_HINT)
    tool_table = tool.table("tool")
    ours = tool_table.table("cuda-resolve") if tool_table is not None else None
    if ours is None:
        raise LockFormatError(
            f"{origin}: tool.cuda-resolve: is required (the profiles' facts): this lock was not "
            "written by cuda-resolve",
            hint="install it with pip (`pip install -r 'pylock.toml[EXTRA]'`), or lock with "
            "cuda-resolve",
        )
    records: dict[str, ProfileRecord] = {}
    profiles_table = ours.table("profiles", required=True)
    assert profiles_table is not None
    for name, table in profiles_table.sub_tables():
        records[name] = _record(name, table)
    declared = set(pylock.extras or ())
    for name in records:
        if name not in declared:
            raise profiles_table.fail(
                name,
                "names a profile that is not in the lock's extras "
                f"({', '.join(sorted(declared)) or 'none'})",
            )
    from .document import packages_digest

    recorded = ours.string("packages-digest", None)
    edited = recorded is not None and recorded != packages_digest(data.get("packages", []))
    if edited:
        notes.append(
            f"{origin}: its [[packages]] were changed after cuda-resolve wrote it (a version, "
            "URL, size or hash is not what was locked); what it says now is what is installed. "
            "To go back to what was locked: lock again, or restore the file"
        )
    return ReadLock(
        pylock=pylock,
        profiles=records,
        requests=ours.strings("requests", ()),
        index_url=ours.string("index-url", None),
        resolver=ours.string("resolver", None),
        origin=origin,
        notes=tuple(notes),
        packages_edited=edited,
    )


def _checked(table: Table, key: str, parser: Callable[[str], object]) -> str | None:
    """The string at ``key`` (None when absent), refused naming the key unless ``parser`` reads it:
    sync compares these facts with the machine it runs on."""
    text: str | None = table.string(key, None)
    if text is not None:
        table.parsed(key, parser)
    return text


def _record(name: str, table: Table) -> ProfileRecord:
    from ..index.model import parse_arch_list
    from ..versions import ComputeCapability, CudaVersion, DriverVersion

    for position, text in enumerate(table.strings("capabilities", ())):
        try:
            ComputeCapability.parse(text)
        except ValueError as exc:
            raise table.fail(f"capabilities[{position}]", f"= {shown(text)}: {exc}") from None
    record = ProfileRecord(
        name=name,
        source=table.string("source"),
        digest=table.string("digest"),
        python=table.string("python"),
        os=table.string("os"),
        arch=table.string("arch"),
        glibc=table.string("glibc", None),
        driver=_checked(table, "driver", DriverVersion.parse),
        driver_cuda=_checked(table, "driver-cuda", CudaVersion.parse),
        gpus=table.strings("gpus", ()),
        capabilities=table.strings("capabilities", ()),
        torch=table.string("torch", None),
        torch_cuda=_checked(table, "torch-cuda", CudaVersion.parse),
        torch_arch_list=_checked(table, "torch-arch-list", parse_arch_list),
        toolkit=_checked(table, "toolkit", CudaVersion.parse),
        decision=table.strings("decision", ()),
        interpreter=table.string("interpreter", ""),
        builds=table.strings("builds", ()),
    )
    return record


@frozen
class LockedFile:
    """A wheel or archive a lock names: enough to tell whether a stored file is that one."""

    package: str  # canonical
    version: str | None
    filename: str
    sha256: str | None
    url: str | None  # or the lock's relative ``path``


def read_locked_files(path: Path) -> tuple[LockedFile, ...]:
    """Every wheel and archive the lock at ``path`` names. Any PEP 751 lock will do (one written
    by uv or pip too: ``[tool.cuda-resolve]`` is not needed); one that cannot be read or is not
    valid raises :class:`LockFormatError` naming the file (and the path in the document)."""
    from .._bounded import read_user_text

    text = read_user_text(path, error=LockFormatError, hint=_HINT, what="a lock file")
    _, pylock, _ = _validated(text, str(path))
    return locked_files(pylock, origin=str(path))


def locked_files(pylock: Pylock, *, origin: str = "<lock>") -> tuple[LockedFile, ...]:
    from packaging.pylock import PylockValidationError

    # Imported here: the net package loads requests, which a cached sync never needs.
    from ..net.pages import file_name

    found: list[LockedFile] = []
    for position, package in enumerate(pylock.packages):
        version = None if package.version is None else str(package.version)
        for number, wheel in enumerate(package.wheels or ()):
            try:
                filename = wheel.filename
            except PylockValidationError:
                raise LockFormatError(
                    f"{origin}: packages[{position}].wheels[{number}]: names no file (no name, "
                    "path or url)",
                    hint=_HINT,
                ) from None
            found.append(
                LockedFile(
                    package=str(package.name),
                    version=version,
                    filename=filename,
                    sha256=(wheel.hashes or {}).get("sha256"),
                    url=wheel.url or wheel.path,
                )
            )
        archive = package.archive
        if archive is not None:
            where = archive.url or archive.path or ""
            filename = file_name(where)
            found.append(
                LockedFile(
                    package=str(package.name),
                    version=version,
                    filename=filename,
                    sha256=(archive.hashes or {}).get("sha256"),
                    url=where or None,
                )
            )
    return tuple(found)
