"""WheelKey: everything a built extension wheel's ABI depends on, and the names derived from it.

Two builds with equal keys are interchangeable; any difference in torch, CUDA variant, Python,
platform, arch list or recipe makes a different key. The key gives the wheel its PEP 440 local
version label (PyG style plus the arch list: ``3.0.0+pt2141cu130.sm86.sm90ptx``) and its folder
in the wheelhouse (:attr:`WheelKey.digest`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..index.model import ArchEntry, parse_arch_entry, parse_arch_list
from .errors import WheelhouseError

__all__ = ["KEY_FIELDS", "WheelKey", "canonical_arch_list"]

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

_NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE)
_VARIANT = re.compile(r"[a-z][a-z0-9]*(\.[0-9]+)*")
_PYTHON_TAG = re.compile(r"[a-z]+[0-9]+[a-z]*")
_PLATFORM = re.compile(r"[a-z0-9_]+")
_HEX = re.compile(r"[0-9a-f]{8,128}")
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


def _label_arch(entry: ArchEntry) -> str:
    cap = entry.capability
    return f"sm{cap.major}{cap.minor}{cap.suffix}{'ptx' if entry.ptx else ''}"


def _fail(origin: str, field: str, value: object, expected: str, hint: str | None = None) -> WheelhouseError:
    where = f"wheel key {field} = {value!r}" if field else f"wheel key {value!r}"
    return WheelhouseError(
        f"{origin}: {where}: {expected}",
        hint=hint or "the key is computed by cuda-resolve from the plan; a hand-edited or foreign entry file should be removed (`cuda-resolve wheelhouse prune`)",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
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
        for field in KEY_FIELDS:
            value = getattr(self, field)
            if not isinstance(value, str):
                raise _fail(origin, field, value, "expected a string")
        if not _NAME.fullmatch(self.package):
            raise _fail(origin, "package", self.package, "not a valid distribution name")
        object.__setattr__(self, "version", self._version(origin, "version", self.version))
        object.__setattr__(self, "torch", self._version(origin, "torch", self.torch))
        if not _VARIANT.fullmatch(self.variant):
            raise _fail(origin, "variant", self.variant, "expected torch's variant name, such as 'cu130' or 'cpu'")
        if not _PYTHON_TAG.fullmatch(self.python_tag):
            raise _fail(origin, "python_tag", self.python_tag, "expected a wheel Python tag such as 'cp311'")
        if not _PLATFORM.fullmatch(self.platform):
            raise _fail(origin, "platform", self.platform, "expected a wheel platform tag such as 'linux_x86_64'")
        try:
            arch_list = canonical_arch_list(self.arch_list)
        except ValueError as exc:
            raise _fail(origin, "arch_list", self.arch_list, str(exc)) from None
        if self.variant == "cpu" and arch_list:
            raise _fail(origin, "arch_list", self.arch_list, "a cpu build has no CUDA arch list")
        if self.variant.startswith("cu") and not arch_list:
            raise _fail(
                origin, "arch_list", self.arch_list,
                f"a {self.variant} build always has an arch list (TORCH_CUDA_ARCH_LIST is always set)",
            )
        object.__setattr__(self, "arch_list", arch_list)
        digest = self.recipe_digest.lower()
        if not _HEX.fullmatch(digest):
            raise _fail(origin, "recipe_digest", self.recipe_digest, "expected a hex sha256")
        object.__setattr__(self, "recipe_digest", digest)

    @staticmethod
    def _version(origin: str, field: str, text: str) -> str:
        try:
            version = Version(text)
        except InvalidVersion:
            raise _fail(origin, field, text, "not a PEP 440 version") from None
        if version.local is not None:
            raise _fail(
                origin, field, text,
                "has a local label; the key wants the base version",
                hint=f"pass {version.public!r} (the CUDA variant is a field of its own)",
            )
        return str(version)

    # -- derived names ---------------------------------------------------------------------

    @property
    def canonical_package(self) -> str:
        """``pointnet2-ops``: the PEP 503 name, used for folders and index pages."""
        return str(canonicalize_name(self.package))

    @property
    def local_label(self) -> str:
        """``pt2141cu130.sm86.sm90ptx``: torch's release digits and variant (PyG style), then
        each arch (``ptx`` where PTX is embedded). A valid PEP 440 local label, already in
        normal form."""
        torch = Version(self.torch)
        head = "pt" + "".join(str(part) for part in torch.release)
        if torch.pre is not None:
            head += f"{torch.pre[0]}{torch.pre[1]}"
        if torch.post is not None:
            head += f"post{torch.post}"
        if torch.dev is not None:
            head += f"dev{torch.dev}"
        variant = self.variant.replace(".", "")
        archs = [
            _label_arch(parse_arch_entry(word)) for word in self.arch_list.split(";") if word
        ]
        return ".".join([head + variant, *archs])

    @property
    def labelled_version(self) -> str:
        """``3.0.0+pt2141cu130.sm86.sm90ptx``: the version the stored wheel carries."""
        return f"{self.version}+{self.local_label}"

    @property
    def digest(self) -> str:
        """16 hex digits of sha256 over every field (package canonicalized): the folder name."""
        data = self.to_json()
        data["package"] = self.canonical_package
        text = json.dumps([_DIGEST_FORMAT, data], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

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
