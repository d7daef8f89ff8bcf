"""What a plan document must hold before anything acts on it.

A plan file may come from a colleague, a repository or another machine: ``apply``, ``cuda-pip
install --plan`` and the executor give it no more power than the command line has. Its pip
words pass the command line's refusals (:mod:`.install.pipoptions`: no option, in any spelling
or ``-r`` file, that turns TLS verification off); its trust words are the ones cuda-resolve
writes; a recipe's fields pass the index parser's own checks (:mod:`.index._parse`: a
subdirectory or patched file inside the source copy, a 40-hex revision, a 64-hex archive hash);
hashes and wheel digests are hex of their length before any is used in a path; a step installs
only the plan's own builds; an item's recorded sha256 is the hash pip checks when it installs
that item. Nesting is bounded. Every refusal is the reader's error naming the key path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import UsageError

if TYPE_CHECKING:
    from ._toml import Table
    from .plan import Plan

__all__ = [
    "MAX_DEPTH",
    "TRUST_WORDS",
    "UNTRUSTED_VARIABLES",
    "check_build_table",
    "check_item_table",
    "check_pip_words",
    "check_plan",
    "check_trust",
    "load_json",
    "plain_data",
]

#: A plan is about six levels deep (builds[0].recipe.patches[0].torch); deeper is not a plan.
MAX_DEPTH = 32
#: The trust-store options :func:`cuda_resolve.install.pip.trust_options` writes into a plan.
TRUST_WORDS = frozenset({"--use-feature=truststore"})

_SHA256 = re.compile(r"[0-9a-f]{64}")
#: A URL's user info as redaction prints it (``user:***@``, ``***@``): what a plan printed with a
#: password holds in its place.
_MASKED_LOGIN = re.compile(r"://(?:[^/@\s]*:)?\*\*\*@")
_WHEEL_DIGEST = re.compile(r"[0-9a-f]{16}")
_VERSION_PIN = "=="


def _too_deep(origin: str, path: str) -> str:
    return f"{origin}: {path or '<top level>'}: nested more than {MAX_DEPTH} levels deep"


def _step(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def plain_data(
    value: Any, *, origin: str, error: type[UsageError], hint: str, path: str = "", depth: int = 0
) -> Any:
    """``value`` with JSON's nulls dropped (null means absent in a plan: readers take defaults),
    refused when nested deeper than :data:`MAX_DEPTH`, naming where."""
    if isinstance(value, (dict, list)) and depth >= MAX_DEPTH:
        raise error(_too_deep(origin, path), hint=hint)
    if isinstance(value, dict):
        return {
            key: plain_data(
                item,
                origin=origin,
                error=error,
                hint=hint,
                path=_step(path, key),
                depth=depth + 1,
            )
            for key, item in value.items()
            if item is not None
        }
    if isinstance(value, list):
        return [
            plain_data(
                item, origin=origin, error=error, hint=hint, path=_step(path, n), depth=depth + 1
            )
            for n, item in enumerate(value)
        ]
    return value


# A JSON string, or one structural character: enough to follow the nesting of a document that
# the json module gave up on (it recurses once per level).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')


def _deep_path(text: str) -> str:
    """Where ``text`` (JSON) first opens a level deeper than :data:`MAX_DEPTH`."""
    stack: list[list[Any]] = []  # [opener, the key or index now being read]
    last = ""
    for match in _TOKEN.finditer(text):
        piece = match.group()
        if piece.startswith('"'):
            last = piece
        elif piece in ("[", "{"):
            if len(stack) >= MAX_DEPTH:
                break
            stack.append([piece, 0 if piece == "[" else ""])
        elif not stack:
            continue
        elif piece in ("]", "}"):
            stack.pop()
        elif piece == ":" and stack[-1][0] == "{":
            try:
                stack[-1][1] = json.loads(last)
            except ValueError:
                stack[-1][1] = last
        elif piece == "," and stack[-1][0] == "[":
            stack[-1][1] += 1
    path = ""
    for _, key in stack:
        path = _step(path, key)
    return path


def load_json(text: str, *, origin: str, error: type[UsageError], hint: str) -> Any:
    """``text`` parsed as JSON; not JSON, or nested past what the parser takes, is ``error``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise error(_too_deep(origin, _deep_path(text)), hint=hint) from None
    except ValueError as exc:
        raise error(f"{origin}: not JSON: {exc}", hint=hint) from None


