"""Compatibility rules: pure functions of facts (Environment pieces and index entries).

Every rule returns either a plain answer or a :class:`Verdict` whose ``reason`` is a sentence
the user can read ("cu130: driver 535.104.05 supports CUDA <= 12.2"). The resolver, doctor and
the planner all decide through these functions, so a rule is written once.

Sources for the rules (cited in ``index/``): NVIDIA's minor-version compatibility guide (S2),
torch's ``_get_cuda_arch_flags`` and ``DEVICE_REQUIREMENT`` (S14, S15).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._frozen import frozen
from .environment import Compiler, Driver, Environment, Gpu, Toolkit
from .index.cuda import ArchEntry, ToolkitFacts
from .versions import ComputeCapability, CudaVersion, DriverVersion

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from .index.cuda import CudaFactsSource

__all__ = [
    "JETSON_CAPABILITIES",
    "UNKNOWN_MARKER_VARIABLES",
    "Verdict",
    "arch_list_for_build",
    "build_covers_gpu",
    "compiler_within_toolkit",
    "cuda_for_driver",
    "driver_supports_cuda",
    "format_arch_list",
    "host_compiler_for",
    "marker_environment",
    "parse_torch_arch_names",
    "python_matches",
    "toolkit_archs",
    "toolkit_can_build",
    "torch_arch_list",
    "uncovered_gpus",
]

#: Integrated (Jetson/Tegra) GPUs run only code built for exactly their capability (S15).
JETSON_CAPABILITIES = frozenset(
    ComputeCapability(major, minor) for major, minor in ((5, 3), (6, 2), (7, 2), (8, 7))
)

#: Capabilities whose code runs only on themselves (S15: 10.0 code does not run on 10.1;
#: 10.1 / 11.0 code runs only on 10.1 / 11.0, 11.0 being 10.1 renamed in CUDA 13).
_EXACT_ONLY = frozenset(ComputeCapability(major, minor) for major, minor in ((10, 1), (11, 0)))


@frozen(kw_only=False)
class Verdict:
    """Whether something fits, and why (true when it does)."""

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


# -- driver ---------------------------------------------------------------------------------


def cuda_for_driver(
    version: DriverVersion, index: CudaFactsSource, *, os: str = "linux"
) -> CudaVersion | None:
    """The highest CUDA a driver supports, from the toolkits' own driver minimums (S1 Table 3)."""
    best: CudaVersion | None = None
    for facts in index.toolkits:
        needed = facts.driver_windows if os == "windows" else facts.driver_linux
        if needed is not None and version >= needed and (best is None or facts.version > best):
            best = facts.version
    return best


def driver_supports_cuda(
    driver: Driver | None,
    cuda: CudaVersion,
    index: CudaFactsSource,
    *,
    strict: bool = False,
    os: str = "linux",
) -> Verdict:
    """Can binaries built with CUDA ``cuda`` run on this driver?

    Backward compatibility: any CUDA up to the driver's own version runs. Minor-version
    compatibility (CUDA 11 onward, not under ``strict``): any CUDA of a major family runs on a
    driver at or above the family minimum. Before CUDA 11 the toolkit's own driver is needed.
    """
    if driver is None:
        return Verdict(False, f"CUDA {cuda} needs an NVIDIA driver and none was found")
    if cuda <= driver.cuda:
        return Verdict(True, f"driver {driver.version} supports CUDA <= {driver.cuda}")
    facts = index.toolkit(cuda)
    own = (facts.driver_windows if os == "windows" else facts.driver_linux) if facts else None
    if own is not None and driver.version >= own:
        return Verdict(True, f"driver {driver.version} meets CUDA {cuda}'s driver {own}")
    family = index.family(cuda.major)
    if not strict and cuda.major >= 11 and family is not None:
        family_min = family.min_driver_windows if os == "windows" else family.min_driver_linux
        if family_min is not None and driver.version >= family_min:
            return Verdict(
                True,
                f"driver {driver.version} runs CUDA {cuda.major}.x by minor-version compatibility "
                f"(>= {family_min})",
            )
        need = f"driver >= {family_min}" if family_min else f"a CUDA {cuda.major}.x driver"
        return Verdict(
            False,
            f"driver {driver.version} supports CUDA <= {driver.cuda}; CUDA {cuda} needs {need}",
        )
    need = f"driver >= {own}" if own else f"a driver for CUDA {cuda}"
    mode = " (--strict-driver)" if strict and cuda.major >= 11 else ""
    return Verdict(
        False,
        f"driver {driver.version} supports CUDA <= {driver.cuda}; CUDA {cuda} needs {need}{mode}",
    )


# -- GPU architectures ----------------------------------------------------------------------


