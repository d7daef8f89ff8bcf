"""What differs between a lock's profile and a target, and what ``sync --exact`` never removes.

A distribution with the locked name, version and local label counts as installed (its files'
hashes are not re-read). ``--exact`` also lists what is installed and not locked, except the
tools that install (:data:`KEEP`) and, when the target holds cuda-resolve (the README's default:
the tool syncs the venv it is installed in), cuda-resolve's requirement closure: removing those
would break the tool in that environment. They are kept and said (:class:`Kept`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._frozen import frozen
from ..errors import InstallError
from ..versions import same_version
from .select import Wanted

__all__ = ["KEEP", "TOOL", "Drift", "Kept", "drift", "kept_by_exact", "tool_closure"]

#: Never removed by ``--exact``: the tools that install (uv: sync's engine for local files,
#: cuda-resolve[fast]; removed, every later sync fell back to pip, ten times slower).
KEEP = frozenset({"pip", "setuptools", "wheel", "uv", "cuda-resolve"})

#: The distribution whose requirement closure ``--exact`` keeps where it is installed.
TOOL = "cuda-resolve"


@frozen
class Drift:
    name: str
    state: str  # "ok", "missing", "other version", "other build", "not locked"
    locked: str | None
    installed: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "locked": self.locked,
            "installed": self.installed,
        }


@frozen
class Kept:
    """An installed distribution the lock does not name that ``--exact`` leaves, and why."""

    name: str
    version: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "why": self.why}


def drift(
    wanted: Sequence[Wanted],
    installed: Mapping[str, str],
    *,
    exact: bool,
    keep: Iterable[str] = (),
) -> list[Drift]:
    """Per locked package: ok, missing, other version or other build (same version, another
    local label); with ``exact`` also what is installed and not locked, less :data:`KEEP` and
    ``keep``."""
    found = []
    for item in wanted:
        have = installed.get(item.name)
        if have is None:
            state = "missing"
        elif same_version(have, item.version):
            state = "ok"
        elif have.split("+", 1)[0] == item.version.split("+", 1)[0]:
            state = "other build"
        else:
            state = "other version"
        found.append(Drift(name=item.name, state=state, locked=item.version, installed=have))
    if exact:
        names = {w.name for w in wanted} | KEEP | set(keep)
        found.extend(
            Drift(name=name, state="not locked", locked=None, installed=version)
            for name, version in sorted(installed.items())
            if name not in names
        )
    return found


def kept_by_exact(
    wanted: Sequence[Wanted], installed: Mapping[str, str], closure: Iterable[str]
) -> list[Kept]:
    """What ``--exact`` leaves although the lock does not name it: the installers, and
    cuda-resolve with what it needs to run (``closure``)."""
    locked = {w.name for w in wanted}
    needed = set(closure)
    kept = []
    for name, version in sorted(installed.items()):
        if name in locked:
            continue
        if name == TOOL:
            why = "the tool itself"
        elif name in needed:
            why = f"{TOOL} needs it to run"
        elif name in KEEP:
            why = "it installs the rest"
        else:
            continue
        kept.append(Kept(name=name, version=version, why=why))
    return kept


# -- cuda-resolve's requirement closure in the target -----------------------------------------

_REQUIRES_SCRIPT = """
import importlib.metadata, json
found = {}
for dist in importlib.metadata.distributions():
    name = dist.metadata["Name"]
    if name and normalized_name(name) not in found:
        found[normalized_name(name)] = list(dist.metadata.get_all("Requires-Dist") or [])
print(json.dumps(found))
"""


def target_requirements(python: str, environ: Mapping[str, str]) -> dict[str, list[str]]:
    """``{canonical name: its Requires-Dist lines}`` for every distribution ``python`` sees (the
    first of a name on its path, as pip reads them)."""
    from .._dist_metadata import source_text
    from ..detect._run import run

    # From "/": "-c" puts the working directory on the path, and a checkout's metadata there is
    # not installed.
    done = run(
        [python, "-c", source_text() + _REQUIRES_SCRIPT], timeout=60, environ=environ, cwd="/"
    )
    data: object = None
    if done is not None and done.ok:
        try:
            data = json.loads(done.stdout)
        except ValueError:
            data = None
    if not isinstance(data, dict) or not all(
        isinstance(lines, list) and all(isinstance(line, str) for line in lines)
        for lines in data.values()
    ):
        raise InstallError(
            f"{python} could not report what its {TOOL} needs to run; nothing was removed",
            hint="check that the target interpreter runs, or sync without --exact",
        )
    return {str(name): list(lines) for name, lines in data.items()}


def tool_closure(
    requires: Mapping[str, Sequence[str]], markers: Mapping[str, str]
) -> frozenset[str]:
    """:data:`TOOL` and every installed distribution it needs, following ``Requires-Dist`` lines
    whose markers hold for the target (``markers``) with no extra, or with the extras a requiring
    line names (``requests[socks]``). cuda-resolve's own extras are not followed: the lock names
    what they add when it is wanted. A line that cannot be parsed names nothing to follow;
    one whose marker cannot be decided is followed."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, set[str]] = {}
    todo: list[tuple[str, frozenset[str]]] = [(TOOL, frozenset())]
    while todo:
        name, extras = todo.pop()
        if name not in requires:
            continue
        done = seen.setdefault(name, set())
        new = {""} | set(extras)
        if done and new <= done:
            continue
        done |= new
        for line in requires[name]:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and not any(
                _holds(requirement.marker, markers, extra) for extra in new
            ):
                continue
            todo.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return frozenset(seen)


def _holds(marker: Any, markers: Mapping[str, str], extra: str) -> bool:
    try:
        return bool(marker.evaluate({**markers, "extra": extra}))
    except Exception:  # an undecidable marker: keep rather than break the tool
        return True
