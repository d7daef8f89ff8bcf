"""The NVIDIA driver and GPUs, cheapest probe first.

Order, and why:

1. ``/sys/module/nvidia/version``, then ``/proc/driver/nvidia/version``: the kernel module's
   version from a plain file (microseconds). No CUDA version, no GPUs.
2. libcuda's ``cuDriverGetVersion``: the driver's CUDA version, under a millisecond.
3. A cached answer: NVML's last report, reused while the boot, the driver version and the
   GPUs' PCI addresses are unchanged (see :mod:`._cache`).
4. NVML through pynvml: driver version, CUDA version and every GPU with its compute
   capability (one session, under a deadline). Its failure text (``Driver/library version
   mismatch``) becomes a note. Asked only when step 1 or 2 found a driver: without one there
   is nothing to ask, and importing pynvml costs more than every other probe together.
5. libcuda's device attributes 75/76 after ``cuInit``, when NVML is absent.
6. ``nvidia-smi`` (a subprocess, under a timeout) for whatever is still unknown. It is an
   NVML client, so it is skipped when NVML itself refused to start: it would fail the same way.
7. The CUDA version derived from the driver version through the index, as a last resort.

Steps 2-5 load libraries into this process and so describe the real machine; they run only
when *root* is ``/`` (a fake root in tests means "this machine's files, not its libraries"),
unless *libraries* says otherwise: the stand-in library tests pair a fake root with stand-in
libraries on ``LD_LIBRARY_PATH``, so that every fact comes from the stand-in machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .._frozen import frozen
from ..environment import Driver, Gpu
from ..versions import ComputeCapability, CudaVersion, DriverVersion
from ._cache import ProbeCache
from ._files import read_text, under_root, which
from ._run import Background, call_with_timeout
from .driver import cuda_for_driver_version, driver_version_from_files

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any

    from .nvidia_smi import SmiHeader

# NVML (_nvml) and nvidia-smi (nvidia_smi) are imported where they are asked: a repeated run
# answers from the cache and needs neither, and every module imported costs start-up time.

__all__ = ["NvidiaFacts", "probe_nvidia"]

_FILE_SOURCES = {"/sys/module/nvidia/version": "sysfs", "/proc/driver/nvidia/version": "procfs"}


@frozen(kw_only=False)
class NvidiaFacts:
    """The driver and GPUs the NVIDIA probes found, with what they noted."""

    driver: Driver | None
    gpus: tuple[Gpu, ...]
    notes: tuple[str, ...] = ()


class _Findings:
    """What the probes have said so far; each field is filled by the first probe that knows.
    (A plain class: a warm ``doctor`` imports no :mod:`dataclasses`, see ``_frozen``.)"""

    __slots__ = (
        "cuda",
        "cuda_source",
        "gpus",
        "gpus_source",
        "notes",
        "nvml_refused",
        "version",
        "version_source",
    )

    def __init__(
        self,
        *,
        version: DriverVersion | None = None,
        version_source: str | None = None,
        cuda: CudaVersion | None = None,
        cuda_source: str | None = None,
        gpus: tuple[Gpu, ...] | None = None,  # None: not enumerated; () : enumerated, none there
        gpus_source: str | None = None,
        nvml_refused: bool = False,
        notes: list[str] | None = None,
    ) -> None:
        self.version = version
        self.version_source = version_source
        self.cuda = cuda
        self.cuda_source = cuda_source
        self.gpus = gpus
        self.gpus_source = gpus_source
        self.nvml_refused = nvml_refused
        self.notes: list[str] = [] if notes is None else notes

    def set_version(self, text: str | None, source: str) -> None:
        if self.version is None and text:
            try:
                self.version = DriverVersion.parse(text)
                self.version_source = source
            except ValueError:
                self.notes.append(f"{source} reported an unreadable driver version {text!r}")

    def set_cuda(self, value: CudaVersion | int | None, source: str) -> None:
        if self.cuda is None and value is not None:
            self.cuda = CudaVersion.from_driver_api(value) if isinstance(value, int) else value
            self.cuda_source = source


def probe_nvidia(
    *,
    root: Path,
    environ: Mapping[str, str],
    timeout: float,
    cache: ProbeCache,
    libraries: bool | None = None,
) -> NvidiaFacts:
    """The driver and GPUs of *root*'s machine; *libraries*: load libcuda and NVML (default: root
    is /)."""
    found = _Findings()
    from_files = driver_version_from_files(root)
    if from_files is not None:
        found.version, path = from_files
        found.version_source = _FILE_SOURCES[path]
    if libraries is None:
        libraries = root == Path("/")
    if libraries:
        from . import _libcuda

        # libcuda's CUDA version is asked every time (it is the cheapest probe, and a
        # forward-compatibility package can change it without a reboot); GPUs may come cached.
        found.set_cuda(_libcuda.driver_cuda_version(), "libcuda")
        cache_key = _gpu_cache_key(root, found.version)
        if not _from_cache(found, cache, cache_key):
            _probe_libraries(found, timeout)
            _remember(found, cache, cache_key)
    _probe_nvidia_smi(found, environ, timeout)
    return _conclude(found)


def _probe_libraries(found: _Findings, timeout: float) -> None:
    if found.version is None and found.cuda is None:
        return  # no kernel module and no libcuda: no driver for NVML or cuInit to describe
    from . import _libcuda, _nvml

    boxed = call_with_timeout(
        lambda: (_nvml.query_nvml(),), timeout=timeout, label="NVML (nvmlInit)"
    )
    if boxed is None:
        found.notes.append(f"NVML did not answer within {timeout:g} s")
        found.nvml_refused = True
        return
    nvml = boxed[0]
    if isinstance(nvml, _nvml.NvmlFailure):
        found.notes.append(f"Failed to initialize NVML: {nvml.message}")
        found.nvml_refused = True
    elif isinstance(nvml, _nvml.NvmlReport):
        found.set_version(nvml.driver_version, "NVML")
        found.set_cuda(nvml.cuda_driver_version, "NVML")
        found.notes.extend(nvml.problems)
        found.gpus, found.gpus_source = nvml.gpus, "NVML"
        return
    boxed_devices = call_with_timeout(
        lambda: (_libcuda.query_devices(),), timeout=timeout, label="libcuda (cuInit)"
    )
    if boxed_devices is None:
        found.notes.append(f"libcuda: cuInit did not answer within {timeout:g} s")
        return
    devices = boxed_devices[0]
    if devices is None:
        return  # no libcuda either; nvidia-smi may still answer
    if devices.problem:
        found.notes.append(f"libcuda: {devices.problem}")
    else:
        found.gpus, found.gpus_source = devices.gpus, "libcuda"


def _probe_nvidia_smi(found: _Findings, environ: Mapping[str, str], timeout: float) -> None:
    need_header = found.version is None or found.cuda is None
    need_gpus = found.gpus is None
    if found.nvml_refused or not (need_header or need_gpus):
        return
    executable = which("nvidia-smi", environ)
    if executable is None:
        return
    from .nvidia_smi import query_smi_gpus, query_smi_header

    header: SmiHeader | None = None
    # The two invocations overlap: each can take tens of milliseconds, or the whole timeout.
    header_job = (
        Background(lambda: query_smi_header(executable, environ=environ, timeout=timeout))
        if need_header
        else None
    )
    gpus_job = (
        Background(lambda: query_smi_gpus(executable, environ=environ, timeout=timeout))
        if need_gpus
        else None
    )
    if header_job is not None:
        header, problem = header_job.result()
        if problem:
            found.notes.append(problem)
    if gpus_job is not None:
        gpus, problem = gpus_job.result()
        if gpus:
            found.gpus, found.gpus_source = gpus, "nvidia-smi"
        elif problem and problem not in found.notes:
            found.notes.append(problem)
    if header is not None:
        if header.driver_version is not None:
            found.set_version(header.driver_version.text, "nvidia-smi")
        found.set_cuda(header.cuda, "nvidia-smi")


def _conclude(found: _Findings) -> NvidiaFacts:
    gpus = found.gpus or ()
    if found.version is None:
        if gpus:
            found.notes.append(f"{len(gpus)} GPU(s) found but no driver version could be read")
        return NvidiaFacts(None, (), tuple(found.notes))
    if found.cuda is None:
        derived = cuda_for_driver_version(found.version)
        found.set_cuda(derived, "index")
    if found.cuda is None:
        found.notes.append(
            f"NVIDIA driver {found.version} is loaded, but the CUDA version it supports is unknown "
            "(libcuda, NVML and nvidia-smi gave no answer and the index has no entry for it)"
        )
        return NvidiaFacts(None, (), tuple(found.notes))
    if found.gpus == ():
        found.notes.append(
            f"NVIDIA driver {found.version} is loaded but no GPU is visible (No devices were found)"
        )
    source = found.version_source or "unknown"
    if found.cuda_source and found.cuda_source != source:
        source = f"{source}+{found.cuda_source}"
    driver = Driver(version=found.version, cuda=found.cuda, source=source)
    return NvidiaFacts(driver, gpus, tuple(dict.fromkeys(found.notes)))


# -- the GPU cache -----------------------------------------------------------------------------


def _gpu_cache_key(root: Path, version: DriverVersion | None) -> str | None:
    """Boot id, driver version and PCI addresses: the GPU facts cannot change while these hold."""
    if version is None:
        return None
    boot_id = read_text(under_root(root, "/proc/sys/kernel/random/boot_id"))
    try:
        addresses = sorted(os.listdir(under_root(root, "/proc/driver/nvidia/gpus")))
    except OSError:
        return None
    if not boot_id or not addresses:
        return None
    return f"{boot_id.strip()}|{version}|{','.join(addresses)}"


def _from_cache(found: _Findings, cache: ProbeCache, key: str | None) -> bool:
    if key is None:
        return False
    entry = cache.get("nvidia", key)
    if not isinstance(entry, dict):
        return False
    try:
        gpus = tuple(
            Gpu(
                index=int(gpu["index"]),
                name=str(gpu["name"]),
                compute_capability=ComputeCapability.parse(str(gpu["compute_capability"])),
                uuid=gpu.get("uuid"),
                memory_mib=gpu.get("memory_mib"),
            )
            for gpu in entry["gpus"]
        )
        cuda = CudaVersion.parse(str(entry["cuda"]))
    except (KeyError, TypeError, ValueError):
        return False
    found.set_cuda(cuda, "NVML")  # only when libcuda did not answer
    found.gpus, found.gpus_source = gpus, "NVML (cached)"
    return True


def _remember(found: _Findings, cache: ProbeCache, key: str | None) -> None:
    # Only a clean, complete NVML answer is worth remembering: libcuda's depends on this
    # process's CUDA_VISIBLE_DEVICES, and a partial answer should be retried next time.
    if (
        key is None
        or found.gpus_source != "NVML"
        or not found.gpus
        or found.cuda is None
        or found.notes
    ):
        return
    entry: dict[str, Any] = {
        "cuda": str(found.cuda),
        "gpus": [
            {
                "index": gpu.index,
                "name": gpu.name,
                "compute_capability": str(gpu.compute_capability),
                "uuid": gpu.uuid,
                "memory_mib": gpu.memory_mib,
            }
            for gpu in found.gpus
        ],
    }
    cache.put("nvidia", key, entry)
