"""``cuda-resolve install REQ...`` and ``cuda-resolve build REQ...``: carry out a Plan.

``install`` resolves, builds what must be built, installs through the target's pip and checks
the imports; ``build`` stops after the wheels are in the wheelhouse (with ``--profile`` it builds
for another machine's GPUs: nvcc needs no GPU, so a login node builds for its compute nodes).
``cuda-pip install`` (pip_plugin) is the same action with pip's own options passed through.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..environment import Environment
from ..errors import UsageError
from ..install.reqfile import FileRequirement, select_requests
from ..resolve import applies as applies_to_target
from . import _output
from ._act import (
    TerminalReporter,
    add_action_options,
    confirm_names,
    describe_target,
    install_options,
)
from ._common import detect_target

__all__ = ["register", "register_build", "run_action"]


def register(subparsers: Any) -> None:
    install = subparsers.add_parser(
        "install",
        help="resolve, build what must be built, install into the target environment and check it imports",
        description="Install REQ... (kaolin, pointnet2_ops, torch, anything pip knows) into the target environment: ABI-matched wheels where they exist, source builds into the wheelhouse where not. Nothing is installed unless every build succeeds; a failure restores the environment.",
    )
    install.add_argument("requests", nargs="+", metavar="REQ")
    add_action_options(install, install=True)
    install.set_defaults(handler=handle_install)


def register_build(subparsers: Any) -> None:
    build = subparsers.add_parser(
        "build",
        help="build the source builds a request needs into the wheelhouse (installs nothing)",
        description="Build REQ...'s source builds against the target's torch into the wheelhouse. With --profile FILE the arch list comes from the profile's GPUs, so a machine without a GPU builds for others.",
    )
    build.add_argument("requests", nargs="+", metavar="REQ")
    add_action_options(build, install=False)
    build.add_argument("--profile", metavar="FILE", type=Path, help="build for the GPUs this profile describes (cross-building)")
    build.set_defaults(handler=handle_build)


def _environment(args: argparse.Namespace) -> tuple[Environment, str]:
    env, choice = detect_target(args.python)
    profile_path = getattr(args, "profile", None)
    if profile_path is not None:
        from ..profile import load_profile

        target = load_profile(profile_path)
        # The machine to build for is the profile's; the toolkit, compiler and torch are here.
        env = replace(env, gpus=target.gpus, driver=target.driver or env.driver)
    return env, choice.how


def _plan(args: argparse.Namespace, requests: Sequence[str], env: Environment, index: Any) -> Any:
    from ..plan import make_plan
    from ..resolve import Options, resolve
    from .plan import parse_arch_list

    options = Options(
        allow_torch_change=args.allow_torch_change,
        strict_driver=args.strict_driver,
        arch_list=parse_arch_list(args.arch_list) if args.arch_list else None,
    )
    return make_plan(resolve(list(requests), env, index, options), env)


def _curated_name(index: Any) -> Any:
    """``text -> canonical name`` for requirements cuda-resolve decides (torch's family or a
    package it indexes), None for the rest (and for what is not a requirement at all)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from ..install.transaction import TORCH_FAMILY

    def curated(text: str) -> str | None:
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement:
            return None
        return name if name in TORCH_FAMILY or index.package(name) is not None else None

    return curated