def build_covers_gpu(arch_list: Iterable[ArchEntry], gpu: ComputeCapability) -> bool:
    """Does a build with this TORCH_CUDA_ARCH_LIST have kernels for a GPU of capability ``gpu``?

    SASS for X.Y runs on X.Z with Z >= Y (sm_80 runs on 8.6 and 8.9, not on 9.0); PTX for X.Y
    is JIT-compiled on any capability >= X.Y; arch-specific ``a`` targets, Jetson parts and
    10.1/11.0 run only on exactly their own capability.
    """
    plain_gpu = ComputeCapability(gpu.major, gpu.minor)
    for entry in arch_list:
        cap = entry.capability
        plain = ComputeCapability(cap.major, cap.minor)
        if plain == plain_gpu:
            return True
        if (
            entry.ptx
            and not cap.suffix
            and plain <= plain_gpu
            and plain_gpu not in JETSON_CAPABILITIES
        ):
            return True
        if cap.suffix or plain in JETSON_CAPABILITIES or plain_gpu in JETSON_CAPABILITIES:
            continue
        if plain in _EXACT_ONLY or plain_gpu in _EXACT_ONLY:
            continue
        if plain == ComputeCapability(10, 0) and plain_gpu == ComputeCapability(10, 1):
            continue
        if cap.major == plain_gpu.major and cap.minor <= plain_gpu.minor:
            return True
    return False


def uncovered_gpus(arch_list: Sequence[ArchEntry], gpus: Iterable[Gpu]) -> list[Gpu]:
    """The GPUs a build has no kernels for (every GPU must be covered)."""
    return [gpu for gpu in gpus if not build_covers_gpu(arch_list, gpu.compute_capability)]


def format_arch_list(arch_list: Iterable[ArchEntry]) -> str:
    """TORCH_CUDA_ARCH_LIST notation: ``7.5;8.6;9.0+PTX``."""
    return ";".join(str(entry) for entry in arch_list)


def parse_torch_arch_names(names: Iterable[str]) -> tuple[ArchEntry, ...]:
    """``torch.cuda.get_arch_list()`` (``sm_90``, ``sm_90a``, ``compute_90``) as arch entries.

    ``sm_XY`` is SASS, ``compute_XY`` is PTX; names that are not a compute capability are skipped.
    """
    entries: list[ArchEntry] = []
    for name in names:
        try:
            capability = ComputeCapability.parse(name)
        except ValueError:
            continue
        if not name.strip().lower().startswith(("sm_", "compute_")):
            continue
        entries.append(ArchEntry(capability, ptx=name.strip().lower().startswith("compute_")))
    return tuple(entries)


def torch_arch_list(
    env: Environment, index: CudaFactsSource
) -> tuple[tuple[ArchEntry, ...] | None, str]:
    """The installed torch's arch list: its own report, else the index's facts; and where from."""
    torch = env.torch
    if torch is None or torch.cuda is None:
        return None, ""
    if torch.arch_list:
        return parse_torch_arch_names(torch.arch_list), "torch.cuda.get_arch_list()"
    known = index.torch_build_arch_list(torch.version, torch.local or torch.cuda.variant)
    if known is None:
        return None, ""
    build, entries = known
    return entries, f"the index's arch list for torch {build}"


# -- toolkits and compilers -----------------------------------------------------------------


def toolkit_archs(
    toolkit: Toolkit | None, facts: ToolkitFacts | None
) -> tuple[ComputeCapability, ...]:
    """What an nvcc can target: what it said itself, else the index's facts for its version."""
    if toolkit is not None and toolkit.gpu_archs:
        return toolkit.gpu_archs
    if facts is not None:
        return facts.archs + facts.specific_archs
    return ()


def toolkit_can_build(
    archs: Sequence[ComputeCapability], arch_list: Iterable[ArchEntry], *, version: CudaVersion
) -> Verdict:
    """Can nvcc (accepting ``archs``) compile every entry of ``arch_list``?"""
    accepted = {(cap.major, cap.minor, cap.suffix) for cap in archs}
    rejected = [
        str(entry)
        for entry in arch_list
        if (entry.capability.major, entry.capability.minor, entry.capability.suffix) not in accepted
    ]
    if rejected:
        lowest = min(archs, default=None)
        span = f" (it accepts {lowest} .. {max(archs)})" if lowest else ""
        return Verdict(False, f"nvcc {version} cannot target {', '.join(rejected)}{span}")
    return Verdict(True, f"nvcc {version} can target every requested architecture")


def _major(version_text: str | None) -> int | None:
    if not version_text:
        return None
    head = version_text.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def compiler_within_toolkit(gcc: str | None, facts: ToolkitFacts | None) -> Verdict:
    """Is the host gcc accepted by nvcc's host_config.h and torch's cpp_extension bound?"""
    major = _major(gcc)
    if major is None:
        return Verdict(True, "no gcc version known")
    if facts is None:
        return Verdict(True, f"gcc {gcc}: no facts for this toolkit")
    if facts.gcc_max is not None and major > facts.gcc_max:
        return Verdict(
            False, f"gcc {gcc} is newer than CUDA {facts.version} accepts (gcc <= {facts.gcc_max})"
        )
    bound = facts.torch_gcc_max_exclusive
    if bound is not None and major >= bound:
        return Verdict(
            False,
            f"gcc {gcc} is outside torch.utils.cpp_extension's range for CUDA {facts.version} "
            f"(gcc < {bound})",
        )
    return Verdict(True, f"gcc {gcc} is within CUDA {facts.version}'s range")


