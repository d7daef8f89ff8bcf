"""Rewrite a built wheel for the wheelhouse: new local version label, debug info stripped.

The version is changed everywhere a wheel carries it (the file name, the ``.dist-info`` and
``.data`` folder names, ``METADATA``'s ``Version:``), the full key is written to
``.dist-info/cuda_resolve_key.json`` (:data:`KEY_FILE`), and ``RECORD`` is regenerated with each
file's sha256 and size, so pip installs the result as an ordinary wheel. Shared objects are
passed through binutils' ``strip --strip-debug`` where it exists: a CUDA extension built with
``-g`` is mostly DWARF (pointnet2_ops: 28 MB with it, 0.4 MB without), which is size only.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .._frozen import frozen
from .errors import WheelhouseError
from .key import WheelKey

__all__ = [
    "KEY_FILE",
    "RewrittenWheel",
    "find_strip",
    "key_document",
    "read_wheel_key",
    "rewrite_wheel",
]

#: The file in a relabelled wheel's ``.dist-info`` that carries its full :class:`WheelKey`
#: (the local label holds only a short recipe digest): a served wheel is taken by it.
KEY_FILE = "cuda_resolve_key.json"
_KEY_FORMAT = 1
_KEY_FILE_LIMIT = 64 * 1024


def key_document(key: WheelKey) -> str:
    """The text of :data:`KEY_FILE` for ``key``."""
    return (
        json.dumps({"format": _KEY_FORMAT, "key": key.to_json()}, indent=2, sort_keys=True) + "\n"
    )


def read_wheel_key(wheel: Path) -> WheelKey | None:
    """The key a relabelled wheel carries in its ``.dist-info`` (:data:`KEY_FILE`); None when it
    has none (a wheel relabelled before the file existed, or not one of ours). WheelhouseError
    when the file is there and is not a valid key, or the wheel is not a zip archive."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [
                n
                for n in archive.namelist()
                if n.count("/") == 1 and n.endswith(f".dist-info/{KEY_FILE}")
            ]
            if not names:
                return None
            if len(names) > 1 or archive.getinfo(names[0]).file_size > _KEY_FILE_LIMIT:
                raise _bad_key(
                    wheel, f"has {len(names)} {KEY_FILE} files or one too large to be a key"
                )
            text = archive.read(names[0]).decode("utf-8")
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise _bad_key(wheel, f"cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _bad_key(wheel, f"its {KEY_FILE} is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != _KEY_FORMAT:
        raise _bad_key(wheel, f"its {KEY_FILE} is not format {_KEY_FORMAT}")
    return WheelKey.from_json(data.get("key"), origin=f"{wheel.name}: {KEY_FILE}")


def _bad_key(wheel: Path, why: str) -> WheelhouseError:
    return WheelhouseError(
        f"wheel {wheel.name}: {why}",
        hint="it was not written by cuda-resolve's wheelhouse; it is not used",
    )


_SHARED_OBJECT = re.compile(r"\.so(\.\d+)*$")
_ELF_MAGIC = b"\x7fELF"
_STRIP_TIMEOUT_S = 300
#: Signatures over the old RECORD; they no longer match and are dropped.
_RECORD_SIGNATURES = ("RECORD.jws", "RECORD.p7s")


@frozen
class RewrittenWheel:
    """What :func:`rewrite_wheel` wrote."""

    filename: str  # the new wheel's file name
    version: str  # the labelled version
    requires_python: str | None
    stripped: tuple[str, ...]  # archive paths of the shared objects strip shrank
    original_name: str
    original_size: int


def find_strip() -> str | None:
    """binutils' ``strip``, or None where there is none (the wheel is then kept as built)."""
    return shutil.which("strip")


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _strip_debug(data: bytes, strip: str, name: str) -> bytes | None:
    """``data`` with debug sections removed, or None when strip fails or gains nothing."""
    with tempfile.TemporaryDirectory(prefix="cuda-resolve-strip-") as scratch:
        target = Path(scratch) / Path(name).name
        target.write_bytes(data)
        try:
            result = subprocess.run(
                [strip, "--strip-debug", str(target)],
                capture_output=True,
                timeout=_STRIP_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if result.returncode != 0:
            return None
        stripped = target.read_bytes()
    if not stripped.startswith(_ELF_MAGIC) or len(stripped) >= len(data):
        return None
    return stripped


def _bad_wheel(path: Path, why: str) -> WheelhouseError:
    return WheelhouseError(
        f"built wheel {path}: {why}",
        hint="this is the output of the recipe's build; check the build log, or report it with "
        "the wheel attached",
    )


def _rewrite_metadata(text: str, new_version: str, path: Path) -> tuple[str, str | None]:
    """METADATA with its ``Version:`` header replaced; also its ``Requires-Python``."""
    lines = text.splitlines(keepends=True)
    requires_python: str | None = None
    replaced = False
    for number, line in enumerate(lines):
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        name, colon, value = line.partition(":")
        if not colon:
            continue
        field = name.strip().lower()
        if field == "version" and not replaced:
            ending = line[len(line.rstrip("\r\n")) :]
            lines[number] = f"Version: {new_version}{ending or chr(10)}"
            replaced = True
        elif field == "requires-python":
            requires_python = value.strip() or None
    if not replaced:
        raise _bad_wheel(path, "its METADATA has no Version: header")
    return "".join(lines), requires_python


def rewrite_wheel(
    source: Path, key: WheelKey, destination_dir: Path, *, strip: str | None
) -> RewrittenWheel:
    """Write ``source`` relabelled with ``key`` into ``destination_dir``; return what was written.

    ``strip`` is the strip executable (:func:`find_strip`) or None to keep binaries as built.
    Raises WheelhouseError when ``source`` is not a wheel of ``key``'s package and version."""
    try:
        name, version, build, tags = parse_wheel_filename(source.name)
    except InvalidWheelFilename as exc:
        raise _bad_wheel(source, f"not a wheel file name ({exc})") from None
    if name != canonicalize_name(key.package):
        raise _bad_wheel(source, f"is a wheel of {name!r}, but the key is for {key.package!r}")
    if Version(version.public) != Version(key.version):
        raise _bad_wheel(source, f"is version {version}, but the key says {key.version}")
    if not any(t.platform in (key.platform, "any") for t in tags):
        raise _bad_wheel(source, f"its platform tags do not include the key's {key.platform!r}")
    if not any(t.interpreter == key.python_tag or t.interpreter.startswith("py") for t in tags):
        raise _bad_wheel(source, f"its Python tags do not include the key's {key.python_tag!r}")

    parts = source.name[: -len(".whl")].split("-")
    name_part, tag_part = parts[0], "-".join(parts[-3:])
    new_version = key.labelled_version
    build_part = f"-{parts[2]}" if build else ""
    filename = f"{name_part}-{new_version}{build_part}-{tag_part}.whl"

    try:
        archive = zipfile.ZipFile(source)
    except (OSError, zipfile.BadZipFile) as exc:
        raise _bad_wheel(source, f"cannot be read as a zip archive ({exc})") from None
    with archive:
        infos = archive.infolist()
        for info in infos:
            member = info.filename
            if member.startswith("/") or "\\" in member or ".." in member.split("/"):
                raise _bad_wheel(source, f"has an unsafe member path {member!r}")
        tops = {info.filename.split("/", 1)[0] for info in infos if "/" in info.filename}
        dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
        if len(dist_infos) != 1:
            raise _bad_wheel(source, f"has {len(dist_infos)} .dist-info folders (expected 1)")
        old_dist_info = dist_infos[0]
        old_stem = old_dist_info[: -len(".dist-info")]
        dist_name = old_stem.rpartition("-")[0]
        if canonicalize_name(dist_name) != name:
            raise _bad_wheel(source, f"its {old_dist_info} does not match its file name")
        new_stem = f"{dist_name}-{new_version}"
        renames = {
            f"{old_stem}.dist-info": f"{new_stem}.dist-info",
            f"{old_stem}.data": f"{new_stem}.data",
        }
        record_name = f"{new_stem}.dist-info/RECORD"
        metadata_name = f"{old_stem}.dist-info/METADATA"
        if metadata_name not in archive.namelist():
            raise _bad_wheel(source, f"has no {metadata_name}")

        requires_python: str | None = None
        stripped: list[str] = []
        records: list[tuple[str, str, str]] = []
        target = destination_dir / filename
        try:
            with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as out:
                for info in infos:
                    top, slash, rest = info.filename.partition("/")
                    new_name = f"{renames.get(top, top)}{slash}{rest}"
                    if info.is_dir():
                        out.writestr(_info_like(info, new_name), b"")
                        continue
                    if top == old_dist_info and rest in ("RECORD", *_RECORD_SIGNATURES, KEY_FILE):
                        continue  # regenerated below (a wheel relabelled again gets its new key)
                    data = archive.read(info)
                    if info.filename == metadata_name:
                        text, requires_python = _rewrite_metadata(
                            data.decode("utf-8"), new_version, source
                        )
                        data = text.encode("utf-8")
                    elif (
                        strip
                        and _SHARED_OBJECT.search(info.filename)
                        and data.startswith(_ELF_MAGIC)
                    ):
                        smaller = _strip_debug(data, strip, info.filename)
                        if smaller is not None:
                            data = smaller
                            stripped.append(new_name)
                    out.writestr(_info_like(info, new_name), data)
                    records.append((new_name, _record_hash(data), str(len(data))))
                key_name = f"{new_stem}.dist-info/{KEY_FILE}"
                key_data = key_document(key).encode("utf-8")
                key_info = zipfile.ZipInfo(
                    key_name, date_time=infos[0].date_time if infos else (1980, 1, 1, 0, 0, 0)
                )
                key_info.external_attr = 0o644 << 16
                out.writestr(key_info, key_data, zipfile.ZIP_DEFLATED)
                records.append((key_name, _record_hash(key_data), str(len(key_data))))
                buffer = io.StringIO()
                writer = csv.writer(buffer, lineterminator="\n")
                writer.writerows(records)
                writer.writerow((record_name, "", ""))
                record_info = zipfile.ZipInfo(
                    record_name, date_time=infos[0].date_time if infos else (1980, 1, 1, 0, 0, 0)
                )
                record_info.external_attr = 0o644 << 16
                out.writestr(record_info, buffer.getvalue().encode("utf-8"), zipfile.ZIP_DEFLATED)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, UnicodeDecodeError) as exc:
            raise _bad_wheel(source, f"cannot be rewritten ({exc})") from None
    return RewrittenWheel(
        filename=filename,
        version=new_version,
        requires_python=requires_python,
        stripped=tuple(stripped),
        original_name=source.name,
        original_size=os.path.getsize(source),
    )


def _info_like(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
    """A ZipInfo for ``name`` keeping ``info``'s date and permissions, compressed."""
    new = zipfile.ZipInfo(name, date_time=info.date_time)
    new.external_attr = info.external_attr
    new.compress_type = zipfile.ZIP_STORED if info.is_dir() else zipfile.ZIP_DEFLATED
    new.create_system = info.create_system
    return new
