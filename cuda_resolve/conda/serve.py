"""Can a channel's build of an extension serve this machine and this environment?

Three questions, each answered with the reason (the same rules the resolver uses, from
:mod:`cuda_resolve.compat`):

1. the driver runs the CUDA the build was made with (``__cuda`` / ``cuda-version`` in its depends);
2. its arch list covers every GPU here: the arch list comes from cuda-resolve's own build string
   (``..._sm80_sm90ptx_...``) or a ``__cuda_arch`` constraint (CEP 46); a build that states
   neither is taken to carry its CUDA's full arch list (conda-forge builds for every arch its
   toolkit supports), which is said in the reason;
3. it pairs with the environment's torch: its ``pytorch``/``torch`` dependency accepts exactly
   the torch the environment has (a channel's pytorch never pairs with pip's torch: their ABIs
   differ), or the environment has no torch yet and the build's torch will come with it.

:func:`veto_cpu_torch` is the other half: a solve that would install a CPU-only torch on a GPU
machine is refused with the reason and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._frozen import frozen
from ..compat import driver_supports_cuda, format_arch_list, uncovered_gpus
from ..environment import Environment
from ..index.cuda import ArchEntry
from ..index.model import parse_arch_entry
from ..versions import ComputeCapability, CudaVersion
from .matchspec import MatchSpec, compare_versions, parse_spec
from .records import CondaRecord, TorchRecord, channel_torch_cuda

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from ..index.cuda import CudaFactsSource

__all__ = [
    "Fit",
    "arch_list_of",
    "best_fitting",
    "build_fits",
    "cuda_of",
    "veto_cpu_torch",
    "veto_torch_swap",
]

_ARCH_WORD = re.compile(r"^sm(\d{2,3})(a|f)?(ptx)?$")


@frozen(kw_only=False)
class Fit:
    record: CondaRecord
    ok: bool
    reasons: tuple[str, ...]

    def describe(self) -> str:
        head = f"{self.record.name} {self.record.version} {self.record.build}"
        return f"{head}: {'fits' if self.ok else 'does not fit'} ({'; '.join(self.reasons)})"


def arch_list_of(record: CondaRecord) -> tuple[ArchEntry, ...] | None:
    """The arch list a record states: cuda-resolve's build-string words (``sm80``, ``sm90ptx``)
    or a ``__cuda_arch`` constraint's lower bound; None when it states none."""
    entries = []
    for word in record.build.split("_"):
        match = _ARCH_WORD.match(word)
        if match:
            digits, suffix, ptx = match.groups()
            capability = ComputeCapability(int(digits[:-1]), int(digits[-1]), suffix or "")
            entries.append(ArchEntry(capability, bool(ptx)))
    if entries:
        return tuple(entries)
    for text in record.constrains:
        spec = parse_spec(text)
        found = re.fullmatch(r">=?(\d+\.\d)", spec.version) if spec.name == "__cuda_arch" else None
        if found:
            # A minimum capability: the build runs from there up (PTX at that minimum).
            return (parse_arch_entry(f"{found.group(1)}+PTX"),)
    return None


def cuda_of(record: CondaRecord) -> CudaVersion | None:
    """The CUDA a build was made with: its ``cuda-version`` dependency, else ``__cuda``'s lower
    bound, else (for pytorch itself) its build string; None when it states none (a CPU build)."""
    for name in ("cuda-version", "__cuda"):
        for spec in record.dependency(name):
            found = re.search(r">=?\s*(\d+)(?:\.(\d+))?", spec.version) or re.fullmatch(
                r"(\d+)\.(\d+)(?:\.\*)?", spec.version
            )
            if found:
                return CudaVersion(int(found.group(1)), int(found.group(2) or 0))
    return channel_torch_cuda(record) if record.name == "pytorch" else None


def _torch_specs(record: CondaRecord) -> list[MatchSpec]:
    return record.dependency("pytorch") + record.dependency("torch")


