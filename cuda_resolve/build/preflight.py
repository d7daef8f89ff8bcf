"""Pre-flight: everything that would make a source build fail, found before anything compiles.

:func:`check_build` is a pure function of the Plan's build item, its Recipe, the Environment and
the index: it either returns a :class:`BuildSpec` (what to build, with which toolkit, compiler,
arch list and variables) or raises :class:`PreflightError` naming the fact and the fix. It costs
well under a second, so an impossible request is refused before a 60-second compile starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..compat import host_compiler_for, toolkit_archs, toolkit_can_build
from ..environment import Environment, Toolkit
from ..errors import BuildError
from ..index.model import ArchEntry, Index, Recipe, parse_arch_list
from ..plan import PYPI_SIMPLE, PlanItem
from ..versions import CudaVersion
from .spec import BuildSpec

__all__ = ["BuildSpec", "PreflightError", "check_build"]


class PreflightError(BuildError):
    """A build that cannot succeed on this machine; the hint says what to change."""

    exit_code = 1


def _variant_cuda(variant: str | None) -> CudaVersion | None:
    """``cu130`` -> 13.0, ``cu118`` -> 11.8; ``cpu`` and ROCm -> None."""
    if not variant or not variant.startswith("cu"):
        return None
    try:
        return CudaVersion.parse(variant)
    except ValueError:
        return None


def _find_toolkit(item: PlanItem, env: Environment) -> Toolkit | None:
    for toolkit in env.toolkits:
        if item.toolkit_root and toolkit.root == item.toolkit_root:
            return toolkit
    return next((t for t in env.toolkits if item.toolkit and str(t.version) == item.toolkit), None)


def _with_ptx(arch_list: tuple[ArchEntry, ...]) -> tuple[ArchEntry, ...]:
    if not arch_list or arch_list[-1].ptx:
        return arch_list
    highest = max(arch_list)
    return tuple(
        sorted({e for e in arch_list if e != highest} | {ArchEntry(highest.capability, ptx=True)})
    )


def _compiler_fix(
    env: Environment, index: Index, toolkit: Toolkit
) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """Variables that switch the host compiler to an installed one in the toolkit's range."""
    facts = index.toolkit(CudaVersion(toolkit.version.major, toolkit.version.minor))
    verdict, switch_to = host_compiler_for(env.compiler, facts)
    if verdict.ok:
        return (), None
    if switch_to is None:
        limit = facts.gcc_max if facts and facts.gcc_max else None
        if facts and facts.torch_gcc_max_exclusive:
            limit = min(limit or 99, facts.torch_gcc_max_exclusive - 1)
        wanted = f"gcc/g++ {limit} or older" if limit else "an older gcc"
        raise PreflightError(
            f"host compiler: {verdict.reason}, and no other installed gcc is in range",
            hint=f"install {wanted} (e.g. apt install g++-{limit or 12}) and run again: "
            "cuda-resolve picks it up; or set CC, CXX and NVCC_CCBIN to one",
        )
    major = switch_to.split(".")[0]
    variables = (
        ("CC", f"gcc-{major}"),
        ("CXX", f"g++-{major}"),
        ("NVCC_CCBIN", f"g++-{major}"),
        ("CUDAHOSTCXX", f"g++-{major}"),
    )
    return variables, f"{verdict.reason}: using the installed gcc-{major} / g++-{major} instead"


#: The nvidia wheel (its component name) that carries each header torch's headers include.
_HEADER_WHEELS = {
    "cuda_runtime_api.h": "cuda-runtime",
    "cusparse.h": "cusparse",
    "cublas_v2.h": "cublas",
    "cusolverDn.h": "cusolver",
}


def _header_dirs(
    env: Environment, toolkit: Toolkit, exists: Callable[[str], bool]
) -> tuple[str, ...]:
    """Include folders of torch's nvidia-* wheels that hold the headers the toolkit lacks."""
    if not toolkit.missing_headers:
        return ()
    wheels = env.torch.nvidia_wheels if env.torch else ()
    dirs: list[str] = []
    still_missing: list[str] = []
    for header in toolkit.missing_headers:
        found = next(
            (
                w.include_dir
                for w in wheels
                if w.include_dir and exists(os.path.join(w.include_dir, header))
            ),
            None,
        )
        if found is None:
            still_missing.append(header)
        elif found not in dirs:
            dirs.append(found)
    if still_missing:
        # CUDA 13's component wheels dropped the -cuXY suffix (nvidia-cusparse); 12's have it.
        suffix = "" if toolkit.version.major >= 13 else f"-cu{toolkit.version.major}"
        carriers = dict.fromkeys(
            f"nvidia-{_HEADER_WHEELS.get(header, 'cuda-runtime')}{suffix}"
            for header in still_missing
        )
        raise PreflightError(
            f"CUDA {toolkit.version} at {toolkit.root} lacks {', '.join(still_missing)}, which "
            "torch's extension headers include, and no nvidia-* wheel beside torch ships them",
            hint="install the toolkit's development libraries (e.g. conda install -c nvidia "
            f"cuda-libraries-dev={toolkit.version}, or the full toolkit from NVIDIA), or beside "
            "torch the wheels that carry them, at the versions torch requires: "
            + " ".join(carriers),
        )
    return tuple(dirs)


