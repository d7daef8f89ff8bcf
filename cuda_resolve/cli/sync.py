"""``cuda-resolve sync pylock.toml [--name NAME|auto] [--check] [--exact] [--dry-run]``.

Installs exactly what a lock holds for one profile into the target (the install target rule:
``--python``, else the active virtualenv, else the active conda env, else python3 on PATH):
nothing is resolved, every file's sha256 is checked before anything is installed, and the
executor undoes a failed install. ``--check`` changes nothing and exits 1 on drift.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _output

if TYPE_CHECKING:
    from ..lock.select import Wanted


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sync",
        help="install exactly what a pylock.toml holds for this machine's profile (or check for drift)",
        description="Install exactly what LOCK (written by `cuda-resolve lock`) holds for one profile: --name NAME, or --name auto for the one profile that fits this machine. Every file's sha256 is checked before anything is installed; a failed install is undone. --check changes nothing and exits 1 on drift.",
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
        help="the environment to sync (default: the active virtualenv, else the active conda env, else python3 on PATH)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; report drift per package and exit 1 when there is any",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="also remove what the lock does not name (never pip, setuptools, wheel or cuda-resolve)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what would be installed and removed, and the pip commands; change nothing",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON report")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import os
    import tempfile

    from ..detect._run import Background
    from ..index import default_cuda_facts
    from ..install.pip import pip_facts_and_distributions
    from ..install.target import choose_target
    from ..lock.read import read_lock
    from ..lock.select import choose_profile, wanted_files
    from ..lock.sync import drift
    from ._common import detect_target

    environ = dict(os.environ)
    _load_for_workers()
    # Three waits at once: the lock is read and validated while the target's interpreter
    # answers twice (its facts for the profile, its installed distributions). Plain threads:
    # importing concurrent.futures costs more than the overlap saves.
    lock_job = Background(lambda: read_lock(args.lock))
    python_now = choose_target(args.python).python
    installed_job = Background(lambda: pip_facts_and_distributions(python_now, environ))
    try:
        env, choice = detect_target(args.python)
    finally:
        lock = lock_job.result()  # a lock that cannot be read is the first thing to say
    python = env.python.executable or choice.python
    probed = installed_job.result()
    installed = probed[1]
    profile = choose_profile(lock, env, default_cuda_facts(), args.name)
    wanted = wanted_files(lock, profile, env)
    if (
        env.torch is not None
        and installed.get("torch") == env.torch.base_version != env.torch.version
    ):
        # PyPI's torch carries no local label in its metadata (2.11.0), while its version.py names
        # the build (2.11.0+cu130): that is the build a lock from the PyTorch index names.
        installed = {**installed, "torch": env.torch.version}
    report = drift(wanted, installed, exact=args.exact)
    to_install = [w for w, d in zip(wanted, report, strict=False) if d.state != "ok"]
    to_remove = [d.name for d in report if d.state == "not locked"]
    document: dict[str, Any] = {
        "lock": str(args.lock),
        "profile": profile,
        "target": python,
        "notes": list(lock.notes),
        "packages": [d.to_json() for d in report],
    }
    satisfied_note = "an installed package with the locked name, version and local label counts as installed; its files' hashes were not re-read"
    if args.check:
        drifted = [d for d in report if d.state != "ok"]
        document.update({"drift": bool(drifted), "note": satisfied_note})
        if args.json:
            _output.print_json(document)
        else:
            _render(report, profile, python, lock.notes)
            _say(
                f"{len(drifted)} package(s) differ from the lock"
                if drifted
                else f"{python} matches profile {profile} of {args.lock}"
            )
            _say(f"note: {satisfied_note}")
        return 1 if drifted else 0
    # Installing (or saying what would be installed) needs the acting layers; checking does not.
    from ..config import load_config
    from ..install.options import InstallOptions
    from ..install.transaction import execute, planned_commands
    from ..lock.sync import cache_path, cached_files, fetch_all, remove_extras, sync_plan
    from ..paths import cache_root, new_log_path
    from ..reporting import RedactingReporter
    from ._act import TerminalReporter

    reporter = RedactingReporter(TerminalReporter(quiet=args.json))
    config = load_config()
    with tempfile.TemporaryDirectory(prefix="cuda-resolve-sync-") as scratch:
        requirements = Path(scratch) / "locked.txt"
        if args.dry_run:
            from ..wheelhouse.store import Wheelhouse

            paths = {w.name: cache_path(cache_root() / "lock-wheels", w) for w in to_install}
            plan = sync_plan(env, to_install, paths, requirements)
            commands = planned_commands(plan, python, Wheelhouse.default())
            document.update(
                {
                    "install": [w.name + "==" + w.version for w in to_install],
                    "remove": to_remove,
                    "pip_runs": commands,
                    "dry_run": True,
                }
            )
            if args.json:
                _output.print_json(document)
            else:
                _render(report, profile, python, lock.notes)
                for name in to_remove:
                    _say(f"would remove {name}")
                for w in to_install:
                    _say(
                        f"would install {w.name} {w.version} ({w.file}, sha256 {w.sha256[:12]}...)"
                    )
                for command in commands:
                    _say("would run: " + " ".join(command))
            return 0
        if to_remove:
            reporter.step(f"--exact: will remove {', '.join(to_remove)} after installing")
        paths, missing = cached_files(to_install, cache_root() / "lock-wheels")
        if missing:  # the HTTP layer (requests and all) is loaded only when something is fetched
            from ..net.factory import client_from_config

            with client_from_config(config) as client:
                paths.update(fetch_all(missing, client, cache_root() / "lock-wheels", reporter))
        plan = sync_plan(env, to_install, paths, requirements, imports=_imports_of(to_install))
        result = None
        if plan.steps:
            # After installing, the torch and curated extensions it installed must import (else undone).
            # One --no-deps pip run over the locked files: only those names can change.
            options = InstallOptions(replaces=tuple(w.name for w in to_install))
            result = execute(
                plan,
                env,
                wheelhouse=None,
                options=options,
                environ=environ,
                reporter=reporter,
                log_path=new_log_path("sync"),
                probed=probed,
            )
        if to_remove:
            remove_extras(python, to_remove, environ, new_log_path("sync-remove"), reporter)
    document.update(
        {
            "installed": [w.name + "==" + w.version for w in to_install],
            "removed": to_remove,
            "pip_runs": [list(c) for c in result.pip_runs] if result else [],
        }
    )
    if args.json:
        _output.print_json(document)
    else:
        if not to_install and not to_remove:
            _say(f"{python} already matches profile {profile} of {args.lock}")
        for name in to_remove:
            _say(f"removed {name}")
        for w in to_install:
            _say(f"installed {w.name} {w.version}")
    return 0


def _load_for_workers() -> None:
    """Load what the worker threads run, here in the main thread: a module imported by two
    threads at once can be met half-initialised where imports are circular."""
    import contextlib
    import encodings.utf_8_sig  # noqa: F401 - how a lock's text is decoded

    from .. import _bounded, _toml  # noqa: F401

    with contextlib.suppress(ImportError):  # read_lock says which packaging is needed
        import packaging.pylock  # noqa: F401


def _say(text: str) -> None:
    """One line on stdout, redacted, control characters shown as escapes; plain text (rich's
    import and table rendering cost more than a whole ``sync --check`` may take on a busy node)."""
    from .._printable import printable
    from ..redaction import redact_urls

    sys.stdout.write(printable(redact_urls(text), one_line=True) + "\n")


def _render(report: list[Any], profile: str, python: str, notes: tuple[str, ...]) -> None:
    for note in notes:
        _say(f"note: {note}")
    rows = [
        ("package", "locked", "installed", "state"),
        *((item.name, item.locked or "-", item.installed or "-", item.state) for item in report),
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    _say(f"profile {profile} -> {python}")
    for row in rows:
        _say(
            "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
        )


def _imports_of(installed: Sequence[Wanted]) -> tuple[str, ...]:
    """The modules to import after a sync: torch and the extensions the index curates."""
    from ..index import default_index

    index = default_index()
    found: list[str] = []
    for wanted in installed:
        package = index.package(wanted.name)
        if wanted.name == "torch":
            found.append("torch")
        elif package is not None:
            found.append(package.import_name)
    return tuple(dict.fromkeys(found))