def build_fits(
    record: CondaRecord,
    env: Environment,
    torch: TorchRecord | None,
    facts: CudaFactsSource,
    *,
    toolkit_archs: Sequence[ComputeCapability] = (),
) -> Fit:
    """Does ``record`` serve ``env`` (its driver and GPUs) and the environment's ``torch``?

    ``toolkit_archs`` is the arch set assumed for a build that states no arch list; by default
    the SASS targets of the CUDA it was built with, from ``facts``. Where neither is known such
    a build fits only where there is no GPU to cover."""
    reasons: list[str] = []
    ok = True
    cuda = cuda_of(record)
    if cuda is not None:
        verdict = driver_supports_cuda(env.driver, cuda, facts)
        ok &= verdict.ok
        reasons.append(verdict.reason)
    if env.gpus:
        stated = arch_list_of(record)
        if not toolkit_archs and cuda is not None:
            toolkit = facts.toolkit(cuda)
            toolkit_archs = toolkit.archs if toolkit is not None else ()
        if stated is None and toolkit_archs:
            stated = tuple(ArchEntry(capability) for capability in toolkit_archs)
            reasons.append(f"no arch list stated: taken as CUDA {cuda}'s full list")
        if stated is None:
            ok = False
            reasons.append("states no arch list, so it cannot be shown to cover the GPUs")
        else:
            missing = uncovered_gpus(stated, env.gpus)
            if missing:
                ok = False
                names = ", ".join(f"{gpu.name} ({gpu.compute_capability})" for gpu in missing)
                reasons.append(f"arch list {format_arch_list(stated)} has no kernels for {names}")
            else:
                reasons.append(f"arch list {format_arch_list(stated)} covers every GPU")
    specs = _torch_specs(record)
    if specs and torch is None:
        reasons.append("the environment has no torch yet: the build's own torch comes with it")
    elif specs and torch is not None:
        wrong_source = [spec for spec in specs if spec.name != torch.name]
        if wrong_source:
            ok = False
            reasons.append(
                f"needs {wrong_source[0].name} from "
                f"{'a channel' if wrong_source[0].name == 'pytorch' else 'pip'}, the environment "
                f"has {torch.describe()}"
            )
        elif not all(spec.matches(torch.name, torch.version, torch.build) for spec in specs):
            ok = False
            reasons.append(
                f"needs {', '.join(map(str, specs))}; the environment has {torch.describe()}"
            )
        else:
            reasons.append(f"pairs with {torch.describe()}")
    return Fit(record=record, ok=ok, reasons=tuple(reasons))


def best_fitting(fits: Sequence[Fit]) -> Fit | None:
    """The fitting build conda should take: the highest version, then build number."""
    best: Fit | None = None
    for fit in fits:
        if not fit.ok:
            continue
        if best is None:
            best = fit
            continue
        order = compare_versions(fit.record.version, best.record.version)
        if order > 0 or (order == 0 and fit.record.build_number > best.record.build_number):
            best = fit
    return best


def veto_cpu_torch(env: Environment, installing: Sequence[CondaRecord]) -> str | None:
    """The reason to refuse a solve that installs a CPU-only pytorch on a machine with GPUs
    (None: no objection)."""
    if not env.gpus:
        return None
    for record in installing:
        if record.name != "pytorch":
            continue
        torch = TorchRecord.from_channel_record(record)
        if torch.is_cpu_only:
            gpus = ", ".join(f"{gpu.name} ({gpu.compute_capability})" for gpu in env.gpus)
            return (
                f"this solve would install {torch.describe()} on a machine with {gpus}: "
                "nothing would run on the GPU"
            )
    return None


def veto_torch_swap(
    installing: Sequence[CondaRecord], installed: Sequence[CondaRecord], torch: TorchRecord | None
) -> str | None:
    """The reason to refuse a solve that brings a channel's ``pytorch`` into an environment whose
    torch is pip's while packages there were built against that pip torch (None: no objection).
    The names differ (``pytorch`` vs ``torch``), so no solver sees the clash: conda's files
    would land over pip's and the extensions' ABI would change underneath them."""
    if (
        torch is None
        or torch.source != "pip"
        or not any(record.name == "pytorch" for record in installing)
    ):
        return None
    leaving = {record.name for record in installing}
    pinned = sorted(
        record.name
        for record in installed
        if record.name not in leaving
        and any(spec.build == torch.build for spec in record.dependency("torch"))
    )
    if not pinned:
        return None
    return (
        f"this solve would install a channel's pytorch over {torch.describe()}, which "
        f"{', '.join(pinned)} were built against: their compiled code would no longer match the "
        "torch they load"
    )