# -- pip's words ----------------------------------------------------------------------------

_UNVERIFIED_HINT = (
    "a plan gets no more power than the command line: make the plan again without it, and put the"
    " proxy's or mirror's CA in the system trust store (cuda-resolve doctor --network says which)"
)


def check_pip_words(table: Table, key: str, words: Sequence[str]) -> None:
    """The command line's refusals for the pip words at ``key``: an ambiguous abbreviation, and
    any option (in any spelling, or inside a ``-r``/``-c`` file they name) that turns TLS
    verification off for a host."""
    from .install.pipoptions import disables_verification, find_options, pip_settings

    for at, word in enumerate(words):
        if _MASKED_LOGIN.search(word):
            raise table.fail(
                f"{key}[{at}]",
                "names a URL whose password was left out (***) when the plan was printed: pip "
                "would send *** as the password",
                hint="a plan never holds a password: keep the login in ~/.netrc (pip reads it) or "
                "a keyring, and plan again with the URL without it; or run cuda-pip install with "
                "the URL itself",
            )
    try:
        found = find_options(words)
    except UsageError as exc:
        raise table.fail(key, exc.message, hint=exc.hint) from None
    for item in found:
        if disables_verification(item.option.name):
            at = words.index(item.words[0])
            raise table.fail(
                f"{key}[{at}]",
                f"= {item.words[0]!r}: turns TLS verification off for a host; cuda-pip does not"
                " run pip with it",
                hint=_UNVERIFIED_HINT,
            )
    try:
        settings = pip_settings(words, python=None, environ={})
    except UsageError as exc:
        raise table.fail(key, exc.message, hint=exc.hint) from None
    for host, origin in settings.unverified_hosts:
        raise table.fail(
            key,
            f"names {origin}, whose trusted-host {host} turns TLS verification off; cuda-pip"
            " does not run pip with it",
            hint=_UNVERIFIED_HINT,
        )


def check_trust(table: Table, words: Sequence[str]) -> None:
    """A plan's ``trust``: the command line's refusals, then only what cuda-resolve writes there."""
    check_pip_words(table, "trust", words)
    for at, word in enumerate(words):
        if word not in TRUST_WORDS:
            raise table.fail(
                f"trust[{at}]",
                f"= {word!r}: not a trust-store option cuda-resolve writes"
                f" ({', '.join(sorted(TRUST_WORDS))})",
                hint="make the plan again; pip options belong on the command line",
            )


# -- items and builds -----------------------------------------------------------------------


def _matches(table: Table, key: str, pattern: re.Pattern[str], what: str) -> None:
    value = table.data.get(key)
    if isinstance(value, str) and not pattern.fullmatch(value):
        raise table.fail(key, f"= {value!r}: expected {what}")


def _parses(table: Table, key: str, parser: Any) -> None:
    value = table.data.get(key)
    if isinstance(value, str):
        try:
            parser(value)
        except ValueError as exc:
            raise table.fail(key, f"= {value!r}: {exc}") from None


