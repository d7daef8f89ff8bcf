"""``cuda-resolve undo --last``: put a target back as it was before an install that was killed.

A cuda-pip install keeps a journal and a stash of the target's files until it finishes or undoes
itself (see :mod:`cuda_resolve.install.stash`). A run killed half-way (SIGKILL, a power cut)
leaves both behind; this command restores the target from the newest such journal. Exit 0 when
the target is back as it was (or there was nothing to undo), 1 when something is still changed.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..install.target import RULE
from . import _output
from ._common import add_json_option

__all__ = ["register"]

#: How long undo waits for a cuda-pip that is installing into the same target.
LOCK_TIMEOUT_S = 10.0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "undo",
        help="put an environment back as it was before an install that was interrupted",
        description="Restore the target environment from the newest journal a killed cuda-pip "
        "install left (packages it replaced are put back from hard links, packages it added are "
        "removed). Exit 0 when the environment is back as it was or there is nothing to undo, 1 "
        "when something is still changed.",
    )
    parser.add_argument(
        "--last",
        action="store_true",
        required=True,
        help="undo the newest install into the target that neither finished nor was undone",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help=f"the target interpreter; the target is: {RULE}",
    )
    add_json_option(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..install.stash import (
        default_journal_dir,
        default_lock_dir,
        pending,
        recover,
        target_lock,
        waiting_for,
    )
    from ..install.target import choose_target

    python = choose_target(args.python).python

    def on_wait(holder: str) -> None:
        _output.error_console().print(
            waiting_for(python, holder), markup=False, highlight=False, soft_wrap=True
        )

    with target_lock(python, default_lock_dir(), timeout=LOCK_TIMEOUT_S, on_wait=on_wait) as prefix:
        journals = [j for j in pending(default_journal_dir()) if j.prefix == prefix]
        if not journals:
            if args.json:
                _output.print_json(
                    {
                        "python": python,
                        "prefix": prefix,
                        "journal": None,
                        "restored": [],
                        "not_restored": [],
                        "kept": None,
                    }
                )
            else:
                _print(f"nothing to undo: no interrupted install into {prefix} left a journal")
            return 0
        journal = journals[0]
        report = recover(journal)
    if args.json:
        _output.print_json(
            {"python": python, "prefix": prefix, "journal": str(journal.path), **report.to_json()}
        )
        return 0 if report.complete else 1
    import time

    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(journal.created))
    _print(f"undoing the install into {prefix} started at {when} (pid {journal.pid})")
    for line in report.restored:
        _print(f"  restored: {line}")
    for line in report.not_restored:
        _print(f"  NOT restored: {line}")
    if not report.restored and not report.not_restored:
        _print("  nothing had changed")
    if report.kept:
        _print(
            f"the stash {report.kept} is kept: run `cuda-resolve undo --last` again once the "
            "cause is fixed"
        )
    return 0 if report.complete else 1


def _print(text: str) -> None:
    _output.console().print(text, markup=False, highlight=False, soft_wrap=True)
