"""``cuda-resolve lock``: a Plan per profile, each profile's closure from pip, one document.

Every profile is decided by the same resolver as ``cuda-resolve plan`` (:func:`profile_plan`), so
a lock and a plan never disagree; a profile whose torch is installed locks that same build as a
wheel from its variant's index. Its pip steps (:func:`~cuda_resolve.install.prepare.complete_plan`)
are then resolved by pip for the profile's Python and platform (:mod:`.closure`), every file's
facts read from the index (:mod:`.files`), and the profiles merged: one entry per (name, version),
marked with the profiles that install it where not all do.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from ..compat import format_arch_list
from ..config import Config
from ..errors import LockError, ResolutionImpossible
from ..index.model import Index
from ..plan import Plan, PlanItem, PlannedBuild
from ..reporting import NullReporter, Reporter
from ..resolve import Options, Resolution
from ..wheelhouse.store import Wheelhouse
from .closure import BuiltFile, PipAnswers, ResolvedFile, find_interpreter, pip_closure
from .document import LockDocument, LockedFile, LockedPackage, ProfileRecord
from .files import FileFinder, file_name
from .profiles import LockProfile, refuse_clashes
from .read import ReadLock

__all__ = ["LockRequest", "make_lock", "profile_plan", "profile_record"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LockRequest:
    requests: tuple[str, ...]
    profiles: tuple[LockProfile, ...]
    index_url: str = "https://pypi.org/simple"
    python_for: Mapping[str, str] | None = None  # profile name -> interpreter
    wheelhouse_url: str | None = None  # where the wheelhouse's folder is served (source builds are locked there)
    skip_unfit: bool = False
    options: Options | None = None


def _installed_as_wheel(plan: Plan, resolution: Resolution) -> Plan:
    """An installed torch (or family member) locked as that same build, a wheel from its variant's index."""
    items: list[PlanItem] = []
    for item in plan.items:
        candidate = resolution.get(item.name)
        variant = candidate.torch_variant if candidate is not None else None
        if item.kind == "installed" and variant is not None:
            version = item.version if "+" in item.version or not item.variant else f"{item.version}+{item.variant}"
            item = PlanItem(name=item.name, version=item.version, kind="wheel", variant=item.variant,
                            requirement=f"{item.name}=={version}", index=variant.index_url)
        items.append(item)
    return replace(plan, items=tuple(items))


def profile_plan(profile: LockProfile, requests: Sequence[str], index: Index, options: Options, config: Config,
                 wheelhouse: Wheelhouse | None = None) -> tuple[Plan, Resolution]:
    """The complete Plan ``cuda-resolve plan REQ... --profile FILE`` makes, with an installed torch as a wheel."""
    from ..install.options import InstallOptions
    from ..install.prepare import complete_plan
    from ..plan import make_plan
    from ..resolve import resolve

    # A lock names files: an installed extension build the machine happens to hold (resolve.installed)
    # is no file, so the lock plans the build (found in the wheelhouse) as if it were not there.
    resolution = resolve(list(requests), profile.environment, index, replace(options, rebuild=True))
    plan = _installed_as_wheel(make_plan(resolution, profile.environment), resolution)
    install_options = InstallOptions(torch_index=config.pytorch.url if config.pytorch else None,
                                     torch_index_option=config.pytorch.pip_option if config.pytorch else "--index-url")
    plan = complete_plan(plan, profile.environment, index, install_options, pip=None, installed=None, wheelhouse=wheelhouse)
    return plan, resolution