def _refuse_hash_mode(origins: Sequence[str], pip_args: Sequence[str]) -> None:
    """pip's hash-checking mode needs a hash for every package: the pins and built wheels
    cuda-resolve adds have none known in advance, so pip would refuse them after the builds."""
    if not origins and "--require-hashes" not in pip_args:
        return
    where = f"--hash at {origins[0]}" if origins else "--require-hashes"
    raise UsageError(
        f"pip's hash-checking mode ({where}) needs a hash for every package, and the torch pin and the wheels cuda-resolve builds or picks have none known in advance",
        hint="install torch, kaolin and pointnet2_ops with their own cuda-pip install first, then the hashed requirements with pip",
    )


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

    timeouts = Timeouts(connect=5.0, read=REACHABILITY_SECONDS - 1, deadline=REACHABILITY_SECONDS - 0.5, total=REACHABILITY_SECONDS)
    with client_from_config(timeouts=timeouts, use_cache=False) as client:
        answer = client.probe(url)
    if answer.ok:
        return True, f"HTTP {answer.status}"
    return False, str(answer.error) if answer.error else f"HTTP {answer.status}"


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
    from ..install.transaction import Phases, execute, prepare
    from ..paths import new_log_path
    from ..wheelhouse.store import Wheelhouse

    started = time.monotonic()
    phases = Phases()
    with phases.timed("detect"):
        env, how = _environment(args)
    reporter = TerminalReporter(quiet=args.json)
    reporter.step(describe_target(env, how))
    with phases.timed("plan"):
        from ._common import index_from_args

        index = index_from_args(args)
        from_files = select_requests(file_requirements, requests, curated=_curated_name(index),
                                     applies=lambda requirement: applies_to_target(requirement, str(requirement), env))
        for line in (*from_files.said, *file_notes):
            reporter.step(line)
        plan = _plan(args, [*requests, *from_files.requests], env, index)
    if mode == "install":
        if plan.items:
            _refuse_hash_mode(from_files.hashed, pip_args)
        interactive = sys.stdin.isatty() and not args.json
        confirm_names([*plan.pass_through, *from_files.unchecked], index, args.accept_name, interactive=interactive, ask=_ask)
    smoke = bool(getattr(args, "smoke", False))
    verify = not getattr(args, "no_verify", False)
    options = install_options(args, pip_args=pip_args, smoke=smoke, verify=verify)
    with phases.timed("pre-flight"):
        prepared = prepare(plan, env, index, options)
    python = env.python.executable or sys.executable
    if args.dry_run:
        return _render_dry_run(args, plan, prepared, python, mode)
    wheelhouse = Wheelhouse.default()
    if mode == "build":
        return _run_builds(args, prepared, wheelhouse, options, reporter)
    result = execute(prepared, env, wheelhouse=wheelhouse, options=options, probe=_probe,
                     reporter=reporter, log_path=new_log_path("install"))
    # The executor timed its phases; detecting and planning happened here, before it.
    result = replace(result, timings=(*phases.items(), *result.timings))
    total = time.monotonic() - started
    if args.json:
        document = {"target": python, "plan": plan.to_json(), "prepared": prepared.to_json(), "result": result.to_json()}
        document["result"]["seconds"] = round(total, 2)
        _output.print_json(document)
        return 0
    for note in result.notes:
        reporter.note(note)
    for name, before, after in result.changed:
        reporter.step(f"{name}: {before or '-'} -> {after or '-'}")
    if not result.changed:
        reporter.step("nothing to change: everything was already installed")
    if result.verified:
        reporter.step(f"imports ok: {', '.join(result.verified)}")
    for package, output in result.smoke:
        reporter.step(f"{package} smoke test passed: {output}")
    reporter.step(f"done in {total:.1f} s (" + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in result.timings if seconds >= 0.05) + ")")
    return 0


def _run_builds(args: argparse.Namespace, prepared: Any, wheelhouse: Any, options: Any, reporter: TerminalReporter) -> int:
    from ..build.builder import build
    from ..install.pip import installed_distributions

    if not prepared.builds:
        reporter.step("nothing to build: the plan has no source builds")
    installed = installed_distributions(prepared.builds[0].python, os.environ) if prepared.builds else {}
    results = [
        build(spec, wheelhouse, source_dir=options.source_for(spec.package), installed=installed, reporter=reporter,
              rebuild=options.rebuild)
        for spec in prepared.builds
    ]
    if args.json:
        _output.print_json({"builds": [
            {"package": r.spec.package, "wheel": str(r.wheel.path), "sha256": r.wheel.sha256, "cache_hit": r.cache_hit,
             "arch_list": r.spec.arch_list, "seconds": round(r.seconds, 1), "log": str(r.log) if r.log else None}
            for r in results
        ]})
    else:
        for r in results:
            _output.console().print(str(r.wheel.path), markup=False, highlight=False)
    return 0


def _render_dry_run(args: argparse.Namespace, plan: Any, prepared: Any, python: str, mode: str) -> int:
    if args.json:
        _output.print_json({"target": python, "plan": plan.to_json(), "prepared": prepared.to_json(), "dry_run": True})
        return 0
    from rich.text import Text

    from .plan import render_plan

    render_plan(plan, explain=False)
    console = _output.console()
    width = console.width

    def say(text: str, first: str = "", rest: str = "    ") -> None:
        # Broken at spaces with a hanging indent: no path or URL is cut, nothing wraps to column 0.
        console.print(Text(_output.hanging(text, first=first, rest=rest, width=width)), soft_wrap=True)

    for spec, source in zip(prepared.builds, prepared.sources, strict=True):
        say(f"build {spec.package} {spec.recipe.version} (recipe {spec.recipe.name}) against torch {spec.torch_version}+{spec.variant}:")
        say(f"source: {source}", first="  ")
        for name, value in spec.variables:
            say(f"{name}={value}", first="  ")
        for note in spec.notes:
            say(note, first="  note: ", rest="        ")
    if mode == "install":
        for step in prepared.steps:
            built = " <built wheels>" if prepared.builds and step is prepared.steps[-1] else ""
            # One line, never broken: it is meant to be copied into a shell.
            console.print(Text(f"{python} -m pip install {' '.join(step.args)}{built}"), soft_wrap=True)
    console.print("dry run: nothing was built or installed", markup=False, highlight=False)
    return 0


def handle_install(args: argparse.Namespace) -> int:
    return run_action(args, args.requests, mode="install")


def handle_build(args: argparse.Namespace) -> int:
    return run_action(args, args.requests, mode="build")