def host_compiler_for(compiler: Compiler, facts: ToolkitFacts | None) -> tuple[Verdict, str | None]:
    """(verdict on the default host compiler, an installed gcc version to switch to).

    The second item is set only when the default is out of the toolkit's range and another
    installed gcc (``gcc-N`` on PATH) is within it: the newest such. A build is possible when the
    verdict is ok or there is one to switch to; the resolver and the build's pre-flight both ask
    here, so a plan never refuses what the build would have fixed by switching."""
    verdict = compiler_within_toolkit(compiler.nvcc_host_version or compiler.gcc, facts)
    if verdict.ok:
        return verdict, None
    # Only versions count: detection may have recorded a bare program name ("gcc-12").
    usable = [
        v
        for v in compiler.other_gcc
        if v.split(".")[0].isdigit() and compiler_within_toolkit(v, facts).ok
    ]
    newest = max(
        usable, key=lambda v: tuple(int(p) for p in v.split(".") if p.isdigit()), default=None
    )
    return verdict, newest


def arch_list_for_build(
    gpus: Iterable[ComputeCapability], archs: Sequence[ComputeCapability]
) -> tuple[tuple[ArchEntry, ...], tuple[ComputeCapability, ...]]:
    """The smallest TORCH_CUDA_ARCH_LIST that covers every GPU with what nvcc can target.

    Returns (entries, impossible): a GPU nvcc has an exact target for gets it; otherwise the
    highest same-major SASS below it that runs there; otherwise the highest target below it as
    PTX (a GPU newer than everything nvcc knows gets the newest target as PTX). GPUs none of
    these cover (Jetson parts without their own target, GPUs older than every target) are
    returned in ``impossible``.
    """
    plain = sorted({ComputeCapability(a.major, a.minor) for a in archs if not a.suffix})
    chosen: set[ArchEntry] = set()
    impossible: list[ComputeCapability] = []
    for gpu in sorted(set(gpus)):
        target = ComputeCapability(gpu.major, gpu.minor)
        if target in plain:
            chosen.add(ArchEntry(target))
            continue
        # Same-major SASS that actually runs here: not 10.1 code on 10.3, not 8.6 on Jetson 8.7.
        same_major = [
            a
            for a in plain
            if a.major == target.major and a < target and build_covers_gpu((ArchEntry(a),), target)
        ]
        if same_major:
            chosen.add(ArchEntry(same_major[-1]))
            continue
        older = [a for a in plain if a < target and a not in JETSON_CAPABILITIES]
        if older:
            newest = ArchEntry(older[-1], ptx=True)
            if build_covers_gpu((newest,), target):
                chosen.add(newest)
                continue
        impossible.append(gpu)
    # "9.0+PTX" already carries the 9.0 SASS: don't list 9.0 twice.
    merged = {
        entry
        for entry in chosen
        if entry.ptx or ArchEntry(entry.capability, ptx=True) not in chosen
    }
    return tuple(sorted(merged)), tuple(impossible)


# -- Python -------------------------------------------------------------------------------

#: Marker variables whose value is a fact of the target's kernel, which no profile records.
UNKNOWN_MARKER_VARIABLES = ("platform_release", "platform_version")

_SYS_PLATFORM = {"linux": "linux", "windows": "win32", "darwin": "darwin"}
_PLATFORM_SYSTEM = {"linux": "Linux", "windows": "Windows", "darwin": "Darwin"}
_IMPLEMENTATION = {"cpython": "CPython", "pypy": "PyPy"}


def marker_environment(env: Environment) -> dict[str, str]:
    """PEP 508 marker values of the *target* (its Python and platform, not this process's).

    ``platform_release`` and ``platform_version`` are absent: no Environment records them, and a
    marker that uses them cannot be decided for another machine (see UNKNOWN_MARKER_VARIABLES).
    """
    machine, python = env.machine, env.python
    arch = machine.arch
    if machine.os == "windows" and arch in ("x86_64", "amd64"):
        arch = "AMD64"
    elif machine.os == "darwin" and arch == "aarch64":
        arch = "arm64"
    return {
        "python_version": python.short_version,
        "python_full_version": python.version,
        "implementation_name": python.implementation,
        "implementation_version": python.version,
        "platform_python_implementation": _IMPLEMENTATION.get(
            python.implementation, python.implementation
        ),
        "sys_platform": _SYS_PLATFORM.get(machine.os, machine.os),
        "platform_system": _PLATFORM_SYSTEM.get(machine.os, machine.os),
        "os_name": "nt" if machine.os == "windows" else "posix",
        "platform_machine": arch,
        "extra": "",
    }


def python_matches(supported: Iterable[str], version: str, *, free_threaded: bool = False) -> bool:
    """Is the interpreter's ``major.minor`` (``3.13t`` when free-threaded) in the list?"""
    major_minor = ".".join(version.split(".")[:2]) + ("t" if free_threaded else "")
    return major_minor in set(supported)