def built_files(plan: Plan, profile: LockProfile, wheelhouse: Wheelhouse, wheelhouse_url: str | None, *,
                index_url: str | None = None, finder: FileFinder | None = None) -> dict[str, BuiltFile]:
    """Each source build of ``plan`` as the wheelhouse holds it, at its served URL: under
    ``wheelhouse_url`` where the wheelhouse folder itself is served, else where the lab's index
    server (``index_url``, the config's ``wheelhouse_url``) lists the same file (same sha256); an
    error saying what to build, publish or serve when neither holds."""
    from urllib.parse import quote

    found: dict[str, BuiltFile] = {}
    for build in plan.builds:
        stored = wheelhouse.lookup(build.key)
        if stored is None:
            raise LockError(f"profile {profile.name}: {build.spec.package} {build.key.labelled_version} is built from source and the wheelhouse ({wheelhouse.root}) has no wheel for it",
                            hint=f"build it for that profile first: cuda-resolve build {build.spec.package} --profile {profile.source} (a login node can: nvcc needs no GPU), then lock again")
        if wheelhouse_url is not None:
            relative = stored.path.resolve().relative_to(wheelhouse.root.resolve())
            url = wheelhouse_url.rstrip("/") + "/" + "/".join(quote(part) for part in relative.parts)
        elif index_url is not None and finder is not None:
            listed = finder.locate(index_url, canonicalize_name(build.key.package), stored.filename)
            if listed is None or (listed[1] is not None and listed[1] != stored.sha256):
                what = "does not list" if listed is None else "lists another file under the name of"
                raise LockError(f"profile {profile.name}: the lab's index {index_url} {what} {stored.filename}",
                                hint="publish it (cuda-resolve wheelhouse publish), or serve the wheelhouse folder and give --wheelhouse-url URL")
            url = listed[0]
        else:
            raise LockError(f"profile {profile.name}: {build.spec.package} is locked from the wheelhouse, and no URL serves it",
                            hint="publish the wheelhouse to the lab's index (wheelhouse_url in the config; cuda-resolve wheelhouse publish), "
                                 "or serve its folder (any static server; cuda-resolve wheelhouse path) and give --wheelhouse-url URL")
        found[build.key.digest] = BuiltFile(path=stored.path, url=url, sha256=stored.sha256, size=stored.size)
    return found


def profile_record(profile: LockProfile, plan: Plan, resolution: Resolution, interpreter: str) -> ProfileRecord:
    env = profile.environment
    torch = resolution.get("torch")
    variant = torch.torch_variant if torch is not None else None
    torch_item = next((i for i in plan.items if i.name == "torch"), None)
    torch_version = None
    if torch_item is not None:
        torch_version = (torch_item.requirement or "").partition("==")[2] or torch_item.version
    toolkit = env.primary_toolkit
    return ProfileRecord(
        name=profile.name, source=profile.source, digest=profile.digest, python=env.python.short_version,
        os=env.machine.os, arch=env.machine.arch, glibc=env.machine.glibc,
        driver=str(env.driver.version) if env.driver else None, driver_cuda=str(env.driver.cuda) if env.driver else None,
        gpus=tuple(f"{g.name} ({g.compute_capability})" for g in env.gpus),
        capabilities=tuple(str(c) for c in env.capabilities),
        torch=torch_version, torch_cuda=str(variant.cuda) if variant and variant.cuda else None,
        torch_arch_list=format_arch_list(variant.arch_list) if variant and variant.arch_list else None,
        toolkit=str(toolkit.version) if toolkit else None,
        decision=tuple(f"{(i.requirement or i.name + '==' + i.version).split('[')[0]} ({i.kind})" for i in plan.items)
        + tuple(f"{text} (pip)" for text in plan.pass_through),
        interpreter="{}.{}".format(*env.python.version_tuple),
        builds=tuple(_build_line(build) for build in plan.builds),
    )


def _build_line(build: PlannedBuild) -> str:
    """One source build as the lock records it: what was built, from what, for which ABI."""
    recipe = build.spec.recipe
    source = f"{recipe.repository}@{recipe.revision}" if recipe.repository else (recipe.archive.url if recipe.archive else "?")
    import hashlib

    # A patch's digest: its file, what it finds and what it puts there, so an edited patch shows.
    patches = ",".join(f"{p.file}:{hashlib.sha256(f'{p.file}|{p.find}|{p.replace}'.encode()).hexdigest()[:12]}"
                       for p in recipe.patches) or "none"
    return (f"{build.spec.package} {build.key.labelled_version}: recipe {recipe.name} ({source}; patches {patches}); "
            f"arch list {build.spec.arch_list}; key {build.key.digest}")


