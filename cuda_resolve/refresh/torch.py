"""``cuda-resolve index refresh torch``: re-derive torch release facts from the real indexes.

From PyPI's JSON API (``/pypi/torch/json``: every release and its files) and each release's
wheel metadata: the PEP 658 ``<wheel>.metadata`` file where the index serves one, else the
wheel's ``*.dist-info/METADATA`` read by HTTP range requests (never the multi-GB wheel), we
re-derive per release:

- ``python``: the CPython versions of its wheel tags (``3.13t`` = free-threaded), all platforms;
- ``requires_python``: the ``Requires-Python`` of its metadata;
- ``pypi_default`` and ``pypi_cuda_runtime``: the CUDA variant of PyPI's Linux x86_64 wheel, from
  its ``Requires-Dist`` pin (``nvidia-cuda-runtime-cu12==12.4.127`` -> cu124, ``cuda-toolkit[...]
  ==13.0.2`` -> cu130); without a pin (CUDA bundled, before 1.13) from ``torch/version.py``;
- ``pypi_linux_aarch64``: the same for the Linux aarch64 wheel.

When the PyTorch wheel index is reachable, its ``torch`` page gives the variants published per
release; when it is not, that is reported and the rest continues. Facts not re-derived here
(arch lists, C++ ABI, torchvision pairing) are carried over from the current index. Answers of
the wrong shape (a captive portal's login page, other JSON) are errors and never index data.

What was read is reused: the JSON document and the page are revalidated with their ETag /
Last-Modified (an unchanged answer costs one 304), and what each wheel's metadata said is kept
by file name and sha256 (:class:`ReadingCache`), so a second refresh reads no wheel again.

The result is compared with the current index (what changed is listed) and written as an overlay
``torch.toml`` (docs/index-format.md): one ``[[torch]]`` table per release whose re-derived facts
differ from the shipped index, so later shipped updates are not masked for the others.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from email.parser import HeaderParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .._frozen import frozen, replace
from ..errors import UsageError
from ..index.model import Index, TorchRelease, TorchVariant
from ..net.client import HttpClient
from ..net.errors import FetchError
from ..net.pages import file_name, page_links
from ..net.remote_zip import RemoteZip
from ..versions import CudaVersion, same_version
from ._readings import ReadingCache
from .common import (
    UNREACHABLE_KINDS,
    Change,
    Progress,
    Unreachable,
    python_versions,
    variant_order,
    wheel_platform,
    write_overlay_file,
    wrong_shape,
)

__all__ = [
    "PYPI_TORCH_JSON",
    "PYTORCH_TORCH_PAGE",
    "SOURCE_KEY",
    "ReleaseFacts",
    "TorchRefresh",
    "WheelReading",
    "apply_facts",
    "compare",
    "cuda_pin",
    "derive_torch",
    "overlay_document",
    "parse_index_page",
    "refresh_torch",
    "variant_from_version_py",
]

PYPI_TORCH_JSON = "https://pypi.org/pypi/torch/json"
PYTORCH_TORCH_PAGE = "https://download.pytorch.org/whl/torch/"
DEFAULT_INDEX_URL = "https://download.pytorch.org/whl/{variant}"
SOURCE_KEY = "cuda-resolve-refresh"
#: The index covers torch from this release on.
FIRST_RELEASE = Version("1.8.0")
#: Metadata of a published file never changes: cache it for a long time.
METADATA_TTL = 30 * 24 * 3600.0
_RUNTIME_NAMES = re.compile(r"^(nvidia-cuda-runtime(-cu\d+)?|cuda-toolkit)$")
_VARIANT = re.compile(r"^(cpu|cu\d{2,3})$")
_FIELDS = (
    "python",
    "requires_python",
    "pypi_default",
    "pypi_cuda_runtime",
    "pypi_linux_aarch64",
    "variants",
)


# -- facts ------------------------------------------------------------------------------------


@frozen
class WheelReading:
    """What one wheel's metadata says about its CUDA build."""

    filename: str
    url: str
    platform: str  # "linux_x86_64" | "linux_aarch64"
    variant: str | None  # "cu124", "cpu"; None when it could not be told
    cuda_runtime: str | None  # "12.4.127", "bundled", None for cpu or unknown
    requires_python: str | None
    evidence: str  # how it was read, for the report


