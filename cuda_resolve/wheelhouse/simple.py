"""The wheelhouse's static pages: a PEP 503 simple index and one flat find-links page.

``simple/index.html`` lists the projects, ``simple/<name>/index.html`` each project's wheels;
``index.html`` at the root lists every wheel (for ``pip --find-links ROOT/index.html`` or
``--find-links http://host/``). Links are relative, so the folder can be served by any static
web server or read as ``file://``; each carries ``#sha256=`` for pip to check.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from .._frozen import frozen

__all__ = [
    "PageLink",
    "page_paths",
    "pages",
    "render_flat_page",
    "render_project_page",
    "render_root_page",
]


@frozen
class PageLink:
    """One wheel as the pages show it; ``path`` is relative to the wheelhouse root."""

    project: str  # canonical name
    filename: str
    path: str  # "wheels/<name>/<digest>/<file>"
    sha256: str
    requires_python: str | None = None


def _escape(text: str) -> str:
    import html  # imported where used: plan and doctor never load it (issue 28)

    return html.escape(text)


def _anchor(link: PageLink, prefix: str) -> str:
    href = prefix + "/".join(quote(part) for part in link.path.split("/"))
    attributes = f'href="{_escape(href)}#sha256={link.sha256}"'
    if link.requires_python:
        attributes += f' data-requires-python="{_escape(link.requires_python)}"'
    return f"    <a {attributes}>{_escape(link.filename)}</a><br/>\n"


def _page(title: str, body: Iterable[str]) -> str:
    return (
        "<!DOCTYPE html>\n<html>\n  <head>\n"
        '    <meta name="pypi:repository-version" content="1.0">\n'
        f"    <title>{_escape(title)}</title>\n  </head>\n  <body>\n"
        f"    <h1>{_escape(title)}</h1>\n" + "".join(body) + "  </body>\n</html>\n"
    )


def render_project_page(project: str, links: Sequence[PageLink]) -> str:
    """``simple/<project>/index.html``: two folders below the root."""
    return _page(f"Links for {project}", (_anchor(link, "../../") for link in links))


def render_root_page(projects: Iterable[str]) -> str:
    """``simple/index.html``."""
    body = (f'    <a href="{quote(name)}/">{_escape(name)}</a><br/>\n' for name in sorted(projects))
    return _page("Simple index", body)


def render_flat_page(links: Sequence[PageLink]) -> str:
    """``index.html`` at the root: every wheel, for ``--find-links``."""
    return _page("cuda-resolve wheelhouse", (_anchor(link, "") for link in links))


def pages(links: Iterable[PageLink]) -> Mapping[str, str]:
    """Every page by its path relative to the root (``simple/<name>/index.html`` etc.)."""
    by_project: dict[str, list[PageLink]] = {}
    everything = sorted(links, key=lambda link: (link.project, link.filename))
    for link in everything:
        by_project.setdefault(link.project, []).append(link)
    result = {
        "index.html": render_flat_page(everything),
        os.path.join("simple", "index.html"): render_root_page(by_project),
    }
    for project, project_links in by_project.items():
        result[os.path.join("simple", project, "index.html")] = render_project_page(
            project, project_links
        )
    return result


def page_paths(root: Path) -> set[str]:
    """Project pages present under ``root/simple`` (relative paths), to remove stale ones."""
    simple = root / "simple"
    if not simple.is_dir():
        return set()
    return {
        os.path.join("simple", child.name, "index.html")
        for child in simple.iterdir()
        if child.is_dir()
    }
