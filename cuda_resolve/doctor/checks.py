"""The doctor's checks: the failure tables of the kaolin and pointnet2_ops guides as diagnoses.

Each check is a pure function ``(Environment, CudaFactsSource) -> list[Finding]`` (the index, or
only its CUDA facts, which is what ``doctor`` reads); :func:`run_checks`
runs them all in a fixed order. A check that has nothing to look at returns no finding rather
than a vacuous "ok".
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from .._lazy_re import lazy_compile
from ..compat import (
    arch_list_for_build,
    build_covers_gpu,
    driver_supports_cuda,
    format_arch_list,
    host_compiler_for,
    toolkit_archs,
    torch_arch_list,
)
from ..environment import Environment, ExtensionBinary, Toolkit
from ..errors import UsageError
from ..index.cuda import ArchEntry
from ..versions import ComputeCapability
from .findings import Finding

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from ..index.cuda import CudaFactsSource

    Check = Callable[[Environment, CudaFactsSource], list[Finding]]

__all__ = ["CHECKS", "run_checks", "torch_arch_entries"]


def _primary(env: Environment) -> Toolkit | None:
    return env.primary_toolkit


def _note_finding(note: str) -> Finding:
    lowered = note.lower()
    if "mismatch" in lowered:
        return Finding(
            check="probe-notes",
            status="error",
            title="NVIDIA driver state",
            found=note,
            fix="the kernel module is older than the user-space driver library (a driver update "
            "without a reboot): reboot, or reload the nvidia modules",
        )
    if "no devices" in lowered or "no device" in lowered:
        return Finding(
            check="probe-notes",
            status="warn",
            title="NVIDIA driver state",
            found=note,
            fix="the driver is loaded but sees no GPU: check CUDA_VISIBLE_DEVICES, the "
            "scheduler's GPU allocation (--gres), or the container's device mounts",
        )
    return Finding(check="probe-notes", status="info", title="probe note", found=note)


def check_probe_notes(env: Environment, index: CudaFactsSource) -> list[Finding]:
    """What probes reported instead of failing: driver/library mismatch, no devices, timeouts."""
    return [_note_finding(note) for note in env.notes]


def check_driver(env: Environment, index: CudaFactsSource) -> list[Finding]:
    findings: list[Finding] = []
    torch = env.torch
    if env.driver is None:
        if torch is not None and torch.cuda is not None:
            findings.append(
                Finding(
                    check="driver",
                    status="warn",
                    title="NVIDIA driver",
                    found=f"no NVIDIA driver found, but torch {torch.version} is a CUDA "
                    f"{torch.cuda} build: torch.cuda.is_available() will be False",
                    fix="on a GPU machine install the NVIDIA driver; on a login or build node "
                    "this is expected",
                )
            )
        else:
            findings.append(
                Finding(
                    check="driver",
                    status="info",
                    title="NVIDIA driver",
                    found="no NVIDIA driver found: this machine is treated as CPU-only",
                )
            )
        return findings
    found = (
        f"driver {env.driver.version} supports CUDA <= {env.driver.cuda} (via {env.driver.source})"
    )
    if torch is None or torch.cuda is None:
        findings.append(Finding(check="driver", status="ok", title="NVIDIA driver", found=found))
        return findings
    verdict = driver_supports_cuda(env.driver, torch.cuda, index, os=env.machine.os)
    if verdict:
        findings.append(
            Finding(
                check="driver",
                status="ok",
                title="driver runs torch's CUDA",
                found=f"{found}; torch {torch.version} needs CUDA {torch.cuda}: {verdict.reason}",
            )
        )
    else:
        findings.append(
            Finding(
                check="driver",
                status="error",
                title="driver runs torch's CUDA",
                found=f"torch {torch.version} is built for CUDA {torch.cuda}: {verdict.reason}",
                fix="upgrade the NVIDIA driver, or install a torch built for CUDA <= "
                f"{env.driver.cuda}: `{_cuda_pip_install(env, 'torch', '--allow-torch-change')}`",
            )
        )
    return findings


def check_smi_cuda_is_not_toolkit(env: Environment, index: CudaFactsSource) -> list[Finding]:
    if env.driver is None:
        return []
    toolkit = _primary(env)
    if toolkit is None:
        return [
            Finding(
                check="smi-cuda-version",
                status="info",
                title="nvidia-smi 'CUDA Version'",
                found=f"nvidia-smi's 'CUDA Version: {env.driver.cuda}' is the newest CUDA this "
                "driver supports; no CUDA toolkit (nvcc) is installed",
                fix="wheels need no toolkit; source builds need one whose major matches "
                "torch's CUDA",
            )
        ]
    verdict = driver_supports_cuda(env.driver, toolkit.version, index, os=env.machine.os)
    if not verdict:
        return [
            Finding(
                check="smi-cuda-version",
                status="error",
                title="toolkit vs driver",
                found=f"nvcc {toolkit.version} at {toolkit.root}: {verdict.reason}; code it "
                "compiles will not run here",
                fix=f"use a CUDA toolkit <= {env.driver.cuda} (or of a family the driver "
                "supports), or upgrade the driver",
            )
        ]
    if toolkit.version != env.driver.cuda:
        return [
            Finding(
                check="smi-cuda-version",
                status="info",
                title="nvidia-smi 'CUDA Version'",
                found=f"the driver supports CUDA <= {env.driver.cuda}; the installed toolkit is "
                f"{toolkit.version}. These differ by design: nvidia-smi does not "
                "show the toolkit",
            )
        ]
    return []


def check_nvcc_matches_torch(env: Environment, index: CudaFactsSource) -> list[Finding]:
    toolkit, torch = _primary(env), env.torch
    if toolkit is None or torch is None or torch.cuda is None:
        return []
    if toolkit.version.major != torch.cuda.major:
        return [
            Finding(
                check="nvcc-vs-torch",
                status="error",
                title="nvcc vs torch CUDA",
                found=f"nvcc {toolkit.version} ({toolkit.root}) but torch {torch.version} was "
                f"built with CUDA {torch.cuda}: extension builds fail with 'The detected CUDA "
                "version mismatches'",
                fix=f"install a CUDA {torch.cuda.major}.x toolkit and export CUDA_HOME to it, or "
                f"use a torch built for CUDA {toolkit.version.major}.x",
            )
        ]
    if toolkit.version.minor != torch.cuda.minor:
        return [
            Finding(
                check="nvcc-vs-torch",
                status="warn",
                title="nvcc vs torch CUDA",
                found=f"nvcc {toolkit.version} vs torch CUDA {torch.cuda}: same major, torch only "
                "warns about the minor mismatch",
                fix=f"usually fine; a CUDA {torch.cuda} toolkit removes the warning",
            )
        ]
    return [
        Finding(
            check="nvcc-vs-torch",
            status="ok",
            title="nvcc vs torch CUDA",
            found=f"nvcc {toolkit.version} matches torch CUDA {torch.cuda}",
        )
    ]


def check_torch_build(env: Environment, index: CudaFactsSource) -> list[Finding]:
    torch = env.torch
    if torch is None:
        return [
            Finding(
                check="torch-build",
                status="info",
                title="torch",
                found="torch is not installed in the target environment",
                fix=f"`{_cuda_pip_install(env, 'torch')}` installs the build for this machine",
            )
        ]
    if env.gpus and torch.build == "cpu":
        return [
            Finding(
                check="torch-build",
                status="error",
                title="torch build",
                found=f"torch {torch.version} is a CPU build on a machine with {len(env.gpus)} "
                "NVIDIA GPU(s)",
                fix="reinstall torch with a CUDA variant: "
                f"`{_cuda_pip_install(env, 'torch', '--allow-torch-change')}`",
            )
        ]
    if env.gpus and torch.build == "rocm":
        return [
            Finding(
                check="torch-build",
                status="error",
                title="torch build",
                found=f"torch {torch.version} is a ROCm (AMD) build on an NVIDIA machine",
                fix="reinstall torch with a CUDA variant: "
                f"`{_cuda_pip_install(env, 'torch', '--allow-torch-change')}`",
            )
        ]
    return [
        Finding(
            check="torch-build",
            status="ok",
            title="torch build",
            found=f"torch {torch.version} ({torch.build} build)",
        )
    ]


def torch_arch_entries(
    env: Environment, index: CudaFactsSource
) -> tuple[tuple[ArchEntry, ...] | None, str]:
    """The installed torch's arch list and where it came from (the rule lives in compat)."""
    return torch_arch_list(env, index)


