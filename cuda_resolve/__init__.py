"""cuda-resolve: a CUDA-aware resolver for PyTorch and its CUDA extensions.

Detect the machine (:mod:`cuda_resolve.detect`) into a frozen
:class:`~cuda_resolve.environment.Environment`, decide from the curated index, and act.
"""

from __future__ import annotations

__all__ = ["__version__", "version_text"]

__version__ = "0.1.0"


def version_text() -> str:
    """``--version``: the program's version and how current its shipped index is. The index has
    no date field; its date is the newest date its files cite (sources "rechecked 2026-12-02")."""
    import re

    from .index.load import shipped_index_dir

    dates: set[str] = set()
    pending = [shipped_index_dir()]
    while pending:
        folder = pending.pop()
        for entry in folder.iterdir():
            if entry.is_dir():
                pending.append(entry)
            elif entry.name.endswith(".toml"):
                dates.update(
                    re.findall(r"\b(20\d\d-[01]\d-[0-3]\d)\b", entry.read_text(encoding="utf-8"))
                )
    dated = f"index of {max(dates)}" if dates else "index without a date"
    return f"cuda-resolve {__version__} ({dated}: the newest date its sources cite)"
