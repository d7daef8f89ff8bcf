"""The CUDA facts of the index: toolkits, driver families and torch builds' arch lists.

What describing a machine needs (``doctor``, the driver probes). A :class:`CudaFacts` is cached
beside the parsed index (:func:`cuda_resolve.index.load.load_cuda_facts`) and holds versions
only, so reading it creates none of the package catalogue's classes and imports no
``packaging.specifiers``: every command pays for what it reads, and ``doctor`` reads little.
:class:`~cuda_resolve.index.model.Index` answers the same questions (:class:`CudaFactsSource`).
"""

from __future__ import annotations

import re

from .._frozen import frozen
from ..versions import ComputeCapability, CudaVersion, DriverVersion

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any, Protocol

__all__ = [
    "ArchEntry",
    "CudaFacts",
    "CudaFamily",
    "ToolkitFacts",
    "facts_from_plain",
    "facts_to_plain",
    "parse_arch_entry",
    "parse_arch_list",
    "release_key",
]


@frozen(kw_only=False, order=True)
class ArchEntry:
    """One TORCH_CUDA_ARCH_LIST entry: SASS for ``capability`` and, with ``ptx``, PTX too."""

    capability: ComputeCapability
    ptx: bool = False

    def __str__(self) -> str:
        return f"{self.capability}{'+PTX' if self.ptx else ''}"


def parse_arch_entry(text: str) -> ArchEntry:
    """``8.6`` / ``9.0a`` / ``12.0+PTX`` -> ArchEntry; ValueError on anything else."""
    cleaned = text.strip()
    ptx = cleaned.upper().endswith("+PTX")
    if ptx:
        cleaned = cleaned[: -len("+PTX")]
    return ArchEntry(ComputeCapability.parse(cleaned), ptx)


def parse_arch_list(text: str) -> tuple[ArchEntry, ...]:
    """``"7.5;8.6 9.0+PTX"`` -> entries in the order written; separators ``;``, ``,`` or
    whitespace, as TORCH_CUDA_ARCH_LIST accepts. ValueError names an entry that is not one."""
    return tuple(parse_arch_entry(word) for word in re.split(r"[;,\s]+", text.strip()) if word)


@frozen
class CudaFamily:
    """Minor-version compatibility of one CUDA major family (CUDA 11 onward)."""

    major: int
    min_driver_linux: DriverVersion
    min_driver_windows: DriverVersion | None = None
    source: str = ""
    unverified: tuple[str, ...] = ()  # keys whose values rest on secondary sources
    notes: str = ""


@frozen
class ToolkitFacts:
    """One CUDA toolkit release as the index records it: driver minimums, archs, host compilers."""

    version: CudaVersion
    driver_linux: DriverVersion | None = None  # the toolkit's own (GA) driver: full feature set
    driver_windows: DriverVersion | None = None
    archs: tuple[ComputeCapability, ...] = ()  # SASS targets nvcc accepts (sm_XY)
    specific_archs: tuple[ComputeCapability, ...] = ()  # 9.0a, 10.0f ...
    gcc_max: int | None = None  # newest gcc major nvcc accepts
    clang_max: int | None = None
    torch_gcc_max_exclusive: int | None = None  # torch.utils.cpp_extension's bound
    torch_clang_max_exclusive: int | None = None  # torch.utils.cpp_extension's clang bound
    source: str = ""
    unverified: tuple[str, ...] = ()  # keys whose values rest on secondary sources
    notes: str = ""


if TYPE_CHECKING:

    class CudaFactsSource(Protocol):
        """What the machine checks read: the index, or its CUDA facts alone."""

        @property
        def toolkits(self) -> tuple[ToolkitFacts, ...]: ...

        @property
        def families(self) -> tuple[CudaFamily, ...]: ...

        def toolkit(self, version: CudaVersion) -> ToolkitFacts | None: ...

        def family(self, major: int) -> CudaFamily | None: ...

        def torch_build_arch_list(
            self, version: str, variant: str
        ) -> tuple[str, tuple[ArchEntry, ...]] | None: ...


@frozen
class CudaFacts:
    """The index's toolkits and CUDA families, and each torch build's arch list as
    ``(release version, variant name, arch list)``; made by ``Index.cuda_facts()``. The release
    is its text (``2.5.1``), not a ``packaging`` version: reading the facts back imports none."""

    toolkits: tuple[ToolkitFacts, ...]
    families: tuple[CudaFamily, ...]
    torch_arch_lists: tuple[tuple[str, str, tuple[ArchEntry, ...]], ...] = ()

    def toolkit(self, version: CudaVersion) -> ToolkitFacts | None:
        return next((t for t in self.toolkits if t.version == version), None)

    def family(self, major: int) -> CudaFamily | None:
        return next((f for f in self.families if f.major == major), None)

    def torch_build_arch_list(
        self, version: str, variant: str
    ) -> tuple[str, tuple[ArchEntry, ...]] | None:
        """As ``Index.torch_build_arch_list``: *version*'s base version (its epoch and release
        numbers; ``2.5`` is ``2.5.0``) is matched against the index's final releases (an index
        release ``2.7.0rc1`` is not the base version of any build). A version that is not PEP
        440 matches none."""
        wanted = release_key(version)
        if wanted is None:
            return None
        for release, name, entries in self.torch_arch_lists:
            if (
                name == variant
                and _FINAL_RELEASE.fullmatch(release)
                and release_key(release) == wanted
            ):
                return f"{release}+{name}", entries
        return None