def check_torch_covers_gpus(env: Environment, index: CudaFactsSource) -> list[Finding]:
    if not env.gpus or env.torch is None or env.torch.cuda is None:
        return []
    entries, origin = torch_arch_entries(env, index)
    if entries is None:
        return [
            Finding(
                check="torch-arch",
                status="info",
                title="torch kernels for the GPUs",
                found=f"torch {env.torch.version}'s arch list is not known to the index",
            )
        ]
    listed = ";".join(str(e) for e in entries)
    missing = [gpu for gpu in env.gpus if not build_covers_gpu(entries, gpu.compute_capability)]
    if missing:
        names = ", ".join(f"{gpu.name} ({gpu.compute_capability})" for gpu in missing)
        return [
            Finding(
                check="torch-arch",
                status="error",
                title="torch kernels for the GPUs",
                found=f"torch {env.torch.version} has kernels for {listed} ({origin}); none run "
                f"on {names}: expect 'no kernel image is available for execution "
                "on the device'",
                fix="install a torch variant whose arch list covers every GPU: `cuda-resolve plan "
                "torch --allow-torch-change --explain`",
            )
        ]
    return [
        Finding(
            check="torch-arch",
            status="ok",
            title="torch kernels for the GPUs",
            found=f"{listed} covers {', '.join(str(c) for c in env.capabilities)}",
        )
    ]