@frozen
class ReleaseFacts:
    version: Version
    python: tuple[str, ...]
    requires_python: str | None
    pypi_default: str | None
    pypi_cuda_runtime: str | None
    pypi_linux_aarch64: str | None  # None: no aarch64 wheel (see has_aarch64) or unknown
    has_aarch64: bool
    index_variants: tuple[str, ...] | None  # from the PyTorch index page; None: not read
    readings: tuple[WheelReading, ...] = ()
    problems: tuple[str, ...] = ()


@frozen
class TorchRefresh:
    facts: tuple[ReleaseFacts, ...]
    changes: tuple[Change, ...]
    unreachable: tuple[Unreachable, ...]
    overlay: Path | None  # the file written (None on a dry run or when nothing differs)
    overlay_releases: tuple[str, ...]  # releases the overlay holds
    document: str  # the overlay's TOML text
    file_name: str = "torch.toml"  # relative to the overlay directory


# -- pure helpers -----------------------------------------------------------------------------


def _python_of(filename: str) -> str:
    versions = [v for v in python_versions([filename]) if not v.endswith("t")]
    return versions[0] if versions else "3.12"


def cuda_pin(
    requires_dist: Iterable[str], *, platform: str, python: str
) -> tuple[str, str, str] | None:
    """The CUDA runtime pin among ``Requires-Dist`` lines that apply on ``platform``:
    (variant, runtime version, the requirement) or None."""
    machine = "x86_64" if platform == "linux_x86_64" else "aarch64"
    environment = {
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": machine,
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    for line in requires_dist:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if not _RUNTIME_NAMES.match(requirement.name.lower()):
            continue
        try:
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
        except InvalidMarker:
            continue
        pinned = [spec.version for spec in requirement.specifier if spec.operator in ("==", "===")]
        if not pinned:
            continue
        try:
            cuda = CudaVersion.parse(".".join(pinned[0].split(".")[:2]))
        except ValueError:
            continue
        return cuda.variant, pinned[0], line.strip()
    return None


def variant_from_version_py(text: str) -> str | None:
    """``cuda = '10.2'`` (or ``cuda: Optional[str] = '13.2'``) -> "cu102"; ``None`` -> "cpu"."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(value, ast.Constant):
            if value.value is None:
                return "cpu"
            try:
                return CudaVersion.parse(str(value.value)).variant
            except ValueError:
                return None
    return None


def parse_index_page(text: str) -> dict[Version, tuple[str, ...]]:
    """A PEP 503 page of torch wheels -> the variants with a Linux x86_64 wheel, per release."""
    found: dict[Version, set[str]] = {}
    for href in page_links(text):
        name = file_name(href)
        if not name.endswith(".whl") or wheel_platform(name) != "linux_x86_64":
            continue
        try:
            _, version, _, _ = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        label = version.local or ""
        if not _VARIANT.match(label):
            continue
        found.setdefault(Version(version.public), set()).add(label)
    return {v: tuple(sorted(labels, key=variant_order)) for v, labels in found.items()}


def _metadata_fields(text: str) -> tuple[str | None, list[str]]:
    message = HeaderParser().parsestr(text)
    return message.get("Requires-Python"), list(message.get_all("Requires-Dist") or [])


# -- reading PyPI ----------------------------------------------------------------------------


def _read_metadata(
    client: HttpClient, url: str, record: Mapping[str, Any]
) -> tuple[str, str, RemoteZip | None]:
    """(METADATA text, how, the RemoteZip if one was opened): PEP 658 first, then range reads."""
    declared = record.get("core-metadata") or record.get("data-dist-info-metadata")
    try:
        response = client.get(url + ".metadata", ttl=METADATA_TTL)
        if isinstance(declared, dict) and declared.get("sha256"):
            actual = hashlib.sha256(response.content).hexdigest()
            if actual != str(declared["sha256"]).lower():
                raise FetchError(
                    f"sha256 mismatch for {url}.metadata: expected {declared['sha256']}, "
                    f"got {actual}",
                    kind="integrity",
                    url=url + ".metadata",
                )
        return _checked_metadata(response.text, url + ".metadata"), "PEP 658 metadata file", None
    except FetchError as exc:
        if exc.status != 404:
            raise
    remote = RemoteZip(client, url)
    member = remote.find(".dist-info/METADATA")
    if member is None:
        raise FetchError(f"{url} has no .dist-info/METADATA", kind="content", url=url)
    text = remote.read(member).decode("utf-8", "replace")
    return _checked_metadata(text, url), "METADATA read from the wheel by range requests", remote


def _checked_metadata(text: str, url: str) -> str:
    """``text`` if it is core metadata of torch (``Metadata-Version`` and ``Name: torch``)."""
    message = HeaderParser().parsestr(text[: 1 << 20])
    name = (message.get("Name") or "").strip().lower()
    if not message.get("Metadata-Version") or name != "torch":
        found = f"Name: {name}" if name else repr(text[:60])
        raise wrong_shape(url, "the core metadata of a torch wheel", found)
    return text


def _read_wheel(
    client: HttpClient,
    record: Mapping[str, Any],
    base: str,
    platform: str,
    readings: ReadingCache | None = None,
) -> WheelReading:
    filename = str(record["filename"])
    url = urljoin(base, str(record["url"]))
    digest = _sha256_of(record)
    if readings is not None and digest is not None:
        known = readings.get(filename, digest)
        if known is not None:
            return WheelReading(
                filename=filename,
                url=url,
                platform=str(known["platform"]),
                variant=known["variant"],
                cuda_runtime=known["cuda_runtime"],
                requires_python=known["requires_python"],
                evidence=str(known["evidence"]),
            )
    reading = _read_wheel_uncached(client, filename, url, record, platform)
    if readings is not None and digest is not None:
        readings.put(filename, digest, reading)
    return reading


def _sha256_of(record: Mapping[str, Any]) -> str | None:
    digests = record.get("digests")
    value = digests.get("sha256") if isinstance(digests, Mapping) else None
    return (
        value.lower()
        if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{64}", value)
        else None
    )


def _read_wheel_uncached(
    client: HttpClient, filename: str, url: str, record: Mapping[str, Any], platform: str
) -> WheelReading:
    text, how, remote = _read_metadata(client, url, record)
    requires_python, requires = _metadata_fields(text)
    pin = cuda_pin(requires, platform=platform, python=_python_of(filename))
    if pin is not None:
        variant, runtime, line = pin
        return WheelReading(
            filename=filename,
            url=url,
            platform=platform,
            variant=variant,
            cuda_runtime=runtime,
            requires_python=requires_python,
            evidence=f"{how}: Requires-Dist {line}",
        )
    remote = remote or RemoteZip(client, url)
    source = remote.read("torch/version.py").decode("utf-8", "replace")
    built = variant_from_version_py(source)
    return WheelReading(
        filename=filename,
        url=url,
        platform=platform,
        variant=built,
        cuda_runtime="bundled" if built not in (None, "cpu") else None,
        requires_python=requires_python,
        evidence=f"{how}: no CUDA runtime pin; torch/version.py read by range requests: "
        f"{built or 'unreadable'}",
    )


def _pick(records: Sequence[Mapping[str, Any]], platform: str) -> Mapping[str, Any] | None:
    """The wheel to read for a platform: the newest regular CPython build."""
    candidates = [
        r
        for r in records
        if str(r.get("filename", "")).endswith(".whl")
        and wheel_platform(str(r["filename"])) == platform
    ]
    regular = [
        r
        for r in candidates
        if python_versions([str(r["filename"])])
        and not python_versions([str(r["filename"])])[0].endswith("t")
    ]
    pool = regular or candidates
    if not pool:
        return None
    return max(pool, key=lambda r: tuple(int(x) for x in _python_of(str(r["filename"])).split(".")))


def _select_versions(
    releases: Mapping[str, Sequence[Mapping[str, Any]]], wanted: Sequence[str] | None
) -> list[Version]:
    available: dict[Version, str] = {}
    for text, files in releases.items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if files:
            available[version] = text
    if wanted:
        chosen = []
        for text in wanted:
            try:
                version = Version(text)
            except InvalidVersion:
                raise UsageError(
                    f"--versions {text}: not a version", hint="give torch releases such as 2.5.1"
                ) from None
            if version not in available:
                near = (
                    ", ".join(
                        str(v) for v in sorted(available) if v.release[:2] == version.release[:2]
                    )
                    or "none"
                )
                raise UsageError(
                    f"torch {text} is not on PyPI", hint=f"releases of that series on PyPI: {near}"
                )
            chosen.append(version)
        return sorted(set(chosen))
    return sorted(
        v for v in available if v >= FIRST_RELEASE and not v.is_prerelease and not v.is_devrelease
    )


def derive_torch(
    client: HttpClient,
    *,
    versions: Sequence[str] | None = None,
    pypi_json: str = PYPI_TORCH_JSON,
    pytorch_page: str | None = PYTORCH_TORCH_PAGE,
    progress: Progress | None = None,
    readings: ReadingCache | None = None,
) -> tuple[tuple[ReleaseFacts, ...], tuple[Unreachable, ...]]:
    """Read the facts of ``versions`` (default: every final release from 1.8.0) from PyPI, and
    the variants from the PyTorch index page when it answers. PyPI failing is an error; the
    PyTorch page failing to answer is recorded in the second element and the rest goes on. An
    answer of the wrong shape (a login page, other JSON) is an error naming the URL.

    ``readings`` remembers what each wheel's metadata said, keyed by its file name and sha256
    (a published file never changes): a second refresh reads no wheel again."""
    project = client.get(pypi_json, accept="application/json", ttl=0)  # revalidated (ETag)
    releases = _checked_releases(project.json(), project.fetched_url)
    chosen = _select_versions(releases, versions)
    unreachable: list[Unreachable] = []
    page: dict[Version, tuple[str, ...]] | None = None
    if pytorch_page is not None:
        try:
            text = client.get_text(pytorch_page, accept="text/html", ttl=0)
        except FetchError as exc:
            if exc.kind not in UNREACHABLE_KINDS and exc.status is None:
                raise  # an answer, but not a page (too large, not text)
            unreachable.append(Unreachable(url=pytorch_page, error=exc.message))
        else:
            page = parse_index_page(text)
            if not page:
                raise wrong_shape(
                    client.resolve(pytorch_page),
                    "a PEP 503 page of torch wheels",
                    "no torch wheel links in it",
                )
    facts = []
    for position, version in enumerate(chosen, 1):
        if progress is not None:
            progress(f"torch {version}", position, len(chosen))
        facts.append(
            _release_facts(
                client,
                version,
                releases[_key(releases, version)],
                project.final_url,
                page,
                readings,
            )
        )
    return tuple(facts), tuple(unreachable)


def _checked_releases(data: object, url: str) -> dict[str, list[Mapping[str, Any]]]:
    """PyPI's ``releases`` mapping, every file record checked: wrong shapes are errors naming
    the URL and the key, never index data."""
    if not isinstance(data, dict) or not isinstance(data.get("releases"), dict):
        found = f"a JSON {type(data).__name__}" + (
            " without a 'releases' object" if isinstance(data, dict) else ""
        )
        raise wrong_shape(url, "PyPI's JSON API document for torch", found)
    info = data.get("info")
    if (
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and info["name"].lower() != "torch"
    ):
        raise wrong_shape(
            url, "PyPI's JSON API document for torch", f"the project {info['name']!r}"
        )
    out: dict[str, list[Mapping[str, Any]]] = {}
    for version, files in data["releases"].items():
        if not isinstance(files, list):
            raise wrong_shape(
                url, "PyPI's JSON API document", f"releases[{version!r}] is not a list"
            )
        for position, record in enumerate(files):
            where = f"releases[{version!r}][{position}]"
            if not isinstance(record, dict):
                raise wrong_shape(url, "PyPI's JSON API document", f"{where} is not an object")
            for key in ("filename", "url"):
                if not isinstance(record.get(key), str) or not record[key]:
                    raise wrong_shape(
                        url, "PyPI's JSON API document", f"{where}.{key} is not a string"
                    )
            target = urljoin(url, record["url"])
            scheme = urlsplit(target).scheme
            if not (scheme == "https" or (scheme == "http" and _loopback(target))):
                raise wrong_shape(
                    url, "PyPI's JSON API document", f"{where}.url is not an https URL"
                )
            if record.get("requires_python") is not None and not isinstance(
                record["requires_python"], str
            ):
                raise wrong_shape(
                    url, "PyPI's JSON API document", f"{where}.requires_python is not a string"
                )
        out[str(version)] = files
    return out


def _loopback(url: str) -> bool:
    from ..config import is_loopback_url

    return is_loopback_url(url)


def _key(releases: Mapping[str, Any], version: Version) -> str:
    return next(text for text in releases if same_version(text, str(version)))


def _release_facts(
    client: HttpClient,
    version: Version,
    files: Sequence[Mapping[str, Any]],
    base: str,
    page: dict[Version, tuple[str, ...]] | None,
    cache: ReadingCache | None = None,
) -> ReleaseFacts:
    live = [f for f in files if not f.get("yanked")] or list(files)
    names = [str(f.get("filename", "")) for f in live]
    readings: list[WheelReading] = []
    problems: list[str] = []
    by_platform: dict[str, WheelReading] = {}
    for platform in ("linux_x86_64", "linux_aarch64"):
        record = _pick(live, platform)
        if record is None:
            continue
        try:
            reading = _read_wheel(client, record, base, platform, cache)
        except FetchError as exc:
            problems.append(f"{record['filename']}: {exc.message}")
            continue
        readings.append(reading)
        by_platform[platform] = reading
    specifiers = {str(f["requires_python"]) for f in live if f.get("requires_python")}
    requires_python = next((r.requires_python for r in readings if r.requires_python), None)
    if requires_python is None and len(specifiers) == 1:
        requires_python = specifiers.pop()
    x86 = by_platform.get("linux_x86_64")
    arm = by_platform.get("linux_aarch64")
    has_aarch64 = _pick(live, "linux_aarch64") is not None
    return ReleaseFacts(
        version=version,
        python=python_versions(names),
        requires_python=requires_python,
        pypi_default=x86.variant if x86 else None,
        pypi_cuda_runtime=x86.cuda_runtime if x86 else None,
        pypi_linux_aarch64=arm.variant if arm else None,
        has_aarch64=has_aarch64,
        # a release the page does not list at all says nothing about its variants
        index_variants=None if page is None else page.get(version),
        readings=tuple(readings),
        problems=tuple(problems),
    )


# -- comparing and updating -------------------------------------------------------------------


def _default_of(release: TorchRelease) -> str | None:
    return next((v.name for v in release.variants if v.pypi_default), None)


def _spec(text: str | None) -> SpecifierSet | None:
    if text is None:
        return None
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def apply_facts(current: TorchRelease | None, facts: ReleaseFacts, *, today: str) -> TorchRelease:
    """The release entry after the refresh: re-derived facts replace the current ones; arch
    lists, ABI, pairing and notes are kept. Unknown facts (a failed reading) keep the current
    value. A new release gets only what was derived, its arch lists marked unverified."""
    python = facts.python or (current.python if current else ())
    requires = _spec(facts.requires_python) or (
        current.requires_python if current else SpecifierSet()
    )
    default = facts.pypi_default or (_default_of(current) if current else None)
    runtime = (
        facts.pypi_cuda_runtime
        if facts.pypi_default
        else (current.pypi_cuda_runtime if current else None)
    )
    if facts.pypi_linux_aarch64 is not None or (not facts.has_aarch64 and not facts.problems):
        aarch64 = facts.pypi_linux_aarch64
    else:
        aarch64 = current.pypi_linux_aarch64 if current else None

    old_variants = {v.name: v for v in current.variants} if current else {}
    names = list(old_variants)
    if facts.index_variants is not None:
        names = [n for n in names if n in facts.index_variants]
        names += [n for n in facts.index_variants if n not in names]
    if default is not None and default not in names:
        names.append(default)
    confirmed = set(facts.index_variants or ())
    variants: list[TorchVariant] = []
    for name in sorted(names, key=variant_order):
        old = old_variants.get(name)
        if old is not None:
            flags = tuple(
                f
                for f in old.unverified
                if not (f == "exists" and (name in confirmed or name == facts.pypi_default))
            )
            variants.append(
                replace(old, pypi_default=name == default, unverified=flags, verified=not flags)
            )
        else:
            cuda = None if name == "cpu" else CudaVersion.parse(name)
            flags = ("arch_list",) if cuda is not None else ()
            if name not in confirmed and name != facts.pypi_default:
                flags = ("exists", *flags)
            variants.append(
                TorchVariant(
                    name=name,
                    cuda=cuda,
                    arch_list=(),
                    index_url=DEFAULT_INDEX_URL.format(variant=name),
                    pypi_default=name == default,
                    verified=not flags,
                    unverified=flags,
                )
            )
    derived = [
        "python",
        "requires_python",
        "pypi_default",
        "pypi_cuda_runtime",
        "pypi_linux_aarch64",
    ]
    unverified = tuple(
        k for k in (current.unverified if current else ()) if k.split("[")[0] not in derived
    )
    read = (
        "; ".join(r.evidence.split(":")[0] + f" of {r.filename}" for r in facts.readings)
        or "PyPI JSON"
    )
    note = f"[{SOURCE_KEY}] {today}: {read}"
    if facts.index_variants is not None:
        note += "; variants from the PyTorch index page"
    source = f"{note}; {current.source}" if current and current.source else note
    if current is None:
        return TorchRelease(
            version=facts.version,
            python=python,
            requires_python=requires,
            variants=tuple(variants),
            pypi_linux_aarch64=aarch64,
            pypi_cuda_runtime=runtime,
            source=source,
            notes=f"added by `cuda-resolve index refresh` on {today}; arch lists, C++ ABI and "
            "torchvision pairing not known",
        )
    return replace(
        current,
        python=python,
        requires_python=requires,
        variants=tuple(variants),
        pypi_linux_aarch64=aarch64,
        pypi_cuda_runtime=runtime,
        source=source,
        unverified=unverified,
    )


def _facts_view(release: TorchRelease) -> dict[str, str | None]:
    return {
        "python": ", ".join(release.python),
        "requires_python": str(release.requires_python),
        "pypi_default": _default_of(release),
        "pypi_cuda_runtime": release.pypi_cuda_runtime,
        "pypi_linux_aarch64": release.pypi_linux_aarch64,
        "variants": " ".join(
            v.name for v in sorted(release.variants, key=lambda v: variant_order(v.name))
        ),
    }


def _same_facts(a: TorchRelease, b: TorchRelease) -> bool:
    if _facts_view(a) != _facts_view(b):
        return False
    return {v.name: v.arch_list for v in a.variants} == {v.name: v.arch_list for v in b.variants}


def compare(index: Index, updated: Iterable[TorchRelease]) -> tuple[Change, ...]:
    """What differs between the index and the refreshed entries, field by field."""
    changes: list[Change] = []
    for release in updated:
        current = index.torch_release(str(release.version))
        view = _facts_view(release)
        if current is None or current.version != release.version:
            summary = f"PyPI default {view['pypi_default'] or '?'}, Python {view['python'] or '?'}"
            changes.append(
                Change(version=str(release.version), key="release", old=None, new=summary)
            )
            continue
        old = _facts_view(current)
        for key in _FIELDS:
            if key == "requires_python":
                if _spec(old[key]) == _spec(view[key]):
                    continue
            elif old[key] == view[key]:
                continue
            changes.append(
                Change(version=str(release.version), key=key, old=old[key], new=view[key])
            )
    return tuple(changes)


# -- the overlay file -------------------------------------------------------------------------


def _release_table(release: TorchRelease) -> dict[str, Any]:
    version = str(release.version)
    table: dict[str, Any] = {
        "series": ".".join(str(p) for p in release.version.release[:2]),
        "releases": [version],
        "python": list(release.python),
        "requires_python": str(release.requires_python),
    }
    default = _default_of(release)
    if default is not None:
        table["pypi_default"] = default
    if release.pypi_cuda_runtime is not None:
        table["pypi_cuda_runtime"] = release.pypi_cuda_runtime
    if release.pypi_linux_aarch64 is not None:
        table["pypi_linux_aarch64"] = release.pypi_linux_aarch64
    if release.cxx11_abi is not None:
        table["cxx11_abi"] = release.cxx11_abi
    if release.torchvision:
        table["torchvision"] = {version: release.torchvision}
    if release.torchaudio:
        table["torchaudio"] = {version: release.torchaudio}
    if release.notes:
        table["notes"] = release.notes
    unverified = [k for k in release.unverified if k.split("[")[0] in table]
    if unverified:
        table["unverified"] = unverified
    table["source"] = release.source or f"[{SOURCE_KEY}]"
    variants: dict[str, Any] = {}
    for variant in release.variants:
        one: dict[str, Any] = {}
        if variant.arch_list or "arch_list" in variant.unverified:
            one["arch_list"] = ";".join(str(entry) for entry in variant.arch_list)
        if variant.index_url != DEFAULT_INDEX_URL.format(variant=variant.name):
            one["index_url"] = variant.index_url
        flags = [f for f in variant.unverified if f == "exists" or f in one]
        if flags:
            one["unverified"] = flags
        variants[variant.name] = one
    table["variants"] = variants
    return table


def overlay_document(
    releases: Sequence[TorchRelease], sources: Mapping[str, str], *, today: str
) -> str:
    """The overlay ``torch.toml``: a ``[sources]`` table defining every key the entries cite,
    and one ``[[torch]]`` table per release."""
    import tomli_w

    cited: dict[str, str] = {}
    for release in releases:
        for key in re.findall(r"\[([A-Za-z][\w.-]*)\]", release.source):
            if key in sources and key != SOURCE_KEY:
                cited[key] = sources[key]
    cited[SOURCE_KEY] = (
        f"Re-derived by `cuda-resolve index refresh` on {today} from PyPI's JSON API "
        f"({PYPI_TORCH_JSON}) and each release's wheel metadata (the PEP 658 .metadata file, else "
        "METADATA and torch/version.py read from the wheel by HTTP range requests), and the "
        "PyTorch wheel index page where it was reachable"
    )
    body = {
        "format": 1,
        "sources": dict(sorted(cited.items())),
        "torch": [_release_table(r) for r in sorted(releases, key=lambda r: r.version)],
    }
    header = (
        "# torch releases re-derived by `cuda-resolve index refresh` (an index overlay; format:\n"
        "# docs/index-format.md). Each [[torch]] table replaces the shipped entry of its release.\n"
        "# Regenerate rather than edit: the command rewrites this file.\n"
    )
    return header + tomli_w.dumps(body)


def _existing_overlay(directory: Path) -> dict[Version, TorchRelease]:
    """The releases an existing overlay ``torch.toml`` in ``directory`` defines."""
    from ..index.load import load_index

    target = directory / "torch.toml"
    if not target.is_file():
        return {}
    merged = load_index([directory], include_shipped=True, include_user=False)
    here = str(target)
    return {r.version: r for r in merged.torch if merged.origin(f"torch {r.version}") == here}


def refresh_torch(
    client: HttpClient,
    *,
    index: Index,
    shipped: Index,
    output_dir: Path | None,
    versions: Sequence[str] | None = None,
    pypi_json: str = PYPI_TORCH_JSON,
    pytorch_page: str | None = PYTORCH_TORCH_PAGE,
    dry_run: bool = False,
    today: str | None = None,
    progress: Progress | None = None,
    readings: ReadingCache | None = None,
) -> TorchRefresh:
    """Derive, compare with ``index`` (what is in use now), and write the overlay into
    ``output_dir`` (unless ``dry_run``): the entries whose facts differ from ``shipped``, plus
    the entries an existing overlay there holds for releases not refreshed now."""
    date = today or datetime.date.today().isoformat()
    facts, unreachable = derive_torch(
        client,
        versions=versions,
        pypi_json=pypi_json,
        pytorch_page=pytorch_page,
        progress=progress,
        readings=readings,
    )
    updated = [
        apply_facts(
            index.torch_release(str(f.version)) if _has(index, f.version) else None, f, today=date
        )
        for f in facts
    ]
    changes = compare(index, updated)
    keep: dict[Version, TorchRelease] = {}
    if output_dir is not None:
        keep = _existing_overlay(output_dir)
    refreshed = {r.version for r in updated}
    overlay = {v: r for v, r in keep.items() if v not in refreshed}
    for release in updated:
        base = (
            shipped.torch_release(str(release.version)) if _has(shipped, release.version) else None
        )
        if base is None or not _same_facts(base, release):
            overlay[release.version] = release
    entries = [overlay[v] for v in sorted(overlay)]
    sources = dict(index.sources)
    document = overlay_document(entries, sources, today=date) if entries else ""
    written: Path | None = None
    if output_dir is not None and not dry_run and entries:
        written = _write_overlay(output_dir, document)
    elif (
        output_dir is not None
        and not dry_run
        and not entries
        and (output_dir / "torch.toml").is_file()
    ):
        (output_dir / "torch.toml").unlink()  # nothing differs from the shipped index any more
    return TorchRefresh(
        facts=facts,
        changes=changes,
        unreachable=unreachable,
        overlay=written,
        overlay_releases=tuple(str(v) for v in sorted(overlay)),
        document=document,
    )


def _has(index: Index, version: Version) -> bool:
    release = index.torch_release(str(version))
    return release is not None and release.version == version


def _write_overlay(directory: Path, document: str) -> Path:
    return write_overlay_file(directory, Path("torch.toml"), document)
