"""NVML (``libnvidia-ml``) through ``pynvml``: driver version, its CUDA version and every GPU.

``pynvml`` is NVIDIA's binding, from the ``nvidia-ml-py`` package, a declared dependency (the
design card; issue 2). Importing it is not free: 107.6 ms on a cold first run and 11.6 ms warm
on the H200, most of the 15 ms in-process detection budget. So it is imported inside
:func:`query_nvml`, and :mod:`.nvidia` calls that only on a probe-cache miss (the GPU list is
cached, keyed by boot id, driver version and PCI addresses) and only when the kernel module or
libcuda shows that a driver is there: a warm run, and any run on a machine without a driver,
never imports it.

pynvml raises :class:`pynvml.NVMLError` subclasses; here they become values, as every probe's
failures do. No library (``NVMLError_LibraryNotFound``) is ``None``; an ``nvmlInit`` that
fails (``Driver/library version mismatch``, ``Driver Not Loaded``) is an :class:`NvmlFailure`
carrying NVML's own text, the words nvidia-smi prints (pynvml's ``str()`` of the error
paraphrases some codes); a GPU that cannot be queried is a line in ``NvmlReport.problems``.

NVML lists every GPU in PCI order regardless of ``CUDA_VISIBLE_DEVICES``: a build must cover
all of them, not only those one process is allowed to see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._frozen import frozen
from ..environment import Gpu
from ..versions import ComputeCapability

__all__ = ["NvmlFailure", "NvmlReport", "query_nvml"]


@frozen(kw_only=False)
class NvmlReport:
    driver_version: str | None
    cuda_driver_version: int | None  # 13000 for CUDA 13.0, as the driver API counts
    gpus: tuple[Gpu, ...]
    problems: tuple[str, ...]  # per-device failures ("GPU 3: GPU is lost")


@frozen(kw_only=False)
class NvmlFailure:
    """NVML loaded but refused to start; *message* is NVML's own (nvidia-smi prints the same)."""

    message: str


class _Lacks(Exception):
    """The loaded library has no entry point for a call (a driver older than the call)."""


def query_nvml() -> NvmlReport | NvmlFailure | None:
    """One NVML session; ``None`` when the library is not installed (no driver here)."""
    try:
        import pynvml  # type: ignore[import-untyped]  # 11.6 ms warm: only on a cache miss
    except (
        ImportError
    ):  # a broken install (it is a dependency): libcuda and nvidia-smi still answer
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        return None
    except pynvml.NVMLError_FunctionNotFound:
        return NvmlFailure("NVML library lacks nvmlInitWithFlags")
    except pynvml.NVMLError as error:
        return NvmlFailure(_text(pynvml, error))
    try:
        return _session(pynvml)
    except _Lacks as missing:
        return NvmlFailure(f"NVML library lacks {missing}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass  # the answers are in; a failed shutdown changes none of them


def _text(nvml: Any, error: Any) -> str:
    """NVML's own words for *error* (``nvmlErrorString``), else pynvml's."""
    try:
        text = nvml.nvmlErrorString(error.value)
    except nvml.NVMLError:
        text = None
    return str(text) if text else str(error)


def _get(nvml: Any, call: Callable[..., Any], *args: object) -> tuple[Any, Any]:
    """``(answer, None)`` or ``(None, the NVMLError)``; a missing entry point raises _Lacks."""
    try:
        return call(*args), None
    except nvml.NVMLError_FunctionNotFound:
        raise _Lacks(call.__name__) from None
    except nvml.NVMLError as error:
        return None, error


def _session(nvml: Any) -> NvmlReport:
    driver_version, _ = _get(nvml, nvml.nvmlSystemGetDriverVersion)
    try:
        cuda, _ = _get(nvml, nvml.nvmlSystemGetCudaDriverVersion_v2)
    except _Lacks:  # older libraries have only the first version of the call
        cuda, _ = _get(nvml, nvml.nvmlSystemGetCudaDriverVersion)
    gpus, problems = _devices(nvml)
    return NvmlReport(
        driver_version=str(driver_version) if driver_version else None,
        cuda_driver_version=cuda if isinstance(cuda, int) and cuda > 0 else None,
        gpus=gpus,
        problems=problems,
    )


def _devices(nvml: Any) -> tuple[tuple[Gpu, ...], tuple[str, ...]]:
    count, error = _get(nvml, nvml.nvmlDeviceGetCount)
    if error is not None:
        return (), (f"NVML could not count GPUs: {_text(nvml, error)}",)
    gpus: list[Gpu] = []
    problems: list[str] = []
    for index in range(int(count)):
        handle, error = _get(nvml, nvml.nvmlDeviceGetHandleByIndex, index)
        if error is not None:
            problems.append(f"NVML GPU {index}: {_text(nvml, error)}")
            continue
        capability, error = _get(nvml, nvml.nvmlDeviceGetCudaComputeCapability, handle)
        if error is not None:
            problems.append(f"NVML GPU {index}: no compute capability: {_text(nvml, error)}")
            continue
        major, minor = capability
        name, _ = _get(nvml, nvml.nvmlDeviceGetName, handle)
        uuid, _ = _get(nvml, nvml.nvmlDeviceGetUUID, handle)
        memory, _ = _get(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
        gpus.append(
            Gpu(
                index=index,
                name=str(name) if name else "unknown NVIDIA GPU",
                compute_capability=ComputeCapability(int(major), int(minor)),
                uuid=str(uuid) if uuid else None,
                memory_mib=int(memory.total) // (1024 * 1024) if memory is not None else None,
            )
        )
    return tuple(gpus), tuple(problems)
