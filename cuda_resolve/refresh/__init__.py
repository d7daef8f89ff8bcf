"""Re-deriving index entries from the real indexes: ``cuda-resolve index refresh``.

One module per source: :mod:`.torch` (PyPI's JSON API, wheel metadata, the PyTorch wheel index
page) and :mod:`.kaolin` (NVIDIA's find-links pages); :mod:`.common` holds what both use. The
index package stays free of network code: this package reads pages through
:class:`cuda_resolve.net.HttpClient`, checks every answer's shape, and writes overlays the index
loader then reads. Progress goes to a callback (:data:`.common.Progress`) the CLI renders.
"""

from __future__ import annotations

from ._readings import ReadingCache, default_reading_cache
from .common import Change, Progress, Unreachable, python_versions
from .kaolin import KAOLIN_SOURCE_KEY, KaolinFacts, KaolinRefresh, parse_kaolin_page, refresh_kaolin
from .torch import (
    PYPI_TORCH_JSON,
    PYTORCH_TORCH_PAGE,
    SOURCE_KEY,
    ReleaseFacts,
    TorchRefresh,
    WheelReading,
    apply_facts,
    compare,
    cuda_pin,
    derive_torch,
    overlay_document,
    parse_index_page,
    refresh_torch,
    variant_from_version_py,
)

__all__ = [
    "KAOLIN_SOURCE_KEY",
    "PYPI_TORCH_JSON",
    "PYTORCH_TORCH_PAGE",
    "SOURCE_KEY",
    "Change",
    "KaolinFacts",
    "KaolinRefresh",
    "Progress",
    "ReadingCache",
    "ReleaseFacts",
    "TorchRefresh",
    "Unreachable",
    "WheelReading",
    "apply_facts",
    "compare",
    "cuda_pin",
    "default_reading_cache",
    "derive_torch",
    "overlay_document",
    "parse_index_page",
    "parse_kaolin_page",
    "python_versions",
    "refresh_kaolin",
    "refresh_torch",
    "variant_from_version_py",
]
