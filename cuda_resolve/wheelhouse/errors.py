"""The wheelhouse's one error class (a :class:`~cuda_resolve.errors.CudaResolveError`)."""

from __future__ import annotations

from ..errors import CudaResolveError

__all__ = ["WheelhouseError"]


class WheelhouseError(CudaResolveError):
    """The wheelhouse cannot be read or written, a key or entry is not valid, or a lock timed out.

    The message names the path (or the key field and its value); the hint says what to do.
    """
