"""Carrying out a Plan: prepare -> check -> build -> install -> verify, undone on failure.

Shaped like conda's transactions. :func:`prepare` is pure: from a Plan, the Environment and the
index it derives every build's pre-flight (:class:`~cuda_resolve.build.preflight.BuildSpec`) and
the pip invocations, so ``--dry-run`` prints exactly what would run and an impossible request is
refused in well under a second. :func:`execute` then checks that the indexes answer, builds
every source build into the wheelhouse (nothing is installed unless all of them succeed),
snapshots the target's distributions, runs the target's pip, and imports what it installed. A
pip failure, a failed import check or Ctrl-C restores the snapshot.

The executor takes a Plan from anywhere: ``plan``, a lockfile entry or a conda hook.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from .._bounded import run as _bounded_run
from ..build.builder import BuildResult, build
from ..build.preflight import BuildSpec, check_build
from ..build.runner import run_logged
from ..build.source import describe_source
from ..environment import Environment
from ..errors import InstallError, UsageError
from ..index.model import Index, Recipe
from ..plan import PYPI_SIMPLE, Plan, PlanItem
from ..reporting import NullReporter, Reporter
from ..wheelhouse.store import Wheelhouse
from .pip import installed_distributions, pip_facts_and_distributions, trust_options
from .reqfile import option_value

__all__ = ["InstallOptions", "InstallResult", "Phases", "PipStep", "Prepared", "execute", "names_requirements", "prepare"]

TORCH_FAMILY = ("torch", "torchvision", "torchaudio")

#: An index that does not answer within this is reported before anything is installed.
REACHABILITY_SECONDS = 15.0


@dataclass(frozen=True, kw_only=True, slots=True)
class InstallOptions:
    pip_args: tuple[str, ...] = ()  # the user's pip options, passed through untouched
    source_dirs: tuple[tuple[str, Path], ...] = ()  # (package or "*", folder) from --source
    smoke: bool = False
    verify: bool = True
    ptx: bool = False
    rebuild: bool = False
    torch_index: str | None = None  # the configured PyTorch mirror base, "https://mirror/whl/"
    torch_index_option: str = "--index-url"  # or "--find-links" for a flat mirror

    def source_for(self, package: str) -> Path | None:
        wanted = canonicalize_name(package)
        for name, folder in self.source_dirs:
            if name == "*" or canonicalize_name(name) == wanted:
                return folder
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class PipStep:
    """One ``python -m pip install`` run; ``wheels`` are filled in once the builds are done."""

    purpose: str
    args: tuple[str, ...]
    checked_urls: tuple[str, ...] = ()  # indexes/pages that must answer first

    def command(self, python: str) -> list[str]:
        return [python, "-m", "pip", "install", *self.args]


@dataclass(frozen=True, kw_only=True, slots=True)
class Prepared:
    plan: Plan
    builds: tuple[BuildSpec, ...]
    steps: tuple[PipStep, ...]  # before the builds' wheel paths are known
    imports: tuple[str, ...]  # modules to import after installing
    smoke_scripts: tuple[tuple[str, str], ...]  # (package, script) for --smoke
    sources: tuple[str, ...]  # where each build's source comes from, in words (one per build)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "builds": [
                {"package": b.package, "version": str(b.recipe.version), "recipe": b.recipe.name,
                 "source": source, "torch": f"{b.torch_version}+{b.variant}", "toolkit": b.toolkit.root,
                 "arch_list": b.arch_list, "variables": dict(b.variables), "notes": list(b.notes)}
                for b, source in zip(self.builds, self.sources, strict=True)
            ],
            "pip": [{"purpose": s.purpose, "args": list(s.args)} for s in self.steps],
            "imports": list(self.imports),
            "notes": list(self.notes),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class InstallResult:
    prepared: Prepared
    builds: tuple[BuildResult, ...]
    changed: tuple[tuple[str, str | None, str | None], ...]  # (name, before, after)
    verified: tuple[str, ...]
    smoke: tuple[tuple[str, str], ...] = ()  # (package, its output's last line)
    notes: tuple[str, ...] = field(default_factory=tuple)
    timings: tuple[tuple[str, float], ...] = ()  # (phase, seconds) in the order they ran
    pip_runs: tuple[PipStep, ...] = ()  # what pip was actually asked, built wheels included

    def to_json(self) -> dict[str, Any]:
        return {
            "builds": [
                {"package": b.spec.package, "wheel": str(b.wheel.path), "sha256": b.wheel.sha256,
                 "cache_hit": b.cache_hit, "seconds": round(b.seconds, 1), "log": str(b.log) if b.log else None}
                for b in self.builds
            ],
            "changed": [{"name": n, "before": before, "after": after} for n, before, after in self.changed],
            "verified_imports": list(self.verified),
            "smoke": [{"package": p, "output": out} for p, out in self.smoke],
            "notes": list(self.notes),
            "timings": {phase: round(seconds, 2) for phase, seconds in self.timings},
            "pip_runs": [{"purpose": s.purpose, "args": list(s.args)} for s in self.pip_runs],
        }


# -- prepare (pure) -------------------------------------------------------------------------


def _recipe(index: Index, item: PlanItem) -> tuple[Recipe, str]:
    package = index.package(item.name)
    recipe = next((r for r in package.recipes if r.name == item.recipe), None) if package else None
    if package is None or recipe is None:
        raise UsageError(
            f"the plan builds {item.name} with recipe {item.recipe!r}, which the index does not have",
            hint="use the index the plan was made with (--index DIR), or make the plan again",
        )
    return recipe, package.import_name


def _torch_index_for(item: PlanItem, options: InstallOptions) -> tuple[str, str]:
    """(pip option, URL) for a torch-family wheel from the PyTorch index (or its mirror)."""
    assert item.index is not None
    if options.torch_index and item.variant:
        return options.torch_index_option, f"{options.torch_index}{item.variant}/"
    return "--index-url", item.index


#: pip options that bring requirements of their own.
_REQUIREMENT_OPTIONS = ("-r", "--requirement", "-e", "--editable")
#: pip options that name indexes: the torch-family step asks its variant's index alone.
_INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")


def options_for_torch_step(pip_args: Sequence[str]) -> list[str]:
    """The user's pip options that hold for the torch-family step too (``--proxy``, ``--target``,
    ``-c``, ``--no-cache-dir`` ...): all but those that name requirements or indexes."""
    dropped = _REQUIREMENT_OPTIONS + _INDEX_OPTIONS
    kept: list[str] = []
    words = list(pip_args)
    i = 0
    while i < len(words):
        word = words[i]
        if word in dropped:
            i += 1  # its value, the next word, goes with it
        elif word != "--no-index" and option_value(words, i, dropped) is None:
            kept.append(word)
        i += 1
    return kept


def names_requirements(pip_args: Sequence[str]) -> bool:
    """Whether pip's own options bring requirements of their own (``-r FILE``, ``-e PATH``)."""
    words = list(pip_args)
    return any(word in _REQUIREMENT_OPTIONS or option_value(words, i, _REQUIREMENT_OPTIONS) is not None
               for i, word in enumerate(words))


