"""pip's INI configuration: set ``[global] index-url`` and keep every other line as it was.

The edit is line-based so comments, ordering, other sections and other keys survive byte for
byte; the result is parsed with :mod:`configparser` (what pip uses) before it is returned. This
module never writes ``trusted-host``: certificate trouble is fixed with the system trust store,
not by switching verification off.
"""

from __future__ import annotations

import configparser
import re

from .._frozen import frozen
from ..config import ConfigError

__all__ = ["PipSettings", "read_pip_settings", "set_index_url"]

_SECTION = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*$")
_INDEX_KEY = re.compile(r"^(?P<key>index[-_]url)\s*[=:]", re.IGNORECASE)
_COMMENT = re.compile(r"^\s*[#;]")


@frozen
class PipSettings:
    """What one pip configuration file says about indexes (``[global]`` and ``[install]``)."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    cert: str | None = None


def _parser(text: str, origin: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, source=origin)
    except configparser.Error as exc:
        raise ConfigError(
            f"{origin}: pip cannot read this file: {exc}".replace("\n", " "),
            hint=f"fix {origin} by hand (pip itself would fail on it) and run the command again",
        ) from None
    return parser


def _values(parser: configparser.RawConfigParser, key: str) -> tuple[str, ...]:
    out: list[str] = []
    for section in ("global", "install", "download"):
        for name in (key, key.replace("-", "_")):
            if parser.has_option(section, name):
                out.extend(parser.get(section, name).split())
    return tuple(dict.fromkeys(out))


def read_pip_settings(text: str, *, origin: str = "pip.conf") -> PipSettings:
    parser = _parser(text, origin)
    index = _values(parser, "index-url")
    cert = _values(parser, "cert")
    return PipSettings(
        index_url=index[-1] if index else None,
        extra_index_urls=_values(parser, "extra-index-url"),
        find_links=_values(parser, "find-links"),
        trusted_hosts=_values(parser, "trusted-host"),
        cert=cert[-1] if cert else None,
    )


def set_index_url(text: str, url: str, *, origin: str = "pip.conf") -> str:
    """``text`` with ``[global] index-url = url``; all else kept line for line.

    An ``index-url`` already set in a command section (``[install]`` overrides ``[global]`` for
    ``pip install``) is changed too, so the mirror applies to every command.
    """
    _parser(text, origin)  # refuse to edit a file pip could not read
    newline = "\r\n" if "\r\n" in text else "\n"  # keep a Windows file's line endings
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    new_line = f"index-url = {url}{newline}"
    section: str | None = None
    header_at: int | None = None
    out: list[str] = []
    replaced: set[str] = set()
    skipping_continuation = False
    for line in lines:
        header = _SECTION.match(line)
        if header:
            skipping_continuation = False
            section = header.group("name").strip()
            if section == "global" and header_at is None:
                header_at = len(out)
            out.append(line)
            continue
        if skipping_continuation:
            if line.strip() and line[0] in " \t" and not _COMMENT.match(line):
                continue  # a continuation line of the index-url value being replaced
            skipping_continuation = False
        if section is not None and _INDEX_KEY.match(line):
            # [global] and command sections ([install] overrides [global] for `pip install`)
            skipping_continuation = True
            if section not in replaced:
                out.append(new_line)
                replaced.add(section)
            continue
        out.append(line)
    if "global" not in replaced:
        if header_at is not None:
            out.insert(header_at + 1, new_line)
        else:
            if out and out[-1].strip():
                out.append(newline)
            out.extend([f"[global]{newline}", new_line])
    result = "".join(out)
    parsed = read_pip_settings(result, origin=origin)
    if parsed.index_url != url:  # pragma: no cover - a bug in the editor above, not user input
        raise ConfigError(
            f"{origin}: editing index-url failed", hint="report this as a cuda-resolve bug"
        )
    return result
