"""NVML (``libnvidia-ml``) through ctypes: driver version, its CUDA version and every GPU.

Why not ``pynvml``: importing it costs about 25 ms on a developer machine (``ctypes.util``
plus thousands of lines of structure definitions), more than the whole in-process detection
budget of 15 ms. The nine entry points used here have had the same C signatures since NVML
shipped them (``nvmlDeviceGetCudaComputeCapability`` since driver 410).

NVML lists every GPU in PCI order regardless of ``CUDA_VISIBLE_DEVICES``: a build must cover
all of them, not only those one process is allowed to see.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass

from ..environment import Gpu
from ..versions import ComputeCapability

__all__ = ["NvmlFailure", "NvmlReport", "query_nvml"]

_LIBRARY = "nvml.dll" if sys.platform == "win32" else "libnvidia-ml.so.1"
_SUCCESS = 0
_BUFFER = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE, also enough for UUIDs and driver versions


class _Memory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


@dataclass(frozen=True, slots=True)
class NvmlReport:
    driver_version: str | None
    cuda_driver_version: int | None  # 13000 for CUDA 13.0, as the driver API counts
    gpus: tuple[Gpu, ...]
    problems: tuple[str, ...]  # per-device failures ("GPU 3: GPU is lost")


@dataclass(frozen=True, slots=True)
class NvmlFailure:
    """NVML loaded but refused to start; *message* is NVML's own (nvidia-smi prints the same)."""

    message: str


def query_nvml() -> NvmlReport | NvmlFailure | None:
    """One NVML session; ``None`` when the library is not installed (no driver here)."""
    try:
        lib = ctypes.CDLL(_LIBRARY)
    except OSError:
        return None
    try:
        return _query(lib)
    except AttributeError as exc:  # a library too old to have an entry point we need
        return NvmlFailure(f"NVML library lacks {exc}")


def _error(lib: ctypes.CDLL, code: int) -> str:
    try:
        describe = lib.nvmlErrorString
        describe.restype = ctypes.c_char_p
        text = describe(code)
    except AttributeError:
        text = None
    return text.decode("utf-8", "replace") if text else f"NVML error {code}"


def _string(lib: ctypes.CDLL, call: str, *leading: object) -> tuple[str | None, int]:
    buffer = ctypes.create_string_buffer(_BUFFER)
    code = getattr(lib, call)(*leading, buffer, ctypes.c_uint(_BUFFER))
    if code != _SUCCESS:
        return None, code
    return buffer.value.decode("utf-8", "replace"), code


def _query(lib: ctypes.CDLL) -> NvmlReport | NvmlFailure:
    init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
    code = init()
    if code != _SUCCESS:
        return NvmlFailure(_error(lib, code))
    try:
        driver_version, _ = _string(lib, "nvmlSystemGetDriverVersion")
        cuda = ctypes.c_int()
        get_cuda = getattr(lib, "nvmlSystemGetCudaDriverVersion_v2", None) or lib.nvmlSystemGetCudaDriverVersion
        cuda_version = cuda.value if get_cuda(ctypes.byref(cuda)) == _SUCCESS and cuda.value > 0 else None
        gpus, problems = _devices(lib)
        return NvmlReport(driver_version, cuda_version, gpus, problems)
    finally:
        lib.nvmlShutdown()


def _devices(lib: ctypes.CDLL) -> tuple[tuple[Gpu, ...], tuple[str, ...]]:
    count = ctypes.c_uint()
    get_count = getattr(lib, "nvmlDeviceGetCount_v2", None) or lib.nvmlDeviceGetCount
    code = get_count(ctypes.byref(count))
    if code != _SUCCESS:
        return (), (f"NVML could not count GPUs: {_error(lib, code)}",)
    get_handle = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or lib.nvmlDeviceGetHandleByIndex
    gpus: list[Gpu] = []
    problems: list[str] = []
    for index in range(count.value):
        handle = ctypes.c_void_p()
        code = get_handle(ctypes.c_uint(index), ctypes.byref(handle))
        if code != _SUCCESS:
            problems.append(f"NVML GPU {index}: {_error(lib, code)}")
            continue
        major, minor = ctypes.c_int(), ctypes.c_int()
        code = lib.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor))
        if code != _SUCCESS:
            problems.append(f"NVML GPU {index}: no compute capability: {_error(lib, code)}")
            continue
        name, _ = _string(lib, "nvmlDeviceGetName", handle)
        uuid, _ = _string(lib, "nvmlDeviceGetUUID", handle)
        memory = _Memory()
        memory_mib = (
            memory.total // (1024 * 1024)
            if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) == _SUCCESS
            else None
        )
        gpus.append(
            Gpu(
                index=index,
                name=name or "unknown NVIDIA GPU",
                compute_capability=ComputeCapability(major.value, minor.value),
                uuid=uuid,
                memory_mib=memory_mib,
            )
        )
    return tuple(gpus), tuple(problems)
