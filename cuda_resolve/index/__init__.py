"""The curated index: CUDA toolkit facts, torch builds and extension packages (see model.py).

``default_index()`` returns the shipped index plus the user's overlay directories, parsed once.
"""

from __future__ import annotations

from .model import (
    ArchEntry,
    CudaFamily,
    ExtensionWheels,
    Index,
    Package,
    Patch,
    Recipe,
    SmokeTest,
    ToolkitFacts,
    TorchRelease,
    TorchVariant,
    parse_arch_entry,
)

__all__ = [
    "ArchEntry",
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
    "default_index",
    "parse_arch_entry",
]


def default_index() -> Index:
    """The shipped index merged with configured overlays; cached for the process."""
    from .load import load_default_index

    return load_default_index()
