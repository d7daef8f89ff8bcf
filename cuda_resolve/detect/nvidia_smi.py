"""``nvidia-smi``: the last resort for driver and GPU facts, and the parsers for its output.

It is a separate program (22 ms on the H200, and it can hang on a wedged GPU), so it runs
only when NVML and libcuda gave no answer, always under a timeout. Two invocations are used:
the plain banner, whose header carries ``Driver Version`` and ``CUDA Version``, and a CSV
query for the GPUs. The parsers are pure functions over recorded text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .._frozen import frozen
from ..environment import Gpu
from ..versions import ComputeCapability, CudaVersion, DriverVersion
from ._run import current_deadline, run

__all__ = [
    "GPU_QUERY",
    "SmiHeader",
    "parse_smi_gpus",
    "parse_smi_header",
    "query_smi_gpus",
    "query_smi_header",
    "smi_problem",
]

GPU_QUERY = (
    "--query-gpu=index,name,uuid,compute_cap,memory.total",
    "--format=csv,noheader,nounits",
)

_DRIVER = re.compile(r"Driver Version:\s*([\d.]+)")
_CUDA = re.compile(r"CUDA Version:\s*([\d.]+)")
#: Lines nvidia-smi prints instead of a table, and what they mean for the user.
_PROBLEMS = (
    "No devices were found",
    "Failed to initialize NVML",
    "NVIDIA-SMI has failed",
    "Unable to determine the device handle",
    "Insufficient Permissions",
    "not a valid field to query",
)


@frozen(kw_only=False)
class SmiHeader:
    driver_version: DriverVersion | None
    cuda: CudaVersion | None  # the driver's CUDA version; older drivers (< 410) omit it


def parse_smi_header(text: str) -> SmiHeader | None:
    """``| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |``."""
    driver = _DRIVER.search(text)
    if driver is None:
        return None
    try:
        version = DriverVersion.parse(driver.group(1))
    except ValueError:
        return None
    cuda_match = _CUDA.search(text)
    cuda = None
    if cuda_match is not None:
        try:
            cuda = CudaVersion.parse(cuda_match.group(1))
        except ValueError:
            cuda = None
    return SmiHeader(version, cuda)


def _optional(field: str) -> str | None:
    return None if not field or field.startswith("[") else field  # "[N/A]", "[Not Supported]"


def parse_smi_gpus(text: str) -> tuple[Gpu, ...]:
    """Rows of ``index, name, uuid, compute_cap, memory.total`` (``MiB`` suffix optional)."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit():
            continue
        index, name, uuid, capability, memory = fields
        try:
            compute_capability = ComputeCapability.parse(capability)
        except ValueError:
            continue
        memory_number = memory.removesuffix("MiB").strip()
        gpus.append(
            Gpu(
                index=int(index),
                name=name,
                compute_capability=compute_capability,
                uuid=_optional(uuid),
                memory_mib=int(memory_number) if memory_number.isdigit() else None,
            )
        )
    return tuple(gpus)


def smi_problem(text: str) -> str | None:
    """The line in which nvidia-smi explains why it printed no table, if it did."""
    for line in text.splitlines():
        stripped = line.strip()
        if any(marker in stripped for marker in _PROBLEMS):
            return stripped
    return None


def _failure(
    executable: str, ran_output: str, returncode: int | None, timeout: float
) -> str | None:
    if returncode is None:
        if current_deadline() is not None:
            return None  # the shared deadline's record says which probe was slow
        return f"nvidia-smi ({executable}) timed out after {timeout:g} s"
    problem = smi_problem(ran_output)
    if problem is not None:
        return f"nvidia-smi: {problem}"
    first = next((line.strip() for line in ran_output.splitlines() if line.strip()), "no output")
    return f"nvidia-smi exited {returncode}: {first}"


def query_smi_header(
    executable: str, *, environ: Mapping[str, str], timeout: float
) -> tuple[SmiHeader | None, str | None]:
    """The banner's driver and CUDA versions, or a note saying why there are none."""
    ran = run([executable], timeout=timeout, environ=environ)
    if ran is None:
        return None, f"nvidia-smi ({executable}) could not be started"
    output = ran.stdout + ran.stderr
    header = parse_smi_header(ran.stdout) if ran.ok else None
    if header is not None:
        return header, None
    return None, _failure(executable, output, ran.returncode, timeout)


def query_smi_gpus(
    executable: str, *, environ: Mapping[str, str], timeout: float
) -> tuple[tuple[Gpu, ...], str | None]:
    """Every GPU nvidia-smi lists, or a note saying why it listed none."""
    ran = run([executable, *GPU_QUERY], timeout=timeout, environ=environ)
    if ran is None:
        return (), f"nvidia-smi ({executable}) could not be started"
    gpus = parse_smi_gpus(ran.stdout) if ran.ok else ()
    if gpus:
        return gpus, None
    return (), _failure(executable, ran.stdout + ran.stderr, ran.returncode, timeout)
