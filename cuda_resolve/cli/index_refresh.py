"""``cuda-resolve index refresh [torch|kaolin]``: re-derive index entries from the real indexes.

Registered under the ``index`` group by :func:`register_refresh` (``cli/index.py`` passes its
subparsers). The work is :mod:`cuda_resolve.refresh`; this module parses arguments, builds
the HTTP client from the configuration, draws the progress the refresh reports (on a terminal
only), and prints what changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.text import Text

from . import _output
from ._common import add_json_option

__all__ = ["handle_refresh", "register_refresh"]


def register_refresh(index_subparsers: Any) -> None:
    parser = index_subparsers.add_parser(
        "refresh",
        help="re-derive torch (or kaolin) entries from PyPI and the wheel indexes; "
        "write an overlay",
        description="Read PyPI's JSON API and each release's wheel metadata (PEP 658 files, else "
        "byte ranges of the wheel: never a whole wheel), and the PyTorch index page where it is "
        "reachable; print what differs from the index in use and write the differing entries as "
        "an overlay (default: the user index directory, which the index reads automatically). "
        "An index that cannot be reached is reported; the refresh goes on with the others.",
    )
    parser.add_argument(
        "what",
        nargs="?",
        choices=("torch", "kaolin"),
        default="torch",
        help="which entries to refresh (default: torch)",
    )
    parser.add_argument(
        "--versions",
        nargs="+",
        metavar="VERSION",
        help="only these releases (torch: 2.5.1 ...; kaolin: 0.17.0 ...)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        metavar="DIR",
        help="the overlay directory to write (default: the user index directory)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the changes and the overlay; write nothing"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="refetch everything: no HTTP cache and no remembered wheel readings",
    )
    add_json_option(parser)
    parser.set_defaults(handler=handle_refresh)


def _client(args: argparse.Namespace) -> Any:
    from ..net import client_from_config

    return client_from_config(use_cache=not args.no_cache)


def handle_refresh(args: argparse.Namespace, *, client: Any = None) -> int:
    from ..index.load import load_index, user_index_dir

    output: Path = args.output if args.output is not None else user_index_dir()
    extra = [output] if output.is_dir() else []
    index = load_index(extra, include_shipped=True, include_user=True)
    shipped = load_index(include_shipped=True, include_user=False)
    owned = client is None
    http = _client(args) if owned else client
    err = _output.error_console()
    quiet = args.json or not err.is_terminal
    drawn = [False]

    def progress(step: str, done: int, total: int) -> None:
        if quiet:
            return
        line = f"[{done}/{total}] reading {step}"[: max(10, err.width - 1)]
        err.file.write(f"\r{line}\x1b[K")  # one line, redrawn in place
        err.file.flush()
        drawn[0] = True

    try:
        if args.what == "kaolin":
            from ..refresh.kaolin import refresh_kaolin

            result: Any = refresh_kaolin(
                http,
                index=index,
                shipped=shipped,
                output_dir=output,
                versions=args.versions,
                dry_run=args.dry_run,
                progress=progress,
            )
        else:
            from ..refresh import default_reading_cache
            from ..refresh.torch import refresh_torch

            result = refresh_torch(
                http,
                index=index,
                shipped=shipped,
                output_dir=output,
                versions=args.versions,
                dry_run=args.dry_run,
                progress=progress,
                readings=None if args.no_cache else default_reading_cache(),
            )
    finally:
        if drawn[0]:
            err.file.write("\r\x1b[K")
            err.file.flush()
        if owned:
            http.close()
    if args.json:
        _output.print_json(_as_json(result, output, args))
    else:
        _render(result, output, args)
    # Nothing could be read at all (every page unreachable): the refresh did not do its job.
    return 1 if result.facts and len(_unchecked(result)) == len(result.facts) else 0


def _unchecked(result: Any) -> list[str]:
    """Releases none of whose facts could be compared (kaolin: pages of theirs unread)."""
    return [str(f.version) for f in result.facts if getattr(f, "unread", ())]


def _as_json(result: Any, output: Path, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "what": args.what,
        "read": [str(f.version) for f in result.facts if str(f.version) not in _unchecked(result)],
        "unchecked": _unchecked(result),
        "changes": [
            {"version": c.version, "key": c.key, "old": c.old, "new": c.new} for c in result.changes
        ],
        "unreachable": [{"url": u.url, "error": u.error} for u in result.unreachable],
        "problems": [p for f in result.facts for p in f.problems],
        "overlay": str(result.overlay) if result.overlay else None,
        "overlay_dir": str(output),
        "overlay_releases": list(result.overlay_releases),
        "dry_run": args.dry_run,
        "document": result.document if args.dry_run else None,
    }


def _render(result: Any, output: Path, args: argparse.Namespace) -> None:
    console = _output.console()

    def line(text: str) -> None:  # one fact per line: URLs and paths are never wrapped
        console.print(Text(text), soft_wrap=True)

    unchecked = _unchecked(result)
    count = len(result.facts) - len(unchecked)
    line(f"read {count} {args.what} release{'s' if count != 1 else ''}")
    for item in result.unreachable:
        line(f"unreachable: {item.url}: {item.error} (continuing with what was reachable)")
    for facts in result.facts:
        unread = getattr(facts, "unread", ())
        if unread:
            line(
                f"not checked: {args.what} {facts.version}: {len(unread)} of its pages could not "
                "be read; its entry is left as it is"
            )
        for problem in facts.problems:
            line(f"problem: {args.what} {facts.version}: {problem}")
    if result.changes:
        line("changes against the index in use:")
        for change in result.changes:
            line(f"  {change.describe()}")
    elif count:
        line("no changes: the index in use agrees with what was read")
    else:
        line("nothing was checked: no page could be read")
    if args.dry_run:
        if result.document:
            line(
                f"dry run: would write {output / result.file_name} with "
                f"{', '.join(result.overlay_releases)}:"
            )
            sys.stdout.write(result.document)
        elif count:
            line("dry run: no overlay needed (everything read agrees with the shipped index)")
        else:
            line("dry run: nothing to write")
    elif result.overlay is not None:
        written = len(result.overlay_releases)
        line(
            f"wrote {result.overlay} ({written} {'entry' if written == 1 else 'entries'}: "
            f"{', '.join(result.overlay_releases)})"
        )
    elif count:
        line(f"no overlay needed in {output}: everything read agrees with the shipped index")
    else:
        line(f"nothing written to {output}")
