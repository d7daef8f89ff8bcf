"""The target interpreter and the torch installed in it, via :mod:`._target_probe`.

The target is the interpreter cuda-resolve inspects and installs into (``--python PATH``),
often not the one running cuda-resolve. Its facts come from running the probe script with it
(``<python> -c <source>``, under a timeout). Not ``-I``: the probe must see the search path
the user's own ``python`` sees, including ``PYTHONPATH`` and user site-packages, since that
decides which torch ``import torch`` finds; the script drops the working directory from
``sys.path`` itself and runs from ``/``. Without ``--python`` the same functions run in
process, with no subprocess at all.

Both reports are remembered in the probe cache while the distributions and torch on the
interpreter's import path stay the same (:func:`_installed_key`); another interpreter's entry is
also keyed by its path, its venv and the variables that move its import path. Both keys carry the
report's format and the curated package names asked for (:func:`curated_extension_names`), whose
installed distributions the report lists: an entry written before either changed is never read.

A ``--python`` that is not an interpreter is the user's mistake, so it raises
:class:`~cuda_resolve.errors.UsageError`; everything found inside a working interpreter
(a broken torch install, odd metadata) becomes a note instead.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence

from .._dist_metadata import normalized_name
from .._frozen import frozen
from ..environment import InstalledExtension, NvidiaWheel, PythonInfo, TorchInfo
from ..errors import CudaResolveError, UsageError
from ..versions import CudaVersion
from ._files import which
from ._run import run

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any, Protocol

__all__ = [
    "MINIMUM_TARGET",
    "SETTLED_NS",
    "TargetFacts",
    "curated_extension_names",
    "facts_from_report",
    "installed_state",
    "interpreter_key",
    "probe_target",
    "resolve_python",
    "watched_folders",
]

#: The oldest interpreter cuda-resolve installs into.
MINIMUM_TARGET = (3, 7)
_HINT = (
    "give the path of a Python interpreter, e.g. ~/miniconda3/envs/NAME/bin/python or "
    ".venv/bin/python"
)


@frozen(kw_only=False)
class TargetFacts:
    """What the target interpreter's files say: its Python, platform, torch and builds."""

    python: PythonInfo
    platform: str | None  # sys.platform: "linux", "win32", "darwin"
    machine: str | None  # the interpreter's architecture
    glibc: str | None
    torch: TorchInfo | None
    notes: tuple[str, ...] = ()
    installed_extensions: tuple[InstalledExtension, ...] = ()


def resolve_python(python: str, environ: Mapping[str, str]) -> str:
    """The interpreter path for ``--python``: a path, or a name looked up on PATH."""
    if os.sep not in python and not os.path.exists(python):
        found = which(python, environ)
        if found is None:
            raise UsageError(f"--python {python}: not found on PATH", hint=_HINT)
        return found
    if not os.path.exists(python):
        raise UsageError(f"--python {python}: no such file", hint=_HINT)
    if os.path.isdir(python):
        raise UsageError(
            f"--python {python}: is a directory, not an interpreter",
            hint=f"give the interpreter inside it, e.g. {os.path.join(python, 'bin', 'python')}",
        )
    if not os.access(python, os.X_OK):
        raise UsageError(
            f"--python {python}: is not executable, so it is not an interpreter", hint=_HINT
        )
    return python


def _probe_source() -> str:
    from importlib.resources import files

    from .._dist_metadata import source_text

    return source_text() + files(__package__).joinpath("_target_probe.py").read_text(
        encoding="utf-8"
    )


#: The report's shape, part of every cache key: a report cached by an older cuda-resolve (without
#: ``installed_extensions``) is not taken for a new one.
_REPORT_FORMAT = "report/2"
#: A package file of the index larger than this is not read for its name.
_PACKAGE_FILE_LIMIT = 1024 * 1024
_PACKAGE_NAME = re.compile(
    r'^\[package\][ \t]*$.*?^name[ \t]*=[ \t]*"([^"\n]+)"', re.MULTILINE | re.DOTALL
)


def _package_file_name(entry: Any) -> str:
    """The ``[package]`` table's ``name`` in an index package file, read as text (no TOML parse);
    the file's stem when it cannot be read or names none (the index parser reports that)."""
    stem = str(entry.name).removesuffix(".toml")
    try:
        if isinstance(entry, os.PathLike):
            from .._bounded import read_text

            text = read_text(entry, limit=_PACKAGE_FILE_LIMIT)
        else:  # a zipped install's resource
            text = entry.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return stem
    match = _PACKAGE_NAME.search(text)
    return match.group(1) if match else stem