def check_build(
    item: PlanItem,
    recipe: Recipe,
    env: Environment,
    index: Index,
    *,
    import_name: str | None = None,
    torch_item: PlanItem | None = None,
    ptx: bool = False,
    exists: Callable[[str], bool] = os.path.exists,
) -> BuildSpec:
    """Every check the build needs, in the order a user would want to hear about them."""
    name = item.name
    torch_version = (item.torch or "").split("+", 1)[0]
    torch_cuda = _variant_cuda(item.variant)
    if not torch_version:
        raise PreflightError(
            f"{name}: the plan names no torch to build against", hint="add torch to the request"
        )
    if torch_cuda is None:
        raise PreflightError(
            f"{name}: torch {item.torch or torch_version} is a {item.variant or 'CPU'} build; "
            f"{name} needs a CUDA build of torch to compile against",
            hint="install a CUDA build of torch first (cuda-pip install torch), or pass "
            "--allow-torch-change",
        )
    toolkit = _find_toolkit(item, env)
    # A profile (another machine's facts) may give a toolkit's root without its nvcc: the build
    # runs there, where nvcc is found again (user walk C14).
    described = env.source != "detected" and toolkit is not None and bool(toolkit.root)
    if toolkit is None or (toolkit.nvcc is None and not described):
        raise PreflightError(
            f"{name}: the CUDA {item.toolkit or torch_cuda.major} toolkit the plan chose "
            f"({item.toolkit_root or 'unknown place'}) was not found",
            hint=f"install a CUDA {torch_cuda.major}.x toolkit with nvcc, or set CUDA_HOME to one",
        )
    if toolkit.version.major != torch_cuda.major:
        raise PreflightError(
            f"{name}: nvcc {toolkit.version} ({toolkit.root}) and torch {item.torch} (CUDA "
            f"{torch_cuda}) differ in CUDA major version; the extension would not load",
            hint=f"install a CUDA {torch_cuda.major}.x toolkit and set CUDA_HOME to it, or pass "
            f"--allow-torch-change to move to a torch built for CUDA {toolkit.version.major}",
        )
    if not item.arch_list:
        raise PreflightError(
            f"{name}: no TORCH_CUDA_ARCH_LIST to build for (no GPU here)",
            hint="pass --arch-list '8.6;9.0' (the compute capabilities of the GPUs to build for)",
        )
    try:
        arch_list = parse_arch_list(item.arch_list)
    except ValueError as exc:
        raise PreflightError(
            f"{name}: TORCH_CUDA_ARCH_LIST {item.arch_list!r}: {exc}",
            hint="write compute capabilities such as '7.5;8.6;9.0+PTX'",
        ) from None
    if ptx:
        arch_list = _with_ptx(arch_list)
    facts = index.toolkit(CudaVersion(toolkit.version.major, toolkit.version.minor))
    archs = toolkit_archs(toolkit, facts)
    if archs:
        verdict = toolkit_can_build(archs, arch_list, version=toolkit.version)
        if not verdict.ok:
            raise PreflightError(
                f"{name}: {verdict.reason}",
                hint="build for what this toolkit supports (--arch-list), or install a toolkit "
                "that targets these GPUs",
            )
    compiler_variables, compiler_note = _compiler_fix(env, index, toolkit)
    installed = env.torch
    same_torch = (
        installed is not None
        and installed.base_version == torch_version
        and installed.cuda is not None
        and installed.cuda.major == torch_cuda.major
        and installed.cuda.minor == torch_cuda.minor
    )
    # A torch still to be installed brings its nvidia-* wheels into the build overlay: the
    # headers the toolkit lacks are looked for there once it is installed (buildenv).
    include_dirs = _header_dirs(env, toolkit, exists) if same_torch else ()

    arch_text = ";".join(str(entry) for entry in arch_list)
    root = toolkit.root or os.path.dirname(os.path.dirname(toolkit.nvcc or ""))
    variables: list[tuple[str, str]] = [
        ("CUDA_HOME", root),
        ("CUDA_PATH", root),
        ("TORCH_CUDA_ARCH_LIST", arch_text),
        *recipe.env,
        *compiler_variables,
    ]
    torch_requirement = None
    torch_index = None
    if not same_torch:
        torch_requirement = (
            torch_item.requirement if torch_item and torch_item.requirement else None
        ) or f"torch=={torch_version}"
        torch_index = torch_item.index if torch_item else None
        if torch_index and torch_index.rstrip("/") == PYPI_SIMPLE:
            # PyPI's torch: the overlay asks the user's PyPI index (or mirror) alone, as the
            # target's torch step does, so both take the same files from one download folder.
            # Named as pypi.org it went there past the mirror, or to the PyTorch mirror of the
            # variant, and a first install downloaded torch and its CUDA wheels twice.
            torch_index = None
    notes = [n for n in (compiler_note,) if n]
    if include_dirs:
        notes.append(
            f"headers missing from CUDA {toolkit.version} come from torch's nvidia wheels: "
            f"{', '.join(include_dirs)}"
        )
    if not same_torch:
        notes.append(
            f"the target's torch is not {item.torch}: the build installs {item.torch} into its "
            "temporary overlay; the target gets it only at install time"
        )
    return BuildSpec(
        recipe=recipe,
        package=name,
        import_name=import_name or name,
        # A profile names no interpreter: a plan made from one runs the applying machine's.
        python=env.python.executable or "python3",
        python_tag=env.python.interpreter_tag,
        platform=f"linux_{env.machine.arch}",
        torch_version=torch_version,
        torch_requirement=torch_requirement,
        torch_index=torch_index,
        variant=item.variant or "",
        toolkit=toolkit,
        arch_list=arch_text,
        variables=tuple(variables),
        include_dirs=include_dirs,
        missing_headers=() if same_torch else toolkit.missing_headers,
        build_requires=recipe.build_requires,
        notes=tuple(notes),
    )
