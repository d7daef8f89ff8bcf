"""``cuda-resolve wheelhouse list | prune | path | publish``: the built wheels kept for the next
install, and their upload to a lab's index server (pypiserver, devpi)."""

from __future__ import annotations

import argparse
import math
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ..errors import UsageError
from . import _output
from ._common import add_json_option

__all__ = ["handle_list", "handle_path", "handle_prune", "handle_publish", "register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "wheelhouse",
        help="list and prune the wheels cuda-resolve built (a PEP 503 folder pip can install from)",
        description="Built wheels, keyed by their full ABI (package, version, torch and CUDA "
        "variant, Python, platform, arch list, recipe). Its location: --wheelhouse, else "
        "$CUDA_RESOLVE_WHEELHOUSE, else the config file's `wheelhouse`, else cuda-resolve's "
        "cache folder.",
    )
    parser.set_defaults(handler=_no_subcommand, wheelhouse_parser=parser)
    sub = parser.add_subparsers(
        dest="wheelhouse_command", metavar="SUBCOMMAND", parser_class=type(parser)
    )

    p_list = sub.add_parser(
        "list", help="list the wheels: package, labelled version, ABI, size, created, path"
    )
    _add_location(p_list)
    p_list.set_defaults(handler=handle_list)

    p_prune = sub.add_parser(
        "prune",
        help="remove wheels: by package, by age, or all (one selector at least)",
        description="Remove the selected wheels and refresh the index pages. --package and "
        "--older-than combine (both must match); --all selects everything. A wheel that a lock "
        "names (by file name or sha256) is never removed: the locks read are the config file's "
        "lock_paths, each --keep-locked, and the pylock.toml / pylock.*.toml in the current "
        "folder; a lock that cannot be read stops the prune.",
    )
    p_prune.add_argument(
        "--package",
        metavar="NAME",
        action="append",
        default=[],
        help="wheels of this package (repeatable)",
    )
    p_prune.add_argument(
        "--older-than", metavar="DAYS", help="wheels created more than DAYS days ago"
    )
    p_prune.add_argument("--all", action="store_true", help="every wheel")
    p_prune.add_argument(
        "--keep-locked",
        metavar="LOCK",
        action="append",
        default=[],
        type=Path,
        help="keep every wheel this pylock.toml names (a file, or a folder of "
        "pylock*.toml; repeatable)",
    )
    p_prune.add_argument(
        "--dry-run",
        action="store_true",
        help="say what would be removed and what locks keep; remove nothing",
    )
    _add_location(p_prune)
    p_prune.set_defaults(handler=handle_prune)

    p_path = sub.add_parser(
        "path", help="print the wheelhouse folder (with --json: also where it came from)"
    )
    _add_location(p_path)
    p_path.set_defaults(handler=handle_path)

    p_publish = sub.add_parser(
        "publish",
        help="upload the built wheels to the lab's index server (pypiserver, devpi)",
        description="Upload each wheel (with its key in .dist-info) through the legacy upload "
        "API. --to: the index's upload URL (https://host/ for pypiserver, "
        "https://host/USER/INDEX/ for devpi) or a ~/.pypirc section; by default the configured "
        "wheelhouse_url less its simple/. Credentials: the URL, ~/.pypirc, ~/.netrc, keyring; "
        "never printed. A wheel the server already has is no error.",
    )
    p_publish.add_argument(
        "--to", metavar="URL|NAME", help="the index's upload URL, or a ~/.pypirc section name"
    )
    p_publish.add_argument(
        "--package",
        metavar="NAME",
        action="append",
        default=[],
        help="only wheels of this package (repeatable)",
    )
    _add_location(p_publish)
    p_publish.set_defaults(handler=handle_publish)


def _add_location(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wheelhouse",
        metavar="DIR",
        type=Path,
        help="this wheelhouse instead of the configured one",
    )
    add_json_option(parser)


def _no_subcommand(args: argparse.Namespace) -> int:
    args.wheelhouse_parser.print_help()
    return 2


def _wheelhouse(args: argparse.Namespace) -> Any:
    from ..wheelhouse import Wheelhouse

    if args.wheelhouse is not None:
        if args.wheelhouse.exists() and not args.wheelhouse.is_dir():  # bad input: exit 2
            raise UsageError(
                f"--wheelhouse {args.wheelhouse}: not a folder",
                hint="give the wheelhouse's folder (`cuda-resolve wheelhouse path` names the "
                "configured one)",
            )
        return Wheelhouse(args.wheelhouse, origin="--wheelhouse")
    return Wheelhouse.default()


