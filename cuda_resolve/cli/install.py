"""``cuda-resolve install REQ...`` and ``cuda-resolve build REQ...``: carry out a Plan.

``install`` resolves, builds what must be built, installs through the target's pip and checks
the imports; ``build`` stops after the wheels are in the wheelhouse (with ``--profile`` it builds
for another machine's GPUs: nvcc needs no GPU, so a login node builds for its compute nodes).
``cuda-pip install`` (pip_plugin) is the same action with pip's own options passed through.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._frozen import replace
from ..environment import Environment
from ..errors import UsageError
from ..install.reqfile import FileRequirement
from ..install.run import InstallRequest
from ..redaction import redact_urls
from ..reporting import RedactingReporter, Reporter
from . import _output
from ._act import (
    TerminalReporter,
    add_action_options,
    base_interpreter_warning,
    describe_target,
    install_options,
)
from ._common import detect_target

if TYPE_CHECKING:
    from ..build.builder import BuildResult
    from ..index.model import Index
    from ..plan import Plan

__all__ = ["add_action_options", "register", "register_build", "run_action"]


def register(subparsers: Any) -> None:
    install = subparsers.add_parser(
        "install",
        help="resolve, build what must be built, install into the target environment and "
        "check it imports",
        description="Install REQ... (kaolin, pointnet2_ops, torch, anything pip knows) into the "
        "target environment: ABI-matched wheels where they exist, source builds into the "
        "wheelhouse where not. Nothing is installed unless every build succeeds; a failure "
        "restores the environment.",
    )
    # None with --repair or --plan (each plans on its own), as for cuda-pip install.
    install.add_argument("requests", nargs="*", metavar="REQ")
    add_action_options(install, install=True)
    install.set_defaults(handler=handle_install)


def register_build(subparsers: Any) -> None:
    build = subparsers.add_parser(
        "build",
        help="build the source builds a request needs into the wheelhouse (installs nothing)",
        description="Build REQ...'s source builds against the target's torch into the wheelhouse. "
        "With --profile FILE the arch list comes from the profile's GPUs, so a machine "
        "without a GPU builds for others.",
    )
    build.add_argument("requests", nargs="+", metavar="REQ")
    add_action_options(build, install=False)
    build.add_argument(
        "--profile",
        metavar="FILE",
        type=Path,
        help="build for the GPUs this profile describes (cross-building)",
    )
    build.set_defaults(handler=handle_build)


def _environment(args: argparse.Namespace) -> tuple[Environment, str, bool]:
    """(the environment, the rule that chose the target, whether the wheels are for machines
    whose driver is not known here: --arch-list, or a profile without [driver])."""
    env, choice = detect_target(args.python)
    cross = bool(args.arch_list)
    profile_path = getattr(args, "profile", None)
    if profile_path is not None:
        from ..profile import load_profile

        target = load_profile(profile_path)
        # The machine to build for is the profile's; the toolkit, compiler and torch are here.
        env = replace(env, gpus=target.gpus, driver=target.driver or env.driver)
        cross = cross or target.driver is None
    return env, choice.how, cross


def driver_needed(plan: Plan, index: Index) -> list[str]:
    """For wheels that run elsewhere: the driver each build's torch CUDA needs there."""
    lines: list[str] = []
    for torch_build in sorted({(b.spec.torch_version, b.spec.variant) for b in plan.builds}):
        release = index.torch_release(torch_build[0])
        variant = (
            next((v for v in release.variants if v.name == torch_build[1]), None)
            if release
            else None
        )
        if variant is None or variant.cuda is None:
            continue
        family = index.family(variant.cuda.major)
        toolkit = index.toolkit(variant.cuda)
        if family is None:
            continue
        own = (
            f" (>= {toolkit.driver_linux} with --strict-driver)"
            if toolkit is not None
            and toolkit.driver_linux
            and toolkit.driver_linux != family.min_driver_linux
            else ""
        )
        lines.append(
            "the machines that run these wheels need an NVIDIA driver >= "
            f"{family.min_driver_linux} on Linux{own}: "
            f"torch {torch_build[0]}+{torch_build[1]} uses CUDA {variant.cuda}"
        )
    return lines


def _ask(question: str) -> bool:
    sys.stderr.write(question)
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")


