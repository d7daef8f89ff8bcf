"""The NVIDIA kernel driver's version from plain files, and the CUDA version a driver supports.

``/sys/module/nvidia/version`` holds just the version; ``/proc/driver/nvidia/version`` holds a
banner (``NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct ...``). Both are
read under a *root* so tests can supply a fake sysfs/procfs. Neither says which CUDA version
the driver supports: that comes from libcuda, NVML or nvidia-smi (see :mod:`.nvidia`), and only
when none of them answers is it derived from the index's table of toolkit driver minimums.
"""

from __future__ import annotations

from pathlib import Path

from .._lazy_re import lazy_compile
from ..versions import CudaVersion, DriverVersion
from ._files import read_text, under_root

__all__ = [
    "cuda_for_driver_version",
    "driver_version_from_files",
    "parse_module_version",
    "parse_proc_version",
]

SYS_MODULE_VERSION = "/sys/module/nvidia/version"
PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"

#: A driver version as the kernel module prints it: 580.159.04, 535.104.05, 470.82.01, 390.157.
_DRIVER_NUMBER = lazy_compile(r"(?<![\d.])(\d{3,4}\.\d{1,3}(?:\.\d{1,3})?)(?![\d.])")


def _driver(text: str) -> DriverVersion | None:
    try:
        return DriverVersion.parse(text)
    except ValueError:
        return None


def parse_module_version(text: str) -> DriverVersion | None:
    """``/sys/module/nvidia/version``: one line, ``580.159.04``."""
    stripped = text.strip()
    return _driver(stripped) if _DRIVER_NUMBER.fullmatch(stripped) else None


def parse_proc_version(text: str) -> DriverVersion | None:
    """The ``NVRM version:`` line of ``/proc/driver/nvidia/version`` (proprietary or open
    module)."""
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            match = _DRIVER_NUMBER.search(line)
            return _driver(match.group(1)) if match else None
    return None


def driver_version_from_files(root: Path) -> tuple[DriverVersion, str] | None:
    """The loaded kernel module's version and the file that said so, or ``None``."""
    for path, parse in (
        (SYS_MODULE_VERSION, parse_module_version),
        (PROC_DRIVER_VERSION, parse_proc_version),
    ):
        text = read_text(under_root(root, path))
        version = parse(text) if text is not None else None
        if version is not None:
            return version, path
    return None


def cuda_for_driver_version(version: DriverVersion) -> CudaVersion | None:
    """The highest CUDA *version* supports, from the index; ``None`` when it cannot be told.

    Only used when no probe reported the CUDA version itself. Imported lazily: the index is
    parsed on first use, which the common path (libcuda or NVML answered) never needs.
    """
    try:
        from ..compat import cuda_for_driver
        from ..errors import CudaResolveError
        from ..index import default_cuda_facts
    except ImportError:
        return None
    try:
        return cuda_for_driver(version, default_cuda_facts())
    except (ImportError, CudaResolveError):
        return None
