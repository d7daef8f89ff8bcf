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

# scheme "://", then the user info up to its "@". A password may hold "/" typed as is
# (``https://lab:pa/ss@mirror/``): a text up to the last "@" of the URL is the user info when the
# part before its first "/" holds an "@", or a "user:password" whose password is not a port
# number; otherwise it is a host and a path that happens to hold "@" (shown as it is).
_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s'\"<>()\[\],]*)@")


def _shown(userinfo: str) -> str:
    user, colon, _password = userinfo.partition(":")
    return f"{user}:{MASK}" if colon and user else MASK


def _masked(match: re.Match[str]) -> str:
    scheme, info = match.group("scheme"), match.group("userinfo")
    first, slash, rest = info.partition("/")
    if slash:
        if "@" in first:  # user info, host, then a path holding "@"
            userinfo, _, host = first.rpartition("@")
            return f"{scheme}{_shown(userinfo)}@{host}/{rest}@"
        user, colon, after = first.partition(":")
        if not colon or not user or after.isdigit():  # host[:port] and a path holding "@"
            return match.group(0)
    return f"{scheme}{_shown(info)}@"


def redact(url: str) -> str:
    """``url`` with the password (or a lone user name) of its user info replaced by ``***``;
    a URL without user info comes back unchanged."""
    return _URL.sub(_masked, url, count=1)


def redact_urls(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact` (messages, notes, diffs)."""
    if "@" not in text:
        return text
    return _URL.sub(_masked, text)


def redact_data(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string passed through :func:`redact_urls`."""
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, dict):
        return {key: redact_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(item) for item in value]
    return value
