"""``cuda-resolve index validate [DIR]`` and ``cuda-resolve index show NAME [VERSION]``.

``validate`` checks the shipped index, or an overlay directory read on top of it, and lists every
problem (exit 0 fine, 1 problems, 2 bad input). ``show`` prints what the merged index knows
about torch, a CUDA toolkit or an extension package, and the file each entry came from, so an
overlay's effect is visible. Further ``index`` subcommands (``refresh``) register the same way.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from ..errors import UsageError
from ..index.model import ArchEntry, Index, Package, ToolkitFacts, TorchRelease
from ..versions import CudaVersion
from . import _output
from ._common import add_json_option, index_from_args

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

__all__ = ["handle_show", "handle_validate", "register"]

_TOOLKIT_NAMES = ("cuda", "toolkit", "toolkits")

#: Modules that add further ``index`` subcommands: (module in cuda_resolve.cli, function taking
#: the ``index`` subparsers). A module not present in this build is skipped.
_EXTENSIONS = (("index_refresh", "register_refresh"),)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "index",
        help="check and inspect the curated index (CUDA toolkits, torch builds, packages)",
        description="The curated index: CUDA toolkit facts, torch releases and extension packages, "
        "shipped with cuda-resolve and extended by overlay directories.",
    )
    parser.set_defaults(handler=_no_subcommand, index_parser=parser)
    sub = parser.add_subparsers(
        dest="index_command", metavar="SUBCOMMAND", parser_class=type(parser)
    )

    p_validate = sub.add_parser(
        "validate",
        help="check the shipped index or an overlay directory; list every problem",
        description="Parse every file of DIR (default: the shipped index), on top of the shipped "
        "index, and check cross references. Exit 0 when fine, 1 with problems, 2 on bad input.",
    )
    p_validate.add_argument(
        "directory", nargs="?", type=Path, metavar="DIR", help="an index directory"
    )
    add_json_option(p_validate)
    p_validate.set_defaults(handler=handle_validate)

    p_show = sub.add_parser(
        "show",
        help="print what the index knows about torch, a CUDA toolkit or a package, and where "
        "it came from",
        description="NAME is 'torch', 'cuda' (or 'toolkit'), 'sources', or a package (kaolin, "
        "pointnet2_ops). VERSION narrows it: a torch release or series (2.5.1, 2.5), a CUDA "
        "version (12.4), a package release.",
    )
    p_show.add_argument("name", metavar="NAME")
    p_show.add_argument("version", nargs="?", metavar="VERSION")
    p_show.add_argument(
        "--index",
        metavar="DIR",
        type=Path,
        action="append",
        default=[],
        help="an index overlay directory (repeatable; later ones win)",
    )
    add_json_option(p_show)
    p_show.set_defaults(handler=handle_show)

    for module_name, function in _EXTENSIONS:
        if importlib.util.find_spec(f"{__package__}.{module_name}") is not None:
            getattr(importlib.import_module(f".{module_name}", __package__), function)(sub)


def _no_subcommand(args: argparse.Namespace) -> int:
    args.index_parser.print_help()
    return 2


# -- validate ---------------------------------------------------------------------------------


def handle_validate(args: argparse.Namespace) -> int:
    from ..index.load import index_files, shipped_index_dir, validate_directory, validate_shipped

    if args.directory is None:
        root: Any = shipped_index_dir()
        label = f"the shipped index ({root})"
        problems = validate_shipped()
    else:
        root = args.directory
        label = str(args.directory)
        problems = validate_directory(args.directory)
    if args.json:
        _output.print_json({"index": str(root), "ok": not problems, "problems": problems})
        return 1 if problems else 0
    from rich.text import Text

    console = _output.console()
    if problems:
        for problem in problems:
            console.print(Text(f"problem: {problem}"), soft_wrap=True)
        console.print(
            Text(f"{label}: {len(problems)} problem{'s' if len(problems) != 1 else ''}"),
            soft_wrap=True,
        )
        return 1
    files, _ = index_files(root)
    console.print(
        Text(f"ok: {label}: {len(files)} file{'s' if len(files) != 1 else ''}, no problems"),
        soft_wrap=True,
    )
    return 0


# -- show -------------------------------------------------------------------------------------


def handle_show(args: argparse.Namespace) -> int:
    index = index_from_args(args)
    name: str = args.name
    version: str | None = args.version
    if name.lower() in _TOOLKIT_NAMES:
        data = _toolkits_data(index, version)
    elif name.lower() == "torch":
        data = _torch_data(index, version)
    elif name.lower() == "sources":
        data = {
            "kind": "sources",
            "sources": [
                {"key": k, "text": v, "origin": index.origin(f"source {k}")}
                for k, v in index.sources
            ],
        }
    else:
        package = index.package(name)
        if package is None:
            known = ", ".join(["torch", "cuda", "sources", *(p.name for p in index.packages)])
            raise UsageError(
                f"index show {name}: the index knows nothing called {name!r}",
                hint=f"known names: {known}",
            )
        data = _package_data(index, package, version)
    if args.json:
        _output.print_json(data)
    else:
        _render(data, _output.console())
    return 0


def _arch(entries: tuple[ArchEntry, ...]) -> str:
    return ";".join(str(entry) for entry in entries)


def _toolkit_json(index: Index, facts: ToolkitFacts) -> dict[str, Any]:
    return {
        "version": str(facts.version),
        "driver_linux": str(facts.driver_linux) if facts.driver_linux else None,
        "driver_windows": str(facts.driver_windows) if facts.driver_windows else None,
        "archs": [c.sm for c in facts.archs],
        "specific_archs": [c.sm for c in facts.specific_archs],
        "gcc_max": facts.gcc_max,
        "clang_max": facts.clang_max,
        "torch_gcc_max_exclusive": facts.torch_gcc_max_exclusive,
        "torch_clang_max_exclusive": facts.torch_clang_max_exclusive,
        "unverified": list(facts.unverified),
        "notes": facts.notes,
        "source": facts.source,
        "origin": index.origin(f"toolkit {facts.version}"),
    }


def _toolkits_data(index: Index, version: str | None) -> dict[str, Any]:
    toolkits = index.toolkits
    if version is not None:
        try:
            wanted = CudaVersion.parse(version)
        except ValueError as exc:
            raise UsageError(
                f"index show cuda {version}: {exc}", hint="give a CUDA version such as 12.4"
            ) from None
        toolkits = tuple(t for t in toolkits if t.version == wanted)
        if not toolkits:
            known = ", ".join(str(t.version) for t in index.toolkits)
            raise UsageError(
                f"index show cuda {version}: no facts for CUDA {wanted}", hint=f"known: {known}"
            )
    majors = {t.version.major for t in toolkits}
    families = [
        {
            "major": f.major,
            "min_driver_linux": str(f.min_driver_linux),
            "min_driver_windows": str(f.min_driver_windows) if f.min_driver_windows else None,
            "unverified": list(f.unverified),
            "source": f.source,
            "origin": index.origin(f"family {f.major}"),
        }
        for f in index.families
        if f.major in majors
    ]
    return {
        "kind": "cuda",
        "families": families,
        "toolkits": [_toolkit_json(index, t) for t in toolkits],
    }


def _torch_json(index: Index, release: TorchRelease) -> dict[str, Any]:
    return {
        "version": str(release.version),
        "python": list(release.python),
        "requires_python": str(release.requires_python),
        "pypi_default": next((v.name for v in release.variants if v.pypi_default), None),
        "pypi_linux_aarch64": release.pypi_linux_aarch64,
        "pypi_cuda_runtime": release.pypi_cuda_runtime,
        "cxx11_abi": release.cxx11_abi,
        "torchvision": release.torchvision,
        "torchaudio": release.torchaudio,
        "variants": [
            {
                "name": v.name,
                "cuda": str(v.cuda) if v.cuda else None,
                "arch_list": _arch(v.arch_list),
                "index_url": v.index_url,
                "pypi_default": v.pypi_default,
                "verified": v.verified,
                "unverified": list(v.unverified),
            }
            for v in release.variants
        ],
        "unverified": list(release.unverified),
        "notes": release.notes,
        "source": release.source,
        "origin": index.origin(f"torch {release.version}"),
    }


def _torch_data(index: Index, version: str | None) -> dict[str, Any]:
    releases = index.torch
    if version is not None:
        try:
            wanted = Version(version)
        except InvalidVersion:
            raise UsageError(
                f"index show torch {version}: not a version",
                hint="give a release (2.5.1) or a series (2.5)",
            ) from None
        if len(wanted.release) == 2:
            releases = tuple(r for r in releases if r.version.release[:2] == wanted.release)
        else:
            releases = tuple(r for r in releases if r.version == Version(wanted.base_version))
        if not releases:
            raise UsageError(
                f"index show torch {version}: the index has no such torch release",
                hint=f"known: {index.torch[0].version} ... {index.torch[-1].version}"
                if index.torch
                else None,
            )
    return {"kind": "torch", "releases": [_torch_json(index, r) for r in releases]}


def _package_data(index: Index, package: Package, version: str | None) -> dict[str, Any]:
    wheels = package.wheels
    recipes = package.recipes
    if version is not None:
        try:
            wanted = Version(version)
        except InvalidVersion:
            raise UsageError(
                f"index show {package.name} {version}: not a version", hint=None
            ) from None
        wheels = tuple(w for w in wheels if w.version == wanted)
        recipes = tuple(r for r in recipes if r.version == wanted)
        if not wheels and not recipes:
            known = {str(w.version) for w in package.wheels} | {
                str(r.version) for r in package.recipes
            }
            raise UsageError(
                f"index show {package.name} {version}: no wheels or recipe for that version",
                hint=f"known: {', '.join(sorted(known))}",
            )
    name = package.name
    return {
        "kind": "package",
        "name": name,
        "import_name": package.import_name,
        "description": package.description,
        "find_links": package.find_links,
        "wheel_url": package.wheel_url,
        "placeholder_versions": list(package.placeholder_versions),
        "requires": list(package.requires),
        "notes": package.notes,
        "source": package.source,
        "origin": index.origin(f"package {name}"),
        "wheels": [
            {
                "version": str(w.version),
                "python": list(w.python),
                "platforms": list(w.platforms),
                "torch": {tv: list(variants) for tv, variants in w.torch},
                "torch_python": {tv: list(py) for tv, py in w.torch_python},
                "torch_window": str(w.torch_window),
                "unverified": list(w.unverified),
                "notes": w.notes,
                "source": w.source,
                "origin": index.origin(f"package {name} wheels {w.version}"),
            }
            for w in wheels
        ],
        "recipes": [
            {
                "name": r.name,
                "version": str(r.version),
                "repository": r.repository,
                "revision": r.revision,
                "subdirectory": r.subdirectory,
                "submodules": r.submodules,
                "torch": str(r.torch),
                "torch_window": str(r.torch_window),
                "python": str(r.python),
                "cuda_min": str(r.cuda_min) if r.cuda_min else None,
                "cuda_max": str(r.cuda_max) if r.cuda_max else None,
                "build_requires": list(r.build_requires),
                "env": dict(r.env),
                "patches": [
                    {
                        "file": p.file,
                        "find": p.find,
                        "replace": p.replace,
                        "reason": p.reason,
                        "count": p.count,
                        "torch": str(p.torch),
                    }
                    for p in r.patches
                ],
                "smoke": None
                if r.smoke is None
                else {
                    "imports": list(r.smoke.imports),
                    "gpu_script": r.smoke.gpu_script,
                    "description": r.smoke.description,
                },
                "unverified": list(r.unverified),
                "notes": r.notes,
                "source": r.source,
                "origin": index.origin(f"package {name} recipe {r.name}"),
            }
            for r in recipes
        ],
    }


# -- rendering --------------------------------------------------------------------------------


def _table(title: str, *columns: str) -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


#: A column is never narrower than its longest word, up to this many characters: rich folds a
#: narrow column mid-word ("unverifie / d"); only paths, URLs and longer tokens may fold.
_WORD_MAX = 16


def _print_table(table: Table, console: Console) -> None:
    """Print with each column at least as wide as its longest word, so words never split.

    rich narrows every column evenly when a table is too wide and then folds the words that no
    longer fit; here the columns with the most room to spare give way first instead.
    """
    columns = table.columns
    widths: list[int] = []
    minimums: list[int] = []
    for column in columns:
        texts = [str(column.header), *(str(cell) for cell in column.cells)]
        lines = [line for text in texts for line in text.splitlines()] or [""]
        words = [word for line in lines for word in line.split() if "/" not in word]
        widths.append(max(1, *(len(line) for line in lines)))
        minimums.append(min(max((len(word) for word in words), default=1), _WORD_MAX))
    available = console.width - (3 * len(columns) + 1)  # borders and one space either side
    while sum(widths) > available:
        slack, index = max(
            (width - minimum, i)
            for i, (width, minimum) in enumerate(zip(widths, minimums, strict=True))
        )
        if slack <= 0:
            break  # even the longest words do not fit: rich folds what it must
        widths[index] -= 1
    for column, width in zip(columns, widths, strict=True):
        column.width = width
    console.print(table)


def _field(console: Console, label: str, value: object) -> None:
    """``  label: value``, wrapped under the value rather than at column 0."""
    from rich.text import Text

    text = f"{label}: {value}"
    if " " not in str(value).strip():
        console.print(
            Text(f"  {text}"), soft_wrap=True
        )  # one token (a URL): whole, on the label's line
        return
    console.print(
        Text(_output.hanging(text, first="  ", rest="      ", width=console.width)), soft_wrap=True
    )


def _cells(*values: object) -> list[Text]:
    from rich.text import Text

    return [Text("" if value is None else str(value)) for value in values]


def _render(data: dict[str, Any], console: Console) -> None:
    kind = data["kind"]
    if kind == "cuda":
        _render_cuda(data, console)
    elif kind == "torch":
        _render_torch(data, console)
    elif kind == "sources":
        table = _table("citation sources", "key", "source", "from")
        for item in data["sources"]:
            table.add_row(*_cells(item["key"], item["text"], _short(item["origin"])))
        _print_table(table, console)
    else:
        _render_package(data, console)


def _render_cuda(data: dict[str, Any], console: Console) -> None:
    from rich.text import Text

    origins = {_short(item["origin"]) for item in (*data["families"], *data["toolkits"])}
    single = len(origins) == 1  # one origin goes in the titles: its column would squeeze the rest
    where = f" (from {next(iter(origins))})" if single else ""
    from_column: tuple[str, ...] = () if single else ("from",)
    families = _table(
        f"minor-version compatibility (CUDA 11+){where}",
        "family",
        "min driver (Linux)",
        "min driver (Windows)",
        "unverified",
        *from_column,
    )
    for f in data["families"]:
        families.add_row(
            *_cells(
                f"{f['major']}.x",
                f["min_driver_linux"],
                f["min_driver_windows"],
                ", ".join(f["unverified"]),
                *(() if single else (_short(f["origin"]),)),
            )
        )
    if data["families"]:
        _print_table(families, console)
    toolkits = _table(
        f"CUDA toolkits{where}",
        "CUDA",
        "driver (Linux / Windows)",
        "SASS targets",
        "specific",
        "gcc <=",
        "clang <=",
        "torch gcc <",
        "unverified",
        *from_column,
    )
    for t in data["toolkits"]:
        toolkits.add_row(
            *_cells(
                t["version"],
                f"{t['driver_linux'] or '-'} / {t['driver_windows'] or '-'}",
                " ".join(a.removeprefix("sm_") for a in t["archs"]),
                " ".join(a.removeprefix("sm_") for a in t["specific_archs"]),
                t["gcc_max"],
                t["clang_max"],
                t["torch_gcc_max_exclusive"],
                ", ".join(t["unverified"]),
                *(() if single else (_short(t["origin"]),)),
            )
        )
    _print_table(toolkits, console)
    if len(data["toolkits"]) == 1:
        t = data["toolkits"][0]
        for label in ("notes", "source"):
            if t[label]:
                console.print(Text(f"{label}: {t[label]}"), soft_wrap=True)


def _render_torch(data: dict[str, Any], console: Console) -> None:
    from rich.text import Text

    releases = data["releases"]
    if len(releases) > 1:
        origins = {_short(r["origin"]) for r in releases}
        single = (
            len(origins) == 1
        )  # one origin goes in the title: its column would squeeze the rest
        title = f"torch releases (from {next(iter(origins))})" if single else "torch releases"
        table = _table(
            title,
            "torch",
            "Python",
            "variants (* = PyPI default)",
            "torchvision",
            "torchaudio",
            "C++11 ABI",
            *(() if single else ("from",)),
        )
        for r in releases:
            variants = " ".join(
                f"{v['name']}{'*' if v['pypi_default'] else ''}{'?' if not v['verified'] else ''}"
                for v in r["variants"]
            )
            table.add_row(
                *_cells(
                    r["version"],
                    ", ".join(r["python"]),
                    variants,
                    r["torchvision"] or "-",
                    r["torchaudio"] or "-",
                    _abi(r["cxx11_abi"]),
                    *(() if single else (_short(r["origin"]),)),
                )
            )
        _print_table(table, console)
        console.print(
            Text(
                "? = a variant whose existence or arch list rests on secondary sources; `index "
                "show torch X.Y.Z` for details"
            ),
            soft_wrap=True,
        )
        return
    for r in releases:
        console.print(Text(f"torch {r['version']}  (from {_short(r['origin'])})"), soft_wrap=True)
        for label, value in (
            ("Python", ", ".join(r["python"]) + f"  (Requires-Python {r['requires_python']})"),
            (
                "PyPI",
                f"default {r['pypi_default']} (CUDA runtime {r['pypi_cuda_runtime']}), aarch64 "
                f"{r['pypi_linux_aarch64']}",
            ),
            (
                "paired",
                f"torchvision {r['torchvision'] or '-'}, torchaudio {r['torchaudio'] or '-'}",
            ),
            ("C++11 ABI", _abi(r["cxx11_abi"])),
            ("unverified", ", ".join(r["unverified"]) or "-"),
            ("notes", r["notes"]),
            ("source", r["source"]),
        ):
            if value:
                _field(console, label, value)
        table = _table("", "variant", "CUDA", "TORCH_CUDA_ARCH_LIST", "index", "unverified")
        for v in r["variants"]:
            table.add_row(
                *_cells(
                    v["name"] + (" (PyPI)" if v["pypi_default"] else ""),
                    v["cuda"] or "-",
                    v["arch_list"] or "-",
                    v["index_url"],
                    ", ".join(v["unverified"]),
                )
            )
        _print_table(table, console)


def _short(origin: str | None) -> str:
    """A shipped file as ``shipped:torch.toml``; overlay files keep their full path."""
    if origin is None:
        return "-"
    from ..index.load import shipped_index_dir

    root = str(shipped_index_dir())
    return "shipped:" + origin[len(root) + 1 :] if origin.startswith(root + "/") else origin


def _abi(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "no")


def _render_package(data: dict[str, Any], console: Console) -> None:
    from rich.text import Text

    console.print(
        Text(f"{data['name']}  (import {data['import_name']}; from {_short(data['origin'])})"),
        soft_wrap=True,
    )
    placeholders = ", ".join(data["placeholder_versions"])
    for label, value in (
        ("description", data["description"]),
        ("find-links", data["find_links"]),
        ("wheel URL", data["wheel_url"]),
        ("placeholders", f"{placeholders} (never installed)" if placeholders else ""),
        ("adds", ", ".join(data["requires"])),
        ("notes", data["notes"]),
        ("source", data["source"]),
    ):
        if value:
            _field(console, label, value)
    if data["wheels"]:
        origins = {_short(w["origin"]) for w in data["wheels"]}
        # One origin (the usual case) goes in the title: the narrow column it needed split words.
        single = len(origins) == 1
        title = f"wheels (from {next(iter(origins))})" if single else "wheels"
        table = _table(
            title,
            "version",
            "Python",
            "torch: variants",
            "platforms",
            "setup.py torch",
            "unverified",
            *(() if single else ("from",)),
        )
        for w in data["wheels"]:
            groups: list[tuple[list[str], tuple[str, ...], tuple[str, ...]]] = []
            for torch_version, variants in w["torch"].items():
                shape = (tuple(variants), tuple(w["torch_python"].get(torch_version, ())))
                if groups and (groups[-1][1], groups[-1][2]) == shape:
                    groups[-1][0].append(torch_version)
                else:
                    groups.append(([torch_version], *shape))
            rows = [
                f"{', '.join(versions)}: {' '.join(variants)}"
                + (f" (py {', '.join(python)})" if python else "")
                for versions, variants, python in groups
            ]
            window = (w["torch_window"] or "-").replace(",", ", ")
            table.add_row(
                *_cells(
                    w["version"],
                    ", ".join(w["python"]),
                    "\n".join(rows),
                    ", ".join(w["platforms"]),
                    window,
                    ", ".join(w["unverified"]),
                    *(() if single else (_short(w["origin"]),)),
                )
            )
        _print_table(table, console)
    for r in data["recipes"]:
        console.print(
            Text(
                f"recipe {r['name']}: {data['name']} {r['version']} from {r['repository']} @ "
                f"{r['revision'][:12]}{' /' + r['subdirectory'] if r['subdirectory'] else ''}  "
                f"(from {_short(r['origin'])})"
            ),
            soft_wrap=True,
        )
        for label, value in (
            (
                "torch",
                r["torch"]
                + (f"  (setup.py accepts {r['torch_window']})" if r["torch_window"] else ""),
            ),
            ("Python", r["python"]),
            (
                "CUDA",
                " ".join(
                    x
                    for x in (
                        f">= {r['cuda_min']}" if r["cuda_min"] else "",
                        f"<= {r['cuda_max']}" if r["cuda_max"] else "",
                    )
                    if x
                ),
            ),
            ("build requires", ", ".join(r["build_requires"])),
            ("env", " ".join(f"{k}={v}" for k, v in r["env"].items())),
            (
                "smoke",
                ", ".join(r["smoke"]["imports"])
                + (" + GPU script" if r["smoke"]["gpu_script"] else "")
                if r["smoke"]
                else "",
            ),
            ("unverified", ", ".join(r["unverified"])),
            ("notes", r["notes"]),
            ("source", r["source"]),
        ):
            if value:
                _field(console, label, value)
        for p in r["patches"]:
            when = f" (torch {p['torch']})" if p["torch"] else ""
            _field(console, f"patch {p['file']}{when}", p["reason"])
