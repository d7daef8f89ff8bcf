"""Secrets are never shown: ``https://user:token@host/`` prints as ``https://user:***@host/``.

pip, conda and requests take credentials in a URL (a lab mirror behind a login, a proxy with a
password, a signed download link). The configuration files keep the real value; what
cuda-resolve prints, puts in ``--json`` output, in an error message or in a log file goes through
:func:`redact` (one URL) or :func:`redact_urls` (a text), which hide:

* the password of a URL's user info (``https://user:pw@host`` -> ``https://user:***@host``). As in
  pip, a user name alone is hidden too (``https://TOKEN@host/`` -> ``https://***@host/``): it is
  often the token itself;
* the value of a query or fragment parameter whose name says it is a credential
  (``?token=...`` -> ``?token=***``), compared case-insensitively, ``-`` read as ``_``: the names
  in :data:`SECRET_PARAMETERS`, and any name ending in ``token``, ``secret``, ``signature``,
  ``password``, ``passwd``, ``credential``, ``credentials``, ``apikey`` or ``_key``
  (``access_token``, ``X-Amz-Signature``, ``client_secret``, ``private_key``);
* a proxy written without a scheme, as pip's ``--proxy`` takes it (``user:pw@proxy:3128``): after
  ``--proxy``, ``proxy=`` / ``*_PROXY=`` / ``proxy:``, or as a whole value (:func:`redact`, a
  string of :func:`redact_data`, an argument of a command line);
* the credentials of an ``Authorization:`` / ``Proxy-Authorization:`` header line;
* every value handed to :func:`register_secret`, wherever it appears (one shorter than
  :data:`MIN_SECRET_LENGTH` wherever it stands as a word of its own: ``pw1`` in ``as pw1.`` but
  not in ``pw12``, so a short password is hidden without garbling every word). This is the
  process-wide registry for secrets that reach a text without a URL's shape to find them by:
  the values of ``${NAME}`` variables that pip expands in a requirements file (``--index-url
  https://u:${TOKEN}@host/simple``) are known only to the environment, and pip or a build may
  print them anywhere. The reader of requirement files (``cuda_resolve/install/reqfile.py``)
  registers them: ``for value in secret_values_from_environment(names): register_secret(value)``
  for the names it expands inside a URL or an option's value (``${HOME}`` in a path is no secret).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping

from ._lazy_re import lazy_compile

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MASK",
    "MIN_SECRET_LENGTH",
    "SECRET_PARAMETERS",
    "clear_secrets",
    "is_secret_parameter",
    "redact",
    "redact_data",
    "redact_urls",
    "register_secret",
    "secret_values_from_environment",
    "url_without_userinfo",
    "without_userinfo",
]

MASK = "***"

#: Query and fragment parameters whose value is a credential (lower case, ``-`` as ``_``).
SECRET_PARAMETERS = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "auth",
        "auth_token",
        "authorization",
        "credential",
        "credentials",
        "id_token",
        "jwt",
        "key",
        "pass",
        "passwd",
        "password",
        "pw",
        "pwd",
        "refresh_token",
        "secret",
        "session",
        "session_id",
        "sessionid",
        "sig",
        "signature",
        "token",
    }
)
_SECRET_SUFFIXES = (
    "token",
    "secret",
    "signature",
    "password",
    "passwd",
    "credential",
    "credentials",
    "apikey",
    "_key",
)

#: Registered values shorter than this are masked where they stand as a word of their own (not
#: inside a longer run of letters and digits): masking "abc" inside "abcd" would garble every
#: message, and leaving a short password in view would show it.
MIN_SECRET_LENGTH = 4

# scheme "://", then the user info up to its "@". A password may hold "/" typed as is
# (``https://lab:pa/ss@mirror/``): a text up to the last "@" of the URL is the user info when the
# part before its first "/" holds an "@", or a "user:password" whose password is not a port
# number; otherwise it is a host and a path that happens to hold "@" (shown as it is).
# Linear on any text: a scheme is tried once per run of scheme characters (the run taken whole,
# as an atomic group would), and the user info stops at the next "://" (two URLs, one after the
# other, are two matches), so no character is scanned again from each of many starts.
_URL = lazy_compile(
    r"(?P<scheme>(?<![A-Za-z0-9+.\-])(?=(?P<run>[A-Za-z0-9+.\-]*[A-Za-z][A-Za-z0-9+.\-]*))(?P=run)://)"
    r"(?P<userinfo>(?:[^\s'\"<>()\[\],:]|:(?!//))*)@"
)
# "?name=value", "&name=value" or "#name=value": the value runs to the next parameter, fragment,
# space or quote (a "/" stays in it: pip appends "/project/" to an index URL with a query).
_PARAMETER = re.compile(
    r"(?P<lead>[?&#;])(?P<name>[A-Za-z0-9_.\-]+)=(?P<value>[^&#;\s'\"<>)\]\x1b]*)"
)
# A scheme-less proxy after the options and variables that name one (its user info runs to the
# last "@" of the value: a password may hold one).
_PROXY_OPTION = lazy_compile(
    r"(?P<lead>(?:--proxy|\b[A-Za-z_]*proxy)(?:\s*=\s*|\s*:\s+|\s+)['\"]?)(?P<info>[^\s'\"]+)@",
    re.IGNORECASE,
)
# A whole value that is "user:password@host[:port][/]" (pip's --proxy form).
_BARE_CREDENTIALS = lazy_compile(
    r"(?P<lead>\s*['\"]?)(?P<info>[^\s'\"/:@]+:[^\s'\"]*)@(?P<host>(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d+)?/?['\"]?\s*)"
)
_AUTH_HEADER = re.compile(
    r"(?P<lead>\b(?:proxy-)?authorization\s*:\s*(?:(?:basic|bearer|token|digest)\s+)?)(?P<value>[^\s'\"]+)",
    re.IGNORECASE,
)

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first: a secret holding another is masked whole
_short: re.Pattern[str] | None = None  # the short ones, each as a word of its own


def register_secret(value: str) -> None:
    """Mask ``value`` wherever it appears in what :func:`redact_urls` and :func:`redact_data`
    return, for the rest of the process; one shorter than :data:`MIN_SECRET_LENGTH` characters
    where it stands as a word of its own. Blank values (and the mask itself) are ignored."""
    global _secrets, _short
    value = value.strip()
    if not value or MASK in value:
        return
    with _lock:
        if value not in _secrets:
            _secrets = tuple(sorted({*_secrets, value}, key=len, reverse=True))
            short = [re.escape(s) for s in _secrets if len(s) < MIN_SECRET_LENGTH]
            _short = (
                re.compile(rf"(?<![A-Za-z0-9])(?:{'|'.join(short)})(?![A-Za-z0-9])")
                if short
                else None
            )


def clear_secrets() -> None:
    """Forget every registered secret (for tests)."""
    global _secrets, _short
    with _lock:
        _secrets, _short = (), None


def secret_values_from_environment(
    names: Iterable[str], environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The values of the variables ``names`` that are set in ``environ`` (default: the process's),
    each once, in order, blank ones left out: what to pass to :func:`register_secret` for the
    ``${NAME}`` a requirements file expands."""
    env = os.environ if environ is None else environ
    found: list[str] = []
    for name in names:
        value = env.get(name, "").strip()
        if value and value not in found:
            found.append(value)
    return tuple(found)


