"""``cuda-resolve index refresh kaolin``: check the index's kaolin rows against NVIDIA's pages.

kaolin's wheels live on NVIDIA's flat find-links pages, one per (torch, CUDA) build, named by
the index's own ``find_links`` pattern. A refresh reads the page of every (torch, variant) the
index lists for the selected kaolin releases and compares what the pages hold with the index:
rows confirmed, rows missing from their page, builds the index does not list, Python versions.
A host that cannot be reached is reported once and its other pages are skipped. A page that
answers with something else than a find-links page (a captive portal's login page) is an error.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .._frozen import frozen, replace
from ..errors import UsageError
from ..index.model import ExtensionWheels, Index
from ..net.client import HttpClient
from ..net.errors import FetchError
from ..net.pages import file_name, page_links
from ..versions import CudaVersion
from .common import (
    UNREACHABLE_KINDS,
    Change,
    Progress,
    Unreachable,
    python_versions,
    variant_order,
    write_overlay_file,
    wrong_shape,
)

__all__ = [
    "KAOLIN_SOURCE_KEY",
    "KaolinFacts",
    "KaolinRefresh",
    "parse_kaolin_page",
    "refresh_kaolin",
]

KAOLIN_SOURCE_KEY = "cuda-resolve-refresh-kaolin"


@frozen
class KaolinFacts:
    version: Version  # the kaolin release
    rows: tuple[
        tuple[str, tuple[str, ...]], ...
    ]  # (torch version, variants) found on the pages read
    python: tuple[str, ...]
    platforms: tuple[str, ...]
    torch_python: tuple[tuple[str, tuple[str, ...]], ...]  # per torch version, where != python
    unread: tuple[str, ...]  # pages of this release's index rows that could not be read
    problems: tuple[str, ...] = ()


@frozen
class KaolinRefresh:
    facts: tuple[KaolinFacts, ...]
    changes: tuple[Change, ...]
    unreachable: tuple[Unreachable, ...]
    overlay: Path | None
    overlay_releases: tuple[str, ...]
    document: str
    file_name: str = "packages/kaolin.toml"


def parse_kaolin_page(text: str) -> list[tuple[Version, tuple[str, ...], str]]:
    """A find-links page -> (kaolin version, Python versions, platform) per kaolin wheel."""
    wheels = []
    for href in page_links(text):
        name = file_name(href)
        if not name.endswith(".whl"):
            continue
        try:
            project, version, _, tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if project != "kaolin":
            continue
        platform = sorted({tag.platform for tag in tags})[0]
        wheels.append((Version(version.public), python_versions([name]), platform))
    return wheels


def _checked_page(client: HttpClient, url: str) -> list[tuple[Version, tuple[str, ...], str]]:
    """The kaolin wheels of one find-links page; a page with no wheel link at all is not a
    find-links page (a login page, an error page) and is refused."""
    text = client.get_text(url, accept="text/html")
    wheels = parse_kaolin_page(text)
    if not wheels and not any(file_name(link).endswith(".whl") for link in page_links(text)):
        raise wrong_shape(
            client.resolve(url), "a find-links page of wheels", "no wheel links in it"
        )
    return wheels


def _page_url(pattern: str, torch: str, variant: str) -> str:
    cuda = CudaVersion.parse(variant)
    return pattern.format(
        torch=torch, cuda=f"{cuda.major}.{cuda.minor}", cuda_nodot=variant[2:], variant=variant
    )


def _kaolin_facts(
    version: Version,
    listed: Iterable[tuple[str, str]],
    pages: Mapping[tuple[str, str], list[tuple[Version, tuple[str, ...], str]] | None],
    urls: Mapping[tuple[str, str], str],
) -> KaolinFacts:
    rows: dict[str, set[str]] = {}
    python_by_torch: dict[str, set[str]] = {}
    platforms: set[str] = set()
    for (torch, variant), wheels in pages.items():
        for found, python, platform in wheels or ():
            if found != version:
                continue
            rows.setdefault(torch, set()).add(variant)
            python_by_torch.setdefault(torch, set()).update(python)
            platforms.add(platform)
    every = sorted({p for ps in python_by_torch.values() for p in ps}, key=_python_order)
    per_torch = tuple(
        (torch, tuple(sorted(ps, key=_python_order)))
        for torch, ps in sorted(python_by_torch.items(), key=lambda item: Version(item[0]))
        if sorted(ps, key=_python_order) != every
    )
    return KaolinFacts(
        version=version,
        rows=tuple(
            (t, tuple(sorted(v, key=variant_order)))
            for t, v in sorted(rows.items(), key=lambda i: Version(i[0]))
        ),
        python=tuple(every),
        platforms=tuple(sorted(platforms)),
        torch_python=per_torch,
        unread=tuple(sorted({urls[key] for key in listed if pages.get(key) is None})),
    )


def _python_order(tag: str) -> tuple[int, int, str]:
    major, _, rest = tag.partition(".")
    minor = rest.rstrip("t")
    return int(major), int(minor), rest[len(minor) :]


def _rows_text(rows: Iterable[tuple[str, Iterable[str]]]) -> str:
    return "; ".join(f"{torch}: {' '.join(variants)}" for torch, variants in rows) or "none"


def refresh_kaolin(
    client: HttpClient,
    *,
    index: Index,
    shipped: Index,
    output_dir: Path | None,
    versions: Sequence[str] | None = None,
    dry_run: bool = False,
    today: str | None = None,
    progress: Progress | None = None,
) -> KaolinRefresh:
    """Read the find-links pages behind the index's kaolin rows and compare (see above)."""
    date = today or datetime.date.today().isoformat()
    package = index.package("kaolin")
    if package is None or not package.find_links:
        raise UsageError(
            "the index has no kaolin package with a find_links pattern",
            hint="check `cuda-resolve index show kaolin`",
        )
    entries = list(package.wheels)
    if versions:
        try:
            wanted = {Version(v) for v in versions}
        except InvalidVersion as exc:
            raise UsageError(
                f"--versions: {exc}", hint="give kaolin releases such as 0.17.0"
            ) from None
        unknown = wanted - {e.version for e in entries}
        if unknown:
            raise UsageError(
                f"kaolin {', '.join(sorted(map(str, unknown)))}: not in the index",
                hint=f"kaolin releases in the index: {', '.join(str(e.version) for e in entries)}",
            )
        entries = [e for e in entries if e.version in wanted]
    urls = {
        (torch, variant): _page_url(package.find_links, torch, variant)
        for entry in entries
        for torch, variants in entry.torch
        for variant in variants
    }
    pages: dict[tuple[str, str], list[tuple[Version, tuple[str, ...], str]] | None] = {}
    unreachable: list[Unreachable] = []
    problems: list[str] = []
    dead: set[str] = set()
    ordered = sorted(urls, key=lambda k: (Version(k[0]), variant_order(k[1])))
    for position, key in enumerate(ordered, 1):
        url = urls[key]
        host = urlsplit(client.resolve(url)).netloc
        if host in dead:
            pages[key] = None
            continue
        if progress is not None:
            progress(f"kaolin page {url.rsplit('/', 1)[-1]}", position, len(ordered))
        try:
            pages[key] = _checked_page(client, url)
        except FetchError as exc:
            if exc.status == 404:
                pages[key] = []  # no such page: no wheel for that build
            else:
                pages[key] = None
                if exc.kind in UNREACHABLE_KINDS:
                    dead.add(host)
                    unreachable.append(
                        Unreachable(
                            url=url, error=f"{exc.message}; the other pages on {host} were skipped"
                        )
                    )
                elif exc.kind == "content" or exc.status is None:
                    raise  # an answer of the wrong shape: an error, never index data
                else:
                    problems.append(f"{url}: {exc.message}")

    facts: list[KaolinFacts] = []
    changes: list[Change] = []
    updated: list[ExtensionWheels] = []
    for entry in entries:
        listed = [(torch, variant) for torch, variants in entry.torch for variant in variants]
        found = _kaolin_facts(entry.version, listed, pages, urls)
        if problems:
            found = replace(found, problems=tuple(problems))
        facts.append(found)
        if found.unread:
            continue  # a partial reading proves nothing about the rows it did not see
        version = str(entry.version)
        old_rows = _rows_text((t, v) for t, v in entry.torch)
        if old_rows != _rows_text(found.rows):
            changes.append(
                Change(
                    package="kaolin",
                    version=version,
                    key="torch",
                    old=old_rows,
                    new=_rows_text(found.rows),
                )
            )
        if found.python and ", ".join(found.python) != ", ".join(entry.python):
            changes.append(
                Change(
                    package="kaolin",
                    version=version,
                    key="python",
                    old=", ".join(entry.python),
                    new=", ".join(found.python),
                )
            )
        if not found.rows:
            continue  # nothing on any page: reported above; an entry with no rows cannot be written
        flags = tuple(f for f in entry.unverified if f.split("[")[0] not in ("torch", "python"))
        updated.append(
            replace(
                entry,
                python=found.python or entry.python,
                torch=found.rows,
                torch_python=found.torch_python,
                unverified=flags,
                source=f"[{KAOLIN_SOURCE_KEY}] {date}: the find-links pages of every listed "
                f"build; {entry.source}",
            )
        )

    target = output_dir / "packages" / "kaolin.toml" if output_dir is not None else None
    keep: dict[Version, ExtensionWheels] = {}
    if target is not None and target.is_file() and output_dir is not None:
        from ..index.load import load_index

        merged = load_index([output_dir], include_shipped=True, include_user=False)
        mine = merged.package("kaolin")
        if mine is not None:
            keep = {
                w.version: w
                for w in mine.wheels
                if merged.origin(f"package kaolin wheels {w.version}") == str(target)
            }
    base = shipped.package("kaolin")
    base_wheels = {w.version: w for w in base.wheels} if base is not None else {}
    overlay = {v: w for v, w in keep.items() if v not in {u.version for u in updated}}
    for wheels in updated:
        before = base_wheels.get(wheels.version)
        if before is None or (before.torch, before.python, before.torch_python) != (
            wheels.torch,
            wheels.python,
            wheels.torch_python,
        ):
            overlay[wheels.version] = wheels
    entries_out = [overlay[v] for v in sorted(overlay)]
    document = _kaolin_document(entries_out, dict(index.sources), today=date) if entries_out else ""
    written: Path | None = None
    if target is not None and output_dir is not None and not dry_run:
        if entries_out:
            written = write_overlay_file(output_dir, Path("packages") / "kaolin.toml", document)
        elif target.is_file():
            target.unlink()
    return KaolinRefresh(
        facts=tuple(facts),
        changes=tuple(changes),
        unreachable=tuple(unreachable),
        overlay=written,
        overlay_releases=tuple(str(v) for v in sorted(overlay)),
        document=document,
    )


