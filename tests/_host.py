"""What the machine running the tests has, for the few tests that describe it for real.

A machine "has an NVIDIA driver" for these tests when the kernel module is loaded (its version
file exists) or when a driver library can be loaded: a build node or container may ship
``libcuda.so.1``/``libnvidia-ml.so.1`` without the module, and the in-process probes then
answer from the libraries.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

__all__ = ["NVIDIA_DRIVER_FILES", "NVIDIA_DRIVER_HERE", "NVIDIA_DRIVER_REASON"]

NVIDIA_DRIVER_FILES = (
    Path("/sys/module/nvidia/version").exists() or Path("/proc/driver/nvidia/version").exists()
)


def _loadable(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


NVIDIA_DRIVER_HERE = (
    NVIDIA_DRIVER_FILES or _loadable("libnvidia-ml.so.1") or _loadable("libcuda.so.1")
)
NVIDIA_DRIVER_REASON = "this machine has an NVIDIA driver (kernel module or driver libraries)"