def prepare(plan: Plan, env: Environment, index: Index, options: InstallOptions) -> Prepared:
    torch_item = next((i for i in plan.items if i.name == "torch"), None)
    builds: list[BuildSpec] = []
    imports: list[str] = []
    smoke: list[tuple[str, str]] = []
    from_torch_index: list[PlanItem] = []
    main_requirements: list[str] = []
    checked: list[str] = []
    for item in plan.items:
        if item.kind == "build":
            recipe, import_name = _recipe(index, item)
            builds.append(check_build(item, recipe, env, index, import_name=import_name,
                                      torch_item=torch_item if torch_item and torch_item.kind == "wheel" else None,
                                      ptx=options.ptx))
            if recipe.smoke:
                imports.extend(recipe.smoke.imports)
                if recipe.smoke.gpu_script:
                    smoke.append((item.name, recipe.smoke.gpu_script))
            else:
                imports.append(import_name)
        elif item.kind == "installed":
            # Hold what is installed where it is: pip must not move torch to satisfy a dependency.
            main_requirements.append(f"{item.name}=={item.version.split('+', 1)[0]}")
        elif item.name in TORCH_FAMILY:
            if item.index and item.index.rstrip("/") != PYPI_SIMPLE:
                from_torch_index.append(item)
            else:
                main_requirements.append(item.requirement or f"{item.name}=={item.version}")
        else:
            package = index.package(item.name)
            if item.url:
                main_requirements.append(f"{item.name} @ {item.url}")
                checked.append(item.url)
            elif item.find_links:
                main_requirements.append(item.requirement or f"{item.name}=={item.version}")
                main_requirements.extend(["--find-links", item.find_links])
                checked.append(item.find_links)
            else:
                main_requirements.append(item.requirement or f"{item.name}=={item.version}")
            imports.append(package.import_name if package else item.name.replace("-", "_"))
            recipe_smoke = next((r.smoke for r in package.recipes if r.smoke), None) if package else None
            if recipe_smoke and recipe_smoke.gpu_script:
                smoke.append((item.name, recipe_smoke.gpu_script))
    steps: list[PipStep] = []
    if from_torch_index:
        option, url = _torch_index_for(from_torch_index[0], options)
        requirements = [i.requirement or f"{i.name}=={i.version}" for i in from_torch_index]
        # Only the torch family is asked of the PyTorch index (it also carries their
        # dependencies); no other name goes there, so no other package can be taken from it.
        steps.append(PipStep(purpose=f"torch family from {url}", args=(*options_for_torch_step(options.pip_args), option, url, *requirements),
                             checked_urls=(url,)))
        # Later steps keep them where this step put them.
        main_requirements = [*requirements, *main_requirements]
    main_requirements.extend(plan.pass_through)
    has_work = bool(builds or plan.pass_through or any(i.kind == "wheel" and i.name not in TORCH_FAMILY for i in plan.items)
                    or names_requirements(options.pip_args))
    if has_work or not from_torch_index:
        steps.append(PipStep(purpose="extensions and the rest", args=(*options.pip_args, *main_requirements), checked_urls=tuple(checked)))
    if any(i.name == "torch" for i in plan.items):
        imports.insert(0, "torch")
    notes = [note for spec in builds for note in spec.notes]
    sources = tuple(describe_source(spec.recipe, options.source_for(spec.package)) for spec in builds)
    return Prepared(plan=plan, builds=tuple(builds), steps=tuple(steps), imports=tuple(dict.fromkeys(imports)),
                    smoke_scripts=tuple(smoke), notes=tuple(notes), sources=sources)