def is_secret_parameter(name: str) -> bool:
    """Whether a query parameter called ``name`` carries a credential (see the module's rules)."""
    key = name.lower().replace("-", "_")
    return key in SECRET_PARAMETERS or key.endswith(_SECRET_SUFFIXES)


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


def _masked_parameter(match: re.Match[str]) -> str:
    if not match.group("value") or not is_secret_parameter(match.group("name")):
        return match.group(0)
    return f"{match.group('lead')}{match.group('name')}={MASK}"


def _masked_proxy(match: re.Match[str]) -> str:
    info = match.group("info")
    if "://" in info:  # a URL: _URL's rule decides
        return match.group(0)
    return f"{match.group('lead')}{_shown(info)}@"


def _masked_bare(match: re.Match[str]) -> str:
    return f"{match.group('lead')}{_shown(match.group('info'))}@{match.group('host')}"


def _masked_header(match: re.Match[str]) -> str:
    return f"{match.group('lead')}{MASK}"


def redact(url: str) -> str:
    """``url`` with its credentials hidden: the password (or a lone user name) of its user info,
    credential query parameters, the password of a scheme-less ``user:pw@proxy:port``, and any
    registered secret; a URL without any comes back unchanged."""
    text = _bare(_URL.sub(_masked, _without_registered(url), count=1))
    return _PARAMETER.sub(_masked_parameter, text) if "=" in text else text


def url_without_userinfo(url: str) -> str:
    """``url`` less its user and password: ``https://user:token@host/simple`` ->
    ``https://host/simple`` (an ``@`` after the host, ``x.git@main``, is the URL's own)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced IPv6 bracket: only the part before the host is dropped
        scheme, separator, rest = url.partition("://")
        host_end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
        if not separator or "@" not in rest[:host_end]:
            return url
        return f"{scheme}://{rest[:host_end].rpartition('@')[2]}{rest[host_end:]}"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


#: A URL inside free text (a requirement line, a decision): up to the next space or quote.
_URL_IN_TEXT = lazy_compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


def without_userinfo(text: str) -> str:
    """``text`` with every URL in it less its user and password (:func:`url_without_userinfo`):
    for files others read (a lock), where even a masked user is not written."""
    if "@" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda found: url_without_userinfo(found.group(0)), text)


def redact_urls(text: str) -> str:
    """``text`` with every secret in it hidden (see the module's rules): messages, notes, diffs,
    log lines, command lines."""
    text = _without_registered(text)
    if "@" in text:
        text = _PROXY_OPTION.sub(_masked_proxy, _bare(_URL.sub(_masked, text)))
    if "=" in text:
        text = _PARAMETER.sub(_masked_parameter, text)
    if ":" in text:
        text = _AUTH_HEADER.sub(_masked_header, text)
    return text


def _bare(text: str) -> str:
    """A whole value "user:password@host[:port]" (no scheme) with its password masked."""
    if "@" not in text or "://" in text or _BARE_CREDENTIALS.fullmatch(text) is None:
        return text
    return _BARE_CREDENTIALS.sub(_masked_bare, text, count=1)


def _without_registered(text: str) -> str:
    for secret in _secrets:
        if len(secret) >= MIN_SECRET_LENGTH and secret in text:
            text = text.replace(secret, MASK)
    short = _short
    return text if short is None else short.sub(MASK, text)


def redact_data(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string in it, keys included, passed
    through :func:`redact_urls`.

    In a list of strings (a command line's arguments) the value after ``--proxy`` is read as a
    proxy, so ``["--proxy", "user:pw@proxy:3128"]`` shows no password either."""
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, dict):
        return {
            redact_urls(key) if isinstance(key, str) else key: redact_data(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        shown: list[Any] = []
        for item in value:
            if isinstance(item, str) and shown and shown[-1] == "--proxy":
                item = redact_urls(f"--proxy {item}")[len("--proxy ") :]
            shown.append(redact_data(item))
        return shown
    return value