def check_toolkit_targets_gpus(env: Environment, index: CudaFactsSource) -> list[Finding]:
    toolkit = _primary(env)
    if toolkit is None or not env.gpus:
        return []
    archs = toolkit_archs(toolkit, index.toolkit(toolkit.version))
    if not archs:
        return []
    entries, impossible = arch_list_for_build(env.capabilities, archs)
    if impossible:
        wanted = ", ".join(str(c) for c in impossible)
        able = [
            t.version
            for t in index.toolkits
            if any((a.major, a.minor) == (c.major, c.minor) for c in impossible for a in t.archs)
        ]
        suggestion = f" (CUDA {min(able)} .. {max(able)} can)" if able else ""
        return [
            Finding(
                check="toolkit-arch",
                status="error",
                title="toolkit targets the GPUs",
                found=f"nvcc {toolkit.version} cannot generate code for compute capability "
                f"{wanted}: lowest it accepts is {min(archs)}",
                fix=f"build with a toolkit that targets {wanted}{suggestion}, with a torch of the "
                "same CUDA major",
            )
        ]
    arch_list = ";".join(str(e) for e in entries)
    return [
        Finding(
            check="toolkit-arch",
            status="ok",
            title="toolkit targets the GPUs",
            found=f"nvcc {toolkit.version} can build TORCH_CUDA_ARCH_LIST={arch_list}",
        )
    ]


def check_host_compiler(env: Environment, index: CudaFactsSource) -> list[Finding]:
    toolkit = _primary(env)
    host = env.compiler.nvcc_host
    if toolkit is None:
        return []
    facts = index.toolkit(toolkit.version)
    if host and "clang" in os.path.basename(host) and env.compiler.nvcc_host_version:
        # NVCC_CCBIN=clang++: its version is clang's, not a gcc's
        clang = env.compiler.nvcc_host_version
        major = clang.split(".")[0]
        if (
            facts
            and facts.clang_max is not None
            and major.isdigit()
            and int(major) > facts.clang_max
        ):
            return [
                Finding(
                    check="host-compiler",
                    status="error",
                    title="host compiler",
                    found=f"nvcc's host compiler {host} is clang {clang}; CUDA {toolkit.version} "
                    f"accepts clang <= {facts.clang_max}",
                    fix=f"point NVCC_CCBIN at a clang <= {facts.clang_max} or at a gcc within "
                    f"CUDA {toolkit.version}'s range",
                )
            ]
        return [
            Finding(
                check="host-compiler",
                status="ok",
                title="host compiler",
                found=f"nvcc's host compiler is clang {clang}",
            )
        ]
    gcc = env.compiler.nvcc_host_version or env.compiler.gcc
    if gcc is None:
        return []
    verdict, switch_to = host_compiler_for(env.compiler, facts)
    if verdict:
        return [
            Finding(check="host-compiler", status="ok", title="host compiler", found=verdict.reason)
        ]
    major = switch_to.split(".")[0] if switch_to else ""
    fix = (
        f"use gcc {switch_to}: export NVCC_CCBIN=g++-{major} CC=gcc-{major} CXX=g++-{major} "
        "(cuda-pip builds switch to it themselves)"
        if switch_to
        else f"install a gcc within CUDA {toolkit.version}'s range (conda: gxx_linux-64) and "
        "point NVCC_CCBIN/CC/CXX at it"
    )
    return [
        Finding(
            check="host-compiler",
            status="error",
            title="host compiler",
            found=verdict.reason,
            fix=fix,
        )
    ]


