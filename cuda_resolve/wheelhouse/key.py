"""WheelKey: everything a built extension wheel's ABI depends on, and the names derived from it.

Two builds with equal keys are interchangeable; any difference in torch, CUDA variant, Python,
platform, arch list or recipe makes a different key. The key gives the wheel its PEP 440 local
version label (PyG style plus the arch list and a short recipe digest:
``3.0.0+pt2141cu130.sm86.sm90ptx.r1a2b3c4d``; :func:`parse_local_label` reads it back) and its
folder in the wheelhouse (:attr:`WheelKey.digest`).

:class:`KeyQuery` is a key without its arch list, and :func:`covers` says whether (and how well) a
built arch list runs on a machine's GPUs, by compat's rule: a wheel built for more GPUs is
reused wherever it covers every GPU here (:meth:`Wheelhouse.find_covering`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Literal

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._frozen import frozen
from ..compat import build_covers_gpu
from ..index.model import ArchEntry, parse_arch_entry, parse_arch_list
from ..versions import ComputeCapability
from .errors import WheelhouseError

__all__ = [
    "KEY_FIELDS",
    "QUERY_FIELDS",
    "RECIPE_WORD_DIGITS",
    "Coverage",
    "CoverageKind",
    "GpuCoverage",
    "KeyQuery",
    "LabelParts",
    "WheelKey",
    "canonical_arch_list",
    "covers",
    "parse_local_label",
    "recipe_word",
]

#: The key's fields, in the order they are written and hashed.
KEY_FIELDS = (
    "package",
    "version",
    "torch",
    "variant",
    "python_tag",
    "platform",
    "arch_list",
    "recipe_digest",
)
#: The fields of a :class:`KeyQuery`: the key's, less the arch list.
QUERY_FIELDS = tuple(field for field in KEY_FIELDS if field != "arch_list")

_NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE)
_VARIANT = re.compile(r"[a-z][a-z0-9]*(\.[0-9]+)*")
_PYTHON_TAG = re.compile(r"[a-z]+[0-9]+[a-z]*")
_PLATFORM = re.compile(r"[a-z0-9_]+")
_HEX = re.compile(r"[0-9a-f]{8,128}")
#: Hex digits of the recipe digest in the local label (:func:`recipe_word`).
RECIPE_WORD_DIGITS = 8
_RECIPE_WORD = re.compile(r"r[0-9a-f]{8}")
_LABEL_HEAD = re.compile(r"pt\d+[a-z0-9]*")
_LABEL_ARCH_WORD = re.compile(r"sm(\d{2,4})([af]?)(ptx)?")
#: Bumped if the digest's input ever changes, so old and new folders never collide.
_DIGEST_FORMAT = "cuda-resolve-wheelkey/1"


def canonical_arch_list(text: str) -> str:
    """``"9.0+PTX 8.6;8.6"`` -> ``"8.6;9.0+PTX"``: sorted, one entry per capability, ``+PTX`` kept.

    Separators may be ``;``, ``,`` or spaces (as TORCH_CUDA_ARCH_LIST accepts); ValueError names
    an entry that is not a compute capability."""
    merged: dict[tuple[int, int, str], ArchEntry] = {}
    for entry in parse_arch_list(text):
        cap = entry.capability
        slot = (cap.major, cap.minor, cap.suffix)
        previous = merged.get(slot)
        merged[slot] = ArchEntry(cap, entry.ptx or (previous is not None and previous.ptx))
    return ";".join(str(merged[slot]) for slot in sorted(merged))


def recipe_word(recipe_digest: str) -> str:
    """The local label's recipe word: ``r`` and the digest's first :data:`RECIPE_WORD_DIGITS` hex
    digits (a letter first, so PEP 440 never reads it as a number and drops leading zeros)."""
    return "r" + recipe_digest.lower()[:RECIPE_WORD_DIGITS]


@frozen
class LabelParts:
    """A labelled version's local label read back (:func:`parse_local_label`)."""

    torch: str  # "pt2141cu130": compared, not split (the release digits are joined)
    arch_list: str  # canonical_arch_list's form, "" for none
    recipe: str | None  # "r1a2b3c4d"; None in labels written before the recipe word existed


def torch_label(torch: Version, variant: str) -> str:
    """A label's torch part for a build against ``torch`` (its release) and ``variant``:
    ``pt2141cu130`` (PyG style: the release's digits joined, so it is compared, not split)."""
    head = "pt" + "".join(str(part) for part in torch.release)
    if torch.pre is not None:
        head += f"{torch.pre[0]}{torch.pre[1]}"
    if torch.post is not None:
        head += f"post{torch.post}"
    if torch.dev is not None:
        head += f"dev{torch.dev}"
    return head + variant.replace(".", "").lower()


