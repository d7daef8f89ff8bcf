"""Which indexes pip will really use for a target environment, and where each setting came from.

pip takes its indexes from four places; a later one overrides an earlier one (pip's
``configuration.py`` and ``cli/parser.py``, read for this; pip's configuration docs say the same):

1. its configuration files, read in this order, a later file beating an earlier one for the same
   ``section.key``: global (``$XDG_CONFIG_DIRS/pip/pip.conf``, then ``/etc/pip.conf``), user
   (``~/.pip/pip.conf``, then ``$XDG_CONFIG_HOME/pip/pip.conf``; skipped when ``PIP_CONFIG_FILE``
   names a file that exists, and under ``--isolated``), site (``sys.prefix/pip.conf`` of the
   target interpreter), then the file ``PIP_CONFIG_FILE`` names (``os.devnull``: no file at all).
   Within the files, ``[install]`` beats ``[global]`` whatever the files' order: the sections
   are merged across files first, then applied global, install;
2. the ``PIP_*`` environment variables (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``,
   ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``); ignored under ``--isolated``;
3. the command line: ``-i``/``--index-url`` replaces, ``--no-index`` sets, while
   ``--extra-index-url`` and ``-f``/``--find-links`` *add* to the list the files or variables
   gave (a list from a variable replaces the files' list instead).

An empty value never overrides (pip drops it). Keys are normalised as pip does (``index_url`` is
``index-url``; ``pypi-url`` is an old spelling of it).

Which files exist and what they say is asked of the target's own pip: ``python -m pip config
debug`` (pip >= 20.2: every file with its values), else ``python -m pip config list`` (pip >= 10:
the values without their files), run with a deadline and without the caller's other ``PIP_*``
variables (``PIP_QUIET`` would silence it). The environment variables and the command line are
read here. :func:`pip_indexes` never raises: a target that cannot run pip, or a pip that cannot
read its own files, gives its answer from what is left, with a note saying what was missing.
"""

from __future__ import annotations

import ast
import configparser
import functools
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from .._bounded import read_text, run
from .._frozen import frozen
from ..redaction import redact, redact_urls

__all__ = [
    "COMMAND_LINE",
    "DEFAULT_ORIGIN",
    "PROBE_TIMEOUT",
    "PYPI_SIMPLE",
    "ConfigFile",
    "IndexLocation",
    "IndexOptions",
    "PipIndexes",
    "attribute_merged",
    "config_values",
    "forget_prefetched",
    "parse_config_debug",
    "parse_config_list",
    "parse_pip_args",
    "pip_indexes",
    "prefetch_config",
    "urls_to_check",
    "without_configured_indexes",
]

#: pip's built-in index (``PyPI.simple_url``).
PYPI_SIMPLE = "https://pypi.org/simple"
#: The origin of a value nobody set.
DEFAULT_ORIGIN = "pip's default"
#: The origin of a value given on pip's command line (``pip_args``).
COMMAND_LINE = "command line"
#: How long the target's pip may take to list its configuration (an interpreter start and
#: pip's imports: well under a second on a local disk, seconds on a cold network file system).
PROBE_TIMEOUT = 20.0

Option = Literal["index-url", "extra-index-url", "find-links"]


@frozen
class IndexLocation:
    """One place pip reads packages from: the option, the URL or path, and who set it."""

    option: Option
    url: str
    origin: str

    @property
    def is_url(self) -> bool:
        """An ``http://`` or ``https://`` location (not a local folder, file or ``file://``)."""
        return urlsplit(self.url).scheme.lower() in ("http", "https")

    def describe(self) -> str:
        return f"{self.option} {redact(self.url)} (from {self.origin})"