def _canonical_from(config: Config) -> Callable[[str], str]:
    """The canonical URL of a file fetched through a configured mirror (the rewrite run backwards)."""

    def canonical(url: str) -> str:
        best = None
        for rule in config.rewrites:
            if url.startswith(rule.mirror) and (best is None or len(rule.mirror) > len(best.mirror)):
                best = rule
        return best.canonical + url[len(best.mirror):] if best is not None else url

    return canonical


def make_lock(request: LockRequest, index: Index, config: Config, *, finder: FileFinder, environ: Mapping[str, str],
              wheelhouse: Wheelhouse | None = None, reporter: Reporter | None = None, created_by: str = "cuda-resolve",
              answers: PipAnswers | None = None, keep: ReadLock | None = None) -> tuple[LockDocument, tuple[str, ...]]:
    """The lock document, and the profiles left out (``skip_unfit``) with the reason for each.

    With ``keep`` (``lock --profile X --update``), the profiles of that lock not given here are
    carried over as they are: their files and facts, so their entries stay byte-identical."""
    from .. import __version__

    report = reporter or NullReporter()
    profiles = list(request.profiles)
    refuse_clashes(profiles)
    if not profiles:
        raise LockError("a lock needs at least one profile", hint="--profile FILE (from `cuda-resolve detect --save-profile FILE`), or --profile this")
    options = request.options or Options()
    records: list[ProfileRecord] = []
    per_profile: dict[str, list[ResolvedFile]] = {}
    skipped: list[str] = []
    memo = answers or PipAnswers(None)
    with tempfile.TemporaryDirectory(prefix="cuda-resolve-lock-") as scratch:
        for profile in profiles:
            report.step(f"profile {profile.name}: resolving {' '.join(request.requests)}")
            try:
                plan, resolution = profile_plan(profile, request.requests, index, options, config, wheelhouse)
            except ResolutionImpossible as exc:
                if request.skip_unfit:
                    skipped.append(f"{profile.name}: {exc}")
                    report.note(f"profile {profile.name} left out: {exc}")
                    continue
                raise ResolutionImpossible(f"profile {profile.name} ({profile.source}): {exc}", hint=exc.hint, reasons=exc.reasons) from None
            given = (request.python_for or {}).get(profile.name)
            python = find_interpreter(profile.environment.python.version, given, environ)
            if python is None:
                raise LockError(f"profile {profile.name} needs a Python {profile.environment.python.short_version} to resolve its closure, and none was found here",
                                hint=f"--python-for {profile.name}=PATH (or install one: pyenv install {profile.environment.python.short_version}, uv python install {profile.environment.python.short_version})")
            report.step(f"profile {profile.name}: pip resolves the closure for Python {profile.environment.python.short_version} ({python})")
            per_profile[profile.name] = pip_closure(plan, profile.environment, pip_python=python, index_url=request.index_url,
                                                    environ=environ, scratch=Path(scratch), name=profile.name, memo=memo,
                                                    built=built_files(plan, profile, wheelhouse, request.wheelhouse_url, index_url=config.wheelhouse_url,
                                                                      finder=finder) if plan.builds and wheelhouse else None)
            records.append(profile_record(profile, plan, resolution, python))
    if keep is not None:
        if tuple(keep.requests) != tuple(request.requests):
            raise LockError(f"{keep.origin} was made for {' '.join(keep.requests)}, not {' '.join(request.requests)}",
                            hint="--update relocks profiles for the lock's own requests; to change them, lock every profile again")
        relocked = {p.name for p in profiles}
        for name, record in sorted(keep.profiles.items()):
            if name not in relocked:
                records.append(record)
                per_profile[name] = _kept_files(keep, name)
    if not records:
        raise LockError("no profile fits: " + "; ".join(skipped), hint="see each profile's reason; `cuda-resolve plan REQ --profile FILE --explain` says more")
    finder.canonical = _canonical_from(config)
    packages = _merge(per_profile, finder, report)
    document = LockDocument(profiles=tuple(sorted(records, key=lambda r: r.name)), packages=packages, requests=request.requests,
                            created_by=created_by, resolver=f"cuda-resolve {__version__}", index_url=request.index_url)
    return document, tuple(skipped)