def _requirement(table: Table) -> None:
    """``name==version`` (extras allowed) naming the item: what pins read the version from."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    text, name = table.data.get("requirement"), table.data.get("name")
    if not isinstance(text, str) or not isinstance(name, str):
        return
    problem = None
    try:
        parsed = Requirement(text)
        Version(text.rsplit(_VERSION_PIN, 1)[-1])
    except (InvalidRequirement, InvalidVersion) as exc:
        problem = str(exc).splitlines()[0]
    else:
        if canonicalize_name(parsed.name) != canonicalize_name(name):
            problem = f"names {parsed.name}, not {name}"
        elif parsed.url or parsed.marker or len(parsed.specifier) != 1:
            problem = "expected NAME==VERSION"
    if problem is not None:
        raise table.fail("requirement", f"= {text!r}: {problem}")


def check_item_table(table: Table) -> None:
    """One ``install`` entry's fields, as the index parser checks the same ones."""
    from .index._parse import _NAME, _REPOSITORY, _REVISION
    from .index.model import parse_arch_list
    from .index.urls import repository_problem
    from .versions import CudaVersion

    _matches(table, "name", _NAME, "a package name")
    _matches(table, "sha256", _SHA256, "the file's sha256 as 64 lower-case hex digits")
    _matches(table, "revision", _REVISION, "a full 40-character commit id (lower-case hex)")
    _matches(table, "repository", _REPOSITORY, "a git URL (https://...)")
    repository = table.data.get("repository")
    if isinstance(repository, str) and (problem := repository_problem(repository)):
        raise table.fail("repository", f"= {repository!r}: {problem}")
    _parses(table, "arch_list", parse_arch_list)
    _parses(table, "toolkit", CudaVersion.parse)
    if table.data.get("kind") in ("wheel", "build"):
        from packaging.version import Version

        _parses(table, "version", Version)
    _requirement(table)


#: Variables a build must not get from a plan: they switch TLS verification off, or choose what
#: it trusts, for pip or git run in the build (a plan's trust is the system's, see TRUST_WORDS).
UNTRUSTED_VARIABLES = frozenset(
    {
        "PIP_TRUSTED_HOST",
        "PIP_CONFIG_FILE",
        "PIP_CERT",
        "PIP_CLIENT_CERT",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "GIT_SSL_NO_VERIFY",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "PYTHONHTTPSVERIFY",
    }
)


def _variable_names(table: Table | None) -> None:
    from .index._parse import _ENV_NAME

    if table is None:
        return
    for name in table.keys():
        if not _ENV_NAME.fullmatch(name):
            raise table.fail(name, "is not an environment variable name")
        if name.upper() in UNTRUSTED_VARIABLES:
            raise table.fail(
                name,
                "changes how pip or git verify TLS; a plan does not set it for a build",
                hint=_UNVERIFIED_HINT,
            )


_TORCH_INDEX_OPTIONS = frozenset({"--index-url", "--find-links"})


def _requirement_text(text: str) -> None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(f"not a requirement: {exc}") from None


def _recipe(table: Table) -> None:
    from .index import _parse as index

    _matches(table, "name", index._NAME, "a recipe name (letters, digits, '.', '_', '-')")
    index._relative_path(table, "subdirectory", "")
    archive = table.table("archive")
    if archive is not None:
        index._archive(archive)
    index._git_source(table, has_archive=archive is not None)
    for patch in table.tables("patches"):
        index._patch(patch)
    _variable_names(table.table("env"))
    index._requirements(table, "build_requires")
    smoke = table.table("smoke")
    if smoke is not None:
        index._smoke(smoke)


def check_build_table(table: Table) -> None:
    """One ``builds`` entry, before its spec is read: the recipe as the index parser checks it,
    the build's names and variables, the compute capabilities its toolkit lists."""
    from .index import _parse as index
    from .install.pipoptions import disables_verification
    from .versions import ComputeCapability

    recipe = table.table("recipe")
    if recipe is not None:
        _recipe(recipe)
    _matches(table, "package", index._NAME, "a package name")
    _matches(table, "import_name", index._MODULE, "a module name")
    _variable_names(table.table("variables"))
    option = table.data.get("torch_index_option")
    if isinstance(option, str) and option not in _TORCH_INDEX_OPTIONS:
        raise table.fail(
            "torch_index_option",
            f"= {option!r}: expected {' or '.join(sorted(_TORCH_INDEX_OPTIONS))}",
            hint=_UNVERIFIED_HINT if disables_verification(option) else None,
        )
    index._requirements(table, "build_requires")
    torch = table.data.get("torch_requirement")
    if isinstance(torch, str):
        _parses(table, "torch_requirement", _requirement_text)
    jobs = table.data.get("max_jobs")
    if isinstance(jobs, int) and not isinstance(jobs, bool) and jobs < 1:
        raise table.fail("max_jobs", f"= {jobs}: expected at least 1")
    toolkit = table.table("toolkit")
    archs = toolkit.data.get("gpu_archs") if toolkit is not None else None
    if toolkit is not None and isinstance(archs, list):
        for at, text in enumerate(archs):
            if isinstance(text, str):
                try:
                    ComputeCapability.parse(text)
                except ValueError as exc:
                    raise toolkit.fail(f"gpu_archs[{at}]", f"= {text!r}: {exc}") from None
    _matches(table, "wheel_digest", _WHEEL_DIGEST, "the wheel key's digest (16 hex digits)")


