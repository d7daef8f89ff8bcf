"""``cuda-resolve sync pylock.toml [--name NAME|auto] [--check] [--exact] [--dry-run]``.

Installs exactly what a lock holds for one profile into the target (the install target rule,
``install.target.RULE``):
nothing is resolved, every file's sha256 is checked before anything is installed, and the
executor undoes a failed install. ``--check`` changes nothing and exits 1 on drift. After
installing, torch and the curated extensions are imported (``--no-verify`` skips it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..install.target import RULE
from . import _output

if TYPE_CHECKING:
    from ..lock.drift import Kept
    from ..lock.sync import SyncResult


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sync",
        help="install exactly what a pylock.toml holds for this machine's profile "
        "(or check for drift)",
        description="Install exactly what LOCK (written by `cuda-resolve lock`) holds for one "
        "profile: --name NAME, or --name auto for the one profile that fits this machine. Every "
        "file's sha256 is checked before anything is installed; a failed install is undone. "
        "--check changes nothing and exits 1 on drift.",
    )
    parser.add_argument(
        "lock",
        metavar="LOCK",
        type=Path,
        nargs="?",
        default=Path("pylock.toml"),
        help="the lock file (default: pylock.toml)",
    )
    parser.add_argument(
        "--name",
        metavar="NAME",
        default="auto",
        help="the profile to install (default: auto, the one that fits this machine)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help=f"the environment to sync; the target is: {RULE}",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; report drift per package and exit 1 when there is any",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="also remove what the lock does not name (never pip, setuptools, wheel or uv; where "
        "the target holds cuda-resolve, never it nor what it needs to run: those are kept and "
        "said)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what would be installed and removed, and the pip commands; change nothing",
    )
    parser.add_argument(
        "--installer",
        choices=("auto", "pip", "uv"),
        default="auto",
        help="what installs the locked files: auto (uv where it is installed: "
        "cuda-resolve[fast]; else pip), uv or pip",
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the import check after installing (torch and the curated extensions are "
        "imported in the target by default; a failed import undoes the sync)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON report")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..lock.sync import SyncRequest, sync

    if args.check:  # a check changes nothing: the options of a change would be ignored silently
        acting = [
            flag
            for flag, given in (
                ("--dry-run", args.dry_run),
                ("--installer", args.installer != "auto"),
                ("--no-verify", args.no_verify),
            )
            if given
        ]
        if acting:
            raise UsageError(
                f"--check changes nothing: {' '.join(acting)} would be ignored beside it",
                hint="drop --check to sync, or the other option(s) to check: cuda-resolve sync "
                + " ".join(_quoted_basics(args))
                + " --check",
            )
    request = SyncRequest(
        lock=args.lock,
        name=args.name,
        python=args.python,
        check=args.check,
        exact=args.exact,
        dry_run=args.dry_run,
        installer=args.installer,
        verify=not args.no_verify,
    )
    reporter = None
    if not args.check:  # checking needs no acting layer, nor the terminal reporter
        from ..reporting import RedactingReporter
        from ._act import TerminalReporter

        reporter = RedactingReporter(TerminalReporter(quiet=args.json))
    result = sync(request, reporter=reporter)
    if args.json:
        _output.print_json(result.to_json())
    elif args.check:
        _render_check(result)
    elif args.dry_run:
        _render_dry_run(result)
    else:
        _render_sync(result)
    return 1 if args.check and result.drifted else 0


def _quoted_basics(args: argparse.Namespace) -> list[str]:
    """LOCK, --name, --python, --exact and --json as given (what a check keeps), shell-quoted:
    the start of a hint's command."""
    import shlex

    words = [str(args.lock), "--name", args.name]
    if args.python:
        words += ["--python", args.python]
    words += [flag for flag, given in (("--exact", args.exact), ("--json", args.json)) if given]
    return [shlex.quote(word) for word in words]


def _render_check(result: SyncResult) -> None:
    from ..lock.sync import SATISFIED_NOTE

    _render(result)
    _say_kept(result.kept, "keeps")
    _say(
        f"{len(result.drifted)} package(s) differ from the lock"
        if result.drifted
        else f"{result.target} matches profile {result.profile} of {result.request.lock}"
    )
    _say(f"note: {SATISFIED_NOTE}")


def _render_dry_run(result: SyncResult) -> None:
    _render(result)
    for name in result.to_remove:
        _say(f"would remove {name}")
    _say_kept(result.kept, "would keep")
    for w in result.to_install:
        _say(f"would install {w.name} {w.version} ({w.file}, sha256 {w.sha256[:12]}...)")
    for command, installer in zip(result.pip_runs, result.installers, strict=False):
        _say(f"would run ({installer}): " + " ".join(command))
        kept = [command[i + 1] for i, word in enumerate(command[:-1]) if word == "-r"]
        for path in kept:
            if Path(path).is_file():  # the dry run's own -r file: it stays for the command
                _say(f"its -r file stays at {path} (cached files by path, the others by URL)")


def _render_sync(result: SyncResult) -> None:
    if not result.to_install and not result.to_remove:
        _say(f"{result.target} already matches profile {result.profile} of {result.request.lock}")
        return
    # In the order they ran: the install, its import check, then --exact's removals.
    _say(f"profile {result.profile} of {result.request.lock} -> {result.target}")
    was = {d.name: d.installed for d in result.packages}
    for w in result.to_install:
        before = was.get(w.name)
        _say(f"installed {w.name} {w.version}" + (f" (was {before})" if before else ""))
    if result.installers:
        _say(f"installed by: {', '.join(dict.fromkeys(result.installers))}")
    if result.verified:
        _say(f"imports checked: {', '.join(result.verified)}")
    elif not result.request.verify and result.to_install:
        _say("import check skipped (--no-verify)")
    elif result.to_install:
        _say("import check not needed: neither torch nor an extension cuda-resolve curates changed")
    for name in result.to_remove:
        _say(f"removed {name}" + (f" {was[name]}" if was.get(name) else ""))
    _say_kept(result.kept, "kept")
    if result.timings:  # where the time went, naming the engine that ran: "uv install"
        shown = ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in result.timings)
        _say(f"took {sum(seconds for _, seconds in result.timings):.1f} s ({shown})")


def _say_kept(kept: Sequence[Kept], verb: str) -> None:
    """--exact's promise made visible: what it leaves although the lock does not name it."""
    for item in kept:
        _say(f"--exact {verb} {item.name} {item.version} ({item.why}; not in the lock)")


def _say(text: str) -> None:
    """One line on stdout, redacted, control characters shown as escapes; plain text (rich's
    import and table rendering cost more than a whole ``sync --check`` may take on a busy node)."""
    from .._printable import printable
    from ..redaction import redact_urls

    sys.stdout.write(printable(redact_urls(text), one_line=True) + "\n")


def _render(result: SyncResult) -> None:
    for note in result.notes:
        _say(f"note: {note}")
    rows = [
        ("package", "locked", "installed", "state"),
        *((d.name, d.locked or "-", d.installed or "-", d.state) for d in result.packages),
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    _say(f"profile {result.profile} -> {result.target}")
    for row in rows:
        _say(
            "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
        )