@frozen
class PipIndexes:
    """The indexes ``pip install`` would use in one environment, each with its origin.

    ``*_origins`` run parallel to their lists. With ``no_index`` pip reads neither ``index_url``
    nor ``extra_index_urls``, only ``find_links``. ``config_read`` says whether the target's pip
    listed its configuration files (False: no interpreter, no pip, or pip failed; see ``notes``);
    ``error`` is set when pip itself would stop on this configuration (a file it cannot parse, a
    ``no-index`` that is not a boolean), so an install would fail before any index is asked."""

    index_url: str = PYPI_SIMPLE
    index_url_origin: str = DEFAULT_ORIGIN
    extra_index_urls: tuple[str, ...] = ()
    extra_index_url_origins: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    find_links_origins: tuple[str, ...] = ()
    no_index: bool = False
    no_index_origin: str | None = None
    python: str | None = None
    config_files: tuple[str, ...] = ()  # the files pip read, lowest precedence first
    config_read: bool = False
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def locations(self) -> tuple[IndexLocation, ...]:
        """Every location an install reads, in pip's order: the index, the extra indexes (both
        left out under ``no_index``), then the find-links pages and folders."""
        found: list[IndexLocation] = []
        if not self.no_index:
            found.append(
                IndexLocation(option="index-url", url=self.index_url, origin=self.index_url_origin)
            )
            found.extend(
                IndexLocation(option="extra-index-url", url=url, origin=origin)
                for url, origin in zip(
                    self.extra_index_urls, self.extra_index_url_origins, strict=True
                )
            )
        found.extend(
            IndexLocation(option="find-links", url=url, origin=origin)
            for url, origin in zip(self.find_links, self.find_links_origins, strict=True)
        )
        return tuple(found)

    def origin_of(self, url: str) -> str | None:
        """Where the setting naming ``url`` came from (None when pip does not use ``url``)."""
        wanted = url.rstrip("/")
        return next(
            (where.origin for where in self.locations if where.url.rstrip("/") == wanted), None
        )

    def describe(self) -> str:
        """One line for a report, credentials redacted."""
        parts = [where.describe() for where in self.locations]
        if self.no_index:
            parts.insert(
                0,
                f"no-index (from {self.no_index_origin}): the index-url {redact(self.index_url)} "
                "and any extra-index-url are not read",
            )
        return (
            "; ".join(parts)
            if parts
            else "no index and no find-links: pip can install nothing from a name"
        )

    def to_dict(self) -> dict[str, Any]:
        """For ``--json``: credentials in URLs replaced by ``***``."""
        return {
            "python": self.python,
            "index_url": redact(self.index_url),
            "index_url_origin": self.index_url_origin,
            "extra_index_urls": [redact(url) for url in self.extra_index_urls],
            "extra_index_url_origins": list(self.extra_index_url_origins),
            "find_links": [redact(url) for url in self.find_links],
            "find_links_origins": list(self.find_links_origins),
            "no_index": self.no_index,
            "no_index_origin": self.no_index_origin,
            "config_files": list(self.config_files),
            "config_read": self.config_read,
            "error": redact_urls(self.error) if self.error else None,
            "notes": [redact_urls(note) for note in self.notes],
            "check": list(map(redact, urls_to_check(self))),
        }


def urls_to_check(indexes: PipIndexes) -> tuple[str, ...]:
    """The ``http(s)`` URLs an install with ``indexes`` contacts: the index and the extra indexes
    (unless ``no_index``), and the find-links pages that are URLs; local folders, files and
    ``file://`` URLs are left out. Each once, in pip's order."""
    return tuple(dict.fromkeys(where.url for where in indexes.locations if where.is_url))


# -- the command line ----------------------------------------------------------------------


