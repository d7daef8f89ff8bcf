# This file must parse on Python 2.7+ (see the docstring): no f-strings, no builtin generics,
# and typing names used only in type comments, which ruff does not read.
# ruff: noqa: UP006, UP024, UP031, UP035, F401
"""Facts about the Python interpreter running this file, read without importing torch.

cuda-resolve runs this source with the *target* interpreter (``<python> -c <source>``), which
may be any Python, so it uses the standard library only and no syntax newer than Python 2.7
(no f-strings, no annotations): an interpreter too old to be a target still reports its
version, and the caller says so instead of failing on a SyntaxError. When the target is the
interpreter running cuda-resolve, the module is imported and :func:`probe` called in process.

It prints one JSON object. torch is never imported (``import torch`` takes seconds and runs
arbitrary code): its version comes from its ``*.dist-info/METADATA`` and from
``torch/version.py`` parsed as text, its C++ ABI from ``TorchConfig.cmake``.
"""

import sys

if __name__ == "__main__" and sys.path and sys.path[0] in ("", "."):
    # "-c" puts the working directory first; a json.py there must not shadow the stdlib.
    del sys.path[0]

import json
import os
import re
import stat

if __name__ != "__main__":  # imported in process; run as source, _dist_metadata's text comes first
    from .._dist_metadata import installed_distributions, normalized_name

MYPY = False
if MYPY:  # type comments, not annotations: this file must parse on any Python
    from typing import Any, Callable, Dict, List, Optional, Tuple

    Distributions = Dict[str, Tuple[str, str, str, str]]

_VERSION_PY_FIELD = re.compile(
    r"^(__version__|cuda|hip|git_version)\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|(None))\s*$",
    re.MULTILINE,
)
_CXX11_ABI = re.compile(r"-D_GLIBCXX_USE_CXX11_ABI=([01])")
_READ_LIMIT = 4 * 1024 * 1024


def _read(path, limit=_READ_LIMIT):
    # type: (str, int) -> Optional[str]
    """The first *limit* bytes of a regular file (a FIFO would block, a device never end)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def _abi_tag():
    # type: () -> Optional[str]
    """The wheel ABI tag packaging would compute: cp312, cp313t, cp37m, pypy39_pp73."""
    import sysconfig  # here, not at the top: the in-process probe's cache hit never needs it

    soabi = sysconfig.get_config_var("SOABI")
    if not soabi:
        ext = sysconfig.get_config_var("EXT_SUFFIX") or ""
        match = re.match(r"^\.(cp\d+\w*)-", str(ext))  # ".cp310-win_amd64.pyd"
        return match.group(1) if match else None
    parts = str(soabi).split("-")
    if parts[0] == "cpython" and len(parts) > 1:
        return "cp" + parts[1]
    if parts[0].startswith("pypy") and len(parts) > 1:
        return parts[0] + "_" + parts[1]
    return None


def _glibc():
    # type: () -> Optional[str]
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        return None
    if not text or not text.startswith("glibc "):
        return None
    match = re.match(r"^(\d+\.\d+)", text.split(" ", 1)[1])
    return match.group(1) if match else None


def _site_packages(existing=True):
    # type: (bool) -> List[str]
    """The interpreter's site-packages folders that exist (``existing``), or those that do not
    exist yet (a fresh prefix: the report cache watches for their creation)."""
    import sysconfig

    found = []
    try:
        paths = sysconfig.get_paths()
        found.extend([paths.get("purelib"), paths.get("platlib")])
    except Exception:  # noqa: S110 - an odd sysconfig must not stop the probe
        pass
    try:
        import site

        found.extend(site.getsitepackages())
    except Exception:  # noqa: S110 - old virtualenv's site.py lacks it
        pass
    found.append(_user_site())
    result = []
    for path in found:
        if path and os.path.isdir(path) == existing and path not in result:
            result.append(path)
    return result


def _search_path():
    # type: () -> List[str]
    """Where ``import`` looks, in order (what ``import torch`` would find first)."""
    result = []
    for entry in sys.path:
        if entry and os.path.isdir(entry) and entry not in result:
            result.append(entry)
    return result


def _distributions(search_path, wanted):
    # type: (List[str], Callable[[str], bool]) -> Distributions
    """{normalized name: (name, version, directory, RECORD text)} for names that *wanted* accepts;
    the RECORD is read for CUDA wheels only (its one use), else it is "". The metadata headers
    are read by :mod:`cuda_resolve._dist_metadata` (first occurrence on the search path wins,
    egg-info included), only for the names asked for, guessed from the entries' file names."""
    found = {}  # type: Distributions
    for key, (name, version, meta) in installed_distributions(search_path, wanted).items():
        if not version:
            continue
        record = ""
        if _is_cuda_wheel_name(key):  # torch's RECORD lists thousands of files
            record = _read(os.path.join(meta, "RECORD")) or ""
        found[key] = (name, version, os.path.dirname(meta), record)
    return found


