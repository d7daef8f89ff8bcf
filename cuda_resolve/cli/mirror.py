"""``cuda-resolve mirror list | show [PRESET] | set PRESET | test [PRESET]``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..install.target import RULE
from ..redaction import redact_urls
from . import _output
from ._common import add_json_option

if TYPE_CHECKING:
    from ..install.pipconfig import PipIndexes

_SET_EPILOG = """\
custom URLs: `mirror set custom --pypi URL [--pypi-files URL] [--pytorch URL
--pytorch-layout simple|flat] [--kaolin URL] [--conda URL]` (--conda is the base of a TUNA-style
Anaconda mirror). Only the ecosystems given are changed. Nothing written ever turns certificate
verification off."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "mirror",
        help="configure pip, conda and cuda-resolve to use a mirror (TUNA, USTC, Aliyun, ...)",
        description="Mirror presets for PyPI, the PyTorch wheel index, conda channels and "
        "kaolin's pages.",
    )
    parser.set_defaults(handler=_no_subcommand, mirror_parser=parser)
    sub = parser.add_subparsers(
        dest="mirror_command", metavar="SUBCOMMAND", parser_class=type(parser)
    )

    p_list = sub.add_parser("list", help="list the presets, one line each")
    add_json_option(p_list)
    p_list.set_defaults(handler=handle_list)

    p_show = sub.add_parser(
        "show", help="show the active configuration and what each file says, or a preset"
    )
    p_show.add_argument("preset", nargs="?", metavar="PRESET", help="show this preset instead")
    p_show.add_argument(
        "--python", metavar="PATH", help="also read this interpreter's environment files"
    )
    add_json_option(p_show)
    p_show.set_defaults(handler=handle_show)

    p_set = sub.add_parser(
        "set",
        help="write pip.conf, .condarc and cuda-resolve's config for a preset",
        description="Write the preset into pip's config, .condarc and cuda-resolve's own config, "
        "keeping everything else in those files. A timestamped backup is written next to each "
        "changed file.",
        epilog=_SET_EPILOG,
    )
    p_set.add_argument("preset", metavar="PRESET", help="a preset name (`mirror list`) or 'custom'")
    p_set.add_argument(
        "--scope",
        choices=("user", "env"),
        default="user",
        help="user: ~/.config/pip/pip.conf and ~/.condarc (default); env: the target "
        "environment's files",
    )
    p_set.add_argument(
        "--python", metavar="PATH", help="with --scope env: the environment's interpreter"
    )
    p_set.add_argument(
        "--prefix", metavar="DIR", type=Path, help="with --scope env: the environment's prefix"
    )
    p_set.add_argument(
        "--dry-run", action="store_true", help="print a unified diff of each file; write nothing"
    )
    custom = p_set.add_argument_group("custom URLs (PRESET = custom)")
    custom.add_argument("--pypi", metavar="URL", help="a PyPI simple index")
    custom.add_argument(
        "--pypi-files", metavar="URL", help="the mirror of files.pythonhosted.org/packages/"
    )
    custom.add_argument("--pytorch", metavar="URL", help="the mirror of download.pytorch.org/whl/")
    custom.add_argument(
        "--pytorch-layout",
        choices=("simple", "flat"),
        default="simple",
        help="simple: PEP 503 tree per variant; flat: find-links page per variant",
    )
    custom.add_argument("--kaolin", metavar="URL", help="the mirror of NVIDIA's kaolin wheel pages")
    custom.add_argument("--conda", metavar="URL", help="the base of a TUNA-style Anaconda mirror")
    add_json_option(p_set)
    p_set.set_defaults(handler=handle_set)

    p_test = sub.add_parser(
        "test",
        help="fetch a known page through each configured mirror: answers, links not "
        "upstream, latency",
        description="Fetch a known page through the index the target's pip really uses (its "
        "index-url, extra indexes and find-links pages, each named with where the setting came "
        "from) and through each mirror cuda-resolve is configured with; or through a "
        "preset's mirrors.",
    )
    p_test.add_argument(
        "preset",
        nargs="?",
        metavar="PRESET",
        help="test this preset instead of the active configuration",
    )
    p_test.add_argument(
        "--variant", default="cpu", help="the PyTorch variant whose index is fetched (default: cpu)"
    )
    p_test.add_argument(
        "--python",
        metavar="PATH",
        help=f"the interpreter whose pip settings are tested; the target is: {RULE}",
    )
    add_json_option(p_test)
    p_test.set_defaults(handler=handle_test)