@frozen
class IndexOptions:
    """The index options found among ``pip install`` arguments (``requirement_files``: the
    ``-r`` files, which may name indexes of their own)."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    isolated: bool = False
    requirement_files: tuple[str, ...] = ()


def parse_pip_args(pip_args: Sequence[str]) -> IndexOptions:
    """The index options among ``pip install`` arguments, in any spelling pip takes: ``-i URL``,
    ``-iURL``, ``--index-url URL``, ``--index-url=URL``, an unambiguous prefix (``--index``,
    ``--extra-index``, ``--find``), ``-f``, short options clustered (``-qi URL``), read by the one
    table of pip's options (:mod:`.pipoptions`). Values of other options are skipped; ``--`` ends
    the options; an ambiguous prefix is skipped (pip stops on it)."""
    from .pipoptions import find_options

    index: str | None = None
    extras: list[str] = []
    links: list[str] = []
    files: list[str] = []
    no_index = isolated = False
    for found in find_options(pip_args, lenient=True):
        name, value = found.option.name, found.value
        if name == "--no-index":
            no_index = True
        elif name == "--isolated":
            isolated = True
        elif value is None:
            continue
        elif name == "--index-url":
            index = value
        elif name == "--extra-index-url":
            extras.append(value)
        elif name == "--find-links":
            links.append(value)
        elif name == "--requirement":
            files.append(value)
    return IndexOptions(
        index_url=index,
        extra_index_urls=tuple(extras),
        find_links=tuple(links),
        no_index=no_index,
        isolated=isolated,
        requirement_files=tuple(files),
    )


# -- the configuration files, as the target's pip lists them --------------------------------


@frozen
class ConfigFile:
    """One configuration file pip read, with the ``section.key`` values it listed for it."""

    path: str
    variant: str  # "global", "user", "site", "env" (PIP_CONFIG_FILE), "base" (pip 23.0)
    values: tuple[tuple[str, str], ...]  # ("global.index-url", value), in the file's order


#: pip's OVERRIDE_ORDER for files (pip 23.0 briefly had "base", sys.base_prefix's file, here).
_VARIANT_RANK = {"global": 0, "user": 1, "base": 2, "site": 3, "env": 5}
_HEADER = re.compile(r"^(?P<variant>[a-z][a-z_-]*):$")
_FILE_LINE = re.compile(r"^  (?P<path>.+), exists: (?P<exists>True|False)$")
_KEY_LINE = re.compile(r"^    (?P<section>[^.\s:]+)\.(?P<key>[^\s:]+): (?P<value>.*)$")
_LIST_LINE = re.compile(r"^(?P<section>[^.\s=]+)\.(?P<key>[^\s=]+)=(?P<value>.*)$")


def parse_config_debug(text: str) -> list[ConfigFile] | None:
    """The existing files of ``pip config debug``'s output with their values, in pip's override
    order (lowest first); None when ``text`` is not that output."""
    if not text.lstrip().startswith("env_var:"):
        return None
    files: list[tuple[int, int, ConfigFile]] = []
    variant: str | None = None
    path: str | None = None
    values: list[list[str]] = []  # [key, value], continuation lines joined with "\n"

    def close() -> None:
        if variant is not None and path is not None:
            rank = _VARIANT_RANK.get(variant, 4)
            files.append(
                (
                    rank,
                    len(files),
                    ConfigFile(path=path, variant=variant, values=tuple((k, v) for k, v in values)),
                )
            )

    for line in text.splitlines():
        header = _HEADER.match(line)
        file_line = _FILE_LINE.match(line)
        key_line = _KEY_LINE.match(line)
        if header:
            close()
            variant, path, values = header.group("variant"), None, []
        elif file_line and variant not in (None, "env_var"):
            close()
            path = file_line.group("path") if file_line.group("exists") == "True" else None
            values = []
        elif key_line and path is not None:
            values.append(
                [f"{key_line.group('section')}.{key_line.group('key')}", key_line.group("value")]
            )
        elif values and path is not None:
            values[-1][1] += (
                "\n" + line
            )  # a multi-line value: pip prints its later lines unindented
    close()
    return [entry for _, _, entry in sorted(files, key=lambda item: (item[0], item[1]))]


class _Parser(configparser.RawConfigParser):
    """Key names normalised as pip's own parser does."""

    def optionxform(self, optionstr: str) -> str:
        return _normalise(optionstr)


def _keys_in(path: str) -> set[str] | None:
    """The ``section.key`` names one file sets (normalised as pip does); None if unreadable."""
    parser = _Parser()
    try:
        parser.read_string(read_text(path), source=path)
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    return {f"{section}.{key}" for section in parser.sections() for key in parser.options(section)}