def _say(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"  # pragma: no cover - the loop always returns


def _entry_line(entry: Any) -> str:
    key = entry.key
    return (
        f"{key.package} {entry.version}  torch {key.torch} {key.variant}  {key.python_tag} "
        f"{key.platform}  archs {key.arch_list or '-'}  {_size(entry.size)}  {entry.created}"
    )


# -- path -------------------------------------------------------------------------------------


def handle_path(args: argparse.Namespace) -> int:
    house = _wheelhouse(args)
    if args.json:
        _output.print_json(
            {
                "root": str(house.root),
                "origin": house.origin,
                "index_url": house.simple_dir.as_uri(),
                "find_links": str(house.find_links_page),
            }
        )
    else:
        _say(str(house.root))
    return 0


# -- list -------------------------------------------------------------------------------------


def handle_list(args: argparse.Namespace) -> int:
    house = _wheelhouse(args)
    entries, problems = house.scan()
    exists = house.root.is_dir()
    if args.json:
        _output.print_json(
            {
                "root": str(house.root),
                "origin": house.origin,
                "exists": exists,
                "entries": [entry.to_json() for entry in entries],
                "total_size": sum(entry.size for entry in entries),
                "problems": problems,
            }
        )
        return 0
    _say(f"wheelhouse: {house.root} (from {house.origin})")
    for entry in entries:
        _say(_entry_line(entry))
        _say(f"  {entry.path}")
    for problem in problems:
        _say(f"note: {problem}")
    if entries:
        count = len(entries)
        _say(f"{count} wheel{'s' if count != 1 else ''}, {_size(sum(e.size for e in entries))}")
    elif not exists:  # a typo in --wheelhouse or the variable, or a wheelhouse never built into
        _say(
            f"{house.root} does not exist: no wheels there (a build creates it; check the path if "
            "you expected wheels)"
        )
    elif problems:
        count = len(problems)
        entries_are = "1 entry above is" if count == 1 else f"{count} entries above are"
        _say(f"no usable wheel: {entries_are} not")
    else:
        _say("no wheels yet (cuda-resolve builds put them here)")
    return 0


# -- prune ------------------------------------------------------------------------------------


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        days = math.nan
    if math.isnan(days) or math.isinf(days) or days < 0:
        raise UsageError(
            f"wheelhouse prune --older-than {text!r}: expected a number of days, 0 or more",
            hint="for example --older-than 30 (wheels created more than 30 days ago)",
        )
    return days


def _lock_places(args: argparse.Namespace) -> list[tuple[Path, str]]:
    """The places named for locks, each with where it came from: the config file's
    ``lock_paths`` (relative to that file), then each ``--keep-locked``."""
    from ..config import load_config

    config = load_config()
    places = [(path, f"lock_paths in {config.path}") for path in config.lock_paths]
    places += [(path, "--keep-locked") for path in args.keep_locked]
    return places


def _is_lock_name(name: str) -> bool:
    """PEP 751's file names: ``pylock.toml`` and ``pylock.NAME.toml``."""
    return name == "pylock.toml" or (
        name.startswith("pylock.") and name.endswith(".toml") and len(name) > len("pylock..toml")
    )


def _locks_in(folder: Path) -> list[Path]:
    try:
        return sorted(
            child for child in folder.iterdir() if _is_lock_name(child.name) and child.is_file()
        )
    except OSError as exc:
        raise UsageError(
            f"wheelhouse prune: cannot read the folder {folder} for locks: {exc.strerror or exc}; "
            "nothing was removed",
            hint="make it readable, or take it out of lock_paths / --keep-locked",
        ) from None


def _find_locks(args: argparse.Namespace) -> list[tuple[Path, str]]:
    """Every lock file to honour, once each, with where it came from. A named place that does
    not exist stops the prune: the wheels its lock names cannot be told apart from the others."""
    found: dict[Path, tuple[Path, str]] = {}
    for place, origin in _lock_places(args):
        path = place.expanduser()
        if path.is_dir():
            files = _locks_in(path)
        elif path.exists():
            files = [path]
        else:
            where = "the config file" if origin.startswith("lock_paths") else "the command line"
            raise UsageError(
                f"wheelhouse prune: the lock {path} ({origin}) does not exist; nothing was removed",
                hint=f"restore the lock, or take it off {where}: prune keeps the wheels every "
                "named lock uses",
            )
        for file in files:
            found.setdefault(file.absolute(), (file, origin))
    for file in _locks_in(Path.cwd()):
        found.setdefault(file.absolute(), (file, "the current folder"))
    return list(found.values())


def _read_locks(locks: list[tuple[Path, str]]) -> dict[str, Any]:
    from ..errors import CudaResolveError
    from ..lock.read import read_locked_files

    read: dict[str, Any] = {}
    for path, origin in locks:
        try:
            read[str(path)] = read_locked_files(path)
        except CudaResolveError as exc:
            raise type(exc)(
                f"wheelhouse prune: the lock {path} ({origin}) cannot be read, so nothing was "
                f"removed: {exc.message}",
                hint="fix or restore the lock, or take it off "
                f"{'lock_paths' if origin.startswith('lock_paths') else origin}; "
                f"{exc.hint or ''}".rstrip("; "),
            ) from None
    return read


def handle_prune(args: argparse.Namespace) -> int:
    from ..wheelhouse.store import parse_created, referenced_by_locks

    if args.all and (args.package or args.older_than is not None):
        raise UsageError(
            "wheelhouse prune --all selects every wheel; it cannot be combined with --package or "
            "--older-than",
            hint="drop --all to prune by package or age",
        )
    if not (args.all or args.package or args.older_than is not None):
        raise UsageError(
            "wheelhouse prune needs a selector: nothing was removed",
            hint="give --package NAME, --older-than DAYS, or --all (add --dry-run to see "
            "what would go)",
        )
    cutoff: datetime | None = None
    if args.older_than is not None:
        cutoff = datetime.now(timezone.utc) - timedelta(days=_days(args.older_than))
    wanted = {canonicalize_name(name) for name in args.package}
    house = _wheelhouse(args)
    selected = []
    for entry in house.entries():
        if wanted and entry.key.canonical_package not in wanted:
            continue
        if cutoff is not None:
            created = parse_created(entry.created)
            if created is None or created >= cutoff:
                continue
        selected.append(entry)
    locks = _find_locks(args)
    named = referenced_by_locks(selected, _read_locks(locks))
    kept = [entry for entry in selected if entry.path in named]
    selected = [entry for entry in selected if entry.path not in named]
    if not args.dry_run:
        for entry in selected:
            house.remove(entry)
    freed = sum(entry.size for entry in selected)
    unmatched = sorted(
        wanted - {entry.key.canonical_package for entry in house.entries() + selected}
    )
    if args.json:
        _output.print_json(
            {
                "root": str(house.root),
                "dry_run": args.dry_run,
                "removed": [entry.to_json() for entry in selected],
                "freed_bytes": freed,
                "unknown_packages": unmatched,
                "kept_by_locks": [
                    {**entry.to_json(), "locks": [ref.to_json() for ref in named[entry.path]]}
                    for entry in kept
                ],
                "locks": [{"path": str(path), "from": origin} for path, origin in locks],
            }
        )
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for path, origin in locks:
        _say(f"lock {path} ({origin}): its wheels are kept")
    for entry in kept:
        refs = ", ".join(f"{ref.lock} ({ref.match})" for ref in named[entry.path])
        _say(f"kept {_entry_line(entry)}: named by {refs}")
    for entry in selected:
        _say(f"{verb} {_entry_line(entry)}")
    for name in unmatched:
        _say(f"note: the wheelhouse has no wheels of {name}")
    count = len(selected)
    _say(
        f"{verb} {count} wheel{'s' if count != 1 else ''}, "
        f"{'would free' if args.dry_run else 'freed'} {_size(freed)} in {house.root}"
    )
    return 0


# -- publish ----------------------------------------------------------------------------------


def handle_publish(args: argparse.Namespace) -> int:
    import os

    from ..redaction import redact
    from ..wheelhouse.publish import (
        default_pypirc,
        find_credentials,
        publish_entries,
        resolve_target,
    )
    from ..wheelhouse.served import served_index_from

    house = _wheelhouse(args)
    served = served_index_from(os.environ) if args.to is None else None
    pypirc = default_pypirc(os.environ)
    url, section = resolve_target(args.to, served_url=served.url if served else None, pypirc=pypirc)
    credentials = find_credentials(
        url, section=section, pypirc=pypirc, netrc_file=None, environ=os.environ
    )
    wanted = {canonicalize_name(name) for name in args.package}
    entries = [e for e in house.entries() if not wanted or e.key.canonical_package in wanted]
    shown = redact(url)
    if not args.json:
        who = (
            f"as {credentials.username!r} (from {credentials.source})"
            if credentials
            else "without credentials"
        )
        _say(
            f"publishing {len(entries)} wheel{'s' if len(entries) != 1 else ''} from {house.root} "
            f"to {shown} {who}"
        )

    def progress(outcome: Any) -> None:
        if not args.json:
            _say(f"{outcome.status}: {outcome.filename} ({_size(outcome.size)})")

    from ..net.factory import client_from_config

    with client_from_config(use_cache=False) as client:
        outcomes = publish_entries(entries, client, url, credentials, progress=progress)
    if args.json:
        _output.print_json(
            {
                "root": str(house.root),
                "to": shown,
                "credentials": credentials.source if credentials else None,
                "wheels": [o.to_json() for o in outcomes],
            }
        )
        return 0
    uploaded = sum(o.status == "uploaded" for o in outcomes)
    _say(f"{uploaded} uploaded, {len(outcomes) - uploaded} already there")
    return 0