def _probe(url: str) -> tuple[bool, str]:
    if not url.startswith(("https://", "http://")):
        return True, "local"
    from ..install.transaction import REACHABILITY_SECONDS
    from ..net.client import Timeouts
    from ..net.factory import client_from_config

    timeouts = Timeouts(
        connect=5.0,
        read=REACHABILITY_SECONDS - 1,
        deadline=REACHABILITY_SECONDS - 0.5,
        total=REACHABILITY_SECONDS,
    )
    with client_from_config(timeouts=timeouts, use_cache=False) as client:
        answer = client.probe(url)
    if answer.ok:
        return True, f"HTTP {answer.status}"
    return False, str(answer.error) if answer.error else f"HTTP {answer.status}"


def _read_page(url: str) -> tuple[str, str, str]:
    """An index page (body, content type, the URL that answered) for pinning the plan's wheels;
    raises when it cannot be read."""
    from ..install.pins import PEP691_ACCEPT
    from ..install.transaction import REACHABILITY_SECONDS
    from ..net.client import Timeouts
    from ..net.factory import client_from_config

    timeouts = Timeouts(
        connect=5.0,
        read=REACHABILITY_SECONDS - 1,
        deadline=REACHABILITY_SECONDS - 0.5,
        total=REACHABILITY_SECONDS,
    )
    with client_from_config(timeouts=timeouts, use_cache=False) as client:
        response = client.get(url, accept=PEP691_ACCEPT, ttl=0)
    if response.status != 200:
        raise OSError(f"HTTP {response.status}")
    return response.text, response.headers.get("Content-Type", ""), response.final_url


def _request(
    args: argparse.Namespace,
    requests: Sequence[str],
    file_requirements: Sequence[FileRequirement],
    file_notes: Sequence[str],
    *,
    keep_installed: bool = True,
) -> InstallRequest:
    from ..resolve import Options
    from .plan import parse_arch_list

    plan = None
    plan_file = getattr(args, "plan", None)
    if plan_file is not None:
        if requests or file_requirements:
            raise UsageError(
                "--plan FILE carries out that plan alone: name no requirements beside it",
                hint="drop the requirements, or drop --plan and let cuda-pip decide",
            )
        from ..install.apply import read_plan_file
        from .apply import refuse_deciding

        refuse_deciding(args, plan_file)  # as apply does: the plan is carried out exactly
        plan = read_plan_file(plan_file)
    return InstallRequest(
        requirements=tuple(requests),
        file_requirements=tuple(file_requirements),
        file_notes=tuple(file_notes),
        resolve=Options(
            allow_torch_change=args.allow_torch_change,
            strict_driver=args.strict_driver,
            arch_list=parse_arch_list(args.arch_list) if args.arch_list else None,
            rebuild=bool(getattr(args, "rebuild", False)) or not keep_installed,
            for_other_machines=not keep_installed,
        ),
        accept_names=tuple(args.accept_name),
        keep_stale=tuple(getattr(args, "keep_stale", ())),
        plan=plan,
        dry_run=bool(args.dry_run),
    )


def _repair_requests(
    env: Environment,
    index: Index,
    requests: Sequence[str],
    file_requirements: Sequence[FileRequirement],
    reporter: Reporter,
) -> list[str]:
    """``--repair``: the curated extensions installed, planned again for the installed torch
    (those that fit it stay as they are); what cannot be rebuilt is said."""
    from ..install.stale import repair_request

    if requests or file_requirements:
        raise UsageError(
            "--repair plans the installed extensions again: name no requirements beside it",
            hint="run cuda-pip install --repair alone, then install the rest",
        )
    names, notes = repair_request(env, index)
    for note in notes:
        reporter.note(note)
    return names


