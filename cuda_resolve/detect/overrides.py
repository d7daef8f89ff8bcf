"""Environment variables that override what the probes found.

Precedence, highest first (the same order is documented in ``docs/detection.md``):

1. ``--profile FILE``: handled by the CLI; the machine is not probed and nothing below applies.
2. ``CUDA_RESOLVE_DRIVER`` (driver version, ``535.104.05``) and ``CUDA_RESOLVE_CUDA_ARCH``
   (compute capabilities, ``8.0,8.6``: one per GPU, replacing the probed ones).
3. conda's ``CONDA_OVERRIDE_CUDA`` (the CUDA version the driver supports, ``12.2``) and
   ``CONDA_OVERRIDE_CUDA_ARCH`` (CEP 46: the lowest compute capability, ``8.6``).
4. The probes.

An empty value means "absent", as in conda: ``CONDA_OVERRIDE_CUDA=`` or
``CUDA_RESOLVE_DRIVER=`` mean no driver, ``CONDA_OVERRIDE_CUDA_ARCH=`` or
``CUDA_RESOLVE_CUDA_ARCH=`` mean no GPU. A value that does not parse is a
:class:`~cuda_resolve.errors.UsageError` naming the variable, read before any probing.

Capabilities replace the probed GPUs' in order when the counts match (names and UUIDs kept);
otherwise one GPU is synthesised per listed capability. conda's variable knows only the
lowest capability, so with it every GPU is taken to have that capability.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._frozen import frozen, replace
from ..environment import Driver, Gpu
from ..errors import UsageError
from ..versions import ComputeCapability, CudaVersion, DriverVersion
from .driver import cuda_for_driver_version

__all__ = ["OVERRIDE_VARIABLES", "Overrides", "apply_overrides", "read_overrides"]

OVERRIDE_VARIABLES = (
    "CUDA_RESOLVE_DRIVER",
    "CUDA_RESOLVE_CUDA_ARCH",
    "CONDA_OVERRIDE_CUDA",
    "CONDA_OVERRIDE_CUDA_ARCH",
)


@frozen(kw_only=False)
class Overrides:
    """What the override variables (CUDA_RESOLVE_DRIVER, CONDA_OVERRIDE_CUDA ...) set, and which."""

    driver_set: bool = False  # a driver variable was present (possibly empty)
    driver_source: str | None = None  # the variable that decided the driver
    driver_version: DriverVersion | None = None  # None with driver_set: "no driver"
    driver_cuda: CudaVersion | None = None
    no_driver: bool = False
    capabilities: tuple[ComputeCapability, ...] | None = None  # None: not overridden; (): no GPU
    capabilities_source: str | None = None

    @property
    def any(self) -> bool:
        return self.driver_set or self.capabilities is not None


def _parse_driver(variable: str, value: str) -> DriverVersion:
    try:
        return DriverVersion.parse(value)
    except ValueError as exc:
        raise UsageError(
            f"{variable}={value!r}: {exc}",
            hint=f"set {variable} to a driver version such as 535.104.05 (nvidia-smi's 'Driver "
            "Version'), or unset it",
        ) from None


def _parse_cuda(variable: str, value: str) -> CudaVersion:
    try:
        return CudaVersion.parse(value)
    except ValueError as exc:
        raise UsageError(
            f"{variable}={value!r}: {exc}",
            hint=f"set {variable} to the CUDA version the driver supports, such as 12.2, or to an "
            "empty value for no driver",
        ) from None


def _parse_capabilities(variable: str, value: str) -> tuple[ComputeCapability, ...]:
    items = [item.strip() for item in value.replace(";", ",").split(",")]
    if not all(items):
        raise UsageError(
            f"{variable}={value!r}: an empty entry in the list",
            hint=f"set {variable} to compute capabilities separated by commas, such as 8.0,8.6",
        )
    try:
        return tuple(ComputeCapability.parse(item) for item in items)
    except ValueError as exc:
        raise UsageError(
            f"{variable}={value!r}: {exc}",
            hint=f"set {variable} to compute capabilities such as 8.6 (comma-separated for "
            "several GPUs)",
        ) from None


def read_overrides(environ: Mapping[str, str]) -> Overrides:
    """Parse the override variables; a bad value raises before anything is probed."""
    result = Overrides()
    conda_cuda_text = environ.get("CONDA_OVERRIDE_CUDA")
    conda_cuda = (
        _parse_cuda("CONDA_OVERRIDE_CUDA", conda_cuda_text)
        if conda_cuda_text and conda_cuda_text.strip()
        else None
    )
    driver_text = environ.get("CUDA_RESOLVE_DRIVER")
    if driver_text is not None:
        if driver_text.strip():
            result = replace(
                result,
                driver_set=True,
                driver_source="CUDA_RESOLVE_DRIVER",
                driver_version=_parse_driver("CUDA_RESOLVE_DRIVER", driver_text),
                driver_cuda=conda_cuda,
            )
        else:
            result = replace(
                result, driver_set=True, driver_source="CUDA_RESOLVE_DRIVER", no_driver=True
            )
    elif conda_cuda_text is not None:
        if conda_cuda is None:
            result = replace(
                result, driver_set=True, driver_source="CONDA_OVERRIDE_CUDA", no_driver=True
            )
        else:
            result = replace(
                result, driver_set=True, driver_source="CONDA_OVERRIDE_CUDA", driver_cuda=conda_cuda
            )
    for variable in ("CUDA_RESOLVE_CUDA_ARCH", "CONDA_OVERRIDE_CUDA_ARCH"):
        text = environ.get(variable)
        if text is None:
            continue
        capabilities = _parse_capabilities(variable, text) if text.strip() else ()
        if variable == "CONDA_OVERRIDE_CUDA_ARCH" and len(capabilities) > 1:
            raise UsageError(
                f"CONDA_OVERRIDE_CUDA_ARCH={text!r}: conda's variable holds one capability "
                "(the lowest)",
                hint="set CONDA_OVERRIDE_CUDA_ARCH to the lowest capability alone, or list every "
                "GPU's in CUDA_RESOLVE_CUDA_ARCH=8.0,8.6",
            )
        result = replace(result, capabilities=capabilities, capabilities_source=variable)
        break
    return result


def _lowest_driver_for(cuda: CudaVersion) -> DriverVersion | None:
    """The toolkit's own driver for *cuda*, from the index: a stand-in when none was probed."""
    try:
        from ..index import default_cuda_facts

        facts = default_cuda_facts().toolkit(cuda)
    except ImportError:
        return None
    return facts.driver_linux if facts is not None else None


