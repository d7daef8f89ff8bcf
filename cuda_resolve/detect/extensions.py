"""Find compiled CUDA/torch extensions in site-packages and the libraries they cannot load.

The classic failure this exposes: an extension built against CUDA 11 needs
``libcudart.so.11.0`` but the environment now carries CUDA 12 (``cannot open shared object
file``), or a build against another torch. A soname counts as loadable when the dynamic
loader would find it (RPATH/RUNPATH, LD_LIBRARY_PATH, the ld.so cache, default directories)
or when ``import torch`` loads it first (torch/lib and the nvidia-* wheels' lib dirs, which
torch preloads) — extensions are only ever imported after torch. The torch that counts is the
one ``import torch`` finds, which may live outside the scanned folders (a venv that reaches a
shared environment's torch through a ``.pth`` file, ``--system-site-packages`` or PYTHONPATH):
its folder is passed as ``torch_sites``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .._bounded import read_head
from ..environment import ExtensionBinary
from ._cache import file_identity


class _Cache(Protocol):
    def get(self, namespace: str, key: str) -> Any: ...
    def put(self, namespace: str, key: str, value: Any) -> None: ...

__all__ = ["find_extensions", "find_extensions_cached", "ldconfig_sonames", "scan_key"]

#: The sonames that tie an extension to CUDA or to a torch build.
_INTERESTING = re.compile(r"^(libcudart|libc10|libtorch|libcublas|libcusparse|libcurand|libcufft|libcusolver|libnvrtc|libcudnn)")
#: Trees that are torch itself or CUDA runtime wheels, not extensions built by users.
_SKIP_DIRS = frozenset({
    "torch", "nvidia", "triton", "jax", "jaxlib", "jax_plugins", "cupy", "cupy_backends", "tensorflow",
    "numpy", "scipy", "pandas", "sklearn", "cv2", "pyarrow", "onnxruntime", "PIL", "matplotlib",
    "grpc", "google", "__pycache__",
})
#: Extensions sit at most a few levels below site-packages (pkg/_C.so, pkg/ops/_ext.so);
#: walking whole trees of large packages costs far more than it finds.
_MAX_DEPTH = 3
_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
_LD_CACHE_LIMIT = 64 * 1024 * 1024  # a large distribution's cache is a few hundred KB
_MAX_FILES = 2000  # a big conda env holds ~1000 .so files; each costs ~40 µs (mapped, not read)


def ldconfig_sonames(cache: Path = Path("/etc/ld.so.cache")) -> frozenset[str]:
    """Sonames listed in the ld.so cache (both the old and the new format store them as strings)."""
    try:
        data = read_head(cache, _LD_CACHE_LIMIT)
    except OSError:
        return frozenset()
    return frozenset(
        match.decode("ascii", "replace") for match in re.findall(rb"(lib[\w.+-]+\.so[\w.]*)\x00", data)
    )


def _names_in(directories: Iterable[str]) -> set[str]:
    names: set[str] = set()
    for directory in directories:
        try:
            names.update(entry.name for entry in os.scandir(directory))
        except OSError:
            continue
    return names


def _torch_loaded_dirs(site_packages: Iterable[Path]) -> list[str]:
    dirs: list[str] = []
    for site in site_packages:
        dirs.append(str(site / "torch" / "lib"))
        nvidia = site / "nvidia"
        try:
            children = list(os.scandir(nvidia))
        except OSError:
            continue
        for child in children:
            dirs.append(os.path.join(child.path, "lib"))
    return dirs


def _candidates(site: Path) -> Iterable[Path]:
    base_depth = str(site).rstrip(os.sep).count(os.sep)
    for directory, subdirs, files in os.walk(site):
        depth = directory.rstrip(os.sep).count(os.sep) - base_depth
        if depth == 0:
            subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS and not d.endswith((".dist-info", ".egg-info"))]
        elif depth >= _MAX_DEPTH:
            subdirs[:] = []
        else:
            subdirs[:] = [d for d in subdirs if d not in ("__pycache__", "tests", "include")]
        for name in files:
            if name.endswith(".so") or ".so." in name:
                yield Path(directory) / name


def find_extensions(
    site_packages: Iterable[str],
    *,
    torch_sites: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    ld_cache: Path = Path("/etc/ld.so.cache"),
    default_dirs: Iterable[str] = _DEFAULT_DIRS,
) -> tuple[ExtensionBinary, ...]:
    """Every extension .so that needs CUDA or torch libraries, with the ones that won't load.

    ``torch_sites``: the folders holding the torch that ``import torch`` finds (they may overlap
    ``site_packages``); its libraries and its nvidia-* wheels' are loaded before any extension.
    ``environ``, ``ld_cache`` and ``default_dirs`` stand for the loader's inputs (tests pass
    their own, so a CUDA installed on the test machine cannot change the answer).
    """
    env = os.environ if environ is None else environ
    sites = [Path(p) for p in site_packages if p and Path(p).is_dir()]
    if not sites:
        return ()
    from ..elf import read_dynamic  # only a cache miss reads ELF files (see find_extensions_cached)

    torch_homes = [Path(p) for p in torch_sites if p and Path(p) not in sites]
    preloaded = _names_in(_torch_loaded_dirs([*sites, *torch_homes]))
    ld_path = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    searchable = _names_in(ld_path) | _names_in(default_dirs) | set(ldconfig_sonames(ld_cache))
    found: list[ExtensionBinary] = []
    scanned = 0
    for site in sites:
        for path in _candidates(site):
            scanned += 1
            if scanned > _MAX_FILES:
                break
            info = read_dynamic(path)
            if info is None:
                continue
            needed = tuple(name for name in info.needed if _INTERESTING.match(name))
            if not needed:
                continue
            origin = str(path.parent)
            own_dirs = [
                p.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for p in (*info.rpath, *info.runpath)
            ]
            visible = searchable | preloaded | _names_in(own_dirs)
            missing = tuple(name for name in needed if name not in visible)
            found.append(ExtensionBinary(path=str(path), needed=needed, missing=missing))
    return tuple(found)


def scan_key(
    site_packages: Iterable[str],
    environ: Mapping[str, str],
    ld_cache: Path = Path("/etc/ld.so.cache"),
    torch_sites: Iterable[str] = (),
) -> str | None:
    """What the scan's answer depends on: each site-packages folder and its top-level entries'
    modification times (installing, removing or rebuilding a package changes one), the folders
    of the torch that is loaded first, the loader's search path, and the ld.so cache. None when
    a folder cannot be read."""
    digest = hashlib.sha256()
    digest.update(environ.get("LD_LIBRARY_PATH", "").encode())
    for home in torch_sites:
        torch, nvidia = (file_identity(os.path.join(home, name)) or "-" for name in ("torch", "nvidia"))
        digest.update(f"torch:{home}|{torch}|{nvidia};".encode())
    try:
        digest.update(str(ld_cache.stat().st_mtime_ns).encode())
    except OSError:
        digest.update(b"-")
    for site in site_packages:
        try:
            digest.update(f"{site}|{os.stat(site).st_mtime_ns}".encode())
            for entry in sorted(os.scandir(site), key=lambda e: e.name):
                digest.update(f"{entry.name}:{entry.stat(follow_symlinks=False).st_mtime_ns};".encode())
        except OSError:
            return None
    return digest.hexdigest()


def find_extensions_cached(
    site_packages: Sequence[str], *, environ: Mapping[str, str], cache: _Cache, torch_sites: Sequence[str] = ()
) -> tuple[ExtensionBinary, ...]:
    """:func:`find_extensions`, remembered until an input of :func:`scan_key` changes.

    A large environment holds hundreds of packages; walking them costs ~100 ms, while checking
    the key costs a few: a second ``doctor`` reuses the first one's scan."""
    torch_sites = [home for home in torch_sites if home not in site_packages]
    key = scan_key(site_packages, environ, torch_sites=torch_sites)
    if key is not None:
        cached = cache.get("extensions", key)
        if isinstance(cached, list):
            try:
                return tuple(
                    ExtensionBinary(path=item["path"], needed=tuple(item["needed"]), missing=tuple(item["missing"]))
                    for item in cached
                )
            except (KeyError, TypeError):
                pass
    found = find_extensions(site_packages, environ=environ, torch_sites=torch_sites)
    if key is not None:
        cache.put("extensions", key, [{"path": e.path, "needed": list(e.needed), "missing": list(e.missing)} for e in found])
    return found
