# This file must parse on Python 2.7+ and use the standard library only: its text is put before
# the scripts cuda-resolve runs with a target interpreter (``<python> -c SOURCE``), which may be
# any Python; typing names are used only in type comments, which ruff does not read.
# ruff: noqa: UP024, UP035, F401
"""The installed distributions' names and versions, read from their metadata headers.

``importlib.metadata`` gives the same answers, but importing it (email, zipfile, csv, pathlib)
costs 40-50 ms per interpreter start, and an install starts the target's interpreter several
times: this reads only the ``Name:`` and ``Version:`` headers of each ``*.dist-info`` (its
``METADATA``, else ``PKG-INFO``), ``*.egg-info`` (``PKG-INFO`` inside, or the file itself) and
egg (``EGG-INFO/PKG-INFO`` of a ``.egg`` folder or zip on the search path), as
``importlib.metadata`` and pip read them: entries in directory order, names compared without
case, headers end at the first blank line, header names are case-insensitive, the first of each
counts; the first distribution of a name on the search path wins. Where importlib.metadata
would stop (bytes that are not UTF-8), this reads on.
"""

import os
import stat

MYPY = False
if MYPY:  # type comments, not annotations: this file must parse on any Python
    from typing import Callable, Dict, Iterable, List, Optional, Tuple


def metadata_file(folder, entry):
    # type: (str, str) -> Optional[str]
    """The file holding the headers of the metadata entry ``entry`` of ``folder``, or None."""
    path = os.path.join(folder, entry)
    low = entry.lower()
    if low.endswith(".dist-info"):
        found = os.path.join(path, "METADATA")
        return found if os.path.exists(found) else os.path.join(path, "PKG-INFO")
    if low.endswith(".egg-info"):
        return os.path.join(path, "PKG-INFO") if os.path.isdir(path) else path
    return None


def name_and_version(path):
    # type: (str) -> Tuple[Optional[str], Optional[str]]
    """The ``Name`` and ``Version`` headers of a METADATA or PKG-INFO file (None where absent)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None, None  # a FIFO would block, a device never end
        with open(path, "rb") as stream:
            return _headers(stream)
    except (IOError, OSError):
        return None, None


def _headers(lines):
    # type: (Iterable[bytes]) -> Tuple[Optional[str], Optional[str]]
    fields = {}  # type: Dict[str, str]
    for raw in lines:
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
    return fields.get("name"), fields.get("version")


def _egg_headers(egg):
    # type: (str) -> Tuple[Optional[str], Optional[str]]
    """The headers of an egg on the search path: a folder, or a zip (read only where one is)."""
    if os.path.isdir(egg):
        return name_and_version(os.path.join(egg, "EGG-INFO", "PKG-INFO"))
    try:
        import zipfile

        with zipfile.ZipFile(egg) as archive:
            return _headers(archive.read("EGG-INFO/PKG-INFO").splitlines())
    except Exception:
        return None, None


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

    def add(name, version, meta):
        # type: (Optional[str], Optional[str], str) -> None
        if name and normalized_name(name) not in found:
            found[normalized_name(name)] = (name, version, meta)

    for folder in search_path:
        if folder.lower().endswith(".egg"):
            name, version = _egg_headers(folder)
            if wanted is None or (name and wanted(normalized_name(name))):
                add(name, version, os.path.join(folder, "EGG-INFO"))
            continue
        try:
            entries = os.listdir(
                folder or "."
            )  # directory order, as importlib.metadata and pip read it
        except (IOError, OSError):
            continue
        for entry in entries:
            headers = metadata_file(folder or ".", entry)
            if headers is None:
                continue
            if wanted is not None and not wanted(
                normalized_name(entry.rsplit(".", 1)[0].split("-", 1)[0])
            ):
                continue
            name, version = name_and_version(headers)
            add(name, version, os.path.join(folder, entry))
    return found


_SOURCE = []  # type: List[str]


def source_text():
    # type: () -> str
    """This file's text, to put before a script that a target interpreter runs (read as package
    data: a zipped or sourceless install has no file beside ``__file__``)."""
    if not _SOURCE:
        import pkgutil

        data = pkgutil.get_data("cuda_resolve", "_dist_metadata.py")
        if data is None:
            raise OSError(
                "cuda_resolve/_dist_metadata.py cannot be read from the installed package"
            )
        _SOURCE.append(data.decode("utf-8"))
    return _SOURCE[0]
