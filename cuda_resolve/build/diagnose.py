"""Reading a failed build's log: the lines that matter, and the known failures with their fixes.

The table is data: each entry is a pattern seen in real logs of CUDA extension builds, what it
means and what to do. The first entry that matches wins, so the more specific come first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .._frozen import frozen

__all__ = ["KNOWN_FAILURES", "Diagnosis", "diagnose", "error_lines"]


@frozen(kw_only=False)
class Diagnosis:
    kind: str
    pattern: re.Pattern[str]
    meaning: str  # may use the match's groups: {0}, {1}
    fix: str


KNOWN_FAILURES: tuple[Diagnosis, ...] = (
    Diagnosis(
        "disk-full",
        re.compile(r"No space left on device(?:: '([^'\n]{1,4096})')?"),
        "the disk filled up during the build ({0})",
        "free space in the temporary folder (TMPDIR; a CUDA build needs a few GB), or point "
        "TMPDIR at a folder with room, then build again",
    ),
    Diagnosis(
        "disk-quota",
        re.compile(r"Disk quota exceeded(?:: '([^'\n]{1,4096})')?"),
        "your disk quota ran out during the build ({0})",
        "free space within your quota (`quota -s` shows it), or point TMPDIR at a folder outside "
        "it, then build again",
    ),
    Diagnosis(
        "unsupported-arch",
        re.compile(r"Unsupported gpu architecture '(compute_\w+|sm_\w+)'"),
        "nvcc was asked for {1}, which this toolkit cannot target (setup.py may hard-code its own "
        "TORCH_CUDA_ARCH_LIST)",
        "build for the GPUs here (cuda-resolve sets TORCH_CUDA_ARCH_LIST; a recipe patch must "
        "make setup.py honour it), or use a toolkit that still supports that architecture",
    ),
    Diagnosis(
        "missing-header",
        re.compile(r"fatal error: ([\w./-]+\.(?:h|hpp|cuh)): No such file or directory"),
        "the header {1} is not on the include path",
        "for cusparse.h / cublas_v2.h / cusolverDn.h install the toolkit's development libraries "
        "(or torch's nvidia-* wheels); otherwise install the package that provides {1}",
    ),
    Diagnosis(
        "compiler-version",
        re.compile(r"unsupported GNU version! gcc versions later than (\d+) are not supported"),
        "the host gcc is newer than this nvcc accepts (gcc <= {1})",
        "install g++-{1} (or older) and run again: cuda-resolve picks an installed compatible "
        "gcc; or set CC, CXX and NVCC_CCBIN",
    ),
    Diagnosis(
        "compiler-version",
        re.compile(
            r"(?:The current installed version of g\+\+ \(([\d.]+)\) is greater than the maximum "
            r"required version)|(?:is not compatible with the compiler Pytorch was built with)"
        ),
        "torch.utils.cpp_extension refuses this host compiler",
        "install an older g++ within the toolkit's range and run again, or set CC and CXX to one",
    ),
    Diagnosis(
        "undefined-symbol",
        re.compile(r"undefined symbol: (\S+)"),
        "a compiled library was built against another torch (or another CUDA runtime): {1}",
        "rebuild the extension against the torch installed now (cuda-pip install reinstalls from "
        "a wheel keyed by torch's version), and keep torch at that version",
    ),
    Diagnosis(
        "out-of-memory",
        re.compile(
            r"(?:cc1plus: out of memory|virtual memory exhausted|Killed signal terminated "
            r"program|c\+\+: fatal error: "
            r"Killed|\bKilled\b(?:(?!\bKilled\b).)*?(?:cicc|ptxas|cc1plus))"
        ),  # each "Killed" looks only up to the next: linear
        "the compiler ran out of memory",
        "run again with fewer parallel jobs (MAX_JOBS=2 cuda-pip install ...); cuda-resolve sizes "
        "MAX_JOBS from free memory when it starts",
    ),
    Diagnosis(
        "no-torch",
        re.compile(r"No module named '?torch'?"),
        "the build could not import torch: it ran in an isolated environment or in an interpreter "
        "without torch",
        "install torch into the target first (cuda-pip install torch), and build with the "
        "target's interpreter (--python PATH)",
    ),
    Diagnosis(
        "no-cuda-home",
        re.compile(r"CUDA_HOME environment variable is not set|No CUDA runtime is found"),
        "torch.utils.cpp_extension found no CUDA toolkit",
        "install a CUDA toolkit of torch's CUDA major version and set CUDA_HOME to it",
    ),
    Diagnosis(
        "cuda-mismatch",
        re.compile(
            r"The detected CUDA version \(([\d.]+)\) mismatches the version that was used to "
            r"compile\s*PyTorch \(([\d.]+)\)"
        ),
        "nvcc {1} and torch's CUDA {2} differ in major version",
        "use a toolkit of CUDA {2}'s major version (set CUDA_HOME), or a torch built for CUDA {1} "
        "(--allow-torch-change)",
    ),
)

#: Compiler context lines. One leading ``\s*`` only: a second inside the alternatives made a long
#: run of blanks backtrack quadratically.
_NOISE = re.compile(r"^\s*(?:note:|In file included from|from |\||\^|\d+ \|)")
_ERRORISH = re.compile(
    r"(?i)\berror\b|fatal|undefined symbol|Killed|Traceback|Exception|No module named"
)


def error_lines(lines: Iterable[str], *, limit: int = 12) -> list[str]:
    """The last lines that say what failed (compiler errors, Python exceptions), de-duplicated."""
    picked: list[str] = []
    for line in lines:
        text = line.rstrip()
        if not text or _NOISE.match(text) or not _ERRORISH.search(text):
            continue
        if text in picked:
            picked.remove(text)
        picked.append(text)
    return picked[-limit:]


def diagnose(lines: Iterable[str]) -> tuple[str, str, str] | None:
    """(kind, meaning, fix) of the first known failure found in the log, else None."""
    text = "\n".join(lines)
    for entry in KNOWN_FAILURES:
        match = entry.pattern.search(text)
        if match:
            groups = [match.group(0), *(g or "" for g in match.groups())]
            return entry.kind, entry.meaning.format(*groups), entry.fix.format(*groups)
    return None
