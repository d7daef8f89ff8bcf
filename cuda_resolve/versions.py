"""Small value types for the version numbers of the CUDA world.

``packaging.version.Version`` is right for Python packages but wrong for these: a driver
version keeps its zero-padded parts as printed (``535.104.05``), a CUDA version is exactly
major.minor, and a compute capability is a (major, minor) pair written ``8.6`` or ``sm_86``.
Each type parses once, at the boundary, and raises ``ValueError`` with the bad text.
"""

from __future__ import annotations

import re

from ._frozen import field, frozen

__all__ = ["ComputeCapability", "CudaVersion", "DriverVersion", "parse_dotted", "same_version"]


#: Digits allowed in one part of a version: driver, CUDA and compiler versions use at most 6.
_MAX_DIGITS = 9


def _quoted(text: str) -> str:
    """``repr(text)``, cut short: a value of thousands of characters is not echoed whole."""
    return repr(text) if len(text) <= 40 else f"{text[:30]!r}... ({len(text)} characters)"


def same_version(one: str, other: str) -> bool:
    """Do two Python package versions name the same release (PEP 440: ``1.0`` is ``1.0.0``, the
    local label counts)? Text that is not PEP 440 is compared as written."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(one) == Version(other)
    except InvalidVersion:
        return one == other


def parse_dotted(text: str, *, what: str) -> tuple[int, ...]:
    """Parse ``"12.2.140"`` into ``(12, 2, 140)``; ``ValueError`` naming *what* otherwise."""
    cleaned = text.strip()
    if not re.fullmatch(r"\d+(\.\d+)*", cleaned):
        raise ValueError(f"{what} {_quoted(text)} is not a dotted version number")
    parts = cleaned.split(".")
    if any(len(part) > _MAX_DIGITS for part in parts):
        raise ValueError(f"{what} {_quoted(text)} has a part longer than {_MAX_DIGITS} digits")
    return tuple(int(part) for part in parts)


@frozen(kw_only=False, order=True)
class DriverVersion:
    """An NVIDIA driver version such as ``535.104.05``; compares numerically."""

    parts: tuple[int, ...]
    text: str = field(compare=False)

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        parts = parse_dotted(text, what="driver version")
        if parts[0] < 100:  # every driver since CUDA 2 is >= 180; "12.2" is nvidia-smi's CUDA
            raise ValueError(
                f"driver version {_quoted(text)} looks like a CUDA version, not a driver"
            )
        return cls(parts, text.strip())

    @property
    def major(self) -> int:
        return self.parts[0]

    def __str__(self) -> str:
        return self.text


@frozen(kw_only=False, order=True)
class CudaVersion:
    """A CUDA version as major.minor (``12.4``). Patch levels are not part of compatibility."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        """Accept ``12.4``, ``12.4.1``, ``V12.4.131`` and ``cu124``; a bare ``12`` or ``124`` is
        an error."""
        cleaned = text.strip()
        if match := re.fullmatch(r"[cC][uU](\d{2,3})", cleaned):
            digits = match.group(1)
            if (
                len(digits) == 2 and int(digits[0]) < 7
            ):  # "cu12" is not CUDA 1.2; cu80/cu92 are real
                raise ValueError(
                    f"CUDA variant {text!r} is ambiguous; write e.g. 'cu121' or '12.1'"
                )
            return cls(int(digits[:-1]), int(digits[-1]))
        cleaned = cleaned.removeprefix("V").removeprefix("v")
        parts = parse_dotted(cleaned, what="CUDA version")
        if len(parts) == 1:
            raise ValueError(f"CUDA version {_quoted(text)} needs a minor part, e.g. '12.4'")
        if parts[0] > 99 or parts[1] > 9:
            raise ValueError(f"CUDA version {_quoted(text)} is out of range (expected e.g. '12.4')")
        return cls(parts[0], parts[1])

    @classmethod
    def from_driver_api(cls, value: int) -> CudaVersion:
        """Convert ``cuDriverGetVersion``'s integer (12080) into 12.8."""
        return cls(value // 1000, (value % 1000) // 10)

    @property
    def variant(self) -> str:
        """The PyTorch wheel-index variant name: ``cu124``."""
        return f"cu{self.major}{self.minor}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@frozen(kw_only=False, order=True)
class ComputeCapability:
    """A GPU's compute capability (8.6); ``suffix`` is ``a`` or ``f`` for arch/family targets."""

    major: int
    minor: int
    suffix: str = ""

    @classmethod
    def parse(cls, text: str) -> ComputeCapability:
        """Accept ``8.6``, ``9.0a``, ``sm_86``, ``compute_90``, ``sm_100a``."""
        cleaned = text.strip().lower()
        if match := re.fullmatch(r"(?:sm|compute)_(\d{1,3}?)(\d)([af]?)", cleaned):
            return cls(int(match.group(1)), int(match.group(2)), match.group(3))
        if match := re.fullmatch(r"(\d{1,3})\.(\d)([af]?)", cleaned):
            return cls(int(match.group(1)), int(match.group(2)), match.group(3))
        raise ValueError(
            f"compute capability {_quoted(text)} is not of the form '8.6', '9.0a' or 'sm_86'"
        )

    @property
    def sm(self) -> str:
        """The nvcc name: ``sm_86``."""
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def number(self) -> int:
        """Two-or-three digit form used by nvcc and CMake: 86, 100."""
        return self.major * 10 + self.minor

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"