def attribute_merged(files: list[ConfigFile]) -> list[ConfigFile]:
    """Give each value to the file that sets it, where pip printed one variant's merged values
    under each of its files (pip < 26 does, for the global and user variants that have two
    files): the value stays pip's, the file is found by reading which one names the key (a key
    no readable file names stays with every file, so the later one is credited)."""
    out: list[ConfigFile] = []
    for entry in files:
        twins = [
            other
            for other in files
            if other.variant == entry.variant and other.values == entry.values
        ]
        if len(twins) < 2 or not entry.values:
            out.append(entry)
            continue
        keys = _keys_in(entry.path)
        claimed = set().union(
            *(found for found in map(_keys_in, (t.path for t in twins)) if found is not None)
        )
        kept = tuple(
            (key, value)
            for key, value in entry.values
            if (keys is not None and key in keys) or key not in claimed
        )
        out.append(ConfigFile(path=entry.path, variant=entry.variant, values=kept))
    return out


def parse_config_list(text: str) -> list[ConfigFile]:
    """``pip config list`` (pip < 20.2: one merged value per ``section.key``, no file names)."""
    values: list[tuple[str, str]] = []
    for line in text.splitlines():
        match = _LIST_LINE.match(line.strip())
        if not match or match.group("section").startswith(":"):
            continue  # ":env:" lines: the variables, read from the environment instead
        try:
            value = ast.literal_eval(match.group("value"))
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, str):
            values.append((f"{match.group('section')}.{match.group('key')}", value))
    return (
        [ConfigFile(path="pip's configuration", variant="unknown", values=tuple(values))]
        if values
        else []
    )


