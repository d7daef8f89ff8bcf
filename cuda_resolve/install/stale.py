"""Extensions built for the torch a plan replaces: carried along, or named (issue 27).

An extension links the torch it was built against (``libtorch*.so``, ``libc10*.so``) and breaks
at its next import under another one (``undefined symbol: _ZN3c10...``). When a plan replaces
torch (another release or variant), every installed extension linking the old one is part of
the decision: one the index curates is planned again for the new torch (a wheel for it, or a
build from its recipe, wheelhouse first) and installed in the same transaction, undone with it;
one the index does not know (found by reading which installed libraries link torch's) is named,
and the plan is refused unless the user leaves it as it is (``--keep-stale NAME``).

The facts are the Environment's: its torch (:mod:`cuda_resolve.torch_identity`), the curated
distributions installed (``installed_extensions``) and the extension scan's libraries
(``extensions``: their ``DT_NEEDED`` and owning distribution). Nothing here probes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from packaging.utils import canonicalize_name

from .._frozen import frozen, replace
from ..environment import Environment
from ..errors import UsageError
from ..index.model import Index
from ..plan import Plan
from ..torch_identity import identity_of
from .verify import planned_torch

__all__ = [
    "StaleExtension",
    "carry_extensions",
    "repair_arch_list",
    "repair_request",
    "replaced_torch",
    "stale_extensions",
]

_TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio"})
_TORCH_LIBRARIES = ("libtorch", "libc10")


@frozen
class StaleExtension:
    """An installed extension built for the installed torch."""

    name: str  # canonical distribution name; a library's path where no distribution owns it
    version: str | None
    curated: bool  # the index knows it: it is planned again for the new torch
    libraries: tuple[str, ...] = ()  # its libraries that link torch's

    def matches(self, names: Collection[str]) -> bool:
        """Is this the extension one of ``names`` (as the user spells them) means?"""
        wanted = {canonicalize_name(n) for n in names} | set(names)
        return self.name in wanted or any(path in wanted for path in self.libraries)


def replaced_torch(plan: Plan, env: Environment) -> tuple[str, str] | None:
    """(installed build, planned build) when ``plan`` installs another torch build (release or
    variant) than the one installed; None when it keeps it or none is installed."""
    planned = planned_torch(plan.items)
    torch_item = next((i for i in plan.items if i.name == "torch"), None)
    if env.torch is None or planned is None or torch_item is None or torch_item.kind != "wheel":
        return None
    installed = identity_of(env.torch)
    same_variant = planned.variant is None or planned.variant == installed.variant
    if installed.release == planned.release and same_variant:
        return None
    return installed.label, planned.label


def _links_torch(needed: Sequence[str]) -> bool:
    return any(soname.startswith(_TORCH_LIBRARIES) for soname in needed)


def stale_extensions(
    env: Environment, index: Index, *, planned: Collection[str] = ()
) -> list[StaleExtension]:
    """The installed extensions built for the installed torch, less those in ``planned``
    (canonical names the plan installs anyway): the index's packages installed, and every
    distribution (or unowned library) whose libraries link libtorch or libc10."""
    found: dict[str, StaleExtension] = {}
    for installed in env.installed_extensions:
        key = str(canonicalize_name(installed.name))
        found[key] = StaleExtension(name=key, version=installed.version, curated=True)
    for binary in env.extensions:
        if not _links_torch(binary.needed):
            continue
        name: str
        if binary.distribution:
            text, _, version = binary.distribution.partition(" ")
            name = str(canonicalize_name(text))
        else:
            name, version = binary.path, ""
        if name in _TORCH_FAMILY:
            continue
        known = found.get(name)
        found[name] = StaleExtension(
            name=name,
            version=(known.version if known else None) or version or None,
            curated=index.package(name) is not None,
            libraries=(*(known.libraries if known else ()), binary.path),
        )
    skip = {canonicalize_name(n) for n in planned}
    return [found[name] for name in sorted(found) if name not in skip]


def carry_extensions(
    plan: Plan,
    env: Environment,
    index: Index,
    *,
    replan: Callable[[Sequence[str]], Plan],
    keep_stale: Collection[str] = (),
) -> Plan:
    """``plan`` with every extension built for the torch it replaces carried along:
    ``replan(names)`` decides again with the curated ones requested too; an unknown one refuses
    the plan unless ``keep_stale`` names it. Each decision is one of the plan's reasons (what
    ``plan`` shows under "Why", and ``--explain``)."""
    replaced = replaced_torch(plan, env)
    if replaced is None:
        return plan
    old, new = replaced
    stale = stale_extensions(env, index, planned=[item.name for item in plan.items])
    for name in keep_stale:  # a typo would leave the extension it meant refused, or unsaid
        if not any(s.matches([name]) for s in stale):
            left = [s.name for s in stale if not s.curated]
            raise UsageError(
                f"--keep-stale {name}: no extension linking torch is installed under that name",
                hint=f"the ones this torch change leaves behind: {', '.join(left)}"
                if left
                else "drop it: this torch change leaves no extension behind",
            )
    unknown = [s for s in stale if not s.curated and not s.matches(keep_stale)]
    if unknown:
        names = ", ".join(_shown(s) for s in unknown)
        raise UsageError(
            f"replacing torch {old} with {new} leaves {names}, which links torch's C++ library "
            "and which cuda-resolve does not know how to rebuild: unless it was built for torch "
            f"{new}, its next import fails with 'undefined symbol' (torch's C++ ABI changes "
            "between builds)",
            hint="rebuild it from its source against the new torch after installing (pip install "
            "--force-reinstall --no-build-isolation with its source folder), or say to leave it "
            "as it is: " + " ".join(f"--keep-stale {s.name}" for s in unknown),
        )
    notes: list[str] = []
    carried = [s for s in stale if s.curated]
    if carried:
        plan = replan([s.name for s in carried])
        # The torch the final plan installs: the first pass, without the extensions, may have
        # chosen another build (no GPU here: the CPU one, where a CUDA build carries them).
        new = (replaced_torch(plan, env) or (old, old))[1]
        for s in carried:
            notes.append(
                f"{_shown(s)} was built for torch {old}: planned again for torch {new}, in the "
                "same transaction (undone with it)"
            )
    for s in stale:
        if not s.curated:
            notes.append(
                f"{_shown(s)} stays as it is (--keep-stale): unless it was built for torch {new}, "
                "its next import may fail with 'undefined symbol'"
            )
    return replace(plan, reasons=(*plan.reasons, *notes))


def _shown(stale: StaleExtension) -> str:
    return f"{stale.name} {stale.version}" if stale.version else stale.name


def repair_request(env: Environment, index: Index) -> tuple[list[str], list[str]]:
    """What ``cuda-pip install --repair`` plans again for the installed torch, after torch was
    changed outside the tool: (the curated extensions installed, whose builds the resolver keeps
    where they fit the installed torch and plans again where not; notes on the extensions
    doctor names that cuda-resolve cannot rebuild: their libraries lack torch symbols)."""
    names = {canonicalize_name(e.name): e.name for e in env.installed_extensions}
    notes: list[str] = []
    for binary in env.extensions:
        if not binary.missing_symbols:
            continue
        text = binary.distribution.partition(" ")[0] if binary.distribution else ""
        if text and index.package(text) is not None:
            names.setdefault(canonicalize_name(text), text)
        else:
            named = binary.distribution or binary.path
            notes.append(
                f"{named} needs torch symbols the installed torch does not define, and "
                "cuda-resolve cannot rebuild it: pip install --force-reinstall --no-deps "
                f"--no-build-isolation {text or 'NAME'} rebuilds it against the installed torch"
            )
    return [names[key] for key in sorted(names)], notes


def repair_arch_list(env: Environment, names: Collection[str]) -> str | None:
    """With no GPU here (a login node, a CPU box) and no ``--arch-list``, ``--repair`` builds
    for the GPUs the installed builds of ``names`` were made for: their labels' arch lists
    (``+pt2141cu130.sm80`` -> ``8.0``), in one TORCH_CUDA_ARCH_LIST. None where there are GPUs
    to build for, or no label names an arch (the build then asks for ``--arch-list``)."""
    from ..compat import format_arch_list
    from ..resolve.installed import parse_build_label

    if env.gpus:
        return None
    wanted = {canonicalize_name(name) for name in names}
    entries = []
    for installed in env.installed_extensions:
        label = parse_build_label(installed.version)
        if canonicalize_name(installed.name) in wanted and label is not None:
            entries += [entry for entry in label.arch_list if entry not in entries]
    return format_arch_list(entries) if entries else None
