"""Pinning a complete plan's wheels to exact files when it is applied: URL and sha256 from the
index.

``plan`` stays offline, so its wheel items name a requirement (``torch==2.6.0+cu126``) and the
index pip reads it from. When the plan is applied (or dry-run before applying), :func:`pin_plan`
reads each such item's project page on that index (PEP 691 JSON, else the PEP 503 page), picks
the file pip would pick for this interpreter (the same version, the best wheel tag), and writes
``name @ URL#sha256=HASH`` into the pip step: pip then installs that exact file and checks its
hash (it verifies the fragment of a requirement the user gave), and the plan records both. An
item whose page does not answer, or lists no hash, stays as it was, with a note saying so: the
executor's reachability check decides whether the run can go on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from urllib.parse import urldefrag, urljoin

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .._frozen import frozen, replace
from ..environment import Environment
from ..net.pages import file_name, page_links
from ..plan import PYPI_SIMPLE, PipStep, Plan, PlanItem

__all__ = ["PEP691_ACCEPT", "IndexFile", "files_on_page", "pin_plan"]

#: What a project page is asked for: PEP 691 JSON first, the PEP 503 page otherwise.
PEP691_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


@frozen
class IndexFile:
    filename: str
    url: str  # without its fragment
    sha256: str | None


def files_on_page(text: str, content_type: str, page_url: str) -> list[IndexFile]:
    """The files a project page lists: PEP 691 JSON (``files``, ``hashes.sha256``) or an HTML page
    whose links carry ``#sha256=`` fragments (PEP 503, and PyTorch's pages). Pure."""
    found: list[IndexFile] = []
    if "json" in content_type:
        try:
            data = json.loads(text)
        except ValueError:
            return []
        entries = data.get("files") if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("filename"), str)
                or not isinstance(entry.get("url"), str)
            ):
                continue
            hashes = entry.get("hashes")
            sha = hashes.get("sha256") if isinstance(hashes, dict) else None
            found.append(
                IndexFile(
                    filename=entry["filename"],
                    url=urldefrag(urljoin(page_url, entry["url"])).url,
                    sha256=sha if isinstance(sha, str) else None,
                )
            )
        return found
    for link in page_links(text, page_url):
        url, fragment = urldefrag(link)
        name, _, value = fragment.partition("=")
        found.append(
            IndexFile(
                filename=file_name(url),
                url=url,
                sha256=value.lower() if name == "sha256" and value else None,
            )
        )
    return found


#: ``page URL -> (body, content type, the URL that answered)``; raises on failure (the
#: caller's network client, with cuda-resolve's mirrors applied).
ReadPage = Callable[[str], tuple[str, str, str]]


def _best_file(
    files: Sequence[IndexFile], item: PlanItem, version: Version, env: Environment
) -> IndexFile | None:
    """The wheel pip would take for ``item`` here: the same name and version, the
    highest-priority tag."""
    priority = {tag: rank for rank, tag in enumerate(env.wheel_tags())}
    wanted = canonicalize_name(item.name)
    best: tuple[int, IndexFile] | None = None
    for entry in files:
        try:
            name, found_version, _, tags = parse_wheel_filename(entry.filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name != wanted or found_version != version:
            continue
        rank = min((priority[tag] for tag in tags if tag in priority), default=None)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, entry)
    return best[1] if best else None


def _index_of(step: PipStep) -> str | None:
    for option in ("--index-url", "-i", "--extra-index-url"):
        if option in step.args[:-1]:
            return step.args[step.args.index(option) + 1]
    return None


def _page_for(item: PlanItem, step: PipStep, pypi: str) -> str | None:
    """The project page listing ``item``'s files, for the step that installs it."""
    if step.torch_index_only and not step.pypi_index:
        index = _index_of(step)
        return f"{index.rstrip('/')}/{canonicalize_name(item.name)}/" if index else None
    if item.find_links:
        return item.find_links
    if item.index and item.index.rstrip("/") == PYPI_SIMPLE:
        return f"{pypi.rstrip('/')}/{canonicalize_name(item.name)}/"
    return None


def pin_plan(
    plan: Plan, env: Environment, read_page: ReadPage, *, pypi_index: str = PYPI_SIMPLE
) -> Plan:
    """``plan`` with each wheel item whose index lists a hash pinned to that file (see the module
    doc). ``pypi_index``: the index pip uses for PyPI names (the user's mirror)."""
    pages: dict[str, list[IndexFile] | str] = {}
    items = list(plan.items)
    steps = list(plan.steps)
    notes: list[str] = []
    for at, item in enumerate(items):
        if item.kind != "wheel" or item.requirement is None or item.sha256:
            continue
        where = next((n for n, step in enumerate(steps) if item.requirement in step.args), None)
        if where is None:
            continue
        page = _page_for(item, steps[where], pypi_index)
        if page is None:
            continue
        if page not in pages:
            try:
                text, content_type, answered = read_page(page)
                pages[page] = files_on_page(text, content_type, answered)
            except Exception as exc:  # any failure leaves the item unpinned, said once
                pages[page] = str(exc) or type(exc).__name__
        listed = pages[page]
        if isinstance(listed, str):
            notes.append(
                f"{item.name} {item.version}: its index page {page} could not be read ({listed}): "
                "not pinned to a file"
            )
            continue
        chosen = _best_file(listed, item, Version(item.requirement.rsplit("==", 1)[-1]), env)
        if chosen is None or not chosen.sha256:
            notes.append(
                f"{item.name} {item.version}: {page} lists no {'hash for the' if chosen else ''} "
                "wheel for this interpreter: not pinned to a file"
            )
            continue
        requirement = item.requirement.rsplit("==", 1)[0]
        pinned = f"{requirement} @ {chosen.url}#sha256={chosen.sha256}"
        step = steps[where]
        steps[where] = replace(
            step, args=tuple(pinned if word == item.requirement else word for word in step.args)
        )
        items[at] = replace(item, url=chosen.url, sha256=chosen.sha256)
    if not notes and items == list(plan.items):
        return plan
    return replace(plan, items=tuple(items), steps=tuple(steps), notes=(*plan.notes, *notes))
