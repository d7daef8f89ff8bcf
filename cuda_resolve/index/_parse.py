"""TOML tables of one index directory -> model objects (a :class:`Layer`); see docs/index-format.md.

Each function reads one kind of table through :class:`cuda_resolve._toml.Table`, so every error
names the file, the dotted key path and the bad value, and unknown keys are errors. Merging
layers and locating files is :mod:`.load`'s job; :func:`cross_check` holds the checks that need
the merged index (``cuda-resolve index validate``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._bounded import read_text
from .._docs import doc_path
from .._toml import Table, parse_toml_text
from ..errors import IndexDataError
from ..versions import ComputeCapability, CudaVersion, DriverVersion
from .model import (
    ArchEntry,
    CudaFamily,
    ExtensionWheels,
    Index,
    Package,
    Patch,
    Recipe,
    SmokeTest,
    SourceArchive,
    ToolkitFacts,
    TorchRelease,
    TorchVariant,
    parse_arch_entry,
)
from .urls import pattern_problem, repository_problem, url_problem

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

__all__ = ["FORMAT_VERSION", "Layer", "PackageDraft", "cross_check", "parse_file"]

#: The index format this code reads; each file may say ``format = 1``.
FORMAT_VERSION = 1
DEFAULT_INDEX_URL = "https://download.pytorch.org/whl/{variant}"
#: Placeholders of find_links / wheel_url patterns (expanded by :mod:`.urls`).
LINK_FIELDS = frozenset(
    {"torch", "torch_minor", "torch_nodot", "variant", "cuda", "cuda_nodot", "python_nodot"}
)
WHEEL_FIELDS = LINK_FIELDS | {"version", "python_tag", "abi_tag", "platform"}

_HINT = f"see {doc_path('index-format.md')}; `cuda-resolve index validate DIR` lists every problem"
_KEY = re.compile(r"[A-Za-z0-9][\w.-]*")
_CITATION = re.compile(r"\[([A-Za-z][\w.-]*)\]")
_UNVERIFIED = re.compile(r"([A-Za-z_]\w*)(?:\[([^\]]+)\])?")
_PYTHON = re.compile(r"\d+\.\d+t?")
_VARIANT = re.compile(r"cpu|cu\d{2,3}")
_ARCH_ENTRY = re.compile(r"\d{1,2}\.\d[af]?(?:\+PTX)?")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REVISION = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REPOSITORY = re.compile(r"(?:https?|ssh|git|file)://\S+|git@[\w.-]+:\S+")
_PLATFORM = re.compile(r"[a-z0-9_]+")


@cache
def _arch_entry(text: str) -> ArchEntry:
    return parse_arch_entry(text)


@cache
def _capability(text: str) -> ComputeCapability:
    return ComputeCapability.parse(text)


# -- the result of reading one directory ------------------------------------------------------


@dataclass
class PackageDraft:
    """One package file's contents, before overlays are merged into it."""

    fields: dict[str, Any]  # the [package] keys this file set, "name" always
    wheels: dict[Version, ExtensionWheels]
    recipes: dict[str, Recipe]
    origin: str

    @property
    def name(self) -> str:
        return str(self.fields["name"])

    @property
    def has_facts(self) -> bool:
        return len(self.fields) > 1

    def merged_with(self, later: PackageDraft) -> PackageDraft:
        """``later`` on top of this: its [package] keys, wheel versions and recipes win."""
        fields = {**self.fields, **{k: v for k, v in later.fields.items() if k != "name"}}
        return PackageDraft(
            fields=fields,
            wheels={**self.wheels, **later.wheels},
            recipes={**self.recipes, **later.recipes},
            origin=later.origin if later.has_facts else self.origin,
        )

    def build(self) -> Package:
        f = self.fields
        return Package(
            name=self.name,
            import_name=f.get("import_name", self.name.replace("-", "_")),
            description=f.get("description", ""),
            find_links=f.get("find_links"),
            wheel_url=f.get("wheel_url"),
            placeholder_versions=f.get("placeholder_versions", ()),
            wheels=tuple(self.wheels[v] for v in sorted(self.wheels)),
            recipes=tuple(self.recipes.values()),
            requires=f.get("requires", ()),
            source=f.get("source", ""),
            notes=f.get("notes", ""),
        )


