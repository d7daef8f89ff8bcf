"""The part of conda's match-spec language that package records and install commands use.

``depends`` entries (``pytorch 2.5.1 cuda126_py312_h1234_300``, ``python >=3.11,<3.12.0a0``,
``__cuda >=12``, ``pytorch * cuda*``) and the specs users type (``kaolin``, ``pytorch=2.5``,
``pointnet2_ops==3.0.0``, ``pytorch[build=cuda*]``, ``conda-forge::kaolin``). Versions are
compared with PEP 440's order where both sides parse (every version these packages use), else
component by component. Conda's solvers remain the judge of a solve; this only lets
cuda-resolve ask "does this record satisfy that dependency" without importing conda.
"""

from __future__ import annotations

import fnmatch
import re

from packaging.version import InvalidVersion, Version

from .._frozen import frozen
from ..errors import UsageError

__all__ = ["MatchSpec", "compare_versions", "parse_spec", "version_matches"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_OPERATOR = re.compile(r"(==|!=|>=|<=|>|<|~=|=)?(.+)")


@frozen(kw_only=False)
class MatchSpec:
    """``name``, a version expression (``*`` = any) and a build glob (``*`` = any)."""

    name: str
    version: str = "*"
    build: str = "*"
    channel: str | None = None

    def matches(self, name: str, version: str, build: str) -> bool:
        return (
            name == self.name
            and version_matches(self.version, version)
            and fnmatch.fnmatchcase(build, self.build)
        )

    def __str__(self) -> str:
        if self.build != "*":
            return f"{self.name} {self.version} {self.build}"
        return self.name if self.version == "*" else f"{self.name} {self.version}"


def parse_spec(text: str) -> MatchSpec:
    """One spec in any of the forms above; :class:`UsageError` names a text that is none."""
    rest = text.strip()
    channel = None
    if "::" in rest:
        channel, rest = rest.split("::", 1)
    brackets: dict[str, str] = {}
    if rest.endswith("]") and "[" in rest:
        rest, inner = rest[:-1].split("[", 1)
        for item in inner.split(","):
            key, _, value = item.partition("=")
            brackets[key.strip()] = value.strip().strip("'\"")
    match = _NAME.match(rest)
    if match is None:
        raise UsageError(
            f"{text!r} is not a conda package spec",
            hint="write it as NAME, NAME=VERSION or 'NAME VERSION BUILD'",
        )
    name, tail = match.group(0), rest[match.end() :].strip()
    version, build = "*", "*"
    if tail.startswith("=") and not tail.startswith(
        "=="
    ):  # name=1.2 (fuzzy: 1.2.*) or name=1.2=build
        version, _, build_text = tail[1:].partition("=")
        version = version if version.endswith("*") or version == "" else f"{version}.*"
        build = build_text or "*"
    elif tail:
        words = re.sub(r"(==|!=|>=|<=|~=|>|<)\s+", r"\1", tail).split()
        if len(words) > 2:
            raise UsageError(
                f"{text!r} has more than a version and a build after the name",
                hint="write it as 'NAME VERSION BUILD'",
            )
        version = words[0]
        build = words[1] if len(words) == 2 else "*"
    version = brackets.get("version", version) or "*"
    build = brackets.get("build", build) or "*"
    return MatchSpec(name=name, version=version, build=build, channel=channel)


def _components(text: str) -> tuple[tuple[int, int | str], ...]:
    return tuple(
        (1, int(piece)) if piece.isdigit() else (0, piece.lower())
        for piece in re.findall(r"\d+|[A-Za-z]+", text)
    )


def compare_versions(left: str, right: str) -> int:
    """-1, 0, 1: PEP 440's order where both parse, else component by component."""
    try:
        a: object = Version(left)
        b: object = Version(right)
    except InvalidVersion:
        a, b = _components(left), _components(right)
    return int(a > b) - int(a < b)  # type: ignore[operator]


def _one(expression: str, version: str) -> bool:
    match = _OPERATOR.fullmatch(expression.strip())
    if match is None:
        return False
    operator, wanted = match.group(1) or "", match.group(2).strip()
    if wanted == "*" and operator in ("", "="):
        return True
    if wanted.endswith("*"):  # 2.5.* or 2.5*: a prefix at a component boundary
        prefix = wanted.rstrip("*").rstrip(".")
        inside = (
            version == prefix
            or version.startswith(prefix + ".")
            or version.startswith(prefix + "+")
        )
        return not inside if operator == "!=" else inside
    if operator == "=":  # =1.2 in an expression: fuzzy, as conda reads it
        return version == wanted or version.startswith(wanted + ".")
    if operator == "~=":
        base = wanted.rsplit(".", 1)[0]
        return compare_versions(version, wanted) >= 0 and (
            version == base or version.startswith(base + ".")
        )
    order = compare_versions(version, wanted)
    return {
        "": order == 0,
        "==": order == 0,
        "!=": order != 0,
        ">=": order >= 0,
        "<=": order <= 0,
        ">": order > 0,
        "<": order < 0,
    }[operator]


def version_matches(expression: str, version: str) -> bool:
    """Does ``version`` satisfy a conda version expression (``>=2.5,<2.6|==3.0``, ``2.5.*``)?"""
    expression = expression.strip()
    if expression in ("", "*"):
        return True
    return any(
        all(_one(part, version) for part in alternative.split(","))
        for alternative in expression.split("|")
    )
