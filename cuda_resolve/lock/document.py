"""The lock as data, and its one writer: sorted, stable TOML (relocking nothing new gives the same
bytes).

:class:`LockDocument` holds what :mod:`.make` decided: one :class:`LockedPackage` per (name,
version), the profiles that install it (all of them: no marker; some: ``'a100' in extras or ...``),
every wheel with its canonical URL, size and sha256, and per profile the facts it was decided
from (:class:`ProfileRecord`, written under ``[tool.cuda-resolve]``; informational, as PEP 751
says). :func:`render` writes PEP 751 TOML by hand, so key order, quoting and line breaks never
depend on a library's version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._frozen import frozen
from ..errors import UsageError
from . import LOCK_VERSION

__all__ = [
    "CREDENTIALS_NOTE",
    "LockDocument",
    "LockedFile",
    "LockedPackage",
    "ProfileRecord",
    "extras_marker",
    "packages_digest",
    "public_url",
    "render",
]


@frozen
class LockedFile:
    name: str  # the wheel's file name
    url: str  # canonical (mirrors are applied at sync time by rewriting its prefix)
    size: int
    sha256: str


@frozen
class LockedPackage:
    name: str  # canonical
    version: str  # with its local label: "2.14.1+cu126"
    profiles: tuple[str, ...]  # sorted; every profile of the lock: no marker
    index: str | None
    wheels: tuple[LockedFile, ...]  # sorted by name
    requested: bool = False  # named on the command line (or a -r file), not only a dependency


@frozen
class ProfileRecord:
    """``[tool.cuda-resolve.profiles.NAME]``: the facts a profile was locked from, which ``sync
    --name auto`` compares with the machine it runs on, and ``lock --check`` with the inputs."""

    name: str
    source: str
    digest: str  # sha256 of the profile file
    python: str  # "3.12" (the minor the closure was resolved for)
    os: str
    arch: str
    glibc: str | None
    driver: str | None
    driver_cuda: str | None
    gpus: tuple[str, ...]  # "NVIDIA A100-SXM4-80GB (8.0)"
    capabilities: tuple[str, ...]  # "8.0", sorted
    torch: str | None  # the locked torch, "2.14.1+cu126"
    torch_cuda: str | None  # its CUDA ("12.6"); None for a CPU build
    torch_arch_list: str | None  # its arch list, "5.0;6.0;...;9.0+PTX"
    toolkit: str | None
    decision: tuple[str, ...]  # the Plan's items: "torch==2.14.1+cu126 (wheel)"
    interpreter: str  # the Python version whose interpreter resolved the closure
    builds: tuple[
        str, ...
    ] = ()  # each source build: package, labelled version, recipe, revision, patches, ABI key

    def to_table(self) -> dict[str, object]:
        table: dict[str, object] = {
            "source": self.source,
            "digest": self.digest,
            "python": self.python,
            "os": self.os,
            "arch": self.arch,
            "gpus": list(self.gpus),
            "capabilities": list(self.capabilities),
            "decision": list(self.decision),
            "interpreter": self.interpreter,
        }
        if self.builds:
            table["builds"] = list(self.builds)
        for key in (
            "glibc",
            "driver",
            "driver_cuda",
            "torch",
            "torch_cuda",
            "torch_arch_list",
            "toolkit",
        ):
            value = getattr(self, key)
            if value is not None:
                table[key.replace("_", "-")] = value
        return table


@frozen
class LockDocument:
    profiles: tuple[ProfileRecord, ...]  # sorted by name
    packages: tuple[LockedPackage, ...]
    requests: tuple[str, ...]
    created_by: str  # "cuda-resolve"
    resolver: str  # "cuda-resolve 0.1.0"
    index_url: str  # the main index the closure was resolved from

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)


def extras_marker(profiles: Sequence[str], every: Sequence[str]) -> str | None:
    """``'a' in extras or 'b' in extras``; None when ``profiles`` are all of ``every``."""
    if set(profiles) >= set(every):
        return None
    return " or ".join(f"'{name}' in extras" for name in sorted(profiles))


def _environment_marker(record: ProfileRecord) -> str:
    platform = {"linux": "linux", "darwin": "darwin", "windows": "win32"}.get(record.os, record.os)
    return (
        f"sys_platform == '{platform}' and platform_machine == '{record.arch}' "
        f"and python_version == '{record.python}'"
    )


def _requires_python(records: Iterable[ProfileRecord]) -> str:
    lowest = min((tuple(int(p) for p in r.python.split(".")) for r in records), default=(3, 8))
    return ">=" + ".".join(str(p) for p in lowest)


# -- TOML by hand ---------------------------------------------------------------------------


def _string(value: str) -> str:
    # JSON's escapes are TOML's (\", \\, \n, \uXXXX); ensure_ascii=False keeps non-BMP text whole.
    return json.dumps(value, ensure_ascii=False)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        return (
            "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
            if value
            else "{}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _key(key: str) -> str:
    return (
        key
        if key and all(c.isalnum() or c in "-_" for c in key) and key.isascii()
        else _string(key)
    )


def _array(key: str, values: Sequence[object]) -> list[str]:
    if not values:
        return [f"{key} = []"]
    return [f"{key} = [", *(f"    {_value(v)}," for v in values), "]"]


def _table_lines(data: Mapping[str, object]) -> list[str]:
    lines: list[str] = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, (list, tuple)) and len(value) > 1:
            lines.extend(_array(_key(key), value))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    return lines


#: Said in a lock whose URLs carried user info: a lock is committed and shared, credentials not.
CREDENTIALS_NOTE = (
    "# credentials are left out of these URLs: sync reads them from ~/.netrc (or $NETRC),"
    " or from a mirror's URL in cuda-resolve's config"
)


def packages_digest(packages: object) -> str:
    """``sha256:...`` of the lock's ``[[packages]]`` as TOML reads them (a list of tables), in a
    canonical JSON form: written under ``[tool.cuda-resolve]`` as ``packages-digest``, so that a
    version, URL, size or hash changed after locking is told from what cuda-resolve wrote."""
    import hashlib

    canonical = json.dumps(packages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def public_url(url: str) -> str:
    """``url`` without user info: ``https://user:token@host/simple`` -> ``https://host/simple``."""
    from ..redaction import url_without_userinfo

    return url_without_userinfo(url)


