"""``cuda-resolve lock REQ... --profile A.toml [--profile B.toml ...] [-o pylock.toml]``.

One PEP 751 lock for several machine classes: each profile decided as ``plan`` decides it, its
whole closure resolved by pip for the profile's Python and platform, every file with its URL,
size and sha256; stock installers select a profile as an extra (``pip install -r
'pylock.toml[a100]'``, ``uv pip install -r pylock.toml --extra a100``), ``cuda-resolve sync``
installs it exactly.

Source builds the wheelhouse lacks are built first, by ``cuda-resolve build REQ... --profile FILE
--python PY`` run as a child (its progress on this terminal), with an interpreter of each
profile's Python and torch (``--python-for``, or found); ``--no-build`` prints those commands
instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._wrap import counted
from ..errors import UsageError
from . import _output
from ._common import add_json_option, index_from_args


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lock",
        help="write one pylock.toml (PEP 751) for several machine profiles",
        description="Lock REQ... for every --profile (files from `cuda-resolve detect "
        "--save-profile`, or `this`): one PEP 751 pylock.toml whose extras are the profiles' "
        "names. Install it with `cuda-resolve sync`, `pip install -r 'pylock.toml[NAME]'` or "
        "`uv pip install -r pylock.toml --extra NAME`.",
    )
    parser.add_argument(
        "requests", nargs="*", metavar="REQ", help="requirements as pip writes them"
    )
    parser.add_argument(
        "-r",
        "--requirement",
        metavar="FILE",
        type=Path,
        action="append",
        default=[],
        help="read requirements from FILE (one a line; comments and options are not taken)",
    )
    parser.add_argument(
        "--profile",
        metavar="[NAME=]FILE",
        action="append",
        default=[],
        help="a machine profile to lock for (repeatable); `this` is the machine lock runs on; the "
        "name is the file's stem unless given",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        type=Path,
        default=Path("pylock.toml"),
        help="where to write the lock (default: pylock.toml)",
    )
    parser.add_argument(
        "--python-for",
        metavar="NAME=PATH",
        action="append",
        default=[],
        help="the interpreter that resolves profile NAME's closure and builds its source builds "
        "(default: one of its Python version found here: PATH, pyenv, uv; a build needs the "
        "profile's torch installed in it)",
    )
    parser.add_argument(
        "--no-build",
        action="store_true",
        help="build nothing: a source build the wheelhouse lacks fails the lock with the "
        "`cuda-resolve build` commands to run",
    )
    parser.add_argument(
        "--index-url",
        metavar="URL",
        default=None,
        help="the package index the closure comes from (default: https://pypi.org/simple), "
        "through the config's mirror of it (`cuda-resolve mirror set`); the PyTorch index comes "
        "from the plan and the config's mirror",
    )
    parser.add_argument(
        "--wheelhouse-url",
        metavar="URL",
        help="where the wheelhouse folder is served (`cuda-resolve wheelhouse path`; any static "
        "server): source-built wheels are locked at this URL",
    )
    parser.add_argument(
        "--refresh",
        action="store_true",
        help="ask the indexes and pip afresh (default: index pages and pip's answers less than an "
        "hour old are reused)",
    )
    parser.add_argument(
        "--skip-unfit",
        action="store_true",
        help="leave out a profile for which nothing fits, instead of failing",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="relock only the --profile(s) given in the lock at -o; the other profiles' entries "
        "stay byte-identical",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 unless the lock at -o is current for these inputs",
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
        "--allow-torch-change",
        action="store_true",
        help="allow a profile's installed torch to be replaced",
    )
    parser.add_argument(
        "--source",
        metavar="[PKG=]DIR",
        action="append",
        default=[],
        help="the source builds build from this copy of the recipe's repository instead of "
        "fetching or cloning it (offline machines): it must hold exactly the files of the "
        "recipe's pinned commit, as a lock names builds of the pinned source; repeatable",
    )
    add_json_option(parser)
    parser.set_defaults(handler=handle)


def _requests(args: argparse.Namespace) -> tuple[str, ...]:
    from .._bounded import read_user_text

    found = list(args.requests)
    for path in args.requirement:
        for line in read_user_text(path, error=UsageError, what="a requirements file").splitlines():
            text = line.split(" #", 1)[0].strip()
            if text and not text.startswith(("#", "-")):
                found.append(text)
    if not found:
        raise UsageError(
            "nothing to lock: give REQ... or -r FILE",
            hint="cuda-resolve lock torch kaolin --profile a100.toml --profile cpu.toml",
        )
    return tuple(found)


def _python_for(pairs: list[str]) -> dict[str, str]:
    from ..lock.profiles import profile_name

    found = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise UsageError(
                f"--python-for {pair!r}: expected NAME=PATH",
                hint="--python-for a100=/usr/bin/python3.10",
            )
        found[profile_name(name, origin="--python-for")] = path
    return found


def handle(args: argparse.Namespace) -> int:
    import os

    from ..config import load_config
    from ..lock.closure import PipAnswers
    from ..lock.document import render
    from ..lock.files import FileFinder
    from ..lock.make import LockRequest, make_lock
    from ..lock.profiles import load_lock_profile
    from ..net.factory import client_from_config
    from ..paths import cache_root, write_atomic
    from ..resolve import Options
    from ..wheelhouse.store import Wheelhouse
    from ._act import TerminalReporter
    from ._common import detect_target

    if not args.profile:
        raise UsageError(
            "which machines? give --profile FILE (repeatable) or --profile this",
            hint="save one per machine class with `cuda-resolve detect --save-profile CLASS.toml`",
        )
    import re

    if not re.fullmatch(r"pylock\.([^.]+\.)?toml", args.output.name):
        # PEP 751's rule; uv refuses any other name, and tools look for these.
        raise UsageError(
            f"-o {args.output}: a lock file is named pylock.toml or pylock.NAME.toml (PEP 751)",
            hint=f"-o {args.output.parent / 'pylock.toml'}",
        )
    requests = _requests(args)
    from ._act import parse_sources

    parse_sources(args.source)  # a folder that is not there is refused before any work
    profiles = tuple(
        load_lock_profile(spec, detect=lambda: detect_target(None)[0]) for spec in args.profile
    )
    config = load_config()
    request = LockRequest(
        requests=requests,
        profiles=profiles,
        index_url=(args.index_url or "https://pypi.org/simple").rstrip("/"),
        python_for=_python_for(args.python_for),
        skip_unfit=args.skip_unfit,
        wheelhouse_url=args.wheelhouse_url,
        options=Options(allow_torch_change=args.allow_torch_change),
        sources=parse_sources(args.source),
    )
    if args.check:
        return _check(args, request, config)
    reporter = TerminalReporter(quiet=args.json)
    house = Wheelhouse.default()
    present = {
        entry.sha256 for entry in house.entries()
    }  # what the lock builds is what is new after it
    with client_from_config(config) as client:
        finder = FileFinder(
            client, cache_dir=cache_root() / "lock-files", page_seconds=0 if args.refresh else 3600
        )
        keep = None
        if args.update:
            from ..lock.read import read_lock

            keep = read_lock(args.output)
        document, skipped = make_lock(
            request,
            index_from_args(args),
            config,
            finder=finder,
            environ=os.environ,
            wheelhouse=house,
            reporter=reporter,
            keep=keep,
            answers=PipAnswers(cache_root() / "lock-pip", seconds=0 if args.refresh else 3600),
            builder=None if args.no_build else _builder(args, requests),
        )
    text = render(document)
    write_atomic(args.output, text, make_parents=False)
    if args.json:
        built = [
            {"package": entry.key.package, "wheel": str(entry.path), "sha256": entry.sha256}
            for entry in house.entries()
            if entry.sha256 not in present
        ]
        _output.print_json(
            {
                "lock": str(args.output),
                "profiles": list(document.names),
                "packages": len(document.packages),
                "skipped": list(skipped),
                "built": built,
            }
        )
    else:
        _output.console().print(
            f"wrote {args.output}: {counted(len(document.packages), 'package')} for profiles "
            f"{', '.join(document.names)}",
            highlight=False,
            soft_wrap=True,
        )
        for line in skipped:
            _output.console().print(f"left out: {line}", highlight=False, soft_wrap=True)
    return 0


def _builder(args: argparse.Namespace, requests: tuple[str, ...]) -> Any:
    """Runs ``cuda-resolve build`` for a profile: the same command, builder and wheelhouse as a
    user's; its progress goes to stderr (stdout stays the lock's, for --json)."""

    def build(profile: Any, interpreter: str) -> None:
        import subprocess
        import sys

        from ..errors import BuildError
        from ..lock.make import build_words

        words = build_words(profile, requests, interpreter)
        for folder in args.index:
            words += ["--index", str(folder)]
        for source in args.source:
            words += ["--source", source]
        if args.json:
            words.append("--json")
        argv = [sys.executable, "-m", "cuda_resolve", *words]
        try:
            out = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):
            out = None
        if out is not None and not args.json:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, check=False)
            said = ""
        else:  # stderr is no file (captured): pass the build's output on as it comes
            with subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ) as child:
                lines = []
                assert child.stdout is not None
                for line in child.stdout:
                    lines.append(line)
                    if not args.json:
                        sys.stderr.write(line)
                        sys.stderr.flush()
            done = subprocess.CompletedProcess(argv, child.returncode)
            said = "".join(lines[-5:]).strip()
        if done.returncode != 0:
            raise BuildError(
                f"profile {profile.name}: `cuda-resolve {' '.join(words)}` failed (exit status "
                f"{done.returncode})" + (f": {said}" if said else ""),
                hint="its output above says why (its log is named there); fix that and lock "
                "again, or lock --no-build",
            )

    return build


def _check(args: argparse.Namespace, request: Any, config: Any) -> int:
    """Whether the lock at -o was made from these inputs: the same requests, profile files and
    decisions."""
    from ..lock.make import profile_plan, profile_record
    from ..lock.read import read_lock
    from ..resolve import Options
    from ..wheelhouse.store import Wheelhouse

    lock = read_lock(args.output)
    index = index_from_args(args)
    stale: list[str] = []
    if lock.packages_edited:
        stale.append(
            "packages: changed after cuda-resolve wrote the lock (a version, URL, size or hash "
            "is not what was locked): lock again, or restore the file"
        )
    if tuple(lock.requests) != tuple(request.requests):
        stale.append(
            f"requests: the lock has {' '.join(lock.requests)}, asked {' '.join(request.requests)}"
        )
    from ..redaction import url_without_userinfo

    # A given --index-url is compared (an option taken is honoured); without one, any index.
    asked = url_without_userinfo(request.index_url).rstrip("/")
    if args.index_url and lock.index_url and lock.index_url.rstrip("/") != asked:
        stale.append(f"index: the lock's closure came from {lock.index_url}, asked {asked}")
    names = {p.name for p in request.profiles}
    # With --update only the profiles given are relocked: the others are not checked either.
    for missing in sorted(set(lock.profiles) - names) if not args.update else ():
        stale.append(f"profile {missing}: in the lock, not given")
    for profile in request.profiles:
        record = lock.profiles.get(profile.name)
        if record is None:
            stale.append(f"profile {profile.name}: not in the lock")
            continue
        if record.digest != profile.digest:
            stale.append(
                f"profile {profile.name}: {profile.source} changed since the lock was made"
            )
        plan, resolution = profile_plan(
            profile,
            request.requests,
            index,
            request.options or Options(),
            config,
            Wheelhouse.default(),
        )
        now = profile_record(profile, plan, resolution, record.interpreter)
        if now.decision != record.decision:
            stale.append(
                f"profile {profile.name}: decided now {', '.join(now.decision)}; locked "
                f"{', '.join(record.decision)}"
            )
    if args.json:
        _output.print_json({"lock": str(args.output), "current": not stale, "stale": stale})
    elif stale:
        for line in stale:
            _output.console().print(f"stale: {line}", highlight=False, soft_wrap=True)
    else:
        _output.console().print(
            f"{args.output} is current for these inputs", highlight=False, soft_wrap=True
        )
    return 1 if stale else 0