def _same_dir(first: str, second: str) -> bool:
    # Pure on purpose: a profile's paths belong to another machine, so this one's symlinks
    # must not decide. Detection already resolved each toolkit's root.
    return os.path.normpath(first) == os.path.normpath(second)


def check_toolkits_agree(env: Environment, index: CudaFactsSource) -> list[Finding]:
    findings: list[Finding] = []
    home = env.variables.cuda_home or env.variables.cuda_path
    on_path = next((t for t in env.toolkits if t.found_via == "PATH"), None)
    home_kit = next(
        (t for t in env.toolkits if t.found_via in ("CUDA_HOME", "CUDA_PATH") and t.root), None
    )
    if home_kit is None and home:
        home_kit = next((t for t in env.toolkits if t.root and _same_dir(t.root, home)), None)
    home_root = home_kit.root if home_kit and home_kit.root else home
    if home and home_root and on_path and on_path.root and not _same_dir(home_root, on_path.root):
        home_version = f" (CUDA {home_kit.version})" if home_kit else ""
        findings.append(
            Finding(
                check="toolkits-agree",
                status="warn",
                title="CUDA_HOME vs nvcc on PATH",
                found=f"CUDA_HOME={home}{home_version} but nvcc on PATH is {on_path.nvcc} (CUDA "
                f"{on_path.version}): torch builds with CUDA_HOME, your shell runs the other",
                fix=f"pick one: `export PATH={home}/bin:$PATH` or "
                f"`export CUDA_HOME={on_path.root}`",
            )
        )
    elif len(env.toolkits) > 1:
        listed = ", ".join(f"{t.version} at {t.root}" for t in env.toolkits)
        findings.append(
            Finding(
                check="toolkits-agree",
                status="info",
                title="CUDA toolkits",
                found=f"{len(env.toolkits)} toolkits: {listed}; builds use the first",
            )
        )
    return findings


def check_nvcc_wrapper(env: Environment, index: CudaFactsSource) -> list[Finding]:
    findings = []
    for toolkit in env.toolkits:
        if toolkit.nvcc_on_path_wrapper and not (
            env.variables.cuda_home or env.variables.cuda_path
        ):
            guessed = os.path.dirname(os.path.dirname(toolkit.nvcc_on_path_wrapper))
            findings.append(
                Finding(
                    check="nvcc-wrapper",
                    status="warn",
                    title="nvcc wrapper on PATH",
                    found=f"nvcc on PATH ({toolkit.nvcc_on_path_wrapper}) is a wrapper for "
                    f"{toolkit.nvcc}; torch would guess CUDA_HOME={guessed} and miss the "
                    "headers ('cuda_runtime_api.h: No such file')",
                    fix=f"export CUDA_HOME={toolkit.root}",
                )
            )
    return findings


def _headers_packages(toolkit: Toolkit) -> str:
    """The packages of *toolkit*'s own version that carry the math library headers."""
    version = toolkit.version
    return (
        f"conda: cuda-libraries-dev={version}; apt, from NVIDIA's repository: "
        f"cuda-libraries-dev-{version.major}-{version.minor}"
    )