# -- the plan as a whole --------------------------------------------------------------------


def _hashed_words(plan: Plan, name: str) -> list[tuple[int, str]]:
    """(step number, word) for each requirement word of the steps that names package ``name``."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from .install.pipoptions import split_command_line

    wanted = canonicalize_name(name)
    found: list[tuple[int, str]] = []
    for number, step in enumerate(plan.steps):
        for word in split_command_line(step.args, {})[2]:
            try:
                named = canonicalize_name(Requirement(word).name)
            except InvalidRequirement:
                continue
            if named == wanted:
                found.append((number, word))
    return found


def _checks_hash(word: str, sha256: str) -> bool:
    from packaging.requirements import Requirement

    url = Requirement(word).url or ""
    return url.partition("#")[2] == f"sha256={sha256}"


def _check_builds_match_items(plan: Plan, table: Table) -> None:
    """Each build makes one item of kind ``build`` and each such item has its build: an edited
    plan must not build (and install) a package it does not list, nor list as built one that
    nothing builds (it would report success having installed nothing)."""
    from packaging.utils import canonicalize_name

    planned = {
        canonicalize_name(item.name): (at, item)
        for at, item in enumerate(plan.items)
        if item.kind == "build"
    }
    built: set[str] = set()
    for at, build in enumerate(plan.builds):
        name = canonicalize_name(build.spec.package)
        if name in built:
            raise table.fail(f"builds[{at}].package", f"= {build.spec.package!r}: built twice")
        built.add(name)
    for name, (at, item) in planned.items():
        if name not in built:
            raise table.fail(
                f"install[{at}]",
                f"= {item.name} {item.version} (build): none of the plan's builds makes it",
                hint="make the plan again: a plan builds every item it lists as a build",
            )
    for at, build in enumerate(plan.builds):
        if canonicalize_name(build.spec.package) not in planned:
            raise table.fail(
                f"builds[{at}].package",
                f"= {build.spec.package!r}: no install item of kind build names it",
                hint="make the plan again: a plan builds only what its install list names",
            )


def check_plan(plan: Plan, table: Table) -> None:
    """What only the whole plan shows: its builds and its install list agree, each step's built
    wheels are the plan's own builds, each recorded sha256 is what pip checks where the item is
    installed, imports are module names."""
    from .index._parse import _MODULE

    _check_builds_match_items(plan, table)
    digests = {build.key.digest for build in plan.builds}
    for number, step in enumerate(plan.steps):
        for at, digest in enumerate(step.built):
            if digest not in digests:
                raise table.fail(
                    f"steps[{number}].built[{at}]",
                    f"= {digest!r}: not the wheel digest of one of the plan's builds"
                    f" ({', '.join(sorted(digests)) or 'it has none'})",
                )
    for position, item in enumerate(plan.items):
        if item.sha256 is None:
            continue
        words = _hashed_words(plan, item.name)
        unchecked = next((w for w in words if not _checks_hash(w[1], item.sha256)), None)
        if not words or unchecked is not None:
            where = (
                f"steps[{unchecked[0]}] installs it as {unchecked[1]!r}"
                if unchecked is not None
                else "no step installs it"
            )
            raise table.fail(
                f"install[{position}].sha256",
                f"= {item.sha256!r}: {where}, which pip would not check against that hash",
                hint="make the plan again: a plan records an item's hash where its step pins it"
                " (NAME @ URL#sha256=HASH)",
            )
    for at, module in enumerate(plan.imports):
        if not _MODULE.fullmatch(module):
            raise table.fail(f"imports[{at}]", f"= {module!r}: not a module name")