def parse_version_py(text):
    # type: (str) -> Dict[str, Optional[str]]
    """``__version__``, ``cuda``, ``hip``, ``git_version`` from torch/version.py, as text."""
    values = {}  # type: Dict[str, Optional[str]]
    for match in _VERSION_PY_FIELD.finditer(text):
        key = match.group(1)
        if key in values:
            continue
        if match.group(4) is not None:
            values[key] = None
        else:
            values[key] = match.group(2) if match.group(2) is not None else match.group(3)
    return values


def parse_cxx11_abi(text):
    # type: (str) -> Optional[bool]
    """TorchConfig.cmake's ``-D_GLIBCXX_USE_CXX11_ABI=0|1``; newer torch (all CXX11) omits it."""
    match = _CXX11_ABI.search(text)
    return match.group(1) == "1" if match else None


_TORCH_FAMILY = ("torch", "torchvision", "torchaudio")


def _torch(search_path, distributions):
    # type: (List[str], Distributions) -> Optional[Dict[str, Any]]
    package = None
    for directory in search_path:
        candidate = os.path.join(directory, "torch")
        if os.path.isfile(os.path.join(candidate, "__init__.py")) or os.path.isfile(
            os.path.join(candidate, "version.py")
        ):
            package = candidate
            break
    metadata = distributions.get("torch")
    if package is None and metadata is None:
        return None
    result = {
        "location": package,
        "version_py": None,
        "cxx11_abi": None,
        "metadata_version": metadata[1] if metadata else None,
    }  # type: Dict[str, Any]
    for companion in ("torchvision", "torchaudio"):
        found = distributions.get(companion)
        result[companion] = found[1] if found else None
    if package is not None:
        text = _read(os.path.join(package, "version.py"))
        if text is not None:
            result["version_py"] = parse_version_py(text)
        cmake = _read(os.path.join(package, "share", "cmake", "Torch", "TorchConfig.cmake"))
        result["cxx11_abi"] = parse_cxx11_abi(cmake or "")
    return result


def _wheel_dirs(directory, record):
    # type: (str, str) -> Tuple[Optional[str], Optional[str], bool]
    """The ``nvidia/<component>/include`` and ``lib`` directories a wheel's RECORD lists."""
    include_dir = lib_dir = None
    for line in record.splitlines():
        parts = line.split(",", 1)[0].split("/")
        if len(parts) < 4 or parts[0] != "nvidia":
            continue
        if parts[2] == "include" and include_dir is None:
            include_dir = os.path.join(directory, "nvidia", parts[1], "include")
        elif parts[2] in ("lib", "lib64") and lib_dir is None:
            lib_dir = os.path.join(directory, "nvidia", parts[1], parts[2])
        if include_dir and lib_dir:
            break
    owns_files = "\nnvidia/" in "\n" + record
    return include_dir, lib_dir, owns_files