def render(document: LockDocument) -> str:
    """The PEP 751 text of ``document``: the same document gives the same bytes. URLs are written
    without user info (:func:`public_url`), with :data:`CREDENTIALS_NOTE` where any had some."""
    every = document.names
    urls = [document.index_url]
    lines = [f"lock-version = {_string(LOCK_VERSION)}"]
    lines.extend(
        _array("environments", sorted({_environment_marker(r) for r in document.profiles}))
    )
    lines.append(f"requires-python = {_string(_requires_python(document.profiles))}")
    lines.append(f"extras = {_value(sorted(every))}")
    lines.append("dependency-groups = []")
    lines.append("default-groups = []")
    lines.append(f"created-by = {_string(document.created_by)}")
    for package in sorted(document.packages, key=lambda p: (p.name, p.profiles, p.version)):
        lines.extend(
            [
                "",
                "[[packages]]",
                f"name = {_string(package.name)}",
                f"version = {_string(package.version)}",
            ]
        )
        marker = extras_marker(package.profiles, every)
        if marker is not None:
            lines.append(f"marker = {_string(marker)}")
        if package.index:
            urls.append(package.index)
            lines.append(f"index = {_string(public_url(package.index))}")
        urls.extend(w.url for w in package.wheels)
        wheels = [
            {
                "name": w.name,
                "url": public_url(w.url),
                "size": w.size,
                "hashes": {"sha256": w.sha256},
            }
            for w in sorted(package.wheels, key=lambda w: w.name)
        ]
        lines.extend(_array("wheels", wheels))
        if package.requested:
            lines.extend([f"[packages.tool.{_key('cuda-resolve')}]", "requested = true"])
    from .._toml import parse_toml_text

    # Digested as a reader will see them: the text written so far, read back.
    written = parse_toml_text("\n".join(lines), origin="<lock>", error=UsageError).data
    digest = packages_digest(written.get("packages", []))
    lines.extend(["", "[tool.cuda-resolve]"])
    # The user's requirement texts and each profile's decision name URLs too (a direct URL with
    # a token, a recipe's repository on a private host): written without user info as well.
    tool = {"requests": list(document.requests)}
    tables = [record.to_table() for record in sorted(document.profiles, key=lambda r: r.name)]
    if any(public_url(url) != url for url in urls) or _public_values([tool, tables]) != [
        tool,
        tables,
    ]:
        lines.append(CREDENTIALS_NOTE)
    lines.extend(
        _table_lines(
            {
                "resolver": document.resolver,
                "requests": _public_values(list(document.requests)),
                "index-url": public_url(document.index_url),
                "packages-digest": digest,
            }
        )
    )
    for record, table in zip(sorted(document.profiles, key=lambda r: r.name), tables, strict=True):
        lines.extend(["", f"[tool.cuda-resolve.profiles.{_key(record.name)}]"])
        lines.extend(_table_lines(_public_values(table)))
    return "\n".join(lines) + "\n"


def _public_values(value: Any) -> Any:
    """``value`` (strings, lists and tables of them) with user info left out of every URL."""
    from ..redaction import without_userinfo

    if isinstance(value, str):
        return without_userinfo(value)
    if isinstance(value, list):
        return [_public_values(item) for item in value]
    if isinstance(value, dict):
        return {key: _public_values(item) for key, item in value.items()}
    return value