def parse_local_label(label: str) -> LabelParts | None:
    """``pt2141cu130.sm86.sm90ptx.r1a2b3c4d`` (or the older form without the recipe word) read
    back; None when it is not a label of that form."""
    head, *words = label.lower().split(".")
    if not _LABEL_HEAD.fullmatch(head):
        return None
    recipe = words.pop() if words and _RECIPE_WORD.fullmatch(words[-1]) else None
    entries: list[str] = []
    for word in words:
        match = _LABEL_ARCH_WORD.fullmatch(word)
        if match is None:
            return None
        digits, suffix, ptx = match.groups()
        entries.append(f"{digits[:-1]}.{digits[-1]}{suffix}{'+PTX' if ptx else ''}")
    try:
        arch_list = canonical_arch_list(";".join(entries))
    except ValueError:
        return None
    return LabelParts(torch=head, arch_list=arch_list, recipe=recipe)


def _label_arch(entry: ArchEntry) -> str:
    cap = entry.capability
    return f"sm{cap.major}{cap.minor}{cap.suffix}{'ptx' if entry.ptx else ''}"


def _fail(
    origin: str, field: str, value: object, expected: str, hint: str | None = None
) -> WheelhouseError:
    where = f"wheel key {field} = {value!r}" if field else f"wheel key {value!r}"
    return WheelhouseError(
        f"{origin}: {where}: {expected}",
        hint=hint
        or "the key is computed by cuda-resolve from the plan; a hand-edited or foreign entry "
        "file should be removed (`cuda-resolve wheelhouse prune`)",
    )


def _version(origin: str, field: str, text: str) -> str:
    try:
        version = Version(text)
    except InvalidVersion:
        raise _fail(origin, field, text, "not a PEP 440 version") from None
    if version.local is not None:
        raise _fail(
            origin,
            field,
            text,
            "has a local label; the key wants the base version",
            hint=f"pass {version.public!r} (the CUDA variant is a field of its own)",
        )
    return str(version)


def _check_abi(obj: WheelKey | KeyQuery, origin: str, fields: tuple[str, ...]) -> None:
    """Check that each of ``fields`` is a string, then check and normalize the fields a key and a
    query share, but for the recipe digest (:func:`_check_digest`, done last)."""
    for field in fields:
        value = getattr(obj, field)
        if not isinstance(value, str):
            raise _fail(origin, field, value, "expected a string")
    if not _NAME.fullmatch(obj.package):
        raise _fail(origin, "package", obj.package, "not a valid distribution name")
    object.__setattr__(obj, "version", _version(origin, "version", obj.version))
    object.__setattr__(obj, "torch", _version(origin, "torch", obj.torch))
    if not _VARIANT.fullmatch(obj.variant):
        raise _fail(
            origin,
            "variant",
            obj.variant,
            "expected torch's variant name, such as 'cu130' or 'cpu'",
        )
    if not _PYTHON_TAG.fullmatch(obj.python_tag):
        raise _fail(
            origin, "python_tag", obj.python_tag, "expected a wheel Python tag such as 'cp311'"
        )
    if not _PLATFORM.fullmatch(obj.platform):
        raise _fail(
            origin, "platform", obj.platform, "expected a wheel platform tag such as 'linux_x86_64'"
        )


def _check_digest(obj: WheelKey | KeyQuery, origin: str) -> None:
    digest = obj.recipe_digest.lower()
    if not _HEX.fullmatch(digest):
        raise _fail(origin, "recipe_digest", obj.recipe_digest, "expected a hex sha256")
    object.__setattr__(obj, "recipe_digest", digest)


