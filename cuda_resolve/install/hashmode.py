"""pip's hash-checking mode, honoured: every file pip installs is checked against a known sha256.

pip turns the mode on for ``--require-hashes`` and for any ``--hash`` in a requirements file
(in every form it reads options: :func:`.pipoptions.pip_settings`). pip then refuses any
requirement, dependencies included, that it would download without a hash, and only after it
has started. cuda-resolve decides before anything is built whether the whole install can be
checked, and either carries it out with a hash for every file or refuses, naming each file
that would have none:

* a wheel the plan takes from an index is pinned to ``name @ URL#sha256=H`` from the index page
  (:mod:`.pins`); a page that lists no sha256 leaves it unhashed;
* a wheel cuda-resolve builds is installed as ``name @ file:///...whl#sha256=H`` with the hash
  of the file the wheelhouse holds;
* every pip step runs with ``--require-hashes``, so pip itself refuses anything else;
* what pip would fetch with no hash to give it is refused here: a torch-family install (pip
  resolves torch's dependencies, the ``nvidia-*`` wheels and triton, from the index), a prebuilt
  wheel beside a build (its dependencies are known only once pip resolves them), a build's
  known runtime or build requirement that is not installed, a requirement given on the command line
  without ``@ URL#sha256=``, and a requirements-file line without ``--hash``.

Everything here is pure: the plan, what is installed, and where the mode came from.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..errors import UsageError
from ..plan import Plan, PlannedBuild
from .reqfile import FileRequirement

__all__ = [
    "REQUIRE_HASHES",
    "built_wheel_requirement",
    "hashed_requirement",
    "refuse_unhashed",
    "unhashed_before_build",
    "unhashed_file_lines",
    "unhashed_wheels",
]

REQUIRE_HASHES = "--require-hashes"


def hashed_requirement(text: str) -> bool:
    """``name @ URL#sha256=H``: a requirement pip checks against its own hash."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return False
    return bool(requirement.url) and "#sha256=" in (requirement.url or "")


def built_wheel_requirement(package: str, wheel: Path, sha256: str) -> str:
    """How a built wheel is given to pip in hash-checking mode (a direct reference pip checks)."""
    return f"{canonicalize_name(package)} @ {wheel.resolve().as_uri()}#sha256={sha256}"


def unhashed_before_build(
    plan: Plan,
    builds: Sequence[PlannedBuild],
    unmet: Mapping[str, Sequence[str]],
    torch_family: Collection[str],
) -> list[str]:
    """What pip would fetch with no hash to check, known before anything is built. ``unmet``:
    each build's known requirements (runtime and build) that the target does not satisfy, by
    wheel-key digest."""
    problems: list[str] = []
    for item in plan.items:
        label = item.requirement or f"{item.name} {item.version}"
        if item.kind == "wheel" and item.name in torch_family:
            problems.append(
                f"{label}: pip would resolve its dependencies (the nvidia-* wheels, triton, ...) "
                "from the index with no hash to check"
            )
        elif item.kind == "wheel" and builds:
            # A prebuilt wheel's dependencies are not known before pip resolves them; alone, pip's
            # own --require-hashes check costs a download at most, but beside a build it would
            # waste the build.
            problems.append(
                f"{label}: its dependencies are not known before pip resolves them, after the "
                f"build of {', '.join(b.spec.package for b in builds)}: install it in its own "
                "cuda-pip run first"
            )
    for build in builds:
        # A build whose runtime requirements are not known (a recipe that does not list them)
        # is left to pip's own check: --require-hashes refuses an unhashed one before installing.
        for requirement in unmet.get(build.key.digest, ()):
            problems.append(
                f"{requirement} (needed by {build.spec.package}) is not installed: pip would "
                "download it with no hash"
            )
    for text in plan.pass_through:
        if not hashed_requirement(text):
            problems.append(
                f"{text} (on the command line) has no hash: give it as 'name @ URL#sha256=...' or "
                "in a file with --hash"
            )
    return problems


def unhashed_file_lines(requirements: Sequence[FileRequirement]) -> list[str]:
    """Requirement lines of ``-r`` files without ``--hash`` (constraints need none)."""
    return [
        f"{item.origin}: {item.text} has no --hash"
        for item in requirements
        if not (item.hashed or hashed_requirement(item.text)) and not item.constraint
    ]


def unhashed_wheels(plan: Plan) -> list[str]:
    """The plan's index wheels with no sha256 after pinning (their index page lists none)."""
    return [
        f"{item.name} {item.version}: "
        + (
            "its index page lists no sha256 for it"
            if item.index or item.find_links
            else "no sha256 is known"
        )
        for item in plan.items
        if item.kind == "wheel" and not item.sha256
    ]


def refuse_unhashed(where: str, problems: Sequence[str]) -> None:
    """Raise naming every file that would have no hash (nothing is built yet)."""
    if not problems:
        return
    listed = "; ".join(problems)
    raise UsageError(
        f"pip's hash-checking mode is on ({where}) and {len(problems)} "
        f"file{'s' if len(problems) != 1 else ''} "
        f"would be installed with no hash to check: {listed}",
        hint="install what is named first (with its hash), or lock the environment with "
        "`cuda-resolve lock` and install it with `cuda-resolve sync`, which checks a sha256 for "
        "every file; nothing was built or installed",
    )