def check_toolkit_headers(env: Environment, index: CudaFactsSource) -> list[Finding]:
    toolkit = _primary(env)
    if toolkit is None or not toolkit.missing_headers:
        return []
    missing = ", ".join(toolkit.missing_headers)
    carriers = [
        w.include_dir for w in (env.torch.nvidia_wheels if env.torch else ()) if w.include_dir
    ]
    if carriers:
        return [
            Finding(
                check="toolkit-headers",
                status="warn",
                title="CUDA headers",
                found=f"the toolkit at {toolkit.root} lacks {missing}, which torch's headers "
                "include; torch's nvidia-* wheels carry them",
                fix=f"export CPATH={':'.join(dict.fromkeys(carriers))}  (cuda-resolve sets this "
                "for its own builds)",
            )
        ]
    if env.torch is None:  # nothing to build against yet; a pip torch may bring the headers
        return [
            Finding(
                check="toolkit-headers",
                status="warn",
                title="CUDA headers",
                found=f"the toolkit at {toolkit.root} lacks {missing}; extension builds against "
                "torch will need them (a PyPI torch's nvidia-* wheels carry them)",
                fix=f"install the toolkit's math library headers ({_headers_packages(toolkit)}), "
                "or build against a PyPI torch",
            )
        ]
    return [
        Finding(
            check="toolkit-headers",
            status="error",
            title="CUDA headers",
            found=f"the toolkit at {toolkit.root} lacks {missing}; extension builds against torch "
            "fail ('cusparse.h: No such file')",
            fix=f"install the toolkit's math library headers ({_headers_packages(toolkit)})",
        )
    ]


def check_extensions_load(env: Environment, index: CudaFactsSource) -> list[Finding]:
    broken = [ext for ext in env.extensions if ext.missing]
    if not broken:
        if env.extensions:
            return [
                Finding(
                    check="extension-libs",
                    status="ok",
                    title="installed CUDA extensions",
                    found=f"{len(env.extensions)} extension(s) find every CUDA/torch "
                    "library they need",
                )
            ]
        return []
    findings = []
    torch_cuda = env.torch.cuda if env.torch else None
    for ext in broken:
        missing = ", ".join(ext.missing)
        cudart = [name for name in ext.missing if name.startswith("libcudart")]
        name = ext.distribution.split()[0] if ext.distribution else None
        if cudart and torch_cuda is not None:
            how = f": `{_cuda_pip_install(env, '--rebuild', name)}`" if name else ""
            fix = (
                f"rebuild it against the installed torch (CUDA {torch_cuda}){how}; or put a "
                f"{cudart[0]} directory on LD_LIBRARY_PATH"
            )
        else:
            fix = (
                "rebuild it against the installed torch, or add the directory holding those "
                "libraries to LD_LIBRARY_PATH"
            )
        findings.append(
            Finding(
                check="extension-libs",
                status="error",
                title="installed CUDA extension",
                found=f"{ext.path} needs {missing}, which the loader cannot find: import fails "
                "with 'cannot open shared object file'",
                fix=fix,
            )
        )
    return findings


def _package(ext: ExtensionBinary) -> str | None:
    """The distribution's name (``pointnet2_ops``), when the scan found which one installed it."""
    return ext.distribution.split(" ", 1)[0] if ext.distribution else None


def _no_rebuild_here(env: Environment, index: CudaFactsSource) -> str | None:
    """Why no rebuild can work on this machine (no toolkit here targets every GPU), said with
    what would; None when one can (or when the toolkits' architectures are unknown)."""
    if not env.gpus or not env.toolkits:
        return None
    blocked: list[str] = []
    for toolkit in env.toolkits:
        archs = toolkit_archs(toolkit, index.toolkit(toolkit.version))
        if not archs:
            return None
        _, impossible = arch_list_for_build(env.capabilities, archs)
        if not impossible:
            return None
        wanted = ", ".join(str(c) for c in impossible)
        blocked.append(f"nvcc {toolkit.version} cannot target {wanted} (lowest: {min(archs)})")
    targets = {(c.major, c.minor) for c in env.capabilities}
    gpus = [f"{major}.{minor}" for major, minor in sorted(targets)]
    able = [t.version for t in index.toolkits if targets <= {(a.major, a.minor) for a in t.archs}]
    would = f"CUDA {min(able)} .. {max(able)}" if able else "an older CUDA toolkit"
    return (
        f"nothing here can rebuild it ({'; '.join(blocked)}); a toolkit that targets "
        f"{', '.join(gpus)} ({would}), with a torch of the same CUDA major, would"
    )


def _named(ext: ExtensionBinary) -> str:
    return f"{ext.distribution} ({ext.path})" if ext.distribution else ext.path