def _kaolin_document(entries: Sequence[Any], sources: Mapping[str, str], *, today: str) -> str:
    import tomli_w

    cited: dict[str, str] = {}
    tables = []
    for wheels in entries:
        for key in re.findall(r"\[([A-Za-z][\w.-]*)\]", wheels.source):
            if key in sources and key != KAOLIN_SOURCE_KEY:
                cited[key] = sources[key]
        python_of = dict(wheels.torch_python)
        groups: list[dict[str, Any]] = []
        for torch, variants in wheels.torch:
            python = list(python_of.get(torch, ()))
            if (
                groups
                and groups[-1]["variants"] == list(variants)
                and groups[-1].get("python", []) == python
            ):
                groups[-1]["versions"].append(torch)
                continue
            group: dict[str, Any] = {"versions": [torch], "variants": list(variants)}
            if python:
                group["python"] = python
            groups.append(group)
        table: dict[str, Any] = {
            "version": str(wheels.version),
            "python": list(wheels.python),
            "platforms": list(wheels.platforms),
        }
        if str(wheels.torch_window):
            table["torch_window"] = str(wheels.torch_window)
        table["torch"] = groups
        if wheels.notes:
            table["notes"] = wheels.notes
        flags = [f for f in wheels.unverified if f.split("[")[0] in table]
        if flags:
            table["unverified"] = flags
        table["source"] = wheels.source
        tables.append(table)
    cited[KAOLIN_SOURCE_KEY] = (
        f"Re-read by `cuda-resolve index refresh kaolin` on {today}: the find-links page of every "
        "(torch, CUDA) build the index lists for these kaolin releases"
    )
    body = {
        "format": 1,
        "sources": dict(sorted(cited.items())),
        "package": {"name": "kaolin"},
        "wheels": tables,
    }
    header = (
        "# kaolin wheel matrices re-read by `cuda-resolve index refresh kaolin` (an "
        "index overlay;\n"
        "# format: docs/index-format.md). Each [[wheels]] table replaces the shipped one of "
        "its version.\n"
    )
    return header + tomli_w.dumps(body)
