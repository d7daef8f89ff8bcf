"""Credentials in URLs are never shown: ``https://user:token@host/`` prints as ``https://user:***@host/``.

pip, conda and requests take credentials in a URL's user info (a lab mirror behind a login, a
proxy with a password). The configuration files keep the real URL; what cuda-resolve prints, puts
in ``--json`` output or in an error message goes through :func:`redact` (one URL) or
:func:`redact_urls` (every URL inside a text). As in pip, a user name alone is hidden too
(``https://TOKEN@host/`` -> ``https://***@host/``): it is often the token itself.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MASK", "redact", "redact_data", "redact_urls"]

MASK = "***"

# scheme "://" then the authority: everything up to the path, query or fragment, or the end of
# the URL in running text (white space, quotes, brackets, a comma)
_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<authority>[^\s/?#'\"<>()\[\],]*)")


def _authority(authority: str) -> str:
    userinfo, at, hostport = authority.rpartition("@")  # the host follows the last "@", as in urlsplit
    if not at:
        return authority
    user, colon, _password = userinfo.partition(":")
    shown = f"{user}:{MASK}" if colon and user else MASK
    return f"{shown}@{hostport}"


def redact(url: str) -> str:
    """``url`` with the password (or a lone user name) of its user info replaced by ``***``;
    a URL without user info comes back unchanged."""
    return _URL.sub(lambda match: match.group("scheme") + _authority(match.group("authority")), url, count=1)


def redact_urls(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact` (messages, notes, diffs)."""
    if "@" not in text:
        return text
    return _URL.sub(lambda match: match.group("scheme") + _authority(match.group("authority")), text)


def redact_data(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string passed through :func:`redact_urls`."""
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, dict):
        return {key: redact_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(item) for item in value]
    return value