def _merge(per_profile: Mapping[str, list[ResolvedFile]], finder: FileFinder, report: Reporter) -> tuple[LockedPackage, ...]:
    """One package per (name, version): the profiles that install it, all its files."""
    grouped: dict[tuple[str, str], dict[str, object]] = {}
    # Profiles in name order, the first to name a file wins: the order of --profile never shows.
    for profile, files in sorted(per_profile.items()):
        for resolved in files:
            entry = grouped.setdefault((resolved.name, resolved.version), {"profiles": set(), "files": {}, "index": None, "requested": False})
            entry["profiles"].add(profile)  # type: ignore[attr-defined]
            known = entry["files"].get(file_name(resolved.url))  # type: ignore[attr-defined]
            if known is None:
                entry["files"][file_name(resolved.url)] = resolved  # type: ignore[index]
            elif known.sha256 and resolved.sha256 and known.sha256 != resolved.sha256:
                raise LockError(f"{file_name(resolved.url)} differs between {known.url} and {resolved.url} (sha256 {known.sha256} vs {resolved.sha256})",
                                hint="two indexes serve different files under one name: lock the profiles from one index, or remove one copy")
            entry["index"] = entry["index"] or resolved.index
            entry["requested"] = bool(entry["requested"]) or resolved.requested
    packages: list[LockedPackage] = []
    for (name, version), entry in sorted(grouped.items()):
        wheels = []
        for resolved in entry["files"].values():  # type: ignore[attr-defined]
            facts = finder.facts(resolved.url, project=name, index=resolved.index, sha256=resolved.sha256, size=resolved.size)
            wheels.append(LockedFile(name=file_name(facts.url), url=facts.url, size=facts.size, sha256=facts.sha256))
        index_url = entry["index"]
        packages.append(LockedPackage(
            name=name, version=version, profiles=tuple(sorted(entry["profiles"])),  # type: ignore[call-overload]
            index=finder.canonical(index_url) if isinstance(index_url, str) else None,
            wheels=tuple(sorted(wheels, key=lambda w: w.name)), requested=bool(entry["requested"])))
    report.step(f"{len(packages)} packages locked")
    return tuple(packages)


def _kept_files(lock: ReadLock, profile: str) -> list[ResolvedFile]:
    """What ``profile`` installs in an existing lock, as the closure would have named it."""
    from packaging.markers import Marker

    found = []
    for package in lock.pylock.packages:
        marker: Marker | None = package.marker
        if marker is not None and f"'{profile}' in extras" not in _our_marker_terms(marker):
            continue
        tool = (package.tool or {}).get("cuda-resolve", {})
        for wheel in package.wheels or ():
            sha = (wheel.hashes or {}).get("sha256")
            if wheel.url is None or not sha or wheel.size is None:
                raise LockError(f"{lock.origin}: {package.name} {package.version}: a wheel without url, size or sha256 cannot be kept",
                                hint="lock every profile again (without --update)")
            found.append(ResolvedFile(name=str(package.name), version=str(package.version), url=wheel.url, sha256=str(sha),
                                      requested=bool(tool.get("requested")) if isinstance(tool, dict) else False,
                                      index=package.index, size=wheel.size))
    return found


def _our_marker_terms(marker: object) -> set[str]:
    """The ``'NAME' in extras`` terms of a marker this module wrote (``extras_marker``'s form)."""
    text = str(marker).replace('"', "'")
    return {term.strip() for term in text.split(" or ")}
