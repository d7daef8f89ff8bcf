"""Reading a ``pylock.toml`` back: PEP 751 validation by ``packaging.pylock`` with the path in
the document that is wrong (``packages[3].wheels[0].hashes``), then cuda-resolve's own
``[tool.cuda-resolve]`` facts, read with the same path-aware errors as every other file."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from .._toml import Table
from ..errors import LockError, UsageError
from . import LOCK_VERSION
from .document import ProfileRecord

if TYPE_CHECKING:
    from packaging.pylock import Pylock

__all__ = ["LockFormatError", "ReadLock", "parse_lock", "read_lock"]

_HINT = "write it again with `cuda-resolve lock ... -o pylock.toml`, or restore it from version control"


class LockFormatError(LockError, UsageError):
    """A lock file that is not a lock this cuda-resolve can honour; the message names the key path."""

    exit_code = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadLock:
    pylock: Pylock
    profiles: dict[str, ProfileRecord]  # by name, from [tool.cuda-resolve.profiles]
    requests: tuple[str, ...]
    index_url: str | None
    resolver: str | None
    origin: str
    notes: tuple[str, ...] = ()  # a newer minor lock-version, and the like


def read_lock(path: Path) -> ReadLock:
    from .._bounded import read_user_text

    text = read_user_text(path, error=LockFormatError, hint=_HINT, what="a lock file")
    return parse_lock(text, origin=str(path))


def _lock_version(data: dict[str, Any], origin: str) -> tuple[Version, list[str]]:
    value = data.get("lock-version")
    if not isinstance(value, str):
        raise LockFormatError(f"{origin}: lock-version: is required (a string such as {LOCK_VERSION!r})", hint=_HINT)
    try:
        version = Version(value)
    except InvalidVersion:
        raise LockFormatError(f"{origin}: lock-version = {value!r}: not a version", hint=_HINT) from None
    supported = Version(LOCK_VERSION)
    if version.major > supported.major:
        raise LockFormatError(f"{origin}: lock-version = {value!r}: this cuda-resolve reads lock version {supported.major}.x only",
                              hint="upgrade cuda-resolve, or lock again with this one")
    notes = []
    if version > supported:
        notes.append(f"{origin}: lock-version {value} is newer than {LOCK_VERSION}: keys it added are ignored")
    return version, notes


def parse_lock(text: str, *, origin: str = "<lock>") -> ReadLock:
    try:
        from packaging.pylock import Pylock, PylockValidationError
    except ImportError:
        import packaging

        raise LockError(f"reading {origin} needs packaging >= 25 (its pylock module); this Python has packaging {packaging.__version__}",
                        hint="python -m pip install -U packaging") from None

    from .._toml import parse_toml_text

    data = parse_toml_text(text, origin=origin, error=LockFormatError, hint=_HINT).data
    _, notes = _lock_version(data, origin)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the newer-minor warning is our note above
            pylock = Pylock.from_dict(data)
    except PylockValidationError as exc:
        where = f"{exc.context}: " if exc.context else ""
        raise LockFormatError(f"{origin}: {where}{exc.message}", hint=_HINT) from None
    tool = Table(data, origin=origin, path="", error=LockFormatError, hint=_HINT)
    tool_table = tool.table("tool")
    ours = tool_table.table("cuda-resolve") if tool_table is not None else None
    if ours is None:
        raise LockFormatError(f"{origin}: tool.cuda-resolve: is required (the profiles' facts): this lock was not written by cuda-resolve",
                              hint="install it with pip (`pip install -r 'pylock.toml[EXTRA]'`), or lock with cuda-resolve")
    records: dict[str, ProfileRecord] = {}
    profiles_table = ours.table("profiles", required=True)
    assert profiles_table is not None
    for name, table in profiles_table.sub_tables():
        records[name] = _record(name, table)
    declared = set(pylock.extras or ())
    for name in records:
        if name not in declared:
            raise profiles_table.fail(name, f"names a profile that is not in the lock's extras ({', '.join(sorted(declared)) or 'none'})")
    return ReadLock(pylock=pylock, profiles=records, requests=ours.strings("requests", ()), index_url=ours.string("index-url", None),
                    resolver=ours.string("resolver", None), origin=origin, notes=tuple(notes))


def _record(name: str, table: Table) -> ProfileRecord:
    record = ProfileRecord(
        name=name, source=table.string("source"), digest=table.string("digest"), python=table.string("python"),
        os=table.string("os"), arch=table.string("arch"), glibc=table.string("glibc", None), driver=table.string("driver", None),
        driver_cuda=table.string("driver-cuda", None), gpus=table.strings("gpus", ()), capabilities=table.strings("capabilities", ()),
        torch=table.string("torch", None), torch_cuda=table.string("torch-cuda", None),
        torch_arch_list=table.string("torch-arch-list", None), toolkit=table.string("toolkit", None),
        decision=table.strings("decision", ()), interpreter=table.string("interpreter", ""), builds=table.strings("builds", ()),
    )
    return record
