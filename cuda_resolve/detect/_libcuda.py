"""The CUDA driver library (``libcuda``) through ctypes.

``cuDriverGetVersion`` needs no initialisation and answers in well under a millisecond: the
cheapest way to learn which CUDA version the installed driver supports. Device queries need
``cuInit``, which can take long on a machine without persistence mode, so they are a fallback
for when NVML is unavailable, and they run under a deadline (see :func:`._run.call_with_timeout`).
Unlike NVML, libcuda honours this process's ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import ctypes
import sys

from .._frozen import frozen
from ..environment import Gpu
from ..versions import ComputeCapability

__all__ = ["CudaDeviceReport", "driver_cuda_version", "format_uuid", "query_devices"]

_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
_SUCCESS = 0
_NO_DEVICE = 100  # CUDA_ERROR_NO_DEVICE
_ATTRIBUTE_CC_MAJOR = 75  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
_ATTRIBUTE_CC_MINOR = 76


@frozen(kw_only=False)
class CudaDeviceReport:
    """The GPUs libcuda lists, or why it could not list them."""

    gpus: tuple[Gpu, ...]
    problem: str | None  # "cuInit: no CUDA-capable device is detected"


def _load() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(_LIBRARY)
    except OSError:
        return None


def driver_cuda_version() -> int | None:
    """``cuDriverGetVersion``: 13000 for a driver that supports CUDA 13.0; ``None`` if no
    libcuda."""
    lib = _load()
    if lib is None:
        return None
    version = ctypes.c_int()
    try:
        code = lib.cuDriverGetVersion(ctypes.byref(version))
    except AttributeError:
        return None
    return version.value if code == _SUCCESS and version.value > 0 else None


def _error(lib: ctypes.CDLL, code: int) -> str:
    text = ctypes.c_char_p()
    try:
        if lib.cuGetErrorString(code, ctypes.byref(text)) == _SUCCESS and text.value:
            return text.value.decode("utf-8", "replace")
    except AttributeError:
        pass
    return f"CUDA driver error {code}"


def query_devices() -> CudaDeviceReport | None:
    """Every device libcuda can see, with compute capability from attributes 75/76."""
    lib = _load()
    if lib is None:
        return None
    try:
        return _devices(lib)
    except AttributeError as exc:
        return CudaDeviceReport((), f"libcuda lacks {exc}")


def _devices(lib: ctypes.CDLL) -> CudaDeviceReport:
    code = lib.cuInit(0)
    if code == _NO_DEVICE:
        return CudaDeviceReport((), None)
    if code != _SUCCESS:
        return CudaDeviceReport((), f"cuInit: {_error(lib, code)}")
    count = ctypes.c_int()
    code = lib.cuDeviceGetCount(ctypes.byref(count))
    if code != _SUCCESS:
        return CudaDeviceReport((), f"cuDeviceGetCount: {_error(lib, code)}")
    gpus: list[Gpu] = []
    for ordinal in range(count.value):
        device = ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(device), ordinal) != _SUCCESS:
            continue
        major, minor = ctypes.c_int(), ctypes.c_int()
        if (
            lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTRIBUTE_CC_MAJOR, device) != _SUCCESS
            or lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTRIBUTE_CC_MINOR, device)
            != _SUCCESS
        ):
            continue
        name = ctypes.create_string_buffer(256)
        got_name = lib.cuDeviceGetName(name, ctypes.c_int(256), device) == _SUCCESS
        memory = ctypes.c_size_t()
        total = getattr(lib, "cuDeviceTotalMem_v2", None) or lib.cuDeviceTotalMem
        got_memory = total(ctypes.byref(memory), device) == _SUCCESS
        gpus.append(
            Gpu(
                index=ordinal,
                name=name.value.decode("utf-8", "replace") if got_name else "unknown NVIDIA GPU",
                compute_capability=ComputeCapability(major.value, minor.value),
                uuid=_uuid(lib, device),
                memory_mib=memory.value // (1024 * 1024) if got_memory else None,
            )
        )
    return CudaDeviceReport(tuple(gpus), None)


def _uuid(lib: ctypes.CDLL, device: ctypes.c_int) -> str | None:
    """``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``, the form NVML and nvidia-smi print."""
    raw = (ctypes.c_ubyte * 16)()
    try:
        if lib.cuDeviceGetUuid(ctypes.byref(raw), device) != _SUCCESS:
            return None
    except AttributeError:
        return None
    return "GPU-" + format_uuid(bytes(raw))


def format_uuid(raw: bytes) -> str:
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"
