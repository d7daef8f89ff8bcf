"""Expand a package's ``find_links`` / ``wheel_url`` pattern for one torch build.

The placeholders (docs/index-format.md) are the ones extension projects put in their URLs:

===================  ===================================  =============================
placeholder          meaning                              torch 2.5.1+cu124, Python 3.10
===================  ===================================  =============================
``{torch}``          torch base version                   ``2.5.1``
``{torch_minor}``    torch major.minor                    ``2.5``
``{torch_nodot}``    torch base version without dots      ``251``
``{variant}``        the build's local label              ``cu124``
``{cuda}``           its CUDA version                     ``12.4``
``{cuda_nodot}``     its CUDA version without the dot     ``124``
``{python_nodot}``   Python major+minor                   ``310``
``{python_tag}``     wheel Python tag (wheel_url only)    ``cp310``
``{abi_tag}``        wheel ABI tag (wheel_url only)       ``cp310`` (``cp313t`` for 3.13t)
``{platform}``       wheel platform tag (wheel_url only)  ``linux_x86_64``
``{version}``        the package version (wheel_url only) ``0.18.0``
===================  ===================================  =============================

A pattern that needs a value the build does not have (``{cuda_nodot}`` for a cpu build, or
``{python_nodot}`` when no Python was given) expands to ``None``: there is no such page.

Every URL the index puts into a plan is ``https://`` (plain ``http://`` only to a loopback host,
where test servers live): :func:`url_problem` says why one is not, and :func:`pattern_problem`
checks a pattern whole: its placeholders are bare names (no format spec such as ``{torch:>9}``,
no conversion such as ``{torch!r}``, no attribute or index), and its scheme and host are
literal text. The index loader refuses what they flag; :func:`expand_pattern` refuses it again,
so an index built any other way cannot put such a URL into a plan either.
"""

from __future__ import annotations

import ipaddress
import string
from collections.abc import Iterable
from urllib.parse import urlsplit

from packaging.version import Version

from ..errors import IndexDataError
from ..versions import CudaVersion

__all__ = [
    "PLACEHOLDERS",
    "expand_pattern",
    "pattern_fields",
    "pattern_problem",
    "repository_problem",
    "url_problem",
]

#: Every placeholder a ``find_links`` or ``wheel_url`` pattern may use.
PLACEHOLDERS = frozenset(
    {
        "torch",
        "torch_minor",
        "torch_nodot",
        "variant",
        "cuda",
        "cuda_nodot",
        "python_nodot",
        "python_tag",
        "abi_tag",
        "platform",
        "version",
    }
)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_problem(url: str) -> str | None:
    """Why ``url`` may not go into a plan, or None: it must be https with a host (plain http
    only to a loopback host), a valid port, no spaces or control characters."""
    if any(char.isspace() or ord(char) < 32 or char == "\x7f" for char in url):
        return "a URL has no spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not 1-65535
        host = parts.hostname
    except ValueError:
        return "the host or port is not valid"
    if not host:
        return "expected an https:// URL with a host"
    if parts.scheme == "https" or (parts.scheme == "http" and _loopback(host)):
        return None
    if parts.scheme == "http":
        return "plain http:// is refused (anyone on the way could swap the files); use https://"
    return f"the scheme {parts.scheme or '(none)'}:// is refused; use https://"


def repository_problem(url: str) -> str | None:
    """Why a recipe's git repository URL is refused, or None: ``git://`` and plain ``http://``
    (other than loopback) carry code unauthenticated; https, ssh and local paths are fine."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "git":
        return (
            "git:// is unauthenticated (anyone on the way could swap the code); use the "
            "https:// URL"
        )
    if scheme == "http":
        return url_problem(url)
    return None


def pattern_problem(pattern: str, allowed: Iterable[str]) -> str | None:
    """Why ``pattern`` is not a valid ``find_links`` / ``wheel_url`` pattern, or None."""
    problem = _placeholder_problem(pattern, frozenset(allowed))
    if problem is not None:
        return problem
    head = next(iter(string.Formatter().parse(pattern)), (pattern, None, None, None))[0]
    _scheme, sep, rest = head.partition("://")
    if not sep or "/" not in rest:
        return (
            "the scheme and host must be written out (https://host/...), not come from "
            "a placeholder"
        )
    return url_problem(pattern.replace("{", "").replace("}", ""))


def _placeholder_problem(pattern: str, known: frozenset[str]) -> str | None:
    """Placeholders are known bare names: no format spec, conversion, attribute or index."""
    try:
        parsed = list(string.Formatter().parse(pattern))
    except ValueError as exc:
        return str(exc)
    for _literal, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in known:
            return f"unknown placeholder {{{name}}}; known: {', '.join(sorted(known))}"
        if conversion:
            return f"placeholder {{{name}!{conversion}}} has a conversion; write {{{name}}}"
        if spec:
            return f"placeholder {{{name}:{spec}}} has a format spec; write {{{name}}}"
    return None


def pattern_fields(
    *,
    torch: str,
    variant: str,
    python: str | None = None,
    version: str | None = None,
    platform: str | None = None,
) -> dict[str, str]:
    """The placeholder values for one torch build (see the module docstring)."""
    base = Version(torch).base_version
    release = Version(base).release
    fields = {
        "torch": base,
        "torch_minor": f"{release[0]}.{release[1] if len(release) > 1 else 0}",
        "torch_nodot": base.replace(".", ""),
        "variant": variant,
    }
    if variant != "cpu":
        cuda = CudaVersion.parse(variant)
        fields["cuda"] = str(cuda)
        fields["cuda_nodot"] = f"{cuda.major}{cuda.minor}"
    if python is not None:
        digits = python.removesuffix("t").replace(".", "")
        fields["python_nodot"] = digits
        fields["python_tag"] = f"cp{digits}"
        fields["abi_tag"] = f"cp{digits}{'t' if python.endswith('t') else ''}"
    if version is not None:
        fields["version"] = version
    if platform is not None:
        fields["platform"] = platform
    return fields


def expand_pattern(
    pattern: str,
    *,
    torch: str,
    variant: str,
    python: str | None = None,
    version: str | None = None,
    platform: str | None = None,
) -> str | None:
    """``pattern`` with its placeholders filled, or ``None`` if one has no value here.

    Raises :class:`IndexDataError` for a placeholder with a format spec, conversion or unknown
    name, or a URL result that is not https (the loader refuses both already; this keeps an
    index built in memory from putting them into a plan)."""
    problem = _placeholder_problem(pattern, PLACEHOLDERS)
    if problem is not None:
        raise IndexDataError(
            f"URL pattern {pattern!r}: {problem}",
            hint="fix the index entry (`cuda-resolve index validate` checks a directory)",
        )
    fields = pattern_fields(
        torch=torch, variant=variant, python=python, version=version, platform=platform
    )
    needed = {name for _, name, _, _ in string.Formatter().parse(pattern) if name is not None}
    if not needed <= fields.keys():
        return None
    url = pattern.format(**fields)
    problem = url_problem(url) if "://" in url else None
    if problem is not None:
        raise IndexDataError(
            f"URL pattern {pattern!r} gives {url!r}: {problem}",
            hint="fix the index entry (`cuda-resolve index validate` checks a directory)",
        )
    return url
