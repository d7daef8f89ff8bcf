"""cuda-resolve: a CUDA-aware resolver for PyTorch and its CUDA extensions.

Detect the machine (:mod:`cuda_resolve.detect`) into a frozen
:class:`~cuda_resolve.environment.Environment`, decide from the curated index, and act.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