def _no_subcommand(args: argparse.Namespace) -> int:
    args.mirror_parser.print_help()
    return 2


def _say(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def _host(url: str | None) -> str:
    from urllib.parse import urlsplit

    return (urlsplit(url).hostname or url or "") if url else ""


# -- list -------------------------------------------------------------------------------


def handle_list(args: argparse.Namespace) -> int:
    from ..mirrors.presets import load_presets
    from ..mirrors.status import preset_to_dict

    presets = load_presets()
    if args.json:
        _output.print_json([preset_to_dict(preset) for preset in presets.values()])
        return 0
    width = max(len(name) for name in presets)
    for preset in presets.values():
        _say(f"{preset.name:<{width}}  {_summary(preset)}  ({preset.title})")
    _say(f"{'custom':<{width}}  your own URLs: mirror set custom --pypi URL --pytorch URL ...")
    return 0


def _summary(preset: Any) -> str:
    def mark(verified: bool) -> str:
        return "" if verified else " [unverified]"

    parts = []
    if preset.pypi is not None:
        parts.append(f"pypi: {_host(preset.pypi.simple)}{mark(preset.pypi.verified)}")
    torch = preset.pytorch
    if torch is None or torch.layout == "none":
        parts.append("pytorch: upstream")
    else:
        parts.append(f"pytorch: {_host(torch.url)} ({torch.layout}){mark(torch.verified)}")
    if preset.conda is None:
        parts.append("conda: upstream")
    else:
        hosts = sorted({_host(url) for _, url in preset.conda.custom_channels})
        parts.append(f"conda: {', '.join(hosts)}{mark(preset.conda.verified)}")
    parts.append("kaolin: " + (_host(preset.kaolin) if preset.kaolin else "upstream"))
    return " | ".join(parts)


# -- show -------------------------------------------------------------------------------


def handle_show(args: argparse.Namespace) -> int:
    from ..mirrors.presets import get_preset
    from ..mirrors.status import preset_to_dict, read_status, status_to_dict
    from ..mirrors.targets import interpreter_prefix

    if args.preset is not None:
        _refuse_python_with_preset(args, "show")
        preset = get_preset(args.preset)
        data = preset_to_dict(preset)
        if args.json:
            _output.print_json(data)
            return 0
        _show_preset(data)
        return 0
    prefix = interpreter_prefix(args.python) if args.python else None
    status = read_status(prefix=prefix)
    data = status_to_dict(status)
    if args.json:
        _output.print_json(data)
        return 0
    config = data["config"]
    missing = " (not written yet)"
    if not config.get("exists") and os.environ.get("CUDA_RESOLVE_CONFIG"):
        # A lab's shared config named with a typo is no config at all (user walk C12).
        missing = (
            " (named by CUDA_RESOLVE_CONFIG, and no such file: no mirror, proxy or wheelhouse "
            "settings are used; check the name)"
        )
    _say(f"cuda-resolve config: {config.get('path')}" + ("" if config.get("exists") else missing))
    if "error" in config:
        _say(f"  error: {config['error']}")
    else:
        _say(f"  preset: {config.get('preset', '(none: canonical URLs)')}")
    for rule in config.get("rewrite", []):
        flag = "  (files only)" if rule["artifacts_only"] else ""
        _say(f"  rewrite {rule['canonical']} -> {rule['mirror']}{flag}")
    if "pytorch" in config:
        _say(f"  pytorch: {config['pytorch']['layout']} {config['pytorch']['url']}")
    for key in ("proxy", "index_dirs"):
        if key in config:
            _say(f"  {key}: {config[key]}")
    for item in data["files"]:
        state = "" if item["exists"] else " (absent)"
        _say(f"{item['tool']} {item['role']}: {item['path']}{state}")
        if "error" in item:
            _say(f"  error: {item['error']}")
        # Every setting --json shows, in its order: a fixed list here had lost find_links.
        for key, value in item.items():
            if key not in _FILE_FACTS and value not in (None, [], {}):
                _say(f"  {key}: {value}")
        for warning in item["warnings"]:
            _say(f"  warning: {warning}")
    for warning in data["warnings"]:
        _say(f"warning: {warning}")
    return 0


#: What a file entry of `mirror show --json` says of the file itself, not of its settings.
_FILE_FACTS = frozenset({"tool", "role", "path", "exists", "error", "warnings"})


def _show_preset(data: dict[str, Any]) -> None:
    _say(f"{data['name']}: {data['title']}")
    _say(f"  source: {data['source']}")
    for ecosystem in ("pypi", "pytorch", "conda"):
        section = data.get(ecosystem)
        if section is None:
            _say(f"{ecosystem}: upstream (no mirror)")
            continue
        verified = "verified" if section["verified"] else "UNVERIFIED"
        _say(f"{ecosystem}: ({verified}; on a miss: {section['on_miss']})")
        for key, value in section.items():
            if key in ("verified", "on_miss") or value in (None, "", [], {}):
                continue
            _say(f"  {key}: {value}")
    _say(f"kaolin: {data['kaolin'] or 'upstream (no public mirror known)'}")
    _say("rewrites written to cuda-resolve's config:")
    for rule in data["rewrites"]:
        flag = "  (files only)" if rule["artifacts_only"] else ""
        _say(f"  {rule['canonical']} -> {rule['mirror']}{flag}")


# -- set --------------------------------------------------------------------------------


def _preset_from_args(args: argparse.Namespace) -> Any:
    from ..mirrors.presets import CUSTOM, custom_preset, get_preset

    custom_options = ("pypi", "pypi_files", "pytorch", "kaolin", "conda")
    given = [name for name in custom_options if getattr(args, name) is not None]
    if args.preset == CUSTOM:
        return custom_preset(
            pypi=args.pypi,
            pypi_files=args.pypi_files,
            pytorch=args.pytorch,
            pytorch_layout=args.pytorch_layout,
            kaolin=args.kaolin,
            conda=args.conda,
        )
    if given:
        import shlex

        options = ", ".join("--" + name.replace("_", "-") for name in given)
        # The same command with the preset 'custom': the URLs and every other option as given.
        words = [w for name in given for w in ("--" + name.replace("_", "-"), getattr(args, name))]
        if args.pytorch_layout != "simple":  # the default
            words += ["--pytorch-layout", args.pytorch_layout]
        if args.scope != "user":
            words += ["--scope", args.scope]
        words += [w for name in ("python", "prefix") if getattr(args, name) for w in (
            f"--{name}", str(getattr(args, name)))]  # fmt: skip
        words += ["--dry-run"] if args.dry_run else []
        raise UsageError(
            f"{options}: URLs are only taken with the preset 'custom'",
            hint=f"run `{shlex.join(['cuda-resolve', 'mirror', 'set', 'custom', *words])}`",
        )
    return get_preset(args.preset)


def handle_set(args: argparse.Namespace) -> int:
    from ..mirrors.apply import Applied, apply_plan, locked, plan_set
    from ..mirrors.presets import load_presets
    from ..mirrors.targets import resolve_targets

    preset = _preset_from_args(args)
    targets = resolve_targets(args.scope, python=args.python, prefix=args.prefix)
    applied: tuple[Applied, ...] = ()
    if args.dry_run:
        plan = plan_set(preset, targets, all_presets=load_presets().values())
    else:
        with locked():  # read and write under one lock: concurrent runs never mix mirrors
            plan = plan_set(preset, targets, all_presets=load_presets().values())
            applied = apply_plan(plan)
    if args.json:
        files = []
        for position, change in enumerate(plan.changes):
            entry: dict[str, Any] = {
                "tool": change.tool,
                "path": str(change.path),
                "changed": change.changed,
                "written": bool(applied and applied[position].written),
                "backup": str(applied[position].backup)
                if applied and applied[position].backup
                else None,
            }
            if args.dry_run:
                entry["diff"] = redact_urls(change.diff())
            files.append(entry)
        _output.print_json(
            {
                "preset": preset.name,
                "scope": targets.scope,
                "dry_run": args.dry_run,
                "files": files,
                "notes": [redact_urls(note) for note in plan.notes],
            }
        )
        return 0
    if args.dry_run:
        for change in plan.changes:
            if change.changed:
                sys.stdout.write(redact_urls(change.diff()))  # the files get the real URLs
            else:
                _say(f"# {change.path}: unchanged")
        _say(f"# dry run: nothing written ({len(plan.pending)} file(s) would change)")
    else:
        for result in applied:
            path = result.change.path
            if not result.written:
                _say(f"unchanged  {path}")
            elif result.backup is not None:
                _say(f"wrote      {path}  (backup: {result.backup.name})")
            else:
                _say(f"created    {path}")
    for note in plan.notes:
        _say(f"note: {redact_urls(note)}")
    if not args.dry_run:
        _say(f"next: `cuda-resolve mirror test` checks that the {preset.name} mirrors answer")
    return 0


# -- test -------------------------------------------------------------------------------


def _refuse_python_with_preset(args: argparse.Namespace, command: str) -> None:
    """--python names the environment whose files the active configuration is read from; a
    preset's layout is the same for every environment: taken and ignored, it is refused."""
    if args.python:
        raise UsageError(
            f"mirror {command} {args.preset}: --python reads an environment's pip settings for "
            "the active configuration; a preset does not depend on one",
            hint="drop --python (or drop the preset to " + command + " the active configuration)",
        )


def _pip_indexes_of_target(python: str | None) -> PipIndexes:
    """What the target's pip uses (``--python``, else the active environment, as every command
    chooses); with no interpreter to ask, only the PIP_* variables count (a note says so)."""
    import os

    from ..install.pipconfig import pip_indexes
    from ..install.target import choose_target

    try:
        chosen: str | None = choose_target(python).python
    except UsageError:
        chosen = None
    return pip_indexes(chosen, os.environ)


def handle_test(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..mirrors.check import (
        check_mirrors,
        targets_from_config,
        targets_from_pip,
        targets_from_preset,
    )
    from ..mirrors.presets import get_preset, load_presets
    from ..net import HttpClient, RetryPolicy

    official = load_presets()["official"]
    canonical = official.canonical
    config = load_config()
    indexes: PipIndexes | None = None
    if args.preset is not None:
        _refuse_python_with_preset(args, "test")
        source = f"preset {args.preset}"
        targets = targets_from_preset(get_preset(args.preset), variant=args.variant)
    else:
        source = f"configuration {config.path}"
        indexes = _pip_indexes_of_target(args.python)
        configured = targets_from_config(config, canonical, variant=args.variant)
        if configured:
            targets = targets_from_pip(
                indexes, configured, others_origin=f"cuda-resolve config {config.path}"
            )
        else:
            source = "upstream indexes (no mirror is configured)"
            targets = targets_from_pip(indexes, targets_from_preset(official, variant=args.variant))
    proxies = config.proxies.as_requests() or None
    with HttpClient(proxies=proxies, use_cache=False, retry=RetryPolicy(attempts=2)) as client:
        results = check_mirrors(targets, client, canonical=canonical)
    ok = all(result.ok for result in results) and not (indexes is not None and indexes.error)
    shown = [result.to_dict() for result in results]  # credentials in URLs are redacted here
    if args.json:
        _output.print_json(
            {
                "source": source,
                "ok": ok,
                "results": shown,
                "pip": indexes.to_dict() if indexes is not None else None,
            }
        )
        return 0 if ok else 1
    _say(f"testing {source}")
    if indexes is not None:
        _say(
            redact_urls(
                f"pip{' in ' + indexes.python if indexes.python else ''}: {indexes.describe()}"
            )
        )
        for note in indexes.notes:
            _say(redact_urls(f"  note: {note}"))
        if indexes.error:
            _say(redact_urls(f"  error: {indexes.error}"))
    for item in shown:
        verdict = "ok  " if item["ok"] else "FAIL"
        latency = f"{item['latency_ms']:.0f} ms" if item["latency_ms"] is not None else "-"
        files = f", {item['files']} files" if item["files"] is not None else ""
        _say(f"{verdict} {item['ecosystem']:<8} {item['url']}  ({latency}{files})")
        if item["origin"]:
            _say(f"     from: {item['origin']}")
        for note in item["notes"]:
            _say(f"     note: {note}")
        for warning in item["warnings"]:
            _say(f"     warning: {warning}")
        if item["error"]:
            _say(f"     error: {item['error']}")
        if item["hint"]:
            _say(f"     hint: {item['hint']}")
    return 0 if ok else 1