def _child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment for ``pip config``: its ``PIP_*`` variables removed except
    ``PIP_CONFIG_FILE`` (they are read here; ``PIP_QUIET`` or a bad ``PIP_VERBOSE`` would
    silence or break the listing), output in UTF-8."""
    child = {
        name: value
        for name, value in environ.items()
        if not name.startswith("PIP_") or name == "PIP_CONFIG_FILE"
    }
    child["PYTHONIOENCODING"] = "utf-8"
    return child


def _venv_prefix(python: str) -> str | None:
    """``sys.prefix`` of ``python`` where its place says it for certain (a venv: ``pyvenv.cfg``
    above ``bin/``; a conda env: ``conda-meta/``) and a pip that has ``pip config debug`` (>= 20.2,
    not 23.0, which also read ``sys.base_prefix``'s file) is installed there, else None."""
    import glob

    folder = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    if not (
        os.path.isfile(os.path.join(folder, "pyvenv.cfg"))
        or os.path.isdir(os.path.join(folder, "conda-meta"))
    ):
        return None
    site = os.path.join(glob.escape(folder), "lib", "python3*", "site-packages")
    versions = [
        os.path.basename(found)[len("pip-") : -len(".dist-info")]
        for found in glob.glob(os.path.join(site, "pip-*.dist-info"))
    ]
    if len(versions) != 1 or not glob.glob(os.path.join(site, "pip", "__init__.py")):
        return None
    try:
        release = tuple(int(part) for part in versions[0].split(".")[:2])
    except ValueError:
        return None
    return folder if release >= (20, 2) and release != (23, 0) else None


def _files_read_here(
    python: str, environ: Mapping[str, str], *, isolated: bool
) -> list[ConfigFile] | None:
    """The configuration files the target's pip reads with their values, read here as pip's
    ``configuration.py`` reads them (the same files, order, parser and key names), so that
    pip need not be started for ``pip config debug`` (0.2 - 1 s, the most of a ``plan``;
    issue 28). None where that is not certain (not Linux, the target's ``sys.prefix`` or pip
    unknown, a file that does not parse): pip is asked then.

    pip reads each ``$XDG_CONFIG_DIRS`` folder's (default ``/etc/xdg``) ``pip/pip.conf`` and
    ``/etc/pip.conf`` (global); ``~/.pip/pip.conf`` and ``$XDG_CONFIG_HOME/pip/pip.conf`` (user;
    not under ``--isolated`` or when ``PIP_CONFIG_FILE`` names a file that exists);
    ``sys.prefix/pip.conf`` (site); then ``PIP_CONFIG_FILE``'s file (env); none at all when
    ``PIP_CONFIG_FILE`` is ``os.devnull``."""
    import sys

    if sys.platform != "linux":
        return None
    prefix = _venv_prefix(python)
    if prefix is None:
        return None
    named = environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    if named and not os.path.isabs(named):
        return None  # pip reads it from its own folder ("/"): pip says what it finds there
    home = environ.get("HOME") or os.path.expanduser("~")
    config_home = (environ.get("XDG_CONFIG_HOME") or "").strip() or os.path.join(home, ".config")
    config_dirs = (environ.get("XDG_CONFIG_DIRS") or "").strip() or "/etc/xdg"
    variants: list[tuple[str, list[str]]] = [
        (
            "global",
            [os.path.join(d, "pip", "pip.conf") for d in config_dirs.split(os.pathsep)]
            + ["/etc/pip.conf"],
        )
    ]
    if not isolated and not (named and os.path.exists(named)):
        variants.append(
            (
                "user",
                [
                    os.path.join(home, ".pip", "pip.conf"),
                    os.path.join(config_home, "pip", "pip.conf"),
                ],
            )
        )
    variants.append(("site", [os.path.join(prefix, "pip.conf")]))
    if named:
        variants.append(("env", [named]))
    found: list[ConfigFile] = []
    for variant, paths in variants:
        for path in paths:
            if not os.path.exists(path):
                continue
            parser = _Parser()
            try:
                parser.read_string(read_text(path), source=path)
            except (OSError, UnicodeDecodeError, configparser.Error):
                return None  # pip says why in its own words
            values = tuple(
                (f"{section}.{key}", value)
                for section in parser.sections()
                for key, value in parser.items(section)
            )
            found.append(ConfigFile(path=path, variant=variant, values=values))
    return found


_PrefetchKey = tuple[str, tuple[tuple[str, str], ...], bool]


class _Pending:
    """A listing being read on another thread (concurrent.futures would import logging: 35 ms
    of every command's start)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: tuple[list[ConfigFile] | None, list[str], str | None] | None = None
        self.error: BaseException | None = None

    def result(self) -> tuple[list[ConfigFile] | None, list[str], str | None]:
        self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


#: Listings being read in the background (:func:`prefetch_config`), each taken by one reader.
_PREFETCHED: dict[_PrefetchKey, _Pending] = {}
_PREFETCH_LOCK = threading.Lock()


def _prefetch_key(python: str, environ: Mapping[str, str], isolated: bool) -> _PrefetchKey:
    # Interpreters of one bin/ folder (python, python3, python3.12) share one pip configuration.
    where = os.path.dirname(os.path.abspath(python)) if os.sep in python else python
    return where, tuple(sorted(_child_environment(environ).items())), isolated


def prefetch_config(
    python: str,
    environ: Mapping[str, str],
    *,
    isolated: bool = False,
    timeout: float = PROBE_TIMEOUT,
) -> None:
    """Start reading ``python``'s pip configuration in the background: the next reader asking
    for it (:func:`config_values`, :func:`pip_indexes` ...) takes the answer instead of starting
    pip then. ``plan`` starts it first thing, so pip's start (0.2 - 0.6 s) overlaps loading the
    index, detecting and resolving (issue 28). Never raises."""
    key = _prefetch_key(python, environ, isolated)
    with _PREFETCH_LOCK:
        if key in _PREFETCHED:
            return
        pending = _PREFETCHED[key] = _Pending()
    given = dict(environ)

    def read() -> None:
        try:
            pending.value = _read_config_now(python, given, isolated=isolated, timeout=timeout)
        except BaseException as exc:  # handed to the reader, who raises it where it asked
            pending.error = exc
        finally:
            pending.done.set()

    threading.Thread(target=read, name="cuda-resolve-pip-config", daemon=True).start()


def forget_prefetched() -> None:
    """Drop the listings started and not taken (a command that ended before asking): a later
    command in the same process asks afresh."""
    with _PREFETCH_LOCK:
        _PREFETCHED.clear()


def _read_config(
    python: str, environ: Mapping[str, str], *, isolated: bool, timeout: float
) -> tuple[list[ConfigFile] | None, list[str], str | None]:
    """(files, notes, error) from the target's pip; files is None when pip gave no listing.
    A listing :func:`prefetch_config` started is taken (once) instead of starting pip again."""
    with _PREFETCH_LOCK:
        pending = _PREFETCHED.pop(_prefetch_key(python, environ, isolated), None)
    if pending is not None:
        return pending.result()
    return _read_config_now(python, environ, isolated=isolated, timeout=timeout)


def _read_config_now(
    python: str, environ: Mapping[str, str], *, isolated: bool, timeout: float
) -> tuple[list[ConfigFile] | None, list[str], str | None]:
    """:func:`_read_config`, run now: the files read here where that is certain
    (:func:`_files_read_here`), else listed by the target's pip."""
    read = _files_read_here(python, environ, isolated=isolated)
    if read is not None:
        return read, [], None
    base = [
        python,
        "-m",
        "pip",
        "--disable-pip-version-check",
        *(["--isolated"] if isolated else []),
        "config",
    ]
    child = _child_environment(environ)
    here = os.path.abspath(os.sep)  # not the caller's folder: a ./pip there would shadow pip
    ran = run([*base, "debug"], timeout=timeout, env=child, cwd=here)
    if ran is None:
        return (
            None,
            [f"{python} could not be started: pip's configuration files were not read"],
            None,
        )
    if ran.timed_out:
        return (
            None,
            [
                f"{python} -m pip config did not answer within {timeout:.0f} s: "
                "pip's configuration files were not read"
            ],
            None,
        )
    output = ran.stdout + "\n" + ran.stderr
    if ran.ok:
        files = parse_config_debug(ran.stdout)
        if files is not None:
            return attribute_merged(files), [], None
    if "No module named pip" in output:
        return (
            None,
            [
                f"{python} has no pip: pip's configuration files were not read "
                "(an install there cannot run pip either)"
            ],
            None,
        )
    failed = _pip_error(output)
    if failed is not None:
        return None, [], failed
    listed = run([*base, "list"], timeout=timeout, env=child, cwd=here)  # pip < 20.2 has no debug
    if listed is not None and listed.ok:
        return (
            parse_config_list(listed.stdout),
            [
                f"{python}'s pip predates `pip config debug` (20.2): values are named by "
                "section, not by file"
            ],
            None,
        )
    first = (listed.first_line if listed is not None and not listed.ok else "") or ran.first_line
    return (
        None,
        [
            f"{python} -m pip config failed ({first or 'no output'}): pip's configuration files "
            "were not read"
        ],
        None,
    )


def _pip_error(output: str) -> str | None:
    """pip's own message when it cannot load its configuration (an install stops the same way):
    ``Configuration file could not be loaded.`` and the parser's reason, or an ``ERROR:`` line
    about it."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for at, line in enumerate(lines):
        lowered = line.lower()
        if "configuration file" in lowered or (line.startswith("ERROR:") and "config" in lowered):
            return " ".join(lines[at : at + 4])
    return None


# -- putting it together -----------------------------------------------------------------------

_NAMES = {
    "index-url": "index-url",
    "pypi-url": "index-url",
    "extra-index-url": "extra-index-url",
    "find-links": "find-links",
    "no-index": "no-index",
}
_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})
_FALSE = frozenset({"n", "no", "f", "false", "off", "0"})


def _normalise(name: str) -> str:
    name = name.lower().replace("_", "-")
    return name[2:] if name.startswith("--") else name


@dataclass(slots=True)
class _Merged:
    """pip's index settings merged across its configuration files, each with its file."""

    index_url: tuple[str, str] | None = None
    extras: tuple[tuple[str, ...], str] | None = None
    links: tuple[tuple[str, ...], str] | None = None
    no_index: tuple[bool, str] | None = None
    errors: list[str] = field(default_factory=list)

    def apply(self, option: str, value: str, origin: str, where: str) -> None:
        if option == "index-url":
            self.index_url = (value, origin)
        elif option == "extra-index-url":
            self.extras = (tuple(value.split()), origin)
        elif option == "find-links":
            self.links = (tuple(value.split()), origin)
        elif option == "no-index":
            word = value.strip().lower()
            if word in _TRUE or word in _FALSE:
                self.no_index = (word in _TRUE, origin)
            else:
                self.errors.append(
                    f"{value!r} is not a valid value for no-index ({where}): pip stops with "
                    "'please specify a boolean value like yes/no, true/false or 1/0'"
                )


def _sections(
    files: Iterable[ConfigFile], names: Mapping[str, str] = _NAMES
) -> list[tuple[str, str, str]]:
    """(option, value, origin) in the order pip applies them: [global] merged across files (a
    later file wins), then [install] merged the same way. ``names``: the keys read, and the
    option each stands for."""
    ordered: list[tuple[str, str, str]] = []
    for section in ("global", "install"):
        merged: dict[str, tuple[str, str]] = {}
        for entry in files:
            label = f"{entry.path} [{section}]" + (
                " (PIP_CONFIG_FILE)" if entry.variant == "env" else ""
            )
            for key, value in entry.values:
                name, _, option = key.partition(".")
                if name == section and _normalise(option) in names:
                    merged[_normalise(option)] = (value, label)
        ordered.extend(
            (names[key], value, origin) for key, (value, origin) in merged.items() if value
        )
    return ordered


#: Configuration keys that name indexes or folders of packages (pip normalises ``_`` to ``-``).
_INDEX_KEYS = frozenset({"index-url", "pypi-url", "extra-index-url", "find-links", "no-index"})


def without_configured_indexes(
    python: str,
    environ: Mapping[str, str],
    *,
    keep: frozenset[str] = frozenset(),
    timeout: float = PROBE_TIMEOUT,
) -> dict[str, str]:
    """Variables that make ``python -m pip install`` ignore the indexes and folders its
    configuration files name, and keep every other setting in them: empty when no file names
    one; else ``PIP_CONFIG_FILE`` = ``os.devnull`` (pip then reads no file) and each other
    ``[global]``/``[install]`` value as the ``PIP_*`` variable pip reads the same way (one the
    caller's environment already sets is left to it: a variable beats a file anyway). For the
    torch steps, which ask one index alone; ``keep`` names index keys that stay (``index-url``
    and ``no-index`` for torch from the user's PyPI index or mirror)."""
    return dict(
        _without_configured_indexes(
            os.path.abspath(python) if os.sep in python else python,
            tuple(sorted(environ.items())),
            timeout,
            tuple(sorted(keep)),
        )
    )


@functools.lru_cache(maxsize=8)
def _without_configured_indexes(
    python: str, environ: tuple[tuple[str, str], ...], timeout: float, keep: tuple[str, ...] = ()
) -> tuple[tuple[str, str], ...]:
    env = dict(environ)
    files, _, _ = _read_config(python, env, isolated=False, timeout=timeout)
    merged: dict[str, str] = {}
    for section in (
        "global",
        "install",
    ):  # pip's order: [install] over [global], a later file over an earlier
        for entry in files or ():
            for key, value in entry.values:
                name, _, option = key.partition(".")
                if name == section and value:
                    merged[_normalise(option)] = value
    dropped = _INDEX_KEYS - set(keep)
    if not dropped & merged.keys():
        return ()
    kept = {
        "PIP_" + key.upper().replace("-", "_"): value
        for key, value in merged.items()
        if key not in dropped
    }
    return (
        ("PIP_CONFIG_FILE", os.devnull),
        *sorted((name, value) for name, value in kept.items() if name not in env),
    )


def config_values(
    python: str,
    environ: Mapping[str, str],
    *,
    keys: Sequence[str],
    isolated: bool = False,
    timeout: float = PROBE_TIMEOUT,
) -> list[tuple[str, str, str]]:
    """(key, value, origin) for ``keys`` (``trusted-host``, ``require-hashes`` ...) in the
    configuration files the target's pip reads, in the order pip applies them (the ``PIP_*``
    variables are not read here). Never raises: files pip does not list give nothing."""
    python = os.path.abspath(python) if os.sep in python else python
    files, _, _ = _read_config(python, environ, isolated=isolated, timeout=timeout)
    return _sections(files or (), {key: key for key in keys})


def _variables(environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(option, value, variable) for the ``PIP_*`` variables pip reads as these options."""
    found: list[tuple[str, str, str]] = []
    for name, value in environ.items():
        if name.startswith("PIP_") and value:
            option = _NAMES.get(_normalise(name[4:]))
            if option is not None:
                found.append((option, value, name))
    return found


def pip_indexes(
    python: str | None,
    environ: Mapping[str, str],
    *,
    pip_args: Sequence[str] = (),
    timeout: float = PROBE_TIMEOUT,
) -> PipIndexes:
    """The indexes ``python -m pip install <pip_args>`` would use with ``environ`` as its
    environment (the module docs give pip's rules). ``python`` None: no interpreter to ask (a
    profile describes the machine); only the variables and ``pip_args`` count, and a note says
    so. Never raises."""
    command = parse_pip_args(pip_args)
    notes: list[str] = []
    error: str | None = None
    files: list[ConfigFile] | None = None
    if python is None:
        notes.append("no target interpreter: pip's configuration files were not read")
    else:
        # pip runs in a neutral folder (see _read_config): a relative path is the caller's.
        python = os.path.abspath(python) if os.sep in python else python
        files, found_notes, error = _read_config(
            python, environ, isolated=command.isolated, timeout=timeout
        )
        notes.extend(found_notes)
    merged = _Merged()
    for option, value, origin in _sections(files or ()):
        merged.apply(option, value, origin, origin)
    if command.isolated:
        notes.append(
            "--isolated: pip ignores its PIP_* variables and the user's configuration file"
        )
    else:
        for option, value, variable in _variables(environ):
            merged.apply(option, value, variable, variable)
    for message in merged.errors:
        error = error or message
    index_url, index_origin = merged.index_url or (PYPI_SIMPLE, DEFAULT_ORIGIN)
    if command.index_url is not None:
        index_url, index_origin = command.index_url, COMMAND_LINE
    extras, extras_origin = merged.extras or ((), "")
    links, links_origin = merged.links or ((), "")
    no_index, no_index_origin = merged.no_index or (False, None)
    if command.no_index:
        no_index, no_index_origin = True, COMMAND_LINE
    for path in command.requirement_files:
        notes.append(
            f"requirement file {path} may name indexes of its own (--index-url, --extra-index-url, "
            "--find-links lines): pip applies them too; they are not read here"
        )
    return PipIndexes(
        index_url=index_url,
        index_url_origin=index_origin,
        extra_index_urls=(*extras, *command.extra_index_urls),
        extra_index_url_origins=(
            *(extras_origin for _ in extras),
            *(COMMAND_LINE for _ in command.extra_index_urls),
        ),
        find_links=(*links, *command.find_links),
        find_links_origins=(
            *(links_origin for _ in links),
            *(COMMAND_LINE for _ in command.find_links),
        ),
        no_index=no_index,
        no_index_origin=no_index_origin,
        python=python,
        config_files=tuple(entry.path for entry in files or () if entry.variant != "unknown"),
        config_read=files is not None,
        error=error,
        notes=tuple(notes),
    )
