# This file must parse on Python 2.7+ and use the standard library only: its text is put before
# the scripts cuda-resolve runs with a target interpreter (``<python> -c SOURCE``), which may be
# any Python; typing names are used only in type comments, which ruff does not read.
# ruff: noqa: UP024, UP035, F401
"""The installed distributions' names and versions, read from their metadata headers.

``importlib.metadata`` gives the same answers, but importing it (email, zipfile, csv, pathlib)
costs 40-50 ms per interpreter start, and an install starts the target's interpreter several
times: this reads only the ``Name:`` and ``Version:`` headers of each ``*.dist-info/METADATA``
or ``*.egg-info`` (``PKG-INFO`` inside, or the file itself), as ``importlib.metadata`` would:
headers end at the first blank line, header names are case-insensitive, the first of each
counts; the first distribution of a name on the search path wins. Zip files on the search path
(zipped eggs) are not read.
"""

import os

MYPY = False
if MYPY:  # type comments, not annotations: this file must parse on any Python
    from typing import Callable, Dict, List, Optional, Tuple


def metadata_file(folder, entry):
    # type: (str, str) -> Optional[str]
    """The file holding the headers of the metadata entry ``entry`` of ``folder``, or None."""
    path = os.path.join(folder, entry)
    if entry.endswith(".dist-info"):
        return os.path.join(path, "METADATA")
    if entry.endswith(".egg-info"):
        return os.path.join(path, "PKG-INFO") if os.path.isdir(path) else path
    return None


def name_and_version(path):
    # type: (str) -> Tuple[Optional[str], Optional[str]]
    """The ``Name`` and ``Version`` headers of a METADATA or PKG-INFO file (None where absent)."""
    fields = {}  # type: Dict[str, str]
    try:
        with open(path, "rb") as stream:
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not line.strip():
                    break  # the headers end at the first blank line
                if line[0] in " \t" or ":" not in line:
                    continue  # a folded continuation, or not a header
                key, value = line.split(":", 1)
                key = key.strip().lower()
                if key in ("name", "version") and key not in fields:
                    fields[key] = value.strip()
                    if len(fields) == 2:
                        break
    except (IOError, OSError):
        pass
    return fields.get("name"), fields.get("version")


def normalized_name(name):
    # type: (str) -> str
    """PEP 503's normalised name."""
    result = []  # type: List[str]
    for char in name.lower():
        if char in "-_.":
            if not result or result[-1] != "-":
                result.append("-")
        else:
            result.append(char)
    return "".join(result)


def installed_distributions(search_path, wanted=None):
    # type: (List[str], Optional[Callable[[str], bool]]) -> Dict[str, Tuple[str, Optional[str], str]]
    """``{normalised name: (name, version, metadata entry path)}`` of the distributions on
    ``search_path`` ("" is the working directory, as for ``import``); with ``wanted`` (a
    callable given the normalised name guessed from the entry's file name) only those are read,
    so an environment of hundreds of packages costs a directory listing."""
    found = {}  # type: Dict[str, Tuple[str, Optional[str], str]]
    for folder in search_path:
        try:
            entries = sorted(os.listdir(folder or "."))
        except (IOError, OSError):
            continue
        for entry in entries:
            headers = metadata_file(folder or ".", entry)
            if headers is None:
                continue
            if wanted is not None and not wanted(normalized_name(entry.rsplit(".", 1)[0].split("-", 1)[0])):
                continue
            name, version = name_and_version(headers)
            if name and normalized_name(name) not in found:
                found[normalized_name(name)] = (name, version, os.path.join(folder, entry))
    return found


def source_text():
    # type: () -> str
    """This file's text, to put before a script that a target interpreter runs."""
    with open(os.path.splitext(__file__)[0] + ".py", "rb") as stream:
        return stream.read().decode("utf-8")