def run_action(
    args: argparse.Namespace,
    requests: Sequence[str],
    *,
    pip_args: Sequence[str] = (),
    mode: str = "install",
    file_requirements: Sequence[FileRequirement] = (),
    file_notes: Sequence[str] = (),
) -> int:
    """The whole action; ``mode`` is "install" or "build". Returns the exit status.

    ``file_requirements`` are the requirements inside ``-r``/``-c`` files (pip still reads the
    files): those cuda-resolve decides, and constraints on them, are planned with ``requests``;
    the others are only checked for look-alike names. ``file_notes`` say what was left unread."""
    from ..install.run import build_only, run

    started = time.monotonic()
    env, how, cross = _environment(args)
    detected = time.monotonic() - started
    reporter = RedactingReporter(TerminalReporter(quiet=args.json))
    warning = base_interpreter_warning(env.python.executable or sys.executable)
    if warning is not None:
        reporter.note(warning)
    reporter.step(describe_target(env, how))
    from ._common import index_from_args

    index = index_from_args(args)
    if getattr(args, "repair", False):
        requests = _repair_requests(env, index, requests, file_requirements, reporter)
        if not requests:
            reporter.step("nothing to repair: no curated extension is installed here")
            if args.json:
                _output.print_json({"target": env.python.executable, "repair": []})
            return 0
        from ..install.stale import repair_arch_list

        archs = None if args.arch_list else repair_arch_list(env, requests)
        if archs is not None:  # no GPU here: build for those the stale builds were made for
            reporter.note(f"no GPU here: building for {archs}, as the installed builds were")
            args.arch_list = archs
    # `build` makes wheels: an installed build that fits is no reason to make none.
    request = _request(
        args, requests, file_requirements, file_notes, keep_installed=mode == "install"
    )
    if request.plan is not None and pip_args:
        # The plan's steps hold the pip options it was made with; these would be ignored.
        given = shlex.join(pip_args)
        names = [*(item.name for item in request.plan.items), *request.plan.pass_through]
        asked = shlex.join(dict.fromkeys(names)) or "REQ..."
        raise UsageError(
            f"--plan FILE carries out that plan with the pip options it was made with: {given} "
            "beside it would be ignored",
            hint=f"drop them, or decide again with them: cuda-pip install {asked} {given} "
            f"--python {shlex.quote(env.python.executable or sys.executable)}",
        )
    smoke = bool(getattr(args, "smoke", False))
    verify = not getattr(args, "no_verify", False)
    options = install_options(args, pip_args=pip_args, smoke=smoke, verify=verify)
    python = env.python.executable or sys.executable
    if mode == "build":
        plan, results = build_only(request, env, index, options, reporter=reporter)
        for line in driver_needed(plan, index) if cross else ():
            reporter.note(line)
        if args.dry_run:
            return _render_dry_run(args, plan, [], python, mode)
        return _render_builds(args, plan, results, reporter)
    interactive = sys.stdin.isatty() and not args.json
    from ..install.apply import PlanFactChanged

    try:
        result = run(
            request,
            env,
            index,
            options,
            reporter=reporter,
            confirm=_ask if interactive else None,
            probe=_probe,
            read_page=_read_page,
        )
    except PlanFactChanged as refused:  # the plan made again needs the same recipes and sources
        overlays = [word for path in args.index for word in ("--index", str(path))]
        sources = [word for source in args.source for word in ("--source", source)]
        raise refused.with_options(overlays, [*overlays, *sources]) from None
    result = replace(result, timings=(("detect", detected), *result.timings))
    if args.dry_run:
        return _render_dry_run(args, result.plan, [list(c) for c in result.pip_runs], python, mode)
    total = time.monotonic() - started
    if args.json:
        outcome = result.to_json()
        outcome["seconds"] = round(total, 2)
        document = {
            "target": python,
            "plan": result.plan.to_json(),
            "prepared": prepared_view(result.plan),
            "result": outcome,
        }
        _output.print_json(document)
        return 0
    for note in result.notes:
        reporter.note(note)
    for name, before, after in result.changed:
        reporter.step(f"{name}: {before or '-'} -> {after or '-'}")
    if result.elsewhere:  # the target is unchanged: pip wrote into another folder (walk C4)
        reporter.step(
            f"pip installed {', '.join(result.elsewhere)} outside the target environment (where "
            "--target, --prefix, --root, --user or a PIP_* variable sent it)"
        )
    elif not result.changed:
        reporter.step("nothing to change: everything was already installed")
    if result.installers:
        reporter.step(f"installed by: {', '.join(dict.fromkeys(result.installers))}")
    if result.verified:
        reporter.step(f"imports ok: {', '.join(result.verified)}")
    for package, output in result.smoke:
        reporter.step(f"{package} smoke test passed: {output}")
    reporter.step(
        f"done in {total:.1f} s ("
        + ", ".join(
            f"{phase} {seconds:.1f} s" for phase, seconds in result.timings if seconds >= 0.05
        )
        + ")"
    )
    return 0


