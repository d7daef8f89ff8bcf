"""What a target's site-packages held before an install, read from the target and kept on disk.

- :func:`read_state` runs one small stdlib-only script in the target interpreter that lists every
  distribution in the target's own site-packages (sysconfig's ``purelib`` and ``platlib``, links
  resolved; not the user site, not a venv's base): its name, version, ``.dist-info`` /
  ``.egg-info`` folder and the absolute paths of the files its ``RECORD`` (or
  ``installed-files.txt``) lists, plus every file in the metadata folder itself. It also lists
  legacy editables (``*.egg-link``) and pip's own half-done leftovers (``~name`` entries).
- :class:`Journal` is the on-disk record of one install in progress: the target, the stash
  folder, the before-state. :func:`write_journal` writes it atomically; :func:`pending` lists
  the journals a run that was killed (SIGKILL, power cut) left behind, newest first;
  :func:`read_journal` reads one.

The journal is data only; :mod:`.stash` keeps the files and puts them back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._bounded import read_text
from .._bounded import run as bounded_run
from .._frozen import frozen
from ..errors import InstallError
from ..paths import cache_root, write_atomic

__all__ = [
    "Distribution",
    "Journal",
    "State",
    "default_journal_dir",
    "pending",
    "read_journal",
    "read_state",
    "write_journal",
]

_FORMAT = 1
#: A journal lists every file of every distribution: tens of MB for the largest environments.
_JOURNAL_LIMIT = 512 * 1024 * 1024
_LISTING_SECONDS = 120.0

# Run by the target interpreter (any Python >= 3.6, stdlib only), after the text of
# cuda_resolve/_dist_metadata.py (names and versions from the metadata headers: importing
# importlib.metadata would cost more than the listing). With no arguments it asks sysconfig
# where pip installs (purelib, platlib); with arguments it reads those folders (the restore
# passes the journal's folders, so it needs nothing from the target's site machinery).
_LISTING_BODY = r"""
import csv, json, sys

def record_files(meta):
    site = os.path.dirname(meta)
    if meta.endswith(".dist-info"):
        listing, base = os.path.join(meta, "RECORD"), site
    else:
        listing, base = os.path.join(meta, "installed-files.txt"), meta
    try:
        with open(listing, newline="", encoding="utf-8", errors="replace") as stream:
            if meta.endswith(".dist-info"):
                rows = list(csv.reader(stream))
            else:
                rows = [[line.rstrip("\n")] for line in stream]
    except OSError:
        return None
    return [os.path.normpath(os.path.join(base, row[0])) for row in rows if row and row[0]]

def distribution(meta, entry):
    stem = entry.rsplit(".", 1)[0]
    name, _, version = stem.partition("-")
    version = version.split("-")[0]
    found_name, found_version = name_and_version(metadata_file(os.path.dirname(meta), entry))
    name = found_name or name
    version = found_version or version
    listed = record_files(meta)
    files = set(listed or [])
    for root, _dirs, names in os.walk(meta):
        files.update(os.path.join(root, n) for n in names)
    return {"name": name, "version": version, "meta": meta, "files": sorted(files),
            "record": listed is not None}

def main(sites):
    prefix = None
    if not sites:
        import sysconfig
        paths = sysconfig.get_paths()
        sites = [paths["purelib"], paths["platlib"]]
        prefix = os.path.realpath(sys.prefix)
    real = []
    for site in sites:
        site = os.path.realpath(site)
        if site not in real and os.path.isdir(site):
            real.append(site)
    dists, egg_links, tilde, entries = [], [], [], []
    top = sorted(os.listdir(prefix)) if prefix else []
    for site in real:
        names = sorted(os.listdir(site))
        entries.append([site, names])
        for entry in names:
            path = os.path.join(site, entry)
            if entry.startswith("~"):
                tilde.append(path)
            elif entry.endswith(".egg-link"):
                try:
                    with open(path, encoding="utf-8", errors="replace") as stream:
                        egg_links.append([path, stream.read(4096)])
                except OSError:
                    egg_links.append([path, ""])
            elif entry.endswith((".dist-info", ".egg-info")):
                if os.path.isdir(path):
                    dists.append(distribution(path, entry))
                else:
                    stem = entry.rsplit(".", 1)[0]
                    name, _, version = stem.partition("-")
                    dists.append({"name": name, "version": version.split("-")[0], "meta": path,
                                  "files": [path], "record": False})
    print(json.dumps({"prefix": prefix, "sites": real, "distributions": dists,
                      "egg_links": egg_links, "tilde": tilde, "top": top, "entries": entries}))

main(sys.argv[1:])
"""


@frozen
class Distribution:
    """One installed distribution as the target's site-packages had it."""

    name: str  # as its METADATA spells it
    version: str
    meta: str  # absolute path of its .dist-info / .egg-info
    files: tuple[
        str, ...
    ]  # absolute, normalised: what RECORD lists plus the metadata folder's files
    record: bool  # False: no RECORD / installed-files.txt (its package files are unknown)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "meta": self.meta,
            "files": list(self.files),
            "record": self.record,
        }


@frozen
class State:
    """The distributions of a target's own site-packages at one moment."""

    prefix: str  # the target's sys.prefix, links resolved
    sites: tuple[str, ...]  # purelib, platlib (links resolved, each once)
    distributions: tuple[Distribution, ...]
    egg_links: tuple[tuple[str, str], ...] = ()  # (path, contents): legacy editables
    tilde: tuple[str, ...] = ()  # pip's own leftovers ("~orch-1.0.dist-info") present then
    top: tuple[str, ...] = ()  # the names in the prefix folder itself (read at begin only)
    #: (site folder, the names directly in it): what no RECORD lists is known to be new too.
    entries: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "sites": list(self.sites),
            "distributions": [d.to_json() for d in self.distributions],
            "egg_links": [list(e) for e in self.egg_links],
            "tilde": list(self.tilde),
            "top": list(self.top),
            "entries": [[site, list(names)] for site, names in self.entries],
        }