def _capabilities(names: tuple[str, ...]) -> tuple[ComputeCapability, ...]:
    found = []
    for name in names:
        try:
            found.append(ComputeCapability.parse(name))
        except ValueError:  # not ours to judge: the scan only writes nvcc's names
            continue
    return tuple(found)


def _carries(ext: ExtensionBinary) -> str:
    sass = ", ".join(ext.sass) or "no SASS"
    return f"{sass} and PTX {', '.join(ext.ptx)}" if ext.ptx else f"{sass} (no PTX)"


def _arch_list_with(ext: ExtensionBinary, wanted: list[ComputeCapability]) -> str:
    """What to build with: the targets it carries plus the GPUs it lacks, as
    TORCH_CUDA_ARCH_LIST."""
    entries = {ArchEntry(c) for c in _capabilities(ext.sass)} | {ArchEntry(c) for c in wanted}
    return format_arch_list(
        sorted(entries, key=lambda e: (e.capability.major, e.capability.minor, e.capability.suffix))
    )


def _keeping_targets(
    env: Environment, ext: ExtensionBinary, lacking: list[ComputeCapability]
) -> str:
    """The rebuild that keeps the targets ``ext`` carries and adds those it ``lacking``:
    cuda-pip's ``--arch-list`` (cuda-pip sets TORCH_CUDA_ARCH_LIST itself, user walk C2), the
    variable alone where no distribution is known to rebuild."""
    wanted = _arch_list_with(ext, lacking)
    package = _package(ext)
    if package is None:
        return f'TORCH_CUDA_ARCH_LIST="{wanted}"'
    return f"`{_cuda_pip_install(env, '--rebuild', package, '--arch-list', wanted)}`"


def check_extension_kernels(env: Environment, index: CudaFactsSource) -> list[Finding]:
    """Does every extension carry a kernel each GPU runs? Its fat binaries' SASS/PTX targets
    (read by the extension scan) against the GPUs, by compat.build_covers_gpu's rule."""
    with_code = [ext for ext in env.extensions if ext.sass or ext.ptx]
    if not env.gpus or not with_code:
        return []
    from ..fatbin import gpu_kernel  # here: a machine without GPUs or kernels never loads it

    findings: list[Finding] = []
    for ext in with_code:
        sass, ptx = _capabilities(ext.sass), _capabilities(ext.ptx)
        kinds = {
            gpu.compute_capability: gpu_kernel(sass, ptx, gpu.compute_capability)
            for gpu in env.gpus
        }
        none = [gpu for gpu in env.gpus if kinds[gpu.compute_capability] is None]
        jit = [gpu for gpu in env.gpus if kinds[gpu.compute_capability] == "ptx"]
        if none:
            gpus = ", ".join(
                dict.fromkeys(f"{gpu.name} ({gpu.compute_capability})" for gpu in none)
            )
            lacking = sorted({gpu.compute_capability for gpu in none})
            package = _package(ext)
            keep = _keeping_targets(env, ext, lacking)
            rebuild = (
                f"`{_cuda_pip_install(env, '--rebuild', package)}` (builds for the GPUs here), "
                f"or keep its targets too: {keep}"
                if package
                else f"rebuild it for the GPUs here ({keep})"
            )
            blocked = _no_rebuild_here(env, index)
            findings.append(
                Finding(
                    check="extension-kernels",
                    status="error",
                    title="kernels for the GPUs",
                    found=f"{_named(ext)} carries {_carries(ext)}; none runs on {gpus}: expect "
                    "'no kernel image is available for execution on the device'",
                    fix=blocked or rebuild,
                )
            )
        elif jit:
            gpus = ", ".join(dict.fromkeys(f"{gpu.name} ({gpu.compute_capability})" for gpu in jit))
            lacking = sorted({gpu.compute_capability for gpu in jit})
            keep = _keeping_targets(env, ext, lacking)
            findings.append(
                Finding(
                    check="extension-kernels",
                    status="warn",
                    title="kernels for the GPUs",
                    found=f"{_named(ext)} carries {_carries(ext)}: {gpus} run(s) only its PTX, "
                    "which the driver JIT-compiles at first use (minutes for a large "
                    "extension; cached in ~/.nv/ComputeCache)",
                    fix=f"{keep if _package(ext) else f'build it with {keep}'} for compiled "
                    "kernels",
                )
            )
    if not findings:
        caps = ", ".join(str(c) for c in env.capabilities)
        findings.append(
            Finding(
                check="extension-kernels",
                status="ok",
                title="kernels for the GPUs",
                found=f"{len(with_code)} extension(s) carry compiled kernels for {caps}",
            )
        )
    return findings