def _is_cuda_wheel_name(name):
    # type: (str) -> bool
    return name.startswith("nvidia-") or name == "cuda-toolkit"


def _nvidia_wheels(distributions):
    # type: (Distributions) -> List[Dict[str, Optional[str]]]
    wheels = []
    for key in sorted(distributions):
        if not _is_cuda_wheel_name(key):
            continue
        _, version, directory, record = distributions[key]
        include_dir, lib_dir, owns_files = _wheel_dirs(directory, record)
        if not owns_files and key != "cuda-toolkit":
            continue  # nvidia-ml-py and other Python-only packages carry no CUDA files
        wheels.append(
            {"name": key, "version": version, "include_dir": include_dir, "lib_dir": lib_dir}
        )
    return wheels


def _platform_machine():
    # type: () -> str
    """The interpreter's own architecture ("linux-x86_64" -> x86_64), not the kernel's."""
    import sysconfig

    platform = sysconfig.get_platform()
    return platform.rsplit("-", 1)[-1] if "-" in platform else platform


def _user_site():
    # type: () -> Optional[str]
    """The user site folder when it is enabled: on the path only once it exists."""
    try:
        import site

        if not site.ENABLE_USER_SITE:  # False: -s, a venv, PYTHONNOUSERSITE; None: setuid
            return None
        return site.getusersitepackages()
    except Exception:
        return None


def _installed_extensions(distributions, names):
    # type: (Distributions, List[str]) -> List[Dict[str, str]]
    """The asked-for distributions (the index's curated packages) as metadata names them; the
    version's local label is reported as it is and read back by cuda-resolve, not here."""
    found = []
    for name in names:
        entry = distributions.get(name)
        if entry is not None:
            found.append({"name": entry[0], "version": entry[1]})
    return found


def probe(extension_names=()):
    # type: (Any) -> Dict[str, Any]
    """The report; *extension_names* (normalized) are the curated packages whose installed
    distributions are reported too: only those names are read, so the probe stays cheap."""
    # Each part reports its own failure: one odd file must not cost the whole report.
    search_path = _search_path()
    errors = []
    extensions = sorted(set(normalized_name(name) for name in extension_names))
    distributions = {}  # type: Distributions
    try:
        distributions = _distributions(
            search_path,
            lambda name: name in _TORCH_FAMILY or _is_cuda_wheel_name(name) or name in extensions,
        )
    except Exception as exc:
        errors.append("reading installed distributions: %r" % (exc,))
    torch = None
    try:
        torch = _torch(search_path, distributions)
    except Exception as exc:
        errors.append("reading torch: %r" % (exc,))
    base_prefix = getattr(sys, "base_prefix", getattr(sys, "real_prefix", sys.prefix))
    return {
        "version": "%d.%d.%d" % tuple(sys.version_info[:3]),
        "implementation": sys.implementation.name if hasattr(sys, "implementation") else "cpython",
        "abi": _abi_tag(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "search_path": search_path,
        "user_site": _user_site(),
        "site_packages": _site_packages(),
        "absent_site_packages": _site_packages(existing=False),
        "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
        "venv": sys.prefix != base_prefix or hasattr(sys, "real_prefix"),
        "platform": sys.platform,
        "machine": _platform_machine(),
        "glibc": _glibc(),
        "torch": torch,
        "nvidia_wheels": _nvidia_wheels(distributions) if torch is not None else [],
        "installed_extensions": _installed_extensions(distributions, extensions),
        "errors": errors,
    }


if __name__ == "__main__":
    try:
        report = probe(sys.argv[1:])  # "python -c SOURCE NAME...": the curated names to report
    except Exception as exc:
        report = {"fatal": repr(exc), "version": "%d.%d.%d" % tuple(sys.version_info[:3])}
    sys.stdout.write(json.dumps(report))
    sys.stdout.write("\n")