# -- execute --------------------------------------------------------------------------------


def _check_reachable(urls: Sequence[str], probe: Callable[[str], tuple[bool, str]], report: Reporter) -> None:
    for url in dict.fromkeys(urls):
        report.step(f"checking that {url} answers")
        ok, detail = probe(url)
        if not ok:
            raise InstallError(
                f"{url} did not answer: {detail}; nothing was installed",
                hint="configure a mirror (cuda-resolve mirror set PRESET) and check it (cuda-resolve mirror test), or fix the proxy (cuda-resolve doctor --network)",
            )


def _with_built_wheels(step: PipStep, results: Sequence[BuildResult]) -> PipStep:
    return replace(step, args=(*step.args, *(str(r.wheel.path) for r in results)))


def _diff(before: Mapping[str, str], after: Mapping[str, str]) -> list[tuple[str, str | None, str | None]]:
    names = sorted(set(before) | set(after))
    return [(n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)]


def _undo(python: str, before: Mapping[str, str], environ: Mapping[str, str], log_path: Path, report: Reporter) -> list[str]:
    """Put the target back as the snapshot had it; returns what could not be restored."""
    after = installed_distributions(python, environ)
    changes = _diff(before, after)
    if not changes:
        return []
    report.step("restoring the environment as it was: " + ", ".join(f"{n} {b or '-'} <- {a or '-'}" for n, b, a in changes))
    added = [name for name, was, _ in changes if was is None]
    restore = [f"{name}=={was}" for name, was, _ in changes if was is not None]
    with open(log_path, "a", encoding="utf-8") as log:
        if added:
            run_logged([python, "-m", "pip", "uninstall", "-y", *added], environ=environ, log=log)
        if restore:
            run_logged([python, "-m", "pip", "install", "--no-deps", *restore], environ=environ, log=log)
    left = _diff(before, installed_distributions(python, environ))
    return [f"{n} (was {b or 'absent'}, now {a or 'absent'})" for n, b, a in left]