_TORCH_LABEL = lazy_compile(r"^pt(\d+)(cu\d+|cpu|rocm[\d.]*)?", re.IGNORECASE)


def _label_torch(distribution: str | None) -> str | None:
    """``pt2141cu130`` from ``pointnet2_ops 3.0.0+pt2141cu130.sm90``: the torch named by the
    version's local label (ours, and PyG's ``+pt21cu121``), or None."""
    if not distribution or "+" not in distribution:
        return None
    match = _TORCH_LABEL.match(distribution.rsplit("+", 1)[1])
    return match.group(0) if match else None


def _same_torch(label: str, installed: str) -> bool:
    """Does ``pt2141cu130`` name this torch? Our labels join every release digit (2.14.1 ->
    2141), PyG's the major and minor (2.1 -> 21); the variant, where the label has one, too."""
    from packaging.version import InvalidVersion, Version

    match = _TORCH_LABEL.match(label)
    try:
        version = Version(installed)
    except InvalidVersion:
        return False
    if match is None:
        return False
    digits, variant = match.group(1), (match.group(2) or "").lower()
    release = [str(part) for part in version.release]
    if digits not in ("".join(release), "".join(release[:2])):
        return False
    local = (version.local or "").lower()
    return not variant or not local or variant == local


def _label_version(label: str) -> str:
    """``pt2141cu130`` -> ``2.14.1`` (our labels: one major digit, one patch digit)."""
    match = _TORCH_LABEL.match(label)
    digits = match.group(1) if match else ""
    if len(digits) >= 3:
        return f"{digits[0]}.{digits[1:-1]}.{digits[-1]}"
    return ".".join(digits) if digits else label


def _repair_command(env: Environment) -> str:
    """The one command that rebuilds, for the installed torch, every extension built for another
    (issue 27)."""
    return _cuda_pip_install(env, "--repair")


def _quoted(word: str) -> str:
    """``shlex.quote(word)``; shlex is imported only for a word that needs quoting (a warm
    doctor imports nothing it does not need)."""
    if word and all(char.isalnum() or char in "@%+=:,./-_" for char in word) and word.isascii():
        return word
    import shlex

    return shlex.quote(word)


def _cuda_pip_install(env: Environment, *words: str) -> str:
    """``cuda-pip install WORDS`` for this target: ``--python`` names it where cuda-pip would not
    choose it by itself."""
    command = " ".join(_quoted(word) for word in ("cuda-pip", "install", *words))
    python = env.python.executable
    if env.source != "detected" or not python:
        return command
    from ..install.target import choose_target

    try:
        default: str | None = choose_target(None).python
    except UsageError:  # $VIRTUAL_ENV names no interpreter: only --python reaches the target
        default = None

    def prefix(path: str) -> str:  # <prefix>/bin/python: bin/python3 names the same target
        return os.path.dirname(os.path.dirname(os.path.abspath(path)))

    if default is not None and prefix(default) == prefix(python):
        return command
    return f"{command} --python {_quoted(python)}"


