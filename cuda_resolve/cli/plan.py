"""``cuda-resolve plan``: decide what to install for a request on this machine, and say why."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .._printable import printable
from ..redaction import redact_urls
from . import _output
from ._common import ArchListOption, add_environment_options
from ._table import render_table, stderr_width, stdout_width

# What deciding needs (resolver, index model, plan, install) is imported by the handler, after
# the target's probes have been started: they then run while it loads (issue 28).
if TYPE_CHECKING:
    from ..environment import Environment
    from ..index import Index
    from ..index.model import ArchEntry
    from ..plan import Plan


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="decide the ABI-matched builds for a request (downloads nothing)",
        description="Resolve REQ... (e.g. kaolin, 'kaolin==0.14.0', pointnet2_ops, 'torch>=2.1') "
        "for this machine or a --profile, and print the plan. Exit 1 when nothing fits.",
    )
    parser.add_argument(
        "requests", nargs="+", metavar="REQ", help="requirements as pip writes them"
    )
    add_environment_options(parser)
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also list the alternatives that lost and the fact that ruled each out",
    )
    parser.add_argument(
        "--allow-torch-change", action="store_true", help="allow replacing the installed torch"
    )
    parser.add_argument(
        "--strict-driver",
        action="store_true",
        help="require each CUDA toolkit's own driver (no minor-version compatibility)",
    )
    parser.add_argument(
        "--arch-list",
        metavar="LIST",
        action=ArchListOption,
        help="TORCH_CUDA_ARCH_LIST for source builds (e.g. '8.0;8.6'); default: the GPUs here",
    )
    parser.add_argument(
        "--index",
        metavar="DIR",
        type=Path,
        action="append",
        default=[],
        help="an index overlay directory (repeatable; later ones win)",
    )
    parser.add_argument(
        "--accept-name",
        metavar="NAME",
        action="append",
        default=[],
        help="plan NAME although it is a look-alike of a package cuda-resolve curates (as "
        "cuda-pip's --accept-name)",
    )
    parser.add_argument(
        "--keep-stale",
        metavar="NAME",
        action="append",
        default=[],
        help="when torch is replaced, leave NAME (an extension cuda-resolve cannot rebuild) "
        "built for the old torch instead of refusing (as cuda-pip's --keep-stale)",
    )
    parser.set_defaults(handler=handle)


def parse_arch_list(text: str) -> tuple[ArchEntry, ...]:
    from ..errors import UsageError
    from ..index.model import parse_arch_list as parse_entries

    try:
        entries = parse_entries(text)
    except ValueError as exc:
        raise UsageError(
            f"--arch-list {text!r}: {exc}",
            hint="write compute capabilities such as '7.5;8.6;9.0+PTX'",
        ) from None
    if not entries:
        raise UsageError(
            f"--arch-list {text!r} names no architecture", hint="e.g. --arch-list '8.6'"
        )
    return entries


def handle(args: argparse.Namespace) -> int:
    # First, before the modules deciding needs are loaded: the target's probes (its pip facts
    # and distributions, its pip configuration) then run while they load (issue 28).
    if args.profile is None:
        _prefetch_target(args.python)
    from ..install import pip, pipconfig

    try:
        return _decide(args)
    finally:
        pip.forget_prefetched()
        pipconfig.forget_prefetched()


def _decide(args: argparse.Namespace) -> int:
    from ..errors import ResolutionImpossible
    from ..install.run import InstallRequest, decide
    from ..reporting import NullReporter
    from ..resolve import Options
    from ._common import environment_from_args, index_from_args

    options = Options(
        allow_torch_change=args.allow_torch_change,
        strict_driver=args.strict_driver,
        arch_list=parse_arch_list(args.arch_list) if args.arch_list else None,
    )
    index = index_from_args(args)
    env = environment_from_args(args)
    request = InstallRequest(
        requirements=tuple(args.requests),
        resolve=options,
        accept_names=tuple(args.accept_name),
        keep_stale=tuple(args.keep_stale),
    )
    try:
        # The decision cuda-pip install makes (one function), its look-alike name guard
        # included (install=True, no prompt): plan never prints a command cuda-pip refuses.
        plan = decide(request, env, index, reporter=NullReporter(), install=True, confirm=None)
    except ResolutionImpossible as exc:
        if args.explain and not args.json:  # --json carries the reasons in the error object
            render_ruled_out(exc.reasons)
        raise
    plan, incomplete = _completed(plan, env, index)

    command = next_command(args)
    if args.json:
        document = plan.to_json(explain=args.explain)
        document["command"] = command
        if incomplete:
            document["cannot_apply"] = incomplete
        _output.print_json(document)
    else:  # plain text, rich never loaded (issue 28)
        # Which interpreter, and which rule chose it (stderr: not the plan); a profile's is the
        # note saved with it on another machine, not this one's.
        for note in env.notes if args.profile is None else ():
            if note.startswith("target interpreter: "):
                say_plain(note, stream=sys.stderr)
        render_plan(plan, explain=args.explain)
        if incomplete:
            text = f"this plan cannot be carried out as it stands: {incomplete}"
            say_plain(
                _output.hanging(text, first="note: ", rest="      ", width=stdout_width()),
                stream=sys.stderr,
            )
        where = (
            "On that machine, carry it out with"
            if args.profile is not None
            else "Carry it out with"
        )
        # One line at any width: a wrapped command pasted into a shell runs half of itself.
        say_plain(f"{where}:")
        said = shlex.join(command)
        say_plain(f"  {said}")
        if redact_urls(said) != said:
            say_plain(
                "note: a password in the command is shown as ***: put it back before running it, "
                "or keep the login in ~/.netrc and leave it out of the URL",
                stream=sys.stderr,
            )
    return 0


def _prefetch_target(python: str | None) -> None:
    """Start, in the background, the target's probes :func:`_completed` waits for: its pip
    facts and distributions, and its pip configuration where it is not read here (how pip's
    hash-checking mode is learnt) (issue 28)."""
    import os

    from ..errors import CudaResolveError
    from ..install.pip import prefetch_probe
    from ..install.pipconfig import prefetch_config
    from ..install.target import choose_target

    try:
        choice = choose_target(python)
    except CudaResolveError:
        return  # detecting says why, in its turn
    prefetch_config(choice.python, os.environ)
    prefetch_probe(choice.python, os.environ, remembered=True)


def _completed(plan: Plan, env: Environment, index: Index) -> tuple[Plan, str | None]:
    """The complete plan (builds, pip steps: what `cuda-pip install --plan` executes), or the
    decision alone and why it cannot be completed here (a build's pre-flight failed)."""
    import os

    from .._frozen import replace
    from ..config import load_config
    from ..errors import CudaResolveError
    from ..install.options import InstallOptions
    from ..install.run import InstallRequest, checked_hash_mode, complete_for_target
    from ..wheelhouse.store import Wheelhouse

    config = load_config()
    options = InstallOptions(
        torch_index=config.pytorch.url if config.pytorch else None,
        torch_index_option=config.pytorch.pip_option if config.pytorch else "--index-url",
    )
    try:
        # pip's hash-checking mode from its configuration or PIP_*: the plan is made in it, as
        # cuda-pip would.
        options = replace(
            options, hash_mode=checked_hash_mode((), env, InstallRequest(), os.environ)
        )
        return complete_for_target(
            plan,
            env,
            index,
            options,
            wheelhouse=Wheelhouse.default(),
            environ=os.environ,
            remembered=True,
        ), None
    except CudaResolveError as exc:
        return plan, str(exc)


def next_command(args: argparse.Namespace) -> list[str]:
    """The exact command that carries out this plan (on the profile's machine, with --profile)."""
    command = ["cuda-pip", "install", *args.requests]
    if args.python is not None:
        command += ["--python", args.python]
    if args.allow_torch_change:
        command.append("--allow-torch-change")
    if args.strict_driver:
        command.append("--strict-driver")
    if args.arch_list:
        command += ["--arch-list", args.arch_list]
    for folder in args.index:
        command += ["--index", str(folder)]
    for name in args.accept_name:
        command += ["--accept-name", name]
    for name in args.keep_stale:
        command += ["--keep-stale", name]
    return command


#: Beyond this many rows the plan's table is a plain list, one item a line: rich lays a table
#: out at about a millisecond a row, minutes for a plan of 100 000 items (issue 28).
TABLE_ROWS = 200


def say_plain(text: str, *, stream: TextIO | None = None) -> None:
    """``text`` and a line break on stdout (or ``stream``), as a rich print of it without markup
    would show it (redacted, control characters made visible), written at once: linear in the
    text, which a rich print per line of a huge plan is not (issue 28)."""
    (stream or sys.stdout).write(redact_urls(printable(text)) + "\n")


def render_plan(plan: Plan, *, explain: bool) -> None:
    # Copyable output: a URL is never put in a cell that could wrap it. Each gets a number in the
    # table and a line of its own under it; the table wraps its other columns at spaces.
    urls: dict[str, int] = {}  # each URL, by its number in the table
    rows: list[tuple[str, str, str, str, str]] = []
    from packaging.utils import canonicalize_name

    reused = {canonicalize_name(b.spec.package): b for b in plan.builds if b.reused}
    for item in plan.items:
        build = reused.get(canonicalize_name(item.name)) if item.kind == "build" else None
        if build is not None:
            archs = " ".join(build.key.arch_list.split(";"))
            source = f"wheelhouse: {build.key.labelled_version} (archs {archs}), no compile"
        elif item.kind == "build":
            # Spaces, not the list's ";": a narrow column breaks between archs, not inside one.
            archs = " ".join((item.arch_list or "").split(";"))
            source = f"source build, recipe {item.recipe}, nvcc {item.toolkit}, archs {archs}"
        elif item.kind == "installed":
            source = "already installed"
        else:
            source = item.url or item.find_links or item.index or ""
            if source and " " not in source:
                # One number for each place, however many items come from it.
                source = f"[{urls.setdefault(source, len(urls) + 1)}]"
        rows.append((item.name, item.version, item.variant or "", item.kind, source))
    rows.extend((text, "", "", "pip", "passed through to pip") for text in plan.pass_through)
    width = stdout_width()
    if width >= 80 and len(rows) <= TABLE_ROWS:
        # Cells are text as given ("requests[socks]" keeps its extras); a single token wider than
        # its column is folded (never a URL here: those are numbered, each on a line below).
        cells = [tuple(redact_urls(printable(cell, one_line=True)) for cell in row) for row in rows]
        headers = ("package", "version", "variant", "kind", "from")
        sys.stdout.write(render_table("Plan", headers, cells, width))
    else:
        # Too narrow for five columns, or too many rows for a table: one item per line, broken
        # at spaces only.
        say_plain("Plan:")
        for name, version, variant, kind, source in rows:
            line = " ".join(
                x
                for x in (name, version, f"({variant})" if variant else "", f"{kind}:", source)
                if x
            )
            say_plain(_output.hanging(line, first="  ", rest="      ", width=width))
    # The lines below are plain text: written as they are, linear however many (issue 28).
    for url, number in urls.items():
        say_plain(f"  [{number}] {url}")
    say_plain("Why:")
    for reason in plan.reasons:
        say_plain(_output.hanging(reason, first="  - ", rest="    ", width=width))
    for build in reused.values():
        line = f"{build.spec.package}: reused, not built: {build.reused}"
        say_plain(_output.hanging(line, first="  - ", rest="    ", width=width))
    if explain and plan.alternatives:
        say_plain("Alternatives that also fit this machine:")
        for alternative in plan.alternatives:
            say_plain(_output.hanging(alternative.reason, first="  - ", rest="    ", width=width))
    if explain and plan.rejected:
        say_plain("Ruled out:")
        for line in plan.explain_lines():
            first = "  " if line.startswith("  ...") else "  - "
            say_plain(_output.hanging(line.strip(), first=first, rest="    ", width=width))


def render_ruled_out(reasons: tuple[str, ...], *, limit: int = 40) -> None:
    """``plan --explain`` on a failure: what was ruled out, most telling first, on stderr above
    the one ``error:`` line (the error boundary prints that)."""
    import sys

    if not reasons:
        return
    width = stderr_width()
    lines = ["Ruled out:"]
    lines.extend(
        _output.hanging(reason, first="  - ", rest="    ", width=width)
        for reason in reasons[:limit]
    )
    if len(reasons) > limit:
        lines.append(f"  ... and {len(reasons) - limit} more (--json lists them all)")
    sys.stderr.write(redact_urls("\n".join(lines) + "\n"))