@frozen
class WheelKey:
    """The full ABI of one built wheel. Values are checked and normalized on construction:
    versions to their PEP 440 normal form, the arch list to :func:`canonical_arch_list`'s,
    the recipe digest to lower case. ``package`` keeps the recipe's spelling; it is compared
    (and hashed) canonicalized."""

    package: str
    version: str
    torch: str
    variant: str
    python_tag: str
    platform: str
    arch_list: str
    recipe_digest: str

    def __post_init__(self) -> None:
        self._check("<wheel key>")

    def _check(self, origin: str) -> None:
        _check_abi(self, origin, KEY_FIELDS)
        try:
            arch_list = canonical_arch_list(self.arch_list)
        except ValueError as exc:
            raise _fail(origin, "arch_list", self.arch_list, str(exc)) from None
        if self.variant == "cpu" and arch_list:
            raise _fail(origin, "arch_list", self.arch_list, "a cpu build has no CUDA arch list")
        if self.variant.startswith("cu") and not arch_list:
            raise _fail(
                origin,
                "arch_list",
                self.arch_list,
                f"a {self.variant} build always has an arch list (TORCH_CUDA_ARCH_LIST "
                "is always set)",
            )
        object.__setattr__(self, "arch_list", arch_list)
        _check_digest(self, origin)

    def query(self) -> KeyQuery:
        """This key without its arch list: what :meth:`Wheelhouse.find_covering` matches."""
        return KeyQuery(**{field: getattr(self, field) for field in QUERY_FIELDS})

    # -- derived names ---------------------------------------------------------------------

    @property
    def canonical_package(self) -> str:
        """``pointnet2-ops``: the PEP 503 name, used for folders and index pages."""
        return str(canonicalize_name(self.package))

    @property
    def recipe_word(self) -> str:
        """``r1a2b3c4d``: the label's last word, ``r`` and the recipe digest's first 8 hex
        digits."""
        return recipe_word(self.recipe_digest)

    @property
    def local_label(self) -> str:
        """``pt2141cu130.sm86.sm90ptx.r1a2b3c4d``: torch's release digits and variant (PyG
        style), then each arch (``ptx`` where PTX is embedded), then :attr:`recipe_word`, so two
        recipes of one version have two file names on an index server. A valid PEP 440 local
        label, already in normal form."""
        archs = [_label_arch(parse_arch_entry(word)) for word in self.arch_list.split(";") if word]
        return ".".join([torch_label(Version(self.torch), self.variant), *archs, self.recipe_word])

    @property
    def labelled_version(self) -> str:
        """``3.0.0+pt2141cu130.sm86.sm90ptx``: the version the stored wheel carries."""
        return f"{self.version}+{self.local_label}"

    @property
    def digest(self) -> str:
        """16 hex digits of sha256 over every field (package canonicalized): the folder name."""
        text = json.dumps(
            [_DIGEST_FORMAT, self._canonical_fields()], sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def same_as(self, other: WheelKey) -> bool:
        """Equal keys, the package compared canonicalized (``Pointnet2_Ops`` is
        ``pointnet2-ops``): the one comparison of two keys (a lookup, a served wheel's key)."""
        return self._canonical_fields() == other._canonical_fields()

    def _canonical_fields(self) -> dict[str, str]:
        data = self.to_json()
        data["package"] = self.canonical_package
        return data

    # -- serialization ---------------------------------------------------------------------

    def to_json(self) -> dict[str, str]:
        return {field: getattr(self, field) for field in KEY_FIELDS}

    @classmethod
    def from_json(cls, data: object, *, origin: str) -> WheelKey:
        """The key written by :meth:`to_json`; errors name ``origin`` and the bad field."""
        if not isinstance(data, dict):
            raise _fail(origin, "", data, "expected a table of the key's fields")
        missing = [field for field in KEY_FIELDS if field not in data]
        if missing:
            raise _fail(origin, missing[0], None, f"missing (a key has {', '.join(KEY_FIELDS)})")
        unknown = sorted(str(name) for name in data if name not in KEY_FIELDS)
        if unknown:
            raise _fail(origin, unknown[0], data[unknown[0]], "not a field of a wheel key")
        for field in KEY_FIELDS:
            if not isinstance(data[field], str):
                raise _fail(origin, field, data[field], "expected a string")
        key = cls.__new__(cls)
        for field in KEY_FIELDS:
            object.__setattr__(key, field, data[field])
        key._check(origin)
        return key


@frozen
class KeyQuery:
    """A :class:`WheelKey` less its arch list: the ABI a reused wheel must match exactly (torch,
    variant, Python, platform, recipe), while the arch list only has to cover this machine's
    GPUs (:func:`covers`). Fields are checked and normalized as a key's are."""

    package: str
    version: str
    torch: str
    variant: str
    python_tag: str
    platform: str
    recipe_digest: str

    def __post_init__(self) -> None:
        _check_abi(self, "<wheel key query>", QUERY_FIELDS)
        _check_digest(self, "<wheel key query>")

    @property
    def canonical_package(self) -> str:
        return str(canonicalize_name(self.package))

    def matches(self, key: WheelKey) -> bool:
        """Does ``key`` have exactly these fields (the package compared canonicalized)?"""
        return key.canonical_package == self.canonical_package and all(
            getattr(key, field) == getattr(self, field)
            for field in QUERY_FIELDS
            if field != "package"
        )

    def with_arch_list(self, arch_list: str) -> WheelKey:
        """The full key for a build with ``arch_list``."""
        return WheelKey(
            arch_list=arch_list, **{field: getattr(self, field) for field in QUERY_FIELDS}
        )


# -- coverage -------------------------------------------------------------------------------------

#: How one GPU runs a build, best first: SASS for exactly its capability; SASS of its major and
#: a lower minor (sm_80 on 8.6); PTX JIT-compiled by the driver at first use.
CoverageKind = Literal["exact", "sass", "ptx"]
_KIND_RANK: dict[CoverageKind, int] = {"exact": 0, "sass": 1, "ptx": 2}


@frozen
class GpuCoverage:
    """Which entry of an arch list runs on one GPU capability, and how."""

    capability: ComputeCapability
    entry: ArchEntry
    kind: CoverageKind

    def describe(self) -> str:
        """``8.0: sm_80 exact`` / ``8.6: sm_80 (same major, lower minor)`` /
        ``9.0: compute_80 PTX (JIT-compiled at first use)``."""
        cap = self.entry.capability
        if self.kind == "exact":
            return f"{self.capability}: {cap.sm} exact"
        if self.kind == "sass":
            return f"{self.capability}: {cap.sm} (same major, lower minor)"
        return f"{self.capability}: compute_{cap.major}{cap.minor} PTX (JIT-compiled at first use)"


@frozen
class Coverage:
    """How an arch list covers every GPU of a machine (from :func:`covers`).

    Ordered by :attr:`rank`, smaller is better: first the GPUs' kinds, worst first (exact SASS
    for every GPU beats lower-minor SASS anywhere, which beats PTX anywhere), then fewer
    compiled targets (each SASS and each PTX counts: a smaller wheel), then the arch-list text,
    so the choice never depends on the order entries were found in."""

    arch_list: str  # canonical_arch_list's form
    gpus: tuple[GpuCoverage, ...]  # one per distinct capability, sorted

    @property
    def kind(self) -> CoverageKind:
        """The worst GPU's kind."""
        return max((gpu.kind for gpu in self.gpus), key=_KIND_RANK.__getitem__)

    @property
    def targets(self) -> int:
        """Code objects in the build: one per arch, one more per ``+PTX``."""
        entries = parse_arch_list(self.arch_list)
        return len(entries) + sum(entry.ptx for entry in entries)

    @property
    def rank(self) -> tuple[tuple[int, ...], int, str]:
        kinds = tuple(sorted((_KIND_RANK[gpu.kind] for gpu in self.gpus), reverse=True))
        return kinds, self.targets, self.arch_list

    def describe(self) -> str:
        """``8.0: sm_80 exact; 8.9: sm_89 exact``."""
        return "; ".join(gpu.describe() for gpu in self.gpus)


def _gpu_coverage(entries: Sequence[ArchEntry], gpu: ComputeCapability) -> GpuCoverage | None:
    """The best entry for ``gpu``. Whether an entry runs there at all, and whether its SASS does,
    is compat.build_covers_gpu's answer; here it is only ranked."""
    plain = ComputeCapability(gpu.major, gpu.minor)
    best: tuple[tuple[int, ComputeCapability], GpuCoverage] | None = None
    for entry in entries:
        if not build_covers_gpu((entry,), gpu):
            continue
        cap = entry.capability
        if build_covers_gpu((ArchEntry(cap, ptx=False),), gpu):
            kind: CoverageKind = (
                "exact" if ComputeCapability(cap.major, cap.minor) == plain else "sass"
            )
        else:
            kind = "ptx"
        # Within one kind the closest (highest) capability is what the driver loads.
        order = (-_KIND_RANK[kind], cap)
        if best is None or order > best[0]:
            best = (order, GpuCoverage(capability=gpu, entry=entry, kind=kind))
    return None if best is None else best[1]


def covers(arch_list: str, capabilities: Sequence[ComputeCapability]) -> Coverage | None:
    """How a build for ``arch_list`` runs on GPUs of ``capabilities``, or None when one of them
    has no kernels in it (compat.build_covers_gpu: SASS of the same major and no higher minor,
    PTX at or below the GPU; ``a``/``f`` targets and Jetson parts only on their own capability).

    None also when ``capabilities`` is empty: with no GPU to cover, a wheel is reused only by its
    exact key (:meth:`Wheelhouse.lookup`). ValueError names an arch-list entry that is not one."""
    text = canonical_arch_list(arch_list)
    entries = parse_arch_list(text)
    gpus: list[GpuCoverage] = []
    for capability in sorted(set(capabilities)):
        found = _gpu_coverage(entries, capability)
        if found is None:
            return None
        gpus.append(found)
    if not gpus:
        return None
    return Coverage(arch_list=text, gpus=tuple(gpus))