def check_extension_symbols(env: Environment, index: CudaFactsSource) -> list[Finding]:
    """Will ``import`` find every torch symbol an extension needs? The scan looked its undefined
    symbols of torch's namespaces up in the installed torch's libraries; an extension whose
    wheel names another torch, whose symbols all resolve, is a warning."""
    torch = env.torch
    if torch is None:
        return []
    findings: list[Finding] = []
    blocked = _no_rebuild_here(env, index)
    for ext in env.extensions:
        label = _label_torch(ext.distribution)
        built_for = f"torch {_label_version(label)} (its version label {label})" if label else None
        other_torch = label is not None and not _same_torch(label, torch.version)
        if ext.missing_symbols:
            shown = (
                ext.demangled
                if len(ext.demangled) == len(ext.missing_symbols)
                else ext.missing_symbols
            )
            first = (
                shown[0]
                if shown[0] == ext.missing_symbols[0]
                else f"{shown[0]} ({ext.missing_symbols[0]})"
            )
            more = (
                f" and {len(ext.missing_symbols) - 1} more" if len(ext.missing_symbols) > 1 else ""
            )
            origin = f"; it was built for {built_for}" if built_for else ""
            install = (
                f", or install the torch it was built for (torch=={_label_version(label)})"
                if label
                else ""
            )
            findings.append(
                Finding(
                    check="extension-symbols",
                    status="error",
                    title="torch symbols of an extension",
                    found=f"{_named(ext)} needs {first}{more}, which the installed torch "
                    f"{torch.version} does not define{origin}: import fails with 'undefined "
                    f"symbol: {ext.missing_symbols[0]}'",
                    fix=f"rebuild it against the installed torch {torch.version}: "
                    f"`{_repair_command(env)}`{install}"
                    if blocked is None
                    else f"{blocked}{install}",
                )
            )
        elif other_torch and built_for:
            findings.append(
                Finding(
                    check="extension-symbols",
                    status="warn",
                    title="torch symbols of an extension",
                    found=f"{_named(ext)} was built for {built_for}, the installed torch is "
                    f"{torch.version}; every torch symbol it needs is defined, so it loads, "
                    "but torch's ABI is not stable across releases",
                    fix=f"rebuild it against torch {torch.version} (`{_repair_command(env)}`) "
                    "before relying on it"
                    if blocked is None
                    else blocked,
                )
            )
    return findings


def check_extension_notes(env: Environment, index: CudaFactsSource) -> list[Finding]:
    """What the extension scan could not read (a corrupt fat binary or symbol table)."""
    return [
        Finding(check="extension-read", status="info", title="extension scan note", found=note)
        for ext in env.extensions
        for note in ext.notes
    ]


def check_slurm(env: Environment, index: CudaFactsSource) -> list[Finding]:
    if not env.scheduler.in_slurm_job:
        return []
    toolkit = _primary(env)
    missing = []
    if toolkit is not None and not (env.variables.cuda_home or env.variables.cuda_path):
        missing.append("CUDA_HOME")
    # LD_LIBRARY_PATH is asked for only where an extension's library is not found (below), as
    # `cuda-resolve env` exports it: the toolkit's lib64 alone was asked for after that fix too.
    if env.gpus and not env.variables.cuda_visible_devices:
        missing.append("CUDA_VISIBLE_DEVICES (no GPUs allocated with --gres?)")
    unloadable = sorted({name for ext in env.extensions for name in ext.missing})
    if unloadable:
        missing.append(f"the libraries its extensions need ({', '.join(unloadable)})")
    if not missing:
        return [
            Finding(
                check="slurm",
                status="ok",
                title="Slurm job",
                found=f"job {env.scheduler.slurm_job_id}: CUDA variables are set",
            )
        ]
    exports = (
        f"export CUDA_HOME={toolkit.root} LD_LIBRARY_PATH={toolkit.root}/lib64:$LD_LIBRARY_PATH"
        if toolkit and toolkit.root
        else "set the CUDA variables in the job script"
    )
    return [
        Finding(
            check="slurm",
            status="warn",
            title="Slurm job",
            found=f"job {env.scheduler.slurm_job_id} lacks {', '.join(missing)}: Slurm resets the "
            "environment and Python-side changes come too late for the loader",
            # `cuda-resolve env` computes them from the extension scan; the hand-written line stays
            # for a toolkit alone.
            fix='in the job script, before python: eval "$(cuda-resolve env)" (or paste the '
            f"lines `cuda-resolve env --slurm` prints); by hand: {exports}",
        )
    ]


CHECKS: tuple[Check, ...] = (
    check_probe_notes,
    check_driver,
    check_smi_cuda_is_not_toolkit,
    check_torch_build,
    check_torch_covers_gpus,
    check_nvcc_matches_torch,
    check_toolkit_targets_gpus,
    check_host_compiler,
    check_toolkits_agree,
    check_nvcc_wrapper,
    check_toolkit_headers,
    check_extensions_load,
    check_extension_kernels,
    check_extension_symbols,
    check_extension_notes,
    check_slurm,
)


def run_checks(env: Environment, index: CudaFactsSource) -> list[Finding]:
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(env, index))
    return findings
