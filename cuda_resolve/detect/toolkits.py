"""Every CUDA toolkit on the machine, in the order a torch extension build would pick them.

Where we look, in order (the first is the one a build uses, as torch's ``_find_cuda_home``
does: ``CUDA_HOME``/``CUDA_PATH``, then ``nvcc`` on PATH, then ``/usr/local/cuda``):

1. ``$CUDA_HOME``, ``$CUDA_PATH``
2. ``nvcc`` on PATH, wrapper scripts and symlinks followed to the real toolkit
3. ``/usr/local/cuda``
4. ``$CONDA_PREFIX`` (conda's ``cuda-nvcc``: ``bin/nvcc`` or ``targets/<triple>/bin/nvcc``)
5. pip's nvcc wheels in the target's site-packages (``nvidia/cuda_nvcc``, ``nvidia/cu13``)
6. ``/usr/local/cuda-*`` and ``/opt/cuda*``, newest first

The same toolkit reached twice (``/usr/local/cuda`` is usually a link) is listed once, under
the first way it was found. nvcc's answers are cached per binary (see :mod:`._cache`).
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .._frozen import frozen, replace
from ..environment import Toolkit
from ..versions import ComputeCapability, CudaVersion
from ._cache import ProbeCache
from ._files import is_executable_file, read_text, under_root, which
from ._run import run
from .nvcc import parse_gpu_arch_list, parse_nvcc_version, resolve_nvcc, toolkit_root

__all__ = ["HEADERS", "Candidate", "find_toolkits", "missing_headers", "toolkit_candidates"]

#: Headers torch's ``ATen/cuda/CUDAContext.h`` pulls in; an nvcc-only toolkit lacks most of them.
HEADERS = ("cuda_runtime_api.h", "cusparse.h", "cublas_v2.h", "cusolverDn.h")
_NVCC = "nvcc.exe" if os.name == "nt" else "nvcc"


@frozen(kw_only=False)
class Candidate:
    """A place that may hold a toolkit: its root, its nvcc as found, and how we got there."""

    found_via: str
    root: str | None = None
    nvcc: str | None = None  # as found: may be a wrapper or a link


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", os.path.basename(path))) or (0,)


def toolkit_candidates(
    *, environ: Mapping[str, str], root: Path, site_packages: Sequence[str]
) -> list[Candidate]:
    found: list[Candidate] = []
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        home = environ.get(variable)
        if home:
            found.append(Candidate(variable, root=home, nvcc=os.path.join(home, "bin", _NVCC)))
    on_path = which("nvcc", environ)
    if on_path is not None:
        found.append(Candidate("PATH", nvcc=on_path))
    default = under_root(root, "/usr/local/cuda")
    found.append(Candidate("/usr/local/cuda", root=str(default), nvcc=str(default / "bin" / _NVCC)))
    prefix = environ.get("CONDA_PREFIX")
    if prefix:
        conda_nvcc = [
            os.path.join(prefix, "bin", _NVCC),
            *glob.glob(os.path.join(prefix, "targets", "*", "bin", _NVCC)),
        ]
        for nvcc in conda_nvcc:
            found.append(Candidate("CONDA_PREFIX", nvcc=nvcc))
    for site in site_packages:
        for nvcc in sorted(glob.glob(os.path.join(glob.escape(site), "nvidia", "*", "bin", _NVCC))):
            found.append(Candidate("nvidia-cuda-nvcc wheel", nvcc=nvcc))
    for pattern in ("/usr/local/cuda-*", "/opt/cuda*"):
        base = under_root(root, pattern)
        matches = sorted(
            glob.glob(os.path.join(glob.escape(str(base.parent)), base.name)),
            key=_version_key,
            reverse=True,
        )
        for directory in matches:
            label = "/" + os.path.relpath(directory, root) if root != Path("/") else directory
            found.append(
                Candidate(label, root=directory, nvcc=os.path.join(directory, "bin", _NVCC))
            )
    return found


def missing_headers(toolkit_dir: str) -> tuple[str, ...]:
    """Which of :data:`HEADERS` are in neither ``include/`` nor ``targets/*/include/``."""
    include_dirs = [
        os.path.join(toolkit_dir, "include"),
        *glob.glob(os.path.join(glob.escape(toolkit_dir), "targets", "*", "include")),
    ]
    return tuple(
        header
        for header in HEADERS
        if not any(os.path.isfile(os.path.join(directory, header)) for directory in include_dirs)
    )


def _version_from_files(toolkit_dir: str) -> tuple[CudaVersion, str] | None:
    """``version.json`` (CUDA >= 11.1) or ``version.txt`` (older), for a toolkit whose nvcc won't
    run."""
    text = read_text(os.path.join(toolkit_dir, "version.json"))
    if text:
        try:
            release = str(json.loads(text)["cuda"]["version"])
            return CudaVersion.parse(release), release
        except (ValueError, KeyError, TypeError, RecursionError):
            pass
    text = read_text(os.path.join(toolkit_dir, "version.txt"))
    match = re.search(r"CUDA Version (\d+\.\d+(?:\.\d+)?)", text or "")
    if match:
        return CudaVersion.parse(match.group(1)), match.group(1)
    return None


@frozen(kw_only=False)
class _Located:
    """Where a candidate toolkit really lives: its root and its real nvcc."""

    candidate: Candidate
    root: str
    real_nvcc: str | None


def _locate(candidate: Candidate, environ: Mapping[str, str]) -> _Located | None:
    """Where the candidate's toolkit really lives. A named directory (CUDA_HOME, a glob match)
    stays the root even when its nvcc is a wrapper: builds take headers from that directory."""
    if candidate.root is not None and not os.path.isdir(candidate.root):
        return None
    real = None
    if candidate.nvcc and is_executable_file(candidate.nvcc):
        real = resolve_nvcc(candidate.nvcc, environ)
    if candidate.root is not None:
        return _Located(candidate, os.path.realpath(candidate.root), real)
    if real is not None:
        return _Located(candidate, os.path.realpath(toolkit_root(real)), real)
    return None


def _nvcc_output(
    nvcc: str, argument: str, *, environ: Mapping[str, str], timeout: float, cache: ProbeCache
) -> str | None:
    def compute() -> str | None:
        ran = run([nvcc, argument], timeout=timeout, environ=environ)
        return ran.stdout if ran is not None and ran.ok else None

    return cache.command_output(nvcc, (argument,), compute)


def _inspect(
    located: _Located, *, environ: Mapping[str, str], timeout: float, cache: ProbeCache
) -> Toolkit | str:
    candidate, root_dir, nvcc = located.candidate, located.root, located.real_nvcc
    version: CudaVersion | None = None
    release: str | None = None
    archs: tuple[ComputeCapability, ...] = ()
    if nvcc is not None:
        parsed = parse_nvcc_version(
            _nvcc_output(nvcc, "--version", environ=environ, timeout=timeout, cache=cache) or ""
        )
        if parsed is not None:
            version, release = parsed
            archs = parse_gpu_arch_list(
                _nvcc_output(nvcc, "--list-gpu-arch", environ=environ, timeout=timeout, cache=cache)
                or ""
            )
    if version is None:
        from_files = _version_from_files(root_dir)
        if from_files is None:
            what = (
                f"nvcc at {nvcc} did not report a version"
                if nvcc
                else f"{root_dir} has no bin/nvcc and no version file"
            )
            return f"toolkit via {candidate.found_via}: {what}"
        version, release = from_files
    wrapper = None
    if candidate.found_via == "PATH" and candidate.nvcc is not None:
        guessed = os.path.dirname(
            os.path.dirname(candidate.nvcc)
        )  # what torch would take as CUDA_HOME
        if os.path.realpath(guessed) != root_dir:
            wrapper = candidate.nvcc
    return Toolkit(
        version=version,
        root=root_dir,
        nvcc=nvcc,
        release=release,
        gpu_archs=archs,
        missing_headers=missing_headers(root_dir),
        found_via=candidate.found_via,
        nvcc_on_path_wrapper=wrapper,
    )


def _explicit_home_notes(candidates: Iterable[Candidate], located: Iterable[_Located]) -> list[str]:
    """CUDA_HOME/CUDA_PATH naming nothing usable: worth saying, since builds will use it."""
    usable = {item.candidate for item in located}
    return [
        f"{c.found_via}={c.root} is not a CUDA toolkit (no bin/{_NVCC}, or not a directory)"
        for c in candidates
        if c.found_via in ("CUDA_HOME", "CUDA_PATH") and c not in usable
    ]


def find_toolkits(
    *,
    environ: Mapping[str, str],
    root: Path,
    site_packages: Sequence[str],
    timeout: float,
    cache: ProbeCache,
) -> tuple[tuple[Toolkit, ...], tuple[str, ...]]:
    """The toolkits, first = the one builds use, and notes on toolkits that could not be read."""
    candidates = toolkit_candidates(environ=environ, root=root, site_packages=site_packages)
    located = [item for item in (_locate(c, environ) for c in candidates) if item is not None]
    notes = _explicit_home_notes(candidates, located)
    first_by_root: dict[str, _Located] = {}
    wrappers: dict[str, str] = {}
    for item in located:
        first_by_root.setdefault(item.root, item)
    # Sequential: nvcc's answers are cached per binary, so threads would cost more than they save.
    results = [
        _inspect(item, environ=environ, timeout=timeout, cache=cache)
        for item in first_by_root.values()
    ]
    # A PATH wrapper that leads to a toolkit first found another way still deserves a mention.
    for item in located:
        if item.candidate.found_via == "PATH" and item is not first_by_root[item.root]:
            guessed = os.path.dirname(os.path.dirname(item.candidate.nvcc or ""))
            if os.path.realpath(guessed) != item.root and item.candidate.nvcc:
                wrappers[item.root] = item.candidate.nvcc
    toolkits: list[Toolkit] = []
    for result in results:
        if isinstance(result, str):
            notes.append(result)
            continue
        if result.root in wrappers and result.nvcc_on_path_wrapper is None:
            result = replace(result, nvcc_on_path_wrapper=wrappers[result.root])
        toolkits.append(result)
    return tuple(toolkits), tuple(notes)