#: A version as torch's are written (PEP 440's normal form): release numbers, then a pre, post
#: and dev part, a local label, in lower case. Any other spelling is left to ``packaging``.
_PLAIN_VERSION = re.compile(
    r"v?([0-9]+(?:\.[0-9]+)*)(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?"  # lower case: IGNORECASE triples its compile time
)  # [0-9], not \d: PEP 440 takes ASCII digits only
#: A final release as ``str(packaging.version.Version)`` writes it (the index's releases).
_FINAL_RELEASE = re.compile(r"(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*")


def release_key(version: str) -> tuple[int, ...] | None:
    """``(epoch, *release)`` of a PEP 440 version, trailing zeros dropped: equal for versions
    whose ``base_version`` is the same release (``2.5.1+cu124``, ``2.5.1a0+git1``, ``2.5.1``).
    Read by hand where the text is plain (``packaging.version`` costs a warm ``doctor`` 3 ms,
    issue 28), by ``packaging`` otherwise; None for text that is not a version."""
    match = _PLAIN_VERSION.fullmatch(version.strip())
    if match is not None:
        parts = [0, *(int(part) for part in match.group(1).split("."))]
    else:
        from packaging.version import InvalidVersion, Version

        try:
            parsed = Version(version)
        except InvalidVersion:
            return None
        parts = [parsed.epoch, *parsed.release]
    while len(parts) > 2 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


# -- the facts as plain data (their cache file: issue 28) -----------------------------------------
# Written with marshal, which the interpreter has built in: unpickling them imported pickle, 1 to
# 2 ms of every warm command. An object is a list, [class name, field values...]; the facts hold
# no list of their own (every sequence is a tuple). Equal parts are written once (marshal writes
# an object it meets again as a reference) and made once when read: the ~2000 objects of the
# shipped facts are ~350 different ones, and reading each in Python costs what unpickling did.

_PLAIN_CLASSES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        CudaFacts,
        ToolkitFacts,
        CudaFamily,
        ArchEntry,
        CudaVersion,
        DriverVersion,
        ComputeCapability,
    )
}
_PLAIN_VALUES = (str, int, float, type(None))  # bool is an int


def facts_to_plain(facts: CudaFacts) -> Any:
    """*facts* as tuples, lists and plain values (what :mod:`marshal` writes), each distinct
    part once."""
    return _to_plain(facts, {})


def facts_from_plain(plain: Any) -> CudaFacts:
    """The facts :func:`facts_to_plain` made; ``ValueError`` where *plain* is not such data."""
    facts = _from_plain(plain, {})
    if not isinstance(facts, CudaFacts):
        raise ValueError(f"not CUDA facts but {type(facts).__name__}")
    return facts


def _to_plain(value: Any, made: dict[tuple[Any, ...], Any]) -> Any:
    """*value* in plain form; *made* holds the plain parts made so far, by what they hold."""
    if isinstance(value, _PLAIN_VALUES):
        return value
    if isinstance(value, tuple):
        plain: Any = tuple(_to_plain(item, made) for item in value)
        key: tuple[Any, ...] = ("tuple", *map(_identity, plain))
    else:
        name = type(value).__name__
        if _PLAIN_CLASSES.get(name) is not type(value):
            raise TypeError(f"CUDA facts hold no {type(value).__qualname__}")
        plain = [name, *(_to_plain(item, made) for item in value.__getstate__())]
        key = (name, *map(_identity, plain[1:]))
    return made.setdefault(key, plain)


def _identity(plain: Any) -> Any:
    """A plain part made by _to_plain is one object per content: its id names it (*made* keeps
    it alive); a value, by its type and itself (``1`` is not ``True``)."""
    return id(plain) if isinstance(plain, (tuple, list)) else (type(plain), plain)


def _from_plain(value: Any, made: dict[int, Any]) -> Any:
    """What *value* describes; *made* holds what was made of each part already read (marshal
    gives a part written once as one object)."""
    if isinstance(value, _PLAIN_VALUES):
        return value
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"not plain data: {type(value).__name__}")
    found = made.get(id(value))
    if found is not None:
        return found
    if isinstance(value, tuple):
        result: Any = tuple([_from_plain(item, made) for item in value])
    else:
        cls = _PLAIN_CLASSES.get(value[0]) if value and isinstance(value[0], str) else None
        if cls is None:
            raise ValueError(f"not a class of the CUDA facts: {value[:1]!r}")
        fields = [_from_plain(item, made) for item in value[1:]]
        expected = len(cls.__frozen_fields__)
        if len(fields) != expected:
            raise ValueError(f"{cls.__name__} has {expected} fields, not {len(fields)}")
        result = object.__new__(cls)
        result.__setstate__(fields)  # as unpickling restores it
    made[id(value)] = result
    return result
