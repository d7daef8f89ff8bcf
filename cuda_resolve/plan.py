"""The Plan: what to install, from where, and what to build — derived from a Resolution.

A plan names exact artifacts and builds and downloads nothing. Its JSON form is a stable,
documented interface (``docs/plan-format.md``): ``environment``, ``install`` (items of kind
``wheel`` / ``build`` / ``installed``), ``pass_through``, ``reasons`` and, with ``--explain``,
``rejected``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .compat import format_arch_list
from .environment import Environment
from .index.urls import expand_pattern
from .profile import environment_to_dict
from .resolve import Alternative, Candidate, Rejection, Resolution

__all__ = ["PYPI_SIMPLE", "Plan", "PlanItem", "make_plan"]

PYPI_SIMPLE = "https://pypi.org/simple"


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanItem:
    name: str
    version: str
    kind: Literal["wheel", "build", "installed"]
    variant: str | None = None
    requirement: str | None = None  # what pip is given: "torch==2.5.1+cu124"
    url: str | None = None  # the exact artifact, where the index knows its name
    index: str | None = None  # the index pip reads it from
    find_links: str | None = None
    recipe: str | None = None
    repository: str | None = None
    revision: str | None = None
    arch_list: str | None = None
    toolkit: str | None = None
    toolkit_root: str | None = None
    torch: str | None = None  # extensions: the torch build they belong to

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "version": self.version, "variant": self.variant, "kind": self.kind}
        for key in ("requirement", "url", "index", "find_links", "recipe", "repository", "revision", "arch_list", "toolkit", "toolkit_root", "torch"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.kind == "wheel":
            # Always present for wheels: null where only the index can name the file (PyPI's
            # and PyTorch's file names and hashes are read at fetch or lock time, not by plan).
            data.setdefault("url", None)
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    environment: Environment
    items: tuple[PlanItem, ...]
    pass_through: tuple[str, ...]
    reasons: tuple[str, ...]
    rejected: tuple[Rejection, ...]
    alternatives: tuple[Alternative, ...] = ()  # builds that also fit, and why they lost

    def to_json(self, *, explain: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "environment": environment_to_dict(self.environment),
            "install": [item.to_json() for item in self.items],
            "pass_through": list(self.pass_through),
            "reasons": list(self.reasons),
        }
        if explain:
            data["rejected"] = [
                {"name": r.name, "candidate": r.label, "category": r.category, "kind": r.kind, "reason": r.reason}
                for r in self.rejected
            ]
            data["alternatives"] = [{"name": a.name, "candidate": a.label, "reason": a.reason} for a in self.alternatives]
        return data

    def explain_lines(self, *, per_group: int = 3) -> list[str]:
        """The rejections, grouped: one line per family of alike reasons, newest first."""
        groups: dict[tuple[str, str], list[Rejection]] = {}
        for rejection in reversed(self.rejected):
            groups.setdefault((rejection.name, rejection.kind), []).append(rejection)
        lines: list[str] = []
        for members in groups.values():
            shown = 1 if members[0].category in ("python", "cpu", "platform") else per_group
            lines.extend(member.reason for member in members[:shown])
            if len(members) > shown:
                lines.append(f"  ... and {len(members) - shown} more {members[0].name} option(s) ruled out alike")
        return lines


def _on_pypi(candidate: Candidate, env: Environment) -> bool:
    release, variant = candidate.release, candidate.torch_variant
    if release is None or variant is None or env.machine.os != "linux":
        return False
    if env.machine.arch == "aarch64":
        return variant.name == release.pypi_linux_aarch64
    return env.machine.arch == "x86_64" and variant.pypi_default


def _with_extras(name: str, extras: tuple[str, ...]) -> str:
    return f"{name}[{','.join(extras)}]" if extras else name


def _torch_family_item(candidate: Candidate, torch: Candidate | None, env: Environment, extras: tuple[str, ...] = ()) -> PlanItem:
    if candidate.kind == "installed":
        return PlanItem(name=candidate.name, version=str(candidate.version), kind="installed", variant=candidate.variant)
    source = candidate if candidate.name == "torch" else torch
    on_pypi = source is not None and _on_pypi(source, env)
    variant = candidate.variant
    index = PYPI_SIMPLE if on_pypi else (source.torch_variant.index_url if source and source.torch_variant else None)
    local = "" if on_pypi or not variant else f"+{variant}"
    return PlanItem(
        name=candidate.name,
        version=str(candidate.version),
        kind="wheel",
        variant=variant,
        requirement=f"{_with_extras(candidate.name, extras)}=={candidate.version}{local}",
        index=index,
    )


def _extension_item(candidate: Candidate, torch: Candidate | None, env: Environment, extras: tuple[str, ...] = ()) -> PlanItem:
    torch_label = f"{torch.version}" if torch else None
    name = candidate.package.name if candidate.package else candidate.name
    if candidate.kind == "build":
        toolkit = candidate.toolkit
        recipe = candidate.recipe
        return PlanItem(
            name=name,
            version=str(candidate.version),
            kind="build",
            variant=torch.variant if torch else None,
            recipe=recipe.name if recipe else None,
            repository=recipe.repository if recipe else None,
            revision=recipe.revision if recipe else None,
            arch_list=format_arch_list(candidate.arch_list),
            toolkit=str(toolkit.version) if toolkit else None,
            toolkit_root=toolkit.root if toolkit else None,
            torch=torch_label,
        )
    package = candidate.package
    variant = candidate.variant or ""
    wheel_platforms = candidate.wheels.platforms if candidate.wheels else ()
    platform = next((p for p in env.platform_tags() if p in wheel_platforms), None)

    def expand(pattern: str | None) -> str | None:
        if pattern is None or candidate.torch_version is None:
            return None
        return expand_pattern(
            pattern, torch=str(candidate.torch_version), variant=variant, python=env.python.short_version,
            version=str(candidate.version), platform=platform,
        )

    return PlanItem(
        name=name,
        version=str(candidate.version),
        kind="wheel",
        variant=variant or None,
        requirement=f"{_with_extras(name, extras)}=={candidate.version}",
        url=expand(package.wheel_url if package else None),
        find_links=expand(package.find_links if package else None),
        torch=f"{candidate.torch_version}+{variant}",
    )


def make_plan(resolution: Resolution, env: Environment) -> Plan:
    torch = resolution.get("torch")
    items: list[PlanItem] = []
    for candidate in resolution.chosen:
        if candidate.name in ("torch", "torchvision", "torchaudio"):
            items.append(_torch_family_item(candidate, torch, env, resolution.extras_of(candidate.name)))
        else:
            items.append(_extension_item(candidate, torch, env, resolution.extras_of(candidate.name)))
    return Plan(
        environment=env,
        items=tuple(items),
        pass_through=resolution.pass_through,
        reasons=resolution.reasons,
        rejected=tuple(dict.fromkeys(resolution.rejected)),
        alternatives=resolution.alternatives,
    )
