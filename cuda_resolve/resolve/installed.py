"""An installed build of a curated extension, judged for keeping: what its label says it was
built for, and whether that is the torch of the plan and covers every GPU here.

A wheel cuda-resolve builds carries its ABI in its version's local label
(:attr:`cuda_resolve.wheelhouse.key.WheelKey.local_label`: ``3.0.0+pt2141cu130.sm80.sm86ptx``
is torch 2.14.1, variant cu130, SASS for 8.0, SASS and PTX for 8.6). :func:`parse_build_label`
reads the label back; :func:`judge_installed` applies the rules. Pure: no I/O.

The rules, in order: ``--rebuild`` or an explicit ``--arch-list`` (a build for other machines is
wanted) leave it out; a version without such a label says nothing of its ABI; the label must name
the installed torch's release and variant exactly; with GPUs here its arch list must cover every
one (compat's rule, ranked by :func:`~cuda_resolve.wheelhouse.key.covers`); with no GPU and no
``--arch-list`` (a login node) any arch list is kept: it was built for other machines on purpose.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from packaging.version import InvalidVersion, Version

from .._frozen import frozen
from ..compat import format_arch_list, uncovered_gpus
from ..environment import Gpu, InstalledExtension
from ..index.cuda import ArchEntry
from ..index.model import TorchRelease, parse_arch_list
from ..wheelhouse.key import covers, parse_local_label, torch_label

__all__ = ["BuildLabel", "Kept", "Refused", "judge_installed", "parse_build_label", "torch_label"]


@frozen
class BuildLabel:
    """A built wheel's local label, read back: the torch part as written (``pt2141cu130``: the
    release's digits are joined, so it is compared, not split) and the arch list."""

    torch: str
    arch_list: tuple[ArchEntry, ...]


def parse_build_label(version: str) -> BuildLabel | None:
    """The label of ``3.0.0+pt2141cu130.sm80.sm86ptx`` (a recipe word after the archs or not),
    read by the wheelhouse's own reader; None when the version has none of that form."""
    try:
        local = Version(version).local
    except InvalidVersion:
        return None
    parts = parse_local_label(local) if local is not None else None
    if parts is None:
        return None
    return BuildLabel(
        torch=parts.torch, arch_list=parse_arch_list(parts.arch_list) if parts.arch_list else ()
    )


@frozen
class Kept:
    """The installed build stays: its arch list and the sentence ``plan --explain`` shows."""

    arch_list: tuple[ArchEntry, ...]
    reason: str


@frozen
class Refused:
    """It is not kept: the rejection's kind (a key of candidates.RULES), sentence and facts."""

    kind: str
    reason: str
    facts: tuple[tuple[str, str], ...] = ()


def _built_for(head: str, releases: Iterable[TorchRelease]) -> str:
    """``torch 2.13.0+cu130`` where the index knows a build with this label part, else the part."""
    for release in releases:
        for variant in release.variants:
            if torch_label(release.version, variant.name) == head:
                return f"torch {release.version}+{variant.name}"
    return f"torch '{head}'"


def judge_installed(
    installed: InstalledExtension,
    *,
    torch: tuple[Version, str] | None,
    gpus: Sequence[Gpu],
    arch_list_given: bool,
    rebuild: bool,
    releases: Iterable[TorchRelease] = (),
) -> Kept | Refused:
    """Whether ``installed`` is kept. ``torch``: the installed torch's (base version, variant),
    the one the plan keeps; ``releases`` only name the torch a foreign label was built for."""
    label = f"installed {installed.name} {installed.version}"
    if rebuild:
        return Refused(
            kind="installed-build-ignored",
            reason=f"{label}: not kept: --rebuild asks for a new build",
        )
    if arch_list_given:
        return Refused(
            kind="installed-build-ignored",
            reason=f"{label}: not kept: --arch-list names the GPUs to build for",
        )
    built = parse_build_label(installed.version)
    if built is None:
        return Refused(
            kind="installed-build-unknown",
            reason=f"{label}: its version has no build label (+pt<torch><variant>.sm<arch>...), "
            "so the torch and GPUs it was built for are unknown",
        )
    if torch is None:
        return Refused(
            kind="installed-build-torch",
            reason=f"{label}: built for {_built_for(built.torch, releases)}, and no torch "
            "is installed",
            facts=(("built_for", built.torch),),
        )
    base, variant = torch
    if built.torch != torch_label(base, variant):
        return Refused(
            kind="installed-build-torch",
            reason=f"{label}: built for {_built_for(built.torch, releases)}, not the installed "
            f"torch {base}+{variant}",
            facts=(("built_for", built.torch), ("torch", f"{base}+{variant}")),
        )
    arch_text = format_arch_list(built.arch_list)
    if gpus:
        coverage = (
            covers(arch_text, [gpu.compute_capability for gpu in gpus]) if arch_text else None
        )
        if coverage is None:
            missing = uncovered_gpus(built.arch_list, gpus)
            names = ", ".join(f"{gpu.name} ({gpu.compute_capability})" for gpu in missing)
            return Refused(
                kind="installed-build-gpu",
                reason=f"{label}: built for {arch_text or 'no GPU'}, which has no "
                f"kernels for {names}",
                facts=(
                    ("gpus", ";".join(str(gpu.compute_capability) for gpu in missing)),
                    ("arch_list", arch_text),
                ),
            )
        why = f"covers {coverage.describe()}"
    else:
        why = f"no GPU here, and it was built for {arch_text or 'no GPU'} on purpose"
    return Kept(
        arch_list=built.arch_list, reason=f"{label}: built for torch {base}+{variant}, {why}: kept"
    )
