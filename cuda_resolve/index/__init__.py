"""The curated index: CUDA toolkit facts, torch builds and extension packages (see model.py).

``default_index()`` returns the shipped index plus the user's overlay directories, parsed once;
``default_cuda_facts()`` only its CUDA facts (see cuda.py), which is all a plain ``doctor``
reads. The package catalogue's classes (:mod:`.model`) are imported on first use, not with this
package: a command that only describes the machine never creates them.
"""

from __future__ import annotations

from .cuda import ArchEntry, CudaFacts, CudaFamily, ToolkitFacts, parse_arch_entry

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any

    from .model import (
        ExtensionWheels,
        Index,
        Package,
        Patch,
        Recipe,
        SmokeTest,
        TorchRelease,
        TorchVariant,
    )

__all__ = [
    "ArchEntry",
    "CudaFacts",
    "CudaFamily",
    "ExtensionWheels",
    "Index",
    "Package",
    "Patch",
    "Recipe",
    "SmokeTest",
    "ToolkitFacts",
    "TorchRelease",
    "TorchVariant",
    "default_cuda_facts",
    "default_index",
    "parse_arch_entry",
]

_FROM_MODEL = frozenset(
    {
        "ExtensionWheels",
        "Index",
        "Package",
        "Patch",
        "Recipe",
        "SmokeTest",
        "TorchRelease",
        "TorchVariant",
    }
)


def __getattr__(name: str) -> Any:
    if name in _FROM_MODEL:
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _FROM_MODEL)


def default_index() -> Index:
    """The shipped index merged with configured overlays; cached for the process."""
    from .load import load_default_index

    return load_default_index()


def default_cuda_facts() -> CudaFacts:
    """The CUDA facts of :func:`default_index`, read without the rest of it when cached."""
    from .load import load_default_cuda_facts

    return load_default_cuda_facts()
