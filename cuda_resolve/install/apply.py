"""Applying a plan written earlier or elsewhere: the facts the resolver used must still hold.

A plan file (``cuda-resolve plan ... --json > plan.json``) records the Environment it was made
for. Before it is executed here, :func:`check_plan_facts` compares the facts that decided it with
this machine: the driver (no older than the plan's), every GPU covered by every build's arch list,
each build's toolkit (major.minor), the Python tag, the platform, the installed torch (exact), and
each installed extension build the plan keeps (exact, and covering every GPU). A plan that runs
no pip (``skip_pip``) is checked against the target's distributions too
(:func:`check_skipped_pip`). Paths do not count: a toolkit or interpreter found elsewhere here is
used in the plan's place.
The first fact that changed is named, with the way out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from .._frozen import replace
from ..build.spec import BuildSpec
from ..compat import build_covers_gpu
from ..environment import Environment
from ..errors import UsageError
from ..index.model import parse_arch_list
from ..plan import NEW_PLAN, Plan, PlanFormatError, PlannedBuild
from ..versions import same_version

__all__ = ["PlanFactChanged", "check_plan_facts", "check_skipped_pip", "read_plan_file"]

#: A plan document larger than this is not one.
_PLAN_LIMIT = 16 * 1024 * 1024


class PlanFactChanged(UsageError):
    """A fact the plan was decided from no longer holds on this machine. The hint decides the
    plan's packages (``names``) again here, for the same target (``python``, where known), with
    the options that say where the recipes and sources are (:meth:`with_options`), and applies
    that plan."""

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        names: Sequence[str] = (),
        python: str | None = None,
        plan_options: Sequence[str] = (),
        apply_options: Sequence[str] = (),
    ) -> None:
        import shlex

        self.names, self.python = tuple(names), python
        target = ["--python", python] if python else []
        plan = shlex.join(["cuda-resolve", "plan", *self.names, *plan_options, *target])
        # A new file: the plan refused here stays as it was (it may be a colleague's).
        apply = shlex.join(["cuda-resolve", "apply", NEW_PLAN, *apply_options, *target])
        super().__init__(
            message,
            hint=f"make the plan again for this machine, then apply it: {plan} --json > "
            f"{NEW_PLAN} && {apply}",
        )

    def with_options(
        self, plan_options: Sequence[str], apply_options: Sequence[str]
    ) -> PlanFactChanged:
        """The same refusal, its commands given these options (``--index DIR``, ...)."""
        return PlanFactChanged(
            self.message,
            names=self.names,
            python=self.python,
            plan_options=plan_options,
            apply_options=apply_options,
        )


def read_plan_file(path: Path) -> Plan:
    from .._bounded import read_user_text

    text = read_user_text(
        path,
        error=PlanFormatError,
        hint="give the file `cuda-resolve plan ... --json` wrote",
        what="a plan file",
        limit=_PLAN_LIMIT,
    )
    from .._plan_checks import load_json

    hint = "give the file `cuda-resolve plan ... --json` wrote"
    data = load_json(text, origin=str(path), error=PlanFormatError, hint=hint)
    return Plan.from_json(data, origin=str(path))


class _Refusal(Protocol):
    def __call__(
        self, fact: str, planned: str, here: str, *, where: str = ...
    ) -> PlanFactChanged: ...


#: Where a fact of the target environment (its Python, what is installed in it) is found: a
#: machine holds many environments, and the one applied to may not be this tool's.
TARGET = "the target environment"


def _refusal(plan: Plan, python: str | None) -> _Refusal:
    """The refusal naming the fact that changed, for ``plan`` and the target ``python``."""
    names = [item.name for item in plan.items] or ["REQ..."]

    def changed(
        fact: str, planned: str, here: str, *, where: str = "this machine"
    ) -> PlanFactChanged:
        return PlanFactChanged(
            f"the plan was made for {f'{fact} {planned}' if planned else fact}; {where} has {here}",
            names=names,
            python=python,
        )

    return changed


def _relocated(build: PlannedBuild, env: Environment, _changed: _Refusal) -> PlannedBuild:
    spec = build.spec
    wanted = spec.toolkit.version
    toolkit = next((t for t in env.toolkits if t.version == wanted and t.nvcc), None)
    if toolkit is None:
        found = ", ".join(str(t.version) for t in env.toolkits) or "none"
        raise _changed(
            f"{spec.package}'s build with CUDA toolkit", str(wanted), f"toolkits {found}"
        )
    python = env.python.executable or spec.python
    if toolkit.root == spec.toolkit.root and python == spec.python:
        return build
    root = toolkit.root or spec.toolkit.root or ""
    variables = tuple(
        (name, root if name in ("CUDA_HOME", "CUDA_PATH") else value)
        for name, value in spec.variables
    )
    moved: BuildSpec = replace(spec, toolkit=toolkit, python=python, variables=variables)
    return replace(build, spec=moved)


def _check_kept_builds(plan: Plan, env: Environment) -> None:
    """An installed extension build the plan keeps (resolve.installed) is installed here at that
    version and covers every GPU here: otherwise nothing would install or replace it."""
    from packaging.utils import canonicalize_name

    _changed = _refusal(plan, env.python.executable)
    here = {canonicalize_name(e.name): e.version for e in env.installed_extensions}
    for item in plan.items:
        if item.kind != "installed" or item.name in ("torch", "torchvision", "torchaudio"):
            continue
        found = here.get(canonicalize_name(item.name))
        if found is None or not same_version(found, item.version):
            raise _changed(
                f"the installed {item.name}", item.version, found or "none", where=TARGET
            )
        for gpu in env.gpus:
            if item.arch_list and not build_covers_gpu(
                parse_arch_list(item.arch_list), gpu.compute_capability
            ):
                raise _changed(
                    f"the installed {item.name}'s arch list",
                    item.arch_list,
                    f"GPU {gpu.index} ({gpu.name}, compute capability {gpu.compute_capability}) "
                    "that it does not cover",
                )


def check_skipped_pip(plan: Plan, installed: Mapping[str, str]) -> None:
    """A plan that runs no pip (``skip_pip``: where it was made, everything was installed as
    planned) holds for the target's distributions ``installed`` (canonical name -> version):
    each kept item and each build (at its labelled version) is installed. Otherwise its steps
    would install nothing and the run would say "nothing to change" over a missing package."""
    from packaging.utils import canonicalize_name

    from .prepare import installed_as_planned

    if plan.skip_pip is None:
        return
    _changed = _refusal(plan, None)
    for item in plan.items:
        if item.kind == "installed" and not installed_as_planned(item, installed):
            found = installed.get(canonicalize_name(item.name))
            raise _changed(
                f"the installed {item.name}", item.version, found or "none", where=TARGET
            )
    for build in plan.builds:
        found = installed.get(canonicalize_name(build.spec.package))
        if found is None or not same_version(found, build.key.labelled_version):
            raise _changed(
                f"the installed {build.spec.package}",
                build.key.labelled_version,
                found or "none",
                where=TARGET,
            )


def check_plan_facts(plan: Plan, env: Environment) -> Plan:
    """``plan`` ready to execute in ``env`` (paths moved to this machine's), or the fact that
    changed."""
    made = plan.environment
    _changed = _refusal(plan, env.python.executable)
    if (made.machine.os, made.machine.arch) != (env.machine.os, env.machine.arch):
        raise _changed(
            "platform",
            f"{made.machine.os} {made.machine.arch}",
            f"{env.machine.os} {env.machine.arch}",
        )
    if made.python.interpreter_tag != env.python.interpreter_tag:
        raise _changed(
            "Python", made.python.interpreter_tag, env.python.interpreter_tag, where=TARGET
        )
    if made.driver is not None:
        if env.driver is None:
            raise _changed("NVIDIA driver", str(made.driver.version), "no driver")
        if env.driver.version < made.driver.version:
            raise _changed(
                "NVIDIA driver",
                f"{made.driver.version} (CUDA {made.driver.cuda})",
                f"{env.driver.version} (CUDA {env.driver.cuda})",
            )
    made_torch = made.torch.version if made.torch else None
    here_torch = env.torch.version if env.torch else None
    if made_torch != here_torch:
        if made_torch is None:  # not "made for the installed torch none"
            raise _changed("an environment without torch", "", f"torch {here_torch}", where=TARGET)
        raise _changed("the installed torch", made_torch, here_torch or "no torch", where=TARGET)
    _check_kept_builds(plan, env)
    for build in plan.builds:
        arch_list = parse_arch_list(build.key.arch_list)
        for gpu in env.gpus:
            if not build_covers_gpu(arch_list, gpu.compute_capability):
                raise _changed(
                    f"{build.spec.package}'s arch list",
                    build.key.arch_list,
                    f"GPU {gpu.index} ({gpu.name}, compute capability {gpu.compute_capability}) "
                    "that it does not cover",
                )
    known = {gpu.compute_capability for gpu in made.gpus}
    for gpu in env.gpus:
        if made.gpus and gpu.compute_capability not in known and not plan.builds:
            raise _changed(
                "GPUs of compute capability",
                ", ".join(sorted(str(c) for c in known)),
                f"GPU {gpu.index} ({gpu.name}, {gpu.compute_capability})",
            )
    builds = tuple(_relocated(build, env, _changed) for build in plan.builds)
    return replace(plan, builds=builds, environment=env)
