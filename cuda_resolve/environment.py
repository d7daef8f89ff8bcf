"""The frozen description of one machine: what every decision in cuda-resolve is made from.

No I/O happens here. :mod:`cuda_resolve.detect` builds an :class:`Environment` by probing the
machine; :mod:`cuda_resolve.profile` builds one from a TOML profile. Everything after that
(doctor checks, resolution, planning, locking) is a pure function of the Environment.
"""

from __future__ import annotations

from ._frozen import field, frozen
from .versions import ComputeCapability, CudaVersion, DriverVersion

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Literal

    from packaging.tags import Tag

__all__ = [
    "Compiler",
    "Driver",
    "Environment",
    "ExtensionBinary",
    "Gpu",
    "InstalledExtension",
    "Machine",
    "NvidiaWheel",
    "PythonInfo",
    "Scheduler",
    "Toolkit",
    "TorchInfo",
    "Variables",
]

if TYPE_CHECKING:
    TorchBuild = Literal["cpu", "cuda", "rocm"]


@frozen
class Machine:
    """The operating system, CPU architecture and C library of the target."""

    os: str = "linux"  # "linux" | "windows" | "darwin"
    arch: str = "x86_64"  # "x86_64" | "aarch64"
    glibc: str | None = None  # "2.35"


@frozen
class PythonInfo:
    """The target interpreter: version, implementation, where it is and what it reads."""

    version: str  # "3.10.12"
    implementation: str = "cpython"
    executable: str | None = None
    abi: str | None = None  # "cp310"; derived from the version when absent
    site_packages: tuple[str, ...] = ()
    prefix: str | None = None
    is_conda: bool = False
    is_venv: bool = False

    @property
    def version_tuple(self) -> tuple[int, int]:
        major, minor = self.version.split(".")[:2]
        return int(major), int(minor)

    @property
    def short_version(self) -> str:
        """``3.10``: the form used in wheel matrices."""
        return "{}.{}".format(*self.version_tuple)

    @property
    def abi_tag(self) -> str:
        if self.abi:
            return self.abi
        major, minor = self.version_tuple
        return f"cp{major}{minor}"

    @property
    def interpreter_tag(self) -> str:
        major, minor = self.version_tuple
        prefix = "cp" if self.implementation == "cpython" else "pp"
        return f"{prefix}{major}{minor}"


@frozen
class Driver:
    """The NVIDIA kernel driver and the highest CUDA version it supports."""

    version: DriverVersion
    cuda: CudaVersion  # the highest CUDA this driver supports (nvidia-smi's "CUDA Version")
    source: str = "profile"  # which probe found it


@frozen
class Gpu:
    """One GPU as NVML or nvidia-smi lists it, with its compute capability."""

    index: int
    name: str
    compute_capability: ComputeCapability
    uuid: str | None = None
    memory_mib: int | None = None


@frozen
class Toolkit:
    """One CUDA toolkit found on this machine (nvcc, its root and what it holds)."""

    version: CudaVersion
    root: str | None = None
    nvcc: str | None = None  # the real nvcc binary, after resolving wrappers and links
    release: str | None = None  # full "13.0.88" where known
    gpu_archs: tuple[ComputeCapability, ...] = ()  # what this nvcc accepts; empty = unknown
    missing_headers: tuple[str, ...] = ()  # e.g. ("cusparse.h",) when the toolkit is minimal
    found_via: str = "profile"  # "CUDA_HOME", "PATH", "/usr/local/cuda-12.4", ...
    nvcc_on_path_wrapper: str | None = None  # the wrapper script on PATH that pointed here


@frozen
class Compiler:
    """The host C and C++ compilers nvcc would use, with their versions."""

    gcc: str | None = None
    gxx: str | None = None
    clang: str | None = None
    nvcc_host: str | None = (
        None  # the host compiler nvcc would call (NVCC_CCBIN/CUDAHOSTCXX or c++)
    )
    nvcc_host_version: str | None = None
    other_gcc: tuple[str, ...] = ()  # other installed gcc versions (gcc-11, g++-12 ...)


@frozen
class NvidiaWheel:
    """One nvidia-* distribution in the target (a CUDA library shipped as a wheel)."""

    name: str  # "nvidia-cuda-runtime-cu12"
    version: str
    include_dir: str | None = None
    lib_dir: str | None = None


@frozen
class TorchInfo:
    """The target's torch build, read from its files without importing it."""

    version: str  # "2.11.0+cu130" (with local tag)
    cuda: CudaVersion | None = None  # torch.version.cuda; None for CPU/ROCm builds
    hip: str | None = None
    git_version: str | None = None
    cxx11_abi: bool | None = None
    arch_list: tuple[str, ...] | None = None  # "sm_90", "compute_90"; None = unknown
    location: str | None = None
    nvidia_wheels: tuple[NvidiaWheel, ...] = ()
    torchvision: str | None = None  # installed beside it; must stay paired with torch
    torchaudio: str | None = None
    # The metadata's version, what pip compares: "2.11.0" for PyPI's file, whose version.py says
    # "2.11.0+cu130" (cuda_resolve.torch_identity); None when unknown (an older profile).
    pip_version: str | None = None

    @property
    def build(self) -> TorchBuild:
        if self.hip:
            return "rocm"
        return "cuda" if self.cuda is not None else "cpu"

    @property
    def base_version(self) -> str:
        return self.version.split("+", 1)[0]

    @property
    def local(self) -> str | None:
        return self.version.split("+", 1)[1] if "+" in self.version else None