@frozen
class Journal:
    """One install in progress: enough to put the target back after the process is gone."""

    path: Path  # this journal's file
    id: str
    python: str
    created: float  # time.time() at begin
    pid: int
    stash: str  # the stash folder, inside the prefix
    before: State
    #: Files kept out of the stash: (path, why, identity "dev:ino:size:mtime_ns" or "" if absent).
    unstashed: tuple[tuple[str, str, str], ...] = ()
    ready: bool = False  # every file was linked into the stash (pip may have run since)

    @property
    def prefix(self) -> str:
        return self.before.prefix

    @property
    def processes(self) -> Path:
        """Beside the journal: the programs the install started, one "PID START" a line
        (:mod:`cuda_resolve._lifeline`); undo waits while one of them still runs."""
        return self.path.with_suffix(".procs")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "id": self.id,
            "python": self.python,
            "created": self.created,
            "pid": self.pid,
            "stash": self.stash,
            "ready": self.ready,
            "unstashed": [list(u) for u in self.unstashed],
            "before": self.before.to_json(),
        }


def default_journal_dir() -> Path:
    """``<cache root>/journal``: where cuda-pip keeps the journals of installs in progress."""
    return cache_root() / "journal"


def read_state(
    python: str, environ: Mapping[str, str], *, sites: Sequence[str] = (), prefix: str | None = None
) -> State:
    """The target's distributions. With ``sites`` (and ``prefix``) those folders are read by the
    target started without its site machinery (``-S``: a half-installed ``.pth`` cannot stop it)."""
    from .._dist_metadata import source_text

    argv = [python, *(["-S"] if sites else []), "-c", source_text() + _LISTING_BODY, *sites]
    done = bounded_run(
        argv, timeout=_LISTING_SECONDS, env=environ, output_limit=_JOURNAL_LIMIT, cwd="/"
    )
    if done is None or not done.ok:
        why = (
            "could not be started"
            if done is None
            else (done.first_line or f"exit {done.returncode}")
        )
        raise InstallError(
            f"{python} could not list its installed files: {why}",
            hint="check that the target interpreter runs (pass --python PATH)",
        )
    try:
        data = json.loads(done.stdout)
        if prefix is not None:
            data["prefix"] = prefix
        return _state(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise InstallError(
            f"{python} gave an unreadable list of its installed files ({exc})",
            hint="check that the target interpreter runs (pass --python PATH)",
        ) from None


def write_journal(journal: Journal) -> None:
    """Write ``journal`` to its path atomically (a reader sees the old one or the new one)."""
    write_atomic(journal.path, json.dumps(journal.to_json(), separators=(",", ":")), private=True)


def read_journal(path: Path) -> Journal:
    """The journal at ``path``; :class:`InstallError` naming it when it cannot be read."""
    try:
        data = json.loads(read_text(path, limit=_JOURNAL_LIMIT))
        if data.get("format") != _FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {_FORMAT}")
        return Journal(
            path=path,
            id=_str(data["id"]),
            python=_str(data["python"]),
            created=float(data["created"]),
            pid=int(data["pid"]),
            stash=_str(data["stash"]),
            ready=bool(data["ready"]),
            unstashed=tuple((_str(u[0]), _str(u[1]), _str(u[2])) for u in _list(data["unstashed"])),
            before=_state(data["before"]),
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise InstallError(
            f"{path}: not a readable cuda-pip journal ({exc})",
            hint="remove it; it cannot be used to undo an install",
        ) from None


def pending(journal_dir: Path) -> list[Journal]:
    """The journals in ``journal_dir``, newest first: installs that neither finished nor were
    undone (the process was killed). Unreadable files are left alone and not listed.

    Call it holding the target's lock (:func:`~.stash.target_lock`): a journal of an install
    that is still running is listed too."""
    try:
        names = sorted(
            entry.name for entry in os.scandir(journal_dir) if entry.name.endswith(".json")
        )
    except OSError:
        return []
    journals: list[Journal] = []
    for name in names:
        try:
            journals.append(read_journal(journal_dir / name))
        except InstallError:
            continue
    return sorted(journals, key=lambda j: (j.created, j.id), reverse=True)


# -- parsing ------------------------------------------------------------------------------------


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _distribution(data: Any) -> Distribution:
    return Distribution(
        name=_str(data["name"]),
        version=_str(data["version"]),
        meta=_str(data["meta"]),
        files=tuple(_str(f) for f in _list(data["files"])),
        record=bool(data["record"]),
    )


def _state(data: Any) -> State:
    return State(
        prefix=_str(data["prefix"]),
        sites=tuple(_str(s) for s in _list(data["sites"])),
        distributions=tuple(_distribution(d) for d in _list(data["distributions"])),
        egg_links=tuple((_str(e[0]), _str(e[1])) for e in _list(data.get("egg_links", []))),
        tilde=tuple(_str(t) for t in _list(data.get("tilde", []))),
        top=tuple(_str(t) for t in _list(data.get("top", []))),
        entries=tuple(
            (_str(e[0]), tuple(_str(n) for n in _list(e[1])))
            for e in _list(data.get("entries", []))
        ),
    )