def curated_extension_names(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The packages the index curates (normalized names), from the package files of the shipped
    index and the configured overlays: a directory listing and a line per file, not the parsed
    index (``doctor`` reads only the index's CUDA facts). ``--index DIR`` given to one command is
    not known here. A broken overlay setting costs its names, never the detection."""
    from ..index.load import overlay_dirs, shipped_index_dir

    roots: list[Any] = []
    try:
        roots.append(shipped_index_dir())
        roots.extend(overlay_dirs(dict(environ)))
    except (CudaResolveError, OSError):
        pass
    names: set[str] = set()
    for root in roots:
        try:
            folder = root.joinpath("packages")
            entries = list(folder.iterdir()) if folder.is_dir() else []
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".toml") and not entry.name.startswith(".#"):
                names.add(normalized_name(_package_file_name(entry)))
    return tuple(sorted(names))


def _run_probe(
    python: str, *, environ: Mapping[str, str], timeout: float, extension_names: Sequence[str] = ()
) -> dict[str, Any]:
    ran = run(
        [python, "-c", _probe_source(), *extension_names], timeout=timeout, environ=environ, cwd="/"
    )
    if ran is None:
        raise UsageError(f"--python {python}: could not be run as a program", hint=_HINT)
    if ran.timed_out:
        import shlex

        raise UsageError(
            f"--python {python}: did not answer within {timeout:g} s",
            hint=f"check that it starts ({shlex.join([python, '-c', 'pass'])}); a slow network"
            " file system can cause this",
        )
    report = _json_object(ran.stdout)
    if report is None or "version" not in report:
        said = ran.first_line or f"nothing (exit status {ran.returncode})"
        raise UsageError(
            f"--python {python}: is not a Python interpreter (it printed {said[:200]!r})",
            hint=_HINT,
        )
    return report


def _json_object(text: str) -> dict[str, Any] | None:
    # The last line: a sitecustomize that prints something must not hide the report.
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        return value if isinstance(value, dict) else None
    return None


if TYPE_CHECKING:

    class _ReportCache(Protocol):
        def get(self, namespace: str, key: str) -> Any: ...
        def put(self, namespace: str, key: str, value: Any) -> None: ...


#: Files that change the import path or what it finds without any distribution changing: path
#: files (``conda develop``, a lab's own ``.pth``), ``setup.py develop`` links, and start-up hooks.
_PATH_HOOKS = (".pth", ".egg-link")
_START_UP_HOOKS = ("sitecustomize.py", "usercustomize.py")


def installed_state(search_path: list[str]) -> tuple[str, int]:
    """What a report depends on, as a digest, and the newest modification time in it.

    The folders on the import path, in order, and in each the distributions' metadata folders,
    the ``torch`` package, path files and start-up hooks (installing, removing or rebuilding a
    package replaces them). Other entries are left out: the first folder is often the working
    directory (``python -m``), whose unrelated files change all the time. The running Python's
    version and glibc are part of it, so a cache survives neither an upgrade of the interpreter
    running cuda-resolve nor of the C library."""
    import sys

    from .._digest import new_digest

    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):  # not glibc, or not POSIX
        libc = ""
    digest = new_digest(f"{sys.version}|{libc}".encode())
    newest = 0
    for folder in search_path:
        digest.update(f"{folder}\0".encode())
        try:
            with os.scandir(folder) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    name = entry.name
                    if (
                        name == "torch"
                        or name.endswith((".dist-info", ".egg-info", *_PATH_HOOKS))
                        or name in _START_UP_HOOKS
                    ):
                        stat = entry.stat(follow_symlinks=False)
                        newest = max(newest, stat.st_mtime_ns)
                        digest.update(f"{name}:{stat.st_mtime_ns}:{stat.st_size};".encode())
                    if name.startswith("torch"):
                        # `setup.py develop` rewrites these in place, which changes no folder.
                        for inside in ("version.py", "METADATA", "PKG-INFO"):
                            digest.update(_file_stamp(os.path.join(entry.path, inside)).encode())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest(), newest


def _installed_key(search_path: list[str]) -> str:
    return installed_state(search_path)[0]


def _file_stamp(path: str) -> str:
    try:
        stat = os.stat(path)
    except OSError:
        return "-;"
    return f"{stat.st_mtime_ns}:{stat.st_size};"


def _storable(report: dict[str, Any]) -> bool:
    """A report that says something went wrong is never remembered: the next run tries again."""
    return not report.get("errors") and "fatal" not in report


def _in_process_report(
    cache: _ReportCache | None, extension_names: Sequence[str] = ()
) -> dict[str, Any]:
    """This interpreter's probe report, remembered while its installed packages stay the same.

    Reading the installed distributions (``importlib.metadata``) is most of what ``doctor`` costs
    once the other probes are cached."""
    import sys

    from . import _target_probe

    key = None
    if cache is not None:
        asked = ",".join(extension_names)
        installed = _installed_key(_target_probe._search_path())
        key = f"{_REPORT_FORMAT}|{asked}|{sys.executable}|{installed}"
        cached = cache.get("target", key)
        if isinstance(cached, dict):
            return cached
    report: dict[str, Any] = _target_probe.probe(extension_names)
    if key is not None and cache is not None and _storable(report):
        cache.put("target", key, report)
    return report


#: Variables that move an interpreter's import path (and so which torch ``import torch`` finds).
_PATH_VARIABLES = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONNOUSERSITE",
    "PYTHONPLATLIBDIR",
    "HOME",
)


def interpreter_key(python: str, environ: Mapping[str, str]) -> str | None:
    """Another interpreter as the report cache knows it: its path as given (a venv's
    ``bin/python`` links to the base interpreter, yet sees other site-packages), the file it
    resolves to (an upgraded Python is another file), its venv's ``pyvenv.cfg``, and the
    variables that move its import path."""
    from ._cache import file_identity

    identity = file_identity(python)
    if identity is None:
        return None
    given = os.path.abspath(python)
    venv_config = (
        file_identity(os.path.join(os.path.dirname(os.path.dirname(given)), "pyvenv.cfg")) or "-"
    )
    variables = "\0".join(f"{name}={environ.get(name, '')}" for name in _PATH_VARIABLES)
    return f"{given}|{identity}|{venv_config}|{variables}"


def watched_folders(report: dict[str, Any]) -> list[str] | None:
    """The report's import path, plus the site-packages folders that are not on it because they
    do not exist yet (the user site folder, or a fresh prefix's own site-packages, which conda or
    the first ``pip install`` creates): their creation must be seen."""
    path = report.get("search_path")
    if not isinstance(path, list) or not all(isinstance(entry, str) for entry in path):
        return None
    absent = [
        folder
        for folder in (report.get("user_site"), *(report.get("absent_site_packages") or ()))
        if isinstance(folder, str) and folder not in path
    ]
    return [*path, *dict.fromkeys(absent)]


#: A report is remembered only when nothing it depends on changed this close to its start: a
#: package installed while the probe ran could otherwise be stored under the new state's key.
#: Two seconds cover file systems with coarse timestamps.
SETTLED_NS = 2_000_000_000


def _subprocess_report(
    python: str,
    *,
    environ: Mapping[str, str],
    timeout: float,
    cache: _ReportCache | None,
    extension_names: Sequence[str] = (),
) -> dict[str, Any]:
    """Another interpreter's report, remembered like the in-process one: the probe's run (the
    interpreter's start, its site hooks, reading metadata) is most of what ``doctor`` costs
    when cuda-resolve lives in an environment of its own (pipx) and describes another."""
    import time

    key = interpreter_key(python, environ) if cache is not None else None
    if key is not None:
        key = f"{_REPORT_FORMAT}|{','.join(extension_names)}|{key}"
    if key is not None and cache is not None:
        cached = cache.get("target-run", key)
        if isinstance(cached, dict) and isinstance(cached.get("report"), dict):
            watched = watched_folders(cached["report"])
            if watched is not None and cached.get("installed") == _installed_key(watched):
                report: dict[str, Any] = cached["report"]
                return report
    started = time.time_ns()
    report = _run_probe(python, environ=environ, timeout=timeout, extension_names=extension_names)
    watched = watched_folders(report)
    if key is None or cache is None or watched is None or not _storable(report):
        return report
    if os.path.realpath(str(report.get("executable"))) != os.path.realpath(python):
        return report  # a launcher (pyenv, asdf) that picks the interpreter by rules of its own
    installed, newest = installed_state(watched)
    if newest < started - SETTLED_NS:
        cache.put("target-run", key, {"installed": installed, "report": report})
    return report


def probe_target(
    python: str | None,
    *,
    environ: Mapping[str, str],
    timeout: float,
    cache: _ReportCache | None = None,
    extension_names: Sequence[str] | None = None,
) -> TargetFacts:
    """Facts of *python* (already checked by :func:`resolve_python`), or of this interpreter.
    *extension_names*: the packages whose installed distributions are reported (default: those
    the index curates, :func:`curated_extension_names`)."""
    names = (
        curated_extension_names(environ)
        if extension_names is None
        else tuple(sorted({normalized_name(n) for n in extension_names}))
    )
    if python is None:
        report = _in_process_report(cache, names)
    else:
        report = _subprocess_report(
            python, environ=environ, timeout=timeout, cache=cache, extension_names=names
        )
    return facts_from_report(report, origin=python)


def _version_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(".")[:2])
    except ValueError:
        return (0,)


def facts_from_report(report: dict[str, Any], *, origin: str | None = None) -> TargetFacts:
    """Turn the probe's JSON into frozen facts; pure, so recorded reports can be tested."""
    version = str(report["version"])
    if _version_tuple(version) < MINIMUM_TARGET:
        raise UsageError(
            f"--python {origin}: Python {version} is too old; cuda-resolve installs into Python >= "
            + ".".join(map(str, MINIMUM_TARGET)),
            hint="create an environment with a newer Python (conda create -n NAME python=3.11)",
        )
    notes = [f"target probe: {error}" for error in report.get("errors", ())]
    if "fatal" in report:
        notes.append(f"target probe failed: {report['fatal']}")
    python = PythonInfo(
        version=version,
        implementation=str(report.get("implementation") or "cpython"),
        executable=report.get("executable") or origin,
        abi=report.get("abi"),
        site_packages=tuple(report.get("site_packages") or ()),
        prefix=report.get("prefix"),
        is_conda=bool(report.get("conda")),
        is_venv=bool(report.get("venv")),
    )
    torch, torch_notes = _torch(report.get("torch"), report.get("nvidia_wheels") or ())
    return TargetFacts(
        python=python,
        platform=report.get("platform"),
        machine=report.get("machine"),
        glibc=report.get("glibc"),
        torch=torch,
        notes=(*notes, *torch_notes),
        installed_extensions=_installed_extensions(report.get("installed_extensions")),
    )


def _cuda(text: str | None, what: str, notes: list[str]) -> CudaVersion | None:
    if not text:
        return None
    try:
        return CudaVersion.parse(text)
    except ValueError:
        notes.append(f"torch: {what} {text!r} is not a CUDA version")
        return None


def _torch(data: dict[str, Any] | None, wheels: Any) -> tuple[TorchInfo | None, list[str]]:
    if not data:
        return None, []
    notes: list[str] = []
    fields = data.get("version_py") or {}
    from_file = fields.get("__version__")
    from_metadata = data.get("metadata_version")
    location = data.get("location")
    version = from_file or from_metadata
    if not version:
        notes.append(
            f"torch at {location} has neither torch/version.py nor metadata: a broken install"
        )
        return None, notes
    # PyPI wheels drop the local tag from their metadata ("2.11.0") while version.py keeps it
    # ("2.11.0+cu130"); only a different release means two installs are mixed.
    if from_file and from_metadata and from_file.split("+")[0] != from_metadata.split("+")[0]:
        notes.append(
            f"torch: metadata says {from_metadata} but torch/version.py says {from_file} (a mixed "
            "or broken install)"
        )
    if location is None:
        notes.append(f"torch {version} is listed in metadata but its package directory is missing")
    if "version_py" in data and data["version_py"] is not None:
        cuda = _cuda(fields.get("cuda"), "torch.version.cuda", notes)
    else:  # no version.py: fall back to the local tag, "2.5.1+cu124"
        local = version.split("+", 1)[1] if "+" in version else ""
        cuda = _cuda(local, "local version tag", []) if local.startswith("cu") else None
    torch = TorchInfo(
        version=version,
        cuda=cuda,
        hip=fields.get("hip"),
        git_version=fields.get("git_version"),
        cxx11_abi=data.get("cxx11_abi"),
        arch_list=None,  # compiled into libtorch_cuda; unknowable without importing torch
        location=location,
        nvidia_wheels=tuple(
            NvidiaWheel(
                name=str(wheel["name"]),
                version=str(wheel["version"]),
                include_dir=wheel.get("include_dir"),
                lib_dir=wheel.get("lib_dir"),
            )
            for wheel in wheels
        ),
        torchvision=_text(data.get("torchvision")),
        torchaudio=_text(data.get("torchaudio")),
        pip_version=_text(from_metadata),
    )
    return torch, notes


def _installed_extensions(entries: Any) -> tuple[InstalledExtension, ...]:
    """The report's ``installed_extensions``; an entry that is not a name and a version is left
    out."""
    if not isinstance(entries, list):
        return ()
    found: list[InstalledExtension] = []
    for entry in entries:
        if isinstance(entry, dict):
            name, version = _text(entry.get("name")), _text(entry.get("version"))
            if name is not None and version is not None:
                found.append(InstalledExtension(name=name, version=version))
    return tuple(found)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