@frozen
class ExtensionBinary:
    """A compiled CUDA/torch extension found in the target's site-packages."""

    path: str
    needed: tuple[str, ...]  # DT_NEEDED sonames that matter (libcudart*, libc10*, libtorch*)
    missing: tuple[str, ...]  # of those, the ones the dynamic loader would not find
    # Device code its fat binaries carry (cuda_resolve.fatbin): SASS ("sm_80") and PTX
    # ("compute_86") targets; both empty when it carries none (host code only).
    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    # Undefined symbols of torch's namespaces that the installed torch's libraries do not
    # define (mangled, as the ImportError prints them), and the same demangled where c++filt could.
    missing_symbols: tuple[str, ...] = ()
    demangled: tuple[str, ...] = ()
    distribution: str | None = None  # "pointnet2_ops 3.0.0+pt2141cu130.sm90": what installed it
    notes: tuple[
        str, ...
    ] = ()  # what could not be read in it (a corrupt fat binary or symbol table)


@frozen
class InstalledExtension:
    """A distribution of a package the index curates, installed in the target, as its metadata
    says. A wheel cuda-resolve built carries its ABI in the version's local label
    (``3.0.0+pt2141cu130.sm80.sm86ptx``); the resolver reads it back, detection only reports it."""

    name: str  # as its metadata spells it: "pointnet2_ops"
    version: str  # with the local label, if any


@frozen
class Scheduler:
    """The batch scheduler this process runs under (Slurm), if any."""

    slurm_job_id: str | None = None
    slurm_variables: tuple[str, ...] = ()  # names of SLURM_* variables that were set

    @property
    def in_slurm_job(self) -> bool:
        return self.slurm_job_id is not None


@frozen
class Variables:
    """Environment variables that change how CUDA code is built or loaded, as found."""

    cuda_home: str | None = None
    cuda_path: str | None = None
    ld_library_path: str | None = None
    torch_cuda_arch_list: str | None = None
    cuda_visible_devices: str | None = None


@frozen
class Environment:
    """Everything detection found (or a profile describes): the input of every decision."""

    machine: Machine
    python: PythonInfo
    driver: Driver | None = None
    gpus: tuple[Gpu, ...] = ()
    toolkits: tuple[Toolkit, ...] = ()
    compiler: Compiler = field(default_factory=Compiler)
    torch: TorchInfo | None = None
    scheduler: Scheduler = field(default_factory=Scheduler)
    variables: Variables = field(default_factory=Variables)
    extensions: tuple[ExtensionBinary, ...] = ()
    installed_extensions: tuple[
        InstalledExtension, ...
    ] = ()  # the index's packages installed in the target
    notes: tuple[str, ...] = ()  # what probes reported instead of crashing (NVML mismatch ...)
    source: str = "profile"  # "detected" or the profile path

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def lowest_capability(self) -> ComputeCapability | None:
        """CEP 46's ``__cuda_arch``: the lowest compute capability over all devices."""
        return min((gpu.compute_capability for gpu in self.gpus), default=None)

    @property
    def capabilities(self) -> tuple[ComputeCapability, ...]:
        """Distinct compute capabilities, ascending."""
        return tuple(sorted({gpu.compute_capability for gpu in self.gpus}))

    @property
    def primary_toolkit(self) -> Toolkit | None:
        """The toolkit a build would use: the first one found (CUDA_HOME, then PATH, ...)."""
        return self.toolkits[0] if self.toolkits else None

    def platform_tags(self) -> list[str]:
        """Wheel platform tags this machine accepts, most specific first."""
        arch = self.machine.arch
        if self.machine.os == "windows":
            return ["win_amd64" if arch in ("x86_64", "amd64") else f"win_{arch}"]
        if self.machine.os == "darwin":
            return [f"macosx_11_0_{arch}"]
        found: list[str] = []
        if self.machine.glibc:
            major, minor = (int(p) for p in self.machine.glibc.split(".")[:2])
            legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
            for glibc_minor in range(minor, 4, -1):
                if (major == 2 and glibc_minor >= 17) or arch in ("x86_64", "i686"):
                    found.append(f"manylinux_2_{glibc_minor}_{arch}")
                    if glibc_minor in legacy:
                        found.append(f"{legacy[glibc_minor]}_{arch}")
        found.append(f"linux_{arch}")
        return found

    def wheel_tags(self) -> list[Tag]:
        """Every wheel tag the target interpreter accepts, in packaging.tags priority order."""
        from packaging import tags  # imported on use: most commands never need tag lists

        major, minor = self.python.version_tuple
        platforms = self.platform_tags()
        if self.python.implementation != "cpython":
            return list(tags.compatible_tags((major, minor), platforms=platforms))
        cpython = tags.cpython_tags(
            (major, minor), [self.python.abi_tag, "abi3", "none"], platforms
        )
        return [*cpython, *tags.compatible_tags((major, minor), platforms=platforms)]