def prepared_view(plan: Plan) -> dict[str, Any]:
    """The ``prepared`` object of the install JSON (kept: its keys are a documented interface)."""
    return {
        "builds": [
            {
                "package": b.spec.package,
                "version": str(b.spec.recipe.version),
                "recipe": b.spec.recipe.name,
                "source": b.source,
                "torch": f"{b.spec.torch_version}+{b.spec.variant}",
                "toolkit": b.spec.toolkit.root,
                "arch_list": b.spec.arch_list,
                "variables": dict(b.spec.variables),
                "notes": list(b.spec.notes),
                "wheel_version": b.key.labelled_version,
                "reused": b.reused,
            }
            for b in plan.builds
        ],
        "pip": [{"purpose": s.purpose, "args": list(s.args)} for s in plan.steps],
        "imports": list(plan.imports),
        "notes": list(plan.notes),
    }


def _render_builds(
    args: argparse.Namespace, plan: Plan, results: Sequence[BuildResult], reporter: Reporter
) -> int:
    if not plan.builds:
        reporter.step("nothing to build: the plan has no source builds")
    if args.json:
        _output.print_json(
            {
                "builds": [
                    {
                        "package": r.spec.package,
                        "wheel": str(r.wheel.path),
                        "sha256": r.wheel.sha256,
                        "cache_hit": r.cache_hit,
                        "arch_list": r.wheel.key.arch_list,
                        "seconds": round(r.seconds, 1),
                        "log": str(r.log) if r.log else None,
                    }
                    for r in results
                ]
            }
        )
    else:
        for r in results:
            _output.console().print(
                str(r.wheel.path), markup=False, highlight=False, soft_wrap=True
            )
    return 0


def _render_dry_run(
    args: argparse.Namespace, plan: Plan, commands: Sequence[Sequence[str]], python: str, mode: str
) -> int:
    import shlex

    if args.json:
        _output.print_json(
            {
                "target": python,
                "plan": plan.to_json(),
                "prepared": prepared_view(plan),
                "commands": [list(c) for c in commands],
                "dry_run": True,
            }
        )
        return 0
    from ._table import stdout_width
    from .plan import render_plan, say_plain

    render_plan(plan, explain=False)
    width = stdout_width()

    def say(text: str, first: str = "", rest: str = "    ") -> None:
        # Broken at spaces with a hanging indent: no path or URL is cut, nothing wraps to column 0.
        # Plain writes: a plan of thousands of builds prints in linear time (issue 28).
        say_plain(_output.hanging(redact_urls(text), first=first, rest=rest, width=width))

    for planned in plan.builds:
        spec = planned.spec
        say(
            f"build {spec.package} {spec.recipe.version} (recipe {spec.recipe.name}) against "
            f"torch {spec.torch_version}+{spec.variant}:"
        )
        if planned.reused:
            say(f"reused: {planned.reused}", first="  ")
        say(f"source: {planned.source}", first="  ")
        for name, value in spec.variables:
            say(f"{name}={value}", first="  ")
        if spec.max_jobs is not None:
            say(f"MAX_JOBS={spec.max_jobs}", first="  ")
        for note in spec.notes:
            say(note, first="  note: ", rest="        ")
    if mode == "install":
        if plan.skip_pip:
            say(plan.skip_pip, first="note: ", rest="      ")
        installed = plan.environment.torch
        torch = next((i for i in plan.items if i.name == "torch" and i.kind != "installed"), None)
        if installed is not None and torch is not None:  # say it before it happens (walk C15)
            wanted = f"{torch.version}+{torch.variant}" if torch.variant else torch.version
            if wanted != installed.version:
                say(
                    f"the installed torch {installed.version} would be replaced by {wanted}",
                    first="note: ",
                    rest="      ",
                )
        for command in commands:
            # One line, never broken: it is meant to be copied into a shell.
            say_plain(shlex.join(command))
    say_plain("dry run: nothing was built or installed")
    return 0


def handle_install(args: argparse.Namespace) -> int:
    if not args.requests and args.plan is None and not args.repair:
        raise UsageError(
            "cuda-resolve install: name at least one requirement (REQ)",
            hint="for example: cuda-resolve install pointnet2_ops (after a torch change made "
            "outside cuda-resolve: cuda-resolve install --repair)",
        )
    return run_action(args, args.requests, mode="install")


def handle_build(args: argparse.Namespace) -> int:
    return run_action(args, args.requests, mode="build")
