"""What an HTML index page links to: the one link parser for PEP 503 and find-links pages.

Used by ``index refresh`` (torch and kaolin pages), ``mirror test`` and ``doctor --network``.
Pure: it parses text a caller fetched.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import unquote, urljoin, urlsplit

__all__ = ["ARCHIVE_SUFFIXES", "distribution_links", "file_name", "page_links"]

#: File names that are distributions (wheels, sdists, conda packages).
ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".conda")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag.lower() == "a":
            for key, value in attrs:
                if key.lower() == "href" and value:
                    self.hrefs.append(value.strip())


def page_links(html: str, base_url: str | None = None) -> list[str]:
    """Every ``<a href>`` of ``html``, made absolute against ``base_url`` when given."""
    parser = _Links()
    parser.feed(html)
    parser.close()
    if base_url is None:
        return parser.hrefs
    return [urljoin(base_url, href) for href in parser.hrefs]


def file_name(url: str) -> str:
    """The file a link points at: ``.../torch-2.5.1%2Bcu124-....whl#sha256=..`` ->
    ``torch-2.5.1+cu124-....whl``."""
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def distribution_links(html: str, base_url: str | None = None) -> list[str]:
    """The links of ``html`` that point at distribution files (:data:`ARCHIVE_SUFFIXES`)."""
    return [
        link
        for link in page_links(html, base_url)
        if file_name(link).lower().endswith(ARCHIVE_SUFFIXES)
    ]