def _driver(overrides: Overrides, probed: Driver | None) -> tuple[Driver | None, list[str]]:
    if not overrides.driver_set:
        return probed, []
    source = overrides.driver_source or "override"
    if overrides.no_driver:
        return None, [
            f"{source} is set but empty: treating this machine as having no NVIDIA driver"
        ]
    if overrides.driver_version is not None:
        cuda = overrides.driver_cuda or cuda_for_driver_version(overrides.driver_version)
        if cuda is None:
            raise UsageError(
                f"CUDA_RESOLVE_DRIVER={overrides.driver_version.text}: cannot tell which CUDA "
                "version this driver supports",
                hint="also set CONDA_OVERRIDE_CUDA to the 'CUDA Version' nvidia-smi shows for "
                "it, e.g. 12.2",
            )
        return Driver(version=overrides.driver_version, cuda=cuda, source=source), []
    cuda = overrides.driver_cuda
    assert cuda is not None  # read_overrides sets it whenever no_driver is false
    if probed is not None:
        return Driver(version=probed.version, cuda=cuda, source=f"{probed.source}+{source}"), []
    stand_in = _lowest_driver_for(cuda)
    if stand_in is None:
        raise UsageError(
            f"CONDA_OVERRIDE_CUDA={cuda}: no driver was found here and the index has no driver "
            f"version for CUDA {cuda}",
            hint="also set CUDA_RESOLVE_DRIVER to the driver version of the machine you mean, "
            "e.g. 535.104.05",
        )
    note = (
        f"CONDA_OVERRIDE_CUDA={cuda} with no driver found: assuming CUDA {cuda}'s own "
        f"driver {stand_in}"
    )
    return Driver(version=stand_in, cuda=cuda, source=source), [note]


def _gpus(overrides: Overrides, probed: tuple[Gpu, ...]) -> tuple[tuple[Gpu, ...], list[str]]:
    capabilities = overrides.capabilities
    if capabilities is None:
        return probed, []
    source = overrides.capabilities_source or "override"
    if not capabilities:
        return (), [f"{source} is set but empty: treating this machine as having no GPU"]
    if source == "CONDA_OVERRIDE_CUDA_ARCH" and probed:
        capabilities = capabilities * len(probed)
    if len(capabilities) == len(probed):
        return tuple(
            replace(gpu, compute_capability=cc)
            for gpu, cc in zip(probed, capabilities, strict=True)
        ), []
    listed = ",".join(str(cc) for cc in capabilities)
    synthesised = tuple(
        Gpu(index=position, name=f"GPU from {source}", compute_capability=cc)
        for position, cc in enumerate(capabilities)
    )
    return synthesised, [f"GPUs taken from {source}={listed} ({len(probed)} probed)"]


def apply_overrides(
    overrides: Overrides, driver: Driver | None, gpus: tuple[Gpu, ...]
) -> tuple[Driver | None, tuple[Gpu, ...], tuple[str, ...]]:
    """The driver and GPUs after the overrides, and notes saying what was overridden."""
    new_driver, driver_notes = _driver(overrides, driver)
    if new_driver is None and overrides.no_driver and overrides.capabilities is None:
        gpus = ()  # no driver, no usable GPU; listing capabilities explicitly keeps them
    new_gpus, gpu_notes = _gpus(overrides, gpus)
    return new_driver, new_gpus, (*driver_notes, *gpu_notes)