#: A wheel's METADATA larger than this is not read (it is not a real one).
_METADATA_LIMIT = 1024 * 1024


def _requires_dist(wheel: Path) -> list[str] | None:
    """The wheel's ``Requires-Dist`` lines; None when its metadata cannot be read."""
    import email.parser
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as archive:
            name = next((n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            if name is None or archive.getinfo(name).file_size > _METADATA_LIMIT:
                return None
            text = archive.read(name).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile):
        return None
    return list(email.parser.HeaderParser().parsestr(text).get_all("Requires-Dist") or [])


def _requirements_met(wheel: Path, installed: Mapping[str, str], env: Environment) -> bool:
    """Every requirement of ``wheel`` that applies to the target is installed at a fitting version."""
    from packaging.requirements import InvalidRequirement, Requirement

    from ..build.buildenv import unsatisfied
    from ..compat import marker_environment

    lines = _requires_dist(wheel)
    if lines is None:
        return False
    markers = dict(marker_environment(env), extra="")
    applying: list[str] = []
    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            return False
        if requirement.marker is not None and not requirement.marker.evaluate(markers):
            continue
        if requirement.extras or requirement.url:
            return False  # what an extra pulls in is not known here: let pip resolve
        applying.append(line)
    return not unsatisfied(applying, installed)


def _only_built_wheels(prepared: Prepared, options: InstallOptions) -> bool:
    """The install is the built wheels alone (kept packages pinned where they are, nothing else)."""
    plan = prepared.plan
    return (not plan.pass_through and not options.pip_args and len(prepared.steps) == 1
            and all(item.kind in ("installed", "build") for item in plan.items))


def _already_installed(prepared: Prepared, results: Sequence[BuildResult], before: Mapping[str, str], options: InstallOptions) -> bool:
    """Only kept packages and built wheels that are installed at exactly their version: pip would do nothing."""
    plan = prepared.plan
    if plan.pass_through or options.pip_args or options.smoke:
        return False
    if any(item.kind not in ("installed", "build") for item in plan.items):
        return False
    return bool(results) and all(before.get(canonicalize_name(r.spec.package)) == r.wheel.version for r in results)


#: The import check and a smoke test each end within this.
_CHECK_SECONDS = 600


def _run_check(python: str, args: Sequence[str], environ: Mapping[str, str], what: str) -> tuple[int | None, list[str]]:
    """(exit status, output lines) of the target running ``args``; status None when it was cut off."""
    done = _bounded_run([python, *args], timeout=_CHECK_SECONDS, env=environ, cwd="/")
    if done is None:
        return None, [f"{python} could not be started for the {what}"]
    if done.returncode is None:
        return None, [f"the {what} took longer than {_CHECK_SECONDS} s or wrote too much"]
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()


def _verify_imports(python: str, modules: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """None when every module imports in a fresh interpreter, else what failed."""
    script = (
        "import importlib, sys, traceback\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except BaseException as exc:\n"
        "        print(f'{name}: {type(exc).__name__}: {exc}')\n"
        "        sys.exit(1)\n"
    )
    status, lines = _run_check(python, ["-c", script, *modules], environ, "import check")
    if status == 0:
        return None
    return lines[-1] if lines else f"exit {status}"


def _run_smoke(python: str, script: str, environ: Mapping[str, str]) -> tuple[bool, str]:
    status, lines = _run_check(python, ["-c", script], environ, "smoke test")
    last = lines[-1] if lines else ""
    if status == 255:
        return False, f"a CUDA kernel failed (exit 255): {last}"
    return status == 0, last or f"exit {status}"


class Phases:
    """Seconds spent per phase, so a slow install says where its time went (and the bench can tell)."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self._seconds[name] = self._seconds.get(name, 0.0) + time.monotonic() - started

    def items(self) -> tuple[tuple[str, float], ...]:
        return tuple(self._seconds.items())


def execute(
    prepared: Prepared,
    env: Environment,
    *,
    wheelhouse: Wheelhouse,
    options: InstallOptions,
    probe: Callable[[str], tuple[bool, str]] | None = None,
    environ: Mapping[str, str] | None = None,
    reporter: Reporter | None = None,
    log_path: Path,
) -> InstallResult:
    report = reporter or NullReporter()
    phases = Phases()
    base = dict(os.environ if environ is None else environ)
    python = env.python.executable or sys.executable
    with phases.timed("target probe"):
        facts, before = pip_facts_and_distributions(python, base)
    trust, trust_note = trust_options(facts)
    notes: list[str] = []
    if probe is not None:
        with phases.timed("index check"):
            _check_reachable([u for s in prepared.steps for u in s.checked_urls], probe, report)
    results: list[BuildResult] = []
    for spec in prepared.builds:
        with phases.timed(f"build {spec.package}"):
            results.append(build(spec, wheelhouse, source_dir=options.source_for(spec.package), installed=before,
                                 environ=base, reporter=report, rebuild=options.rebuild))
    steps = list(prepared.steps)
    if results and _only_built_wheels(prepared, options) and all(_requirements_met(r.wheel.path, before, env) for r in results):
        # Everything the wheels need is installed: pip need not resolve torch's whole dependency
        # tree again, nor check every installed package for conflicts (seconds in a big env).
        steps = [PipStep(purpose="built wheels (their requirements are installed)",
                         args=("--no-deps", *(str(r.wheel.path) for r in results)))]
    elif results:
        steps[-1] = _with_built_wheels(steps[-1], results)
    # The builds never touch the target, so the snapshot taken before them still holds.
    if _already_installed(prepared, results, before, options):
        notes.append("every planned package is installed at the planned version: pip was not run")
        return InstallResult(prepared=prepared, builds=tuple(results), changed=(), verified=(), notes=tuple(notes),
                             timings=phases.items())
    if trust_note:
        notes.append(trust_note)
    report.step(f"installing into {python}")
    started = time.monotonic()
    try:
        with open(log_path, "a", encoding="utf-8") as log, phases.timed("pip install"):
            for step in steps:
                command = [python, "-m", "pip", "install", "--disable-pip-version-check", *trust, *step.args]
                status, tail = run_logged(command, environ=base, log=log,
                                          on_line=lambda line: report.progress("pip", None, None, time.monotonic() - started))
                if status != 0:
                    detail = [line for line in tail if line.startswith("ERROR")] or tail[-3:]
                    raise InstallError(f"pip install ({step.purpose}) failed: {' / '.join(d.strip() for d in detail)}",
                                       hint=f"the environment was restored as it was; full log: {log_path}")
        with phases.timed("pip install"):
            after = installed_distributions(python, base)
        changed = _diff(before, after)
        verified: list[str] = []
        if options.verify and prepared.imports:
            if not changed and all(r.cache_hit for r in results):
                notes.append("nothing changed in the environment: import check skipped")
            else:
                report.step(f"checking imports: {', '.join(prepared.imports)}")
                with phases.timed("import check"):
                    failure = _verify_imports(python, prepared.imports, base)
                if failure is not None:
                    raise InstallError(f"installed, but the import check failed: {failure}",
                                       hint=f"the environment was restored as it was; full log: {log_path}")
                verified = list(prepared.imports)
        smoke_results: list[tuple[str, str]] = []
        if options.smoke:
            if not env.gpus:
                notes.append("--smoke: no GPU here, the GPU smoke tests were not run")
            for package, script in prepared.smoke_scripts if env.gpus else ():
                report.step(f"running {package}'s smoke test on the GPU")
                with phases.timed("smoke test"):
                    ok, output = _run_smoke(python, script, base)
                if not ok:
                    raise InstallError(f"{package}'s smoke test failed: {output}",
                                       hint=f"the environment was restored as it was; if the GPU is busy or missing, install without --smoke; log: {log_path}")
                smoke_results.append((package, output))
    except BaseException:
        left = _undo(python, before, base, log_path, report)
        if left:
            report.note("could not restore: " + "; ".join(left))
        raise
    return InstallResult(prepared=prepared, builds=tuple(results), changed=tuple(changed), verified=tuple(verified),
                         smoke=tuple(smoke_results), notes=tuple(notes), timings=phases.items(), pip_runs=tuple(steps))