@dataclass
class Layer:
    """Everything one index directory defines, keyed the way overlays replace entries."""

    families: dict[int, CudaFamily] = field(default_factory=dict)
    toolkits: dict[CudaVersion, ToolkitFacts] = field(default_factory=dict)
    torch: dict[Version, TorchRelease] = field(default_factory=dict)
    packages: dict[str, PackageDraft] = field(default_factory=dict)  # canonical name -> draft
    sources: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    citations: list[tuple[str, str]] = field(default_factory=list)  # (key, "file: path.source")


_READ_LIMIT = 32 * 1024 * 1024  # an overlay written by `index refresh` is far smaller


def parse_file(kind: str, file: Traversable, layer: Layer) -> None:
    """Read one file (``kind`` = cuda | torch | package) into ``layer``."""
    origin = str(file)
    try:  # an overlay on disk goes through the bounded reader (regular file, size cap)
        text = (
            read_text(file, limit=_READ_LIMIT)
            if isinstance(file, Path)
            else file.read_text(encoding="utf-8")
        )
    except (OSError, UnicodeDecodeError) as exc:
        raise IndexDataError(
            f"{origin}: cannot be read: {getattr(exc, 'strerror', None) or exc}", hint=_HINT
        ) from None
    top = parse_toml_text(text, origin=origin, error=IndexDataError, hint=_HINT)
    version = top.integer("format", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        from .._upgrade import upgrade_hint

        raise top.fail(
            "format",
            f"= {version}: this cuda-resolve reads index format {FORMAT_VERSION}",
            hint=f"{upgrade_hint()}, or write the file in format {FORMAT_VERSION}"
            if version > FORMAT_VERSION
            else f"write the file in format {FORMAT_VERSION}",
        )
    _sources(top, layer)
    if kind == "cuda":
        _cuda_file(top, layer)
    elif kind == "torch":
        _torch_file(top, layer)
    else:
        _package_file(top, layer)
    top.finish()


# -- shared readers ---------------------------------------------------------------------------


def _sources(top: Table, layer: Layer) -> None:
    table = top.table("sources")
    if table is None:
        return
    for key in table.keys():
        if not _KEY.fullmatch(key):
            raise table.fail(key, "citation keys are letters, digits, '.', '_' and '-'")
        text = table.string(key)
        if not text.strip():
            raise table.fail(key, "= '': a source needs a description")
        defined_in = layer.origins.get(f"source {key}")
        if defined_in is not None and layer.sources[key] != text:
            raise table.fail(key, f"is also defined, differently, in {defined_in}")
        layer.sources[key] = text
        layer.origins[f"source {key}"] = top.origin
    table.finish()


def _source(t: Table, layer: Layer, *, required: bool = True) -> str:
    text: str = t.string("source") if required else t.string("source", "")
    if required and not text.strip():
        raise t.fail("source", "= '': every table must say where its facts come from")
    layer.citations.extend((key, t.where("source")) for key in _CITATION.findall(text))
    return text


def _unverified(
    t: Table,
    *,
    extra: tuple[str, ...] = (),
    detail_ok: Callable[[str, str], bool] | None = None,
) -> tuple[str, ...]:
    """``unverified = ["key", "key[detail]"]``: each names a key of this table (or ``extra``)."""
    items: tuple[str, ...] = t.strings("unverified", ())
    for position, item in enumerate(items):
        where = f"unverified[{position}]"
        match = _UNVERIFIED.fullmatch(item)
        if match is None:
            raise t.fail(where, f"= {item!r}: expected a key name, optionally with [detail]")
        name, detail = match.groups()
        if name not in t.data and name not in extra:
            known = (
                ", ".join(sorted(k for k in t.data if k not in ("unverified", "source")))
                or "(none)"
            )
            raise t.fail(where, f"= {item!r}: this table has no key {name!r} (keys here: {known})")
        if detail is not None and (detail_ok is None or not detail_ok(name, detail)):
            raise t.fail(where, f"= {item!r}: {detail!r} does not name an element of {name!r}")
    return items


def _version(t: Table, key: str, text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise t.fail(key, f"= {text!r}: not a version number") from None


def _specifier(text: str) -> SpecifierSet:
    return SpecifierSet(text)  # InvalidSpecifier is a ValueError: Table.parsed reports it


def _python_tags(t: Table, key: str) -> tuple[str, ...]:
    tags: tuple[str, ...] = t.strings(key)
    for position, tag in enumerate(tags):
        if not _PYTHON.fullmatch(tag):
            raise t.fail(
                f"{key}[{position}]",
                f"= {tag!r}: expected a Python version such as '3.12' or '3.13t'",
            )
    if len(set(tags)) != len(tags):
        raise t.fail(key, f"= {list(tags)!r}: lists a version twice")
    return tags


def _variant_name(t: Table, key: str, name: str) -> CudaVersion | None:
    """``cpu`` -> None, ``cu124`` -> CUDA 12.4; anything else is an error at ``key``."""
    if not _VARIANT.fullmatch(name):
        raise t.fail(key, f"= {name!r}: variant names are 'cpu' or 'cuXYZ' (cu124 = CUDA 12.4)")
    if name == "cpu":
        return None
    return CudaVersion.parse(name)


def _arch_list(t: Table, key: str) -> tuple[ArchEntry, ...]:
    text: str = t.string(key, "")
    if not text.strip():
        return ()
    entries: list[ArchEntry] = []
    for part in text.split(";"):
        item = part.strip()
        if not _ARCH_ENTRY.fullmatch(item):
            raise t.fail(
                key,
                f"= {text!r}: entry {item!r} is not TORCH_CUDA_ARCH_LIST notation ('8.6', '9.0a', "
                "'12.0+PTX'; ';' between entries)",
            )
        entries.append(_arch_entry(item))
    capabilities = [entry.capability for entry in entries]
    if len(set(capabilities)) != len(capabilities):
        raise t.fail(key, f"= {text!r}: lists an architecture twice")
    return tuple(sorted(entries))


def _capabilities(t: Table, key: str, *, specific: bool) -> tuple[ComputeCapability, ...]:
    items: tuple[str, ...] = t.strings(key, ())
    result: list[ComputeCapability] = []
    for position, item in enumerate(items):
        where = f"{key}[{position}]"
        try:
            capability = _capability(item)
        except ValueError as exc:
            raise t.fail(where, f"= {item!r}: {exc}") from None
        if specific and not capability.suffix:
            raise t.fail(
                where,
                f"= {item!r}: specific_archs holds 'a'/'f' targets (sm_90a); plain ones "
                "belong in archs",
            )
        if not specific and capability.suffix:
            raise t.fail(where, f"= {item!r}: an 'a'/'f' target belongs in specific_archs")
        result.append(capability)
    if len(set(result)) != len(result):
        raise t.fail(key, "lists a target twice")
    return tuple(sorted(result))


def _positive(t: Table, key: str) -> int | None:
    value: int | None = t.integer(key, None)
    if value is not None and value <= 0:
        raise t.fail(key, f"= {value}: expected a positive version number")
    return value


def _pattern(t: Table, key: str, allowed: frozenset[str]) -> str:
    """A URL pattern, checked whole (:func:`.urls.pattern_problem`: bare placeholders, https)."""
    text: str = t.string(key)
    problem = pattern_problem(text, allowed)
    if problem is not None:
        raise t.fail(key, f"= {text!r}: {problem}")
    return text


def _url(t: Table, key: str, url: str) -> str:
    problem = url_problem(url)
    if problem is not None:
        raise t.fail(key, f"= {url!r}: {problem}")
    return url


def _requirements(t: Table, key: str) -> tuple[str, ...]:
    items: tuple[str, ...] = t.strings(key, ())
    for position, item in enumerate(items):
        try:
            Requirement(item)
        except InvalidRequirement as exc:
            raise t.fail(f"{key}[{position}]", f"= {item!r}: not a requirement: {exc}") from None
    return items


def _relative_path(t: Table, key: str, default: str | None = None) -> str:
    text: str = t.string(key) if default is None else t.string(key, default)
    if text == "" and default == "":
        return text
    parts = text.split("/")
    if not text or text.startswith("/") or "\\" in text or ".." in parts or "" in parts:
        raise t.fail(
            key, f"= {text!r}: expected a relative path with '/' separators, inside the repository"
        )
    return text


# -- cuda.toml --------------------------------------------------------------------------------


def _cuda_key(t: Table, key: str) -> CudaVersion:
    try:
        version = CudaVersion.parse(key)
    except ValueError as exc:
        raise t.fail(key, f"is not a CUDA version: {exc}") from None
    if str(version) != key:
        raise t.fail(key, f"write the CUDA version as {str(version)!r}")
    return version


def _cuda_file(top: Table, layer: Layer) -> None:
    families = top.table("family")
    if families is not None:
        for key in families.keys():
            table = families.table(key, required=True)
            assert table is not None
            if not key.isdigit():
                raise families.fail(key, 'family keys are CUDA major versions such as "12"')
            major = int(key)
            if major < 11:
                raise families.fail(
                    key,
                    "minor-version compatibility starts with CUDA 11; older toolkits need "
                    "their own driver",
                )
            family = CudaFamily(
                major=major,
                min_driver_linux=table.parsed("min_driver_linux", DriverVersion.parse),
                min_driver_windows=table.parsed("min_driver_windows", DriverVersion.parse, None),
                notes=table.string("notes", ""),
                unverified=_unverified(table),
                source=_source(table, layer),
            )
            table.finish()
            layer.families[major] = family
            layer.origins[f"family {major}"] = top.origin
        families.finish()
    toolkits = top.table("toolkit")
    if toolkits is not None:
        for key in toolkits.keys():
            table = toolkits.table(key, required=True)
            assert table is not None
            facts = ToolkitFacts(
                version=_cuda_key(toolkits, key),
                driver_linux=table.parsed("driver_linux", DriverVersion.parse, None),
                driver_windows=table.parsed("driver_windows", DriverVersion.parse, None),
                archs=_capabilities(table, "archs", specific=False),
                specific_archs=_capabilities(table, "specific_archs", specific=True),
                gcc_max=_positive(table, "gcc_max"),
                clang_max=_positive(table, "clang_max"),
                torch_gcc_max_exclusive=_positive(table, "torch_gcc_max_exclusive"),
                torch_clang_max_exclusive=_positive(table, "torch_clang_max_exclusive"),
                notes=table.string("notes", ""),
                unverified=_unverified(table),
                source=_source(table, layer),
            )
            table.finish()
            layer.toolkits[facts.version] = facts
            layer.origins[f"toolkit {facts.version}"] = top.origin
        toolkits.finish()


# -- torch.toml -------------------------------------------------------------------------------


def _torch_file(top: Table, layer: Layer) -> None:
    pattern = (
        _pattern(top, "index_url", frozenset({"variant"}))
        if "index_url" in top
        else DEFAULT_INDEX_URL
    )
    for table in top.tables("torch"):
        for release in _torch_series(table, pattern, layer):
            if release.version in layer.torch:
                raise table.fail(
                    "releases", f"torch {release.version} is listed by two [[torch]] tables"
                )
            layer.torch[release.version] = release
            layer.origins[f"torch {release.version}"] = top.origin


def _pairing(t: Table, key: str, releases: list[Version]) -> dict[Version, str]:
    """``torchvision = { "2.0.0" = "0.15.1" }``: the paired version of each release."""
    table = t.table(key)
    if table is None:
        return {}
    paired: dict[Version, str] = {}
    for name in table.keys():
        release = _version(table, name, name)
        if release not in releases:
            raise table.fail(name, "is not one of this table's releases")
        value: str = table.string(name)
        _version(table, name, value)
        paired[release] = value
    table.finish()
    return paired


def _torch_series(t: Table, pattern: str, layer: Layer) -> list[TorchRelease]:
    series: str = t.string("series")
    if not re.fullmatch(r"\d+\.\d+", series):
        raise t.fail("series", f"= {series!r}: expected major.minor such as '2.5'")
    names: tuple[str, ...] = t.strings("releases")
    if not names:
        raise t.fail("releases", "= []: list at least one release")
    releases: list[Version] = []
    for position, name in enumerate(names):
        version = _version(t, f"releases[{position}]", name)
        if version.local is not None or ".".join(map(str, version.release[:2])) != series:
            raise t.fail(
                f"releases[{position}]", f"= {name!r}: not a public release of series {series}"
            )
        releases.append(version)
    python = _python_tags(t, "python")
    requires_python: SpecifierSet = t.parsed("requires_python", _specifier)
    pypi_default: str | None = t.string("pypi_default", None)
    aarch64: str | None = t.string("pypi_linux_aarch64", None)
    if aarch64 is not None:
        _variant_name(t, "pypi_linux_aarch64", aarch64)
    runtime: str | None = t.string("pypi_cuda_runtime", None)
    cxx11: bool | None = t.boolean("cxx11_abi", None)
    torchvision = _pairing(t, "torchvision", releases)
    torchaudio = _pairing(t, "torchaudio", releases)
    notes: str = t.string("notes", "")
    unverified = _unverified(t)
    source = _source(t, layer)

    variant_table = t.table("variants", required=True)
    assert variant_table is not None
    variants: list[tuple[TorchVariant, frozenset[Version] | None]] = []
    for name in variant_table.keys():
        cuda = _variant_name(variant_table, name, name)
        one = variant_table.table(name, required=True)
        assert one is not None
        arch_list = _arch_list(one, "arch_list")
        if cuda is None and arch_list:
            raise one.fail("arch_list", "a cpu build has no arch list")
        only: frozenset[Version] | None = None
        if "releases" in one:
            subset = [
                (i, _version(one, f"releases[{i}]", n))
                for i, n in enumerate(one.strings("releases"))
            ]
            for position, version in subset:
                if version not in releases:
                    raise one.fail(
                        f"releases[{position}]", f"= '{version}': not one of this table's releases"
                    )
            only = frozenset(version for _, version in subset)
        url: str = _url(
            one, "index_url", one.string("index_url", None) or pattern.format(variant=name)
        )
        flags = _unverified(one, extra=("exists",))
        one.finish()
        variant = TorchVariant(
            name=name,
            cuda=cuda,
            arch_list=arch_list,
            index_url=url,
            pypi_default=name == pypi_default,
            verified=not flags,
            unverified=flags,
        )
        variants.append((variant, only))
    variant_table.finish()
    if not variants:
        raise t.fail("variants", "lists no builds")

    overrides: dict[Version, dict[str, Any]] = {}
    per_release = t.table("per_release")
    if per_release is not None:
        for name in per_release.keys():
            version = _version(per_release, name, name)
            if version not in releases:
                raise per_release.fail(name, "is not one of this table's releases")
            one = per_release.table(name, required=True)
            assert one is not None
            changes: dict[str, Any] = {}
            if "python" in one:
                changes["python"] = _python_tags(one, "python")
            if "requires_python" in one:
                changes["requires_python"] = one.parsed("requires_python", _specifier)
            if "cxx11_abi" in one:
                changes["cxx11_abi"] = one.boolean("cxx11_abi")
            if "pypi_linux_aarch64" in one:  # "" = no aarch64 wheel on PyPI for this release
                changes["pypi_linux_aarch64"] = one.string("pypi_linux_aarch64") or None
            if "notes" in one:
                changes["notes"] = one.string("notes")
            one.finish()
            overrides[version] = changes
        per_release.finish()
    t.finish()

    result: list[TorchRelease] = []
    for version in releases:
        builds = tuple(variant for variant, only in variants if only is None or version in only)
        if pypi_default is not None and all(v.name != pypi_default for v in builds):
            raise t.fail("pypi_default", f"= {pypi_default!r}: torch {version} has no such variant")
        release = TorchRelease(
            version=version,
            python=python,
            requires_python=requires_python,
            variants=builds,
            torchvision=torchvision.get(version),
            torchaudio=torchaudio.get(version),
            cxx11_abi=cxx11,
            pypi_linux_aarch64=aarch64,
            pypi_cuda_runtime=runtime,
            source=source,
            unverified=unverified,
            notes=notes,
        )
        if version in overrides:
            release = replace(release, **overrides[version])
        result.append(release)
    return result


# -- packages/*.toml --------------------------------------------------------------------------


def _package_file(top: Table, layer: Layer) -> None:
    table = top.table("package", required=True)
    assert table is not None
    name: str = table.string("name")
    if not _NAME.fullmatch(name):
        raise table.fail("name", f"= {name!r}: not a valid package name")
    fields: dict[str, Any] = {"name": name}
    for key in ("description", "notes"):
        if key in table:
            fields[key] = table.string(key)
    if "import_name" in table:
        fields["import_name"] = table.string("import_name")
        if not _MODULE.fullmatch(fields["import_name"]):
            raise table.fail("import_name", f"= {fields['import_name']!r}: not a module name")
    if "find_links" in table:
        fields["find_links"] = _pattern(table, "find_links", LINK_FIELDS)
    if "wheel_url" in table:
        fields["wheel_url"] = _pattern(table, "wheel_url", WHEEL_FIELDS)
    if "placeholder_versions" in table:
        texts: tuple[str, ...] = table.strings("placeholder_versions")
        for position, text in enumerate(texts):
            _version(table, f"placeholder_versions[{position}]", text)
        fields["placeholder_versions"] = texts
    if "requires" in table:
        fields["requires"] = _requirements(table, "requires")
    if len(fields) > 1 or "source" in table:
        fields["source"] = _source(table, layer)
    table.finish()

    wheels: dict[Version, ExtensionWheels] = {}
    for wheel_table in top.tables("wheels"):
        entry = _wheels(wheel_table, layer)
        if entry.version in wheels:
            raise wheel_table.fail("version", f"= '{entry.version}': listed twice in this file")
        wheels[entry.version] = entry
    recipes: dict[str, Recipe] = {}
    for recipe_table in top.tables("recipe"):
        recipe = _recipe(recipe_table, name, layer)
        if recipe.name in recipes:
            raise recipe_table.fail("name", f"= {recipe.name!r}: listed twice in this file")
        recipes[recipe.name] = recipe

    key = canonicalize_name(name)
    if key in layer.packages:
        raise table.fail(
            "name", f"= {name!r}: {layer.packages[key].origin} in the same directory defines it too"
        )
    layer.packages[key] = PackageDraft(
        fields=fields, wheels=wheels, recipes=recipes, origin=top.origin
    )


def _wheels(t: Table, layer: Layer) -> ExtensionWheels:
    version = _version(t, "version", t.string("version"))
    python = _python_tags(t, "python")
    platforms: tuple[str, ...] = t.strings("platforms", ("linux_x86_64",))
    for position, platform in enumerate(platforms):
        if not _PLATFORM.fullmatch(platform):
            raise t.fail(
                f"platforms[{position}]",
                f"= {platform!r}: expected a wheel platform tag such as 'linux_x86_64'",
            )
    window: SpecifierSet = t.parsed("torch_window", _specifier, SpecifierSet())
    rows: list[tuple[Version, str, tuple[str, ...]]] = []
    row_python: dict[str, tuple[str, ...]] = {}
    for row in t.tables("torch"):
        texts: tuple[str, ...] = row.strings("versions")
        variants: tuple[str, ...] = row.strings("variants")
        if not texts or not variants:
            raise row.fail(
                "versions" if not texts else "variants",
                "= []: a row needs torch versions and variants",
            )
        for position, variant in enumerate(variants):
            _variant_name(row, f"variants[{position}]", variant)
        python_here = _python_tags(row, "python") if "python" in row else None
        row.finish()
        for position, text in enumerate(texts):
            torch_version = _version(row, f"versions[{position}]", text)
            if torch_version.local is not None:
                raise row.fail(
                    f"versions[{position}]",
                    f"= {text!r}: write the base version (the variant says the CUDA)",
                )
            canonical = str(torch_version)
            if any(canonical == seen for _, seen, _ in rows):
                raise row.fail(
                    f"versions[{position}]", f"= {text!r}: torch {canonical} is in two rows"
                )
            rows.append((torch_version, canonical, variants))
            if python_here is not None:
                row_python[canonical] = python_here
    if not rows:
        raise t.fail(
            "torch",
            "lists no torch builds ([[wheels]] needs torch = [{ versions = [...], "
            "variants = [...] }])",
        )
    listed = {canonical for _, canonical, _ in rows}

    def detail_ok(name: str, detail: str) -> bool:
        return name == "torch" and detail in listed

    entry = ExtensionWheels(
        version=version,
        python=python,
        torch=tuple((canonical, variants) for _, canonical, variants in sorted(rows)),
        platforms=platforms,
        torch_python=tuple(sorted(row_python.items(), key=lambda item: Version(item[0]))),
        torch_window=window,
        notes=t.string("notes", ""),
        unverified=_unverified(t, detail_ok=detail_ok),
        source=_source(t, layer),
    )
    t.finish()
    return entry


def _recipe(t: Table, package: str, layer: Layer) -> Recipe:
    name: str = t.string("name")
    if not _NAME.fullmatch(name):
        raise t.fail("name", f"= {name!r}: recipe names are letters, digits, '.', '_' and '-'")
    archive_table = t.table("archive")
    archive = _archive(archive_table) if archive_table is not None else None
    repository, revision = _git_source(t, has_archive=archive is not None)
    env: list[tuple[str, str]] = []
    env_table = t.table("env")
    if env_table is not None:
        for key in env_table.keys():
            if not _ENV_NAME.fullmatch(key):
                raise env_table.fail(key, "is not an environment variable name")
            env.append((key, env_table.string(key)))
        env_table.finish()
    patches = tuple(_patch(patch) for patch in t.tables("patch"))
    smoke_table = t.table("smoke")
    smoke = _smoke(smoke_table) if smoke_table is not None else None
    recipe = Recipe(
        name=name,
        package=package,
        version=_version(t, "version", t.string("version")),
        repository=repository,
        revision=revision,
        archive=archive,
        subdirectory=_relative_path(t, "subdirectory", ""),
        submodules=t.boolean("submodules", False),
        torch=t.parsed("torch", _specifier, SpecifierSet()),
        torch_window=t.parsed("torch_window", _specifier, SpecifierSet()),
        python=t.parsed("python", _specifier, SpecifierSet()),
        cuda_min=t.parsed("cuda_min", CudaVersion.parse, None),
        cuda_max=t.parsed("cuda_max", CudaVersion.parse, None),
        build_requires=_requirements(t, "build_requires"),
        requires=_requirements(t, "requires") if "requires" in t else None,
        env=tuple(env),
        patches=patches,
        smoke=smoke,
        notes=t.string("notes", ""),
        unverified=_unverified(t),
        source=_source(t, layer),
    )
    if recipe.cuda_min and recipe.cuda_max and recipe.cuda_min > recipe.cuda_max:
        raise t.fail("cuda_max", f"= '{recipe.cuda_max}': below cuda_min '{recipe.cuda_min}'")
    if archive is not None and recipe.submodules:
        # The archive wins over the clone, and a release tarball carries no submodules.
        raise t.fail(
            "submodules",
            "= true: the recipe's archive is built, not a clone, so submodules would be missing",
            hint="name an archive that includes them (an sdist does), or drop the archive and "
            "build from the clone",
        )
    t.finish()
    return recipe


def _git_source(t: Table, *, has_archive: bool) -> tuple[str | None, str | None]:
    """``repository`` and its pinned ``revision``: both or neither, and neither only next to an
    archive."""
    repository: str | None = t.string("repository", None)
    revision: str | None = t.string("revision", None)
    if repository is None:
        if revision is not None:
            raise t.fail(
                "revision",
                f"= {revision!r}: a revision pins a commit of a repository, and the "
                "recipe names none",
            )
        if not has_archive:
            raise t.fail(
                "repository",
                "is required but missing: a recipe builds from a git repository (with revision) "
                "or an [recipe.archive] (url, sha256)",
            )
        return None, None
    if not _REPOSITORY.fullmatch(repository):
        raise t.fail("repository", f"= {repository!r}: expected a git URL (https://...)")
    insecure = repository_problem(repository)
    if insecure is not None:
        raise t.fail("repository", f"= {repository!r}: {insecure}")
    if revision is None:
        raise t.fail(
            "revision", "is required but missing: pin the repository's commit (40 hex digits)"
        )
    if not _REVISION.fullmatch(revision):
        raise t.fail(
            "revision", f"= {revision!r}: pin a full 40-character commit id (lower-case hex)"
        )
    return repository, revision


def _archive(t: Table) -> SourceArchive:
    url: str = _url(t, "url", t.string("url"))
    sha256: str = t.string("sha256")
    if not _SHA256.fullmatch(sha256):
        raise t.fail(
            "sha256", f"= {sha256!r}: expected the archive's sha256 as 64 lower-case hex digits"
        )
    strip: str | None = t.string("strip", None)
    if (
        strip is not None
        and strip != ""
        and (strip in (".", "..") or "/" in strip or "\\" in strip)
    ):
        raise t.fail(
            "strip",
            f"= {strip!r}: expected the name of the archive's one top-level folder (or '' to "
            "keep the layout)",
        )
    archive = SourceArchive(url=url, sha256=sha256, strip=strip)
    t.finish()
    return archive


def _patch(t: Table) -> Patch:
    find: str = t.string("find")
    if not find:
        raise t.fail("find", "= '': a patch needs the text it replaces")
    reason: str = t.string("reason")
    if not reason.strip():
        raise t.fail("reason", "= '': say why the patch is needed")
    count: int = t.integer("count", 1)
    if count < 1:
        raise t.fail("count", f"= {count}: expected at least 1")
    patch = Patch(
        file=_relative_path(t, "file"),
        find=find,
        replace=t.string("replace"),
        reason=reason,
        count=count,
        torch=t.parsed("torch", _specifier, SpecifierSet()),
    )
    t.finish()
    return patch


def _smoke(t: Table) -> SmokeTest:
    imports: tuple[str, ...] = t.strings("imports")
    for position, module in enumerate(imports):
        if not _MODULE.fullmatch(module):
            raise t.fail(f"imports[{position}]", f"= {module!r}: not a module name")
    smoke = SmokeTest(
        imports=imports,
        gpu_script=t.string("gpu_script", None),
        description=t.string("description", ""),
    )
    t.finish()
    return smoke


# -- checks on the merged index (index validate) ---------------------------------------------


def cross_check(index: Index, layer: Layer) -> list[str]:
    """Problems of ``layer``'s entries that only show against the merged ``index``."""
    problems: list[str] = []
    for version, entry in layer.torch.items():
        where = layer.origins[f"torch {version}"]
        for build in entry.variants:
            if build.cuda is not None and index.toolkit(build.cuda) is None:
                problems.append(
                    f"{where}: torch {version} +{build.name}: no toolkit facts for CUDA "
                    f"{build.cuda}"
                )
    for draft in layer.packages.values():
        package = index.package(draft.name)
        assert package is not None
        where = draft.origin
        for wheels in draft.wheels.values():
            label = f"{where}: {package.name} {wheels.version}"
            if str(wheels.version) in package.placeholder_versions:
                problems.append(f"{label}: listed as wheels and as a placeholder version")
            for torch_version, variants in wheels.torch:
                release = index.torch_release(torch_version)
                if release is None:
                    problems.append(f"{label}: torch {torch_version} is not in the torch index")
                    continue
                for variant in variants:
                    if release.variant(variant) is None:
                        problems.append(
                            f"{label}: torch {torch_version} has no {variant} build in "
                            "the torch index"
                        )
                extra = [py for py in wheels.python_for(torch_version) if py not in release.python]
                if extra:
                    problems.append(
                        f"{label}: Python {', '.join(extra)} wheels for torch {torch_version}, "
                        "which has none"
                    )
        if draft.wheels and package.find_links is None and package.wheel_url is None:
            problems.append(
                f"{where}: {package.name} lists wheels but neither find_links nor wheel_url"
            )
        for recipe in draft.recipes.values():
            label = f"{where}: recipe {recipe.name}"
            for patch in recipe.patches:
                if patch.find == patch.replace:
                    problems.append(f"{label}: patch of {patch.file} replaces its text with itself")
            if recipe.smoke is not None and recipe.smoke.gpu_script is not None:
                try:
                    compile(recipe.smoke.gpu_script, f"<{recipe.name} gpu_script>", "exec")
                except SyntaxError as exc:
                    problems.append(f"{label}: smoke.gpu_script line {exc.lineno}: {exc.msg}")
    return problems
