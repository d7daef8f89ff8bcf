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

For each extension the scan also reads (mapped, never loaded) what predicts the two run-time
failures that follow an install that "succeeded": the SASS/PTX targets of its fat binaries
(``no kernel image is available for execution on the device``; doctor compares them with the
GPUs) and its undefined symbols of torch's namespaces that the installed torch's libraries do
not define (``undefined symbol: _ZNK3c104IValue9toGenericEv``). A file whose fat binary or
symbol table is corrupt gets a note naming it.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from .._bounded import read_head, read_text
from .._bounded import run as run_bounded
from .._digest import new_digest
from .._dist_metadata import normalized_name
from .._frozen import replace
from .._lazy_re import lazy_compile
from ..environment import ExtensionBinary
from ._cache import file_identity

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any, Protocol

    from ..elf import ElfImage

    class _Cache(Protocol):
        def get(self, namespace: str, key: str) -> Any: ...
        def put(self, namespace: str, key: str, value: Any) -> None: ...


__all__ = [
    "TORCH_LIBRARIES",
    "demangle",
    "find_extensions",
    "find_extensions_cached",
    "is_torch_symbol",
    "ldconfig_sonames",
    "scan_key",
]

#: The sonames that tie an extension to CUDA or to a torch build.
_INTERESTING = lazy_compile(
    r"^(libcudart|libc10|libtorch|libcublas|libcusparse|libcurand|libcufft|libcusolver|libnvrtc|libcudnn)"
)
#: Trees that are torch itself or CUDA runtime wheels, not extensions built by users.
_SKIP_DIRS = frozenset(
    {
        "torch",
        "nvidia",
        "triton",
        "jax",
        "jaxlib",
        "jax_plugins",
        "cupy",
        "cupy_backends",
        "tensorflow",
        "numpy",
        "scipy",
        "pandas",
        "sklearn",
        "cv2",
        "pyarrow",
        "onnxruntime",
        "PIL",
        "matplotlib",
        "grpc",
        "google",
        "__pycache__",
    }
)
#: Extensions sit at most a few levels below site-packages (pkg/_C.so, pkg/ops/_ext.so);
#: walking whole trees of large packages costs far more than it finds.
_MAX_DEPTH = 3
_DEFAULT_DIRS = (
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
)
_LD_CACHE_LIMIT = 64 * 1024 * 1024  # a large distribution's cache is a few hundred KB
_MAX_FILES = 2000  # a big conda env holds ~1000 .so files; each costs ~40 µs (mapped, not read)
#: The torch libraries whose symbols an extension may use (torch/lib); what they do not define
#: and the extension needs, ``import`` fails on.
TORCH_LIBRARIES = (
    "libc10.so",
    "libc10_cuda.so",
    "libtorch.so",
    "libtorch_cpu.so",
    "libtorch_cuda.so",
    "libtorch_python.so",
)
#: Mangled names in torch's namespaces (c10::, at::, torch::, caffe2::), their vtables and type
#: infos, and libtorch_python's C names (THPVariable_Wrap ...): what torch is meant to provide.
_TORCH_SYMBOL = lazy_compile(r"^_Z(?:T[VIS])?N[rVK]*[RO]?(?:3c10|2at|5torch|6caffe2)|^THP[A-Z]")
_MAX_SYMBOLS_SHOWN = 50  # per extension: the first ones are enough to act on
_DEMANGLE_TIMEOUT_S = 5.0
_DISTRIBUTION_TEXT_LIMIT = 1024 * 1024


def ldconfig_sonames(cache: Path = Path("/etc/ld.so.cache")) -> frozenset[str]:
    """Sonames listed in the ld.so cache (both the old and the new format store them as strings)."""
    try:
        data = read_head(cache, _LD_CACHE_LIMIT)
    except OSError:
        return frozenset()
    return frozenset(
        match.decode("ascii", "replace")
        for match in re.findall(rb"(lib[\w.+-]+\.so[\w.]*)\x00", data)
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
            subdirs[:] = [
                d
                for d in subdirs
                if d not in _SKIP_DIRS and not d.endswith((".dist-info", ".egg-info"))
            ]
        elif depth >= _MAX_DEPTH:
            subdirs[:] = []
        else:
            subdirs[:] = [d for d in subdirs if d not in ("__pycache__", "tests", "include")]
        for name in files:
            if name.endswith(".so") or ".so." in name:
                yield Path(directory) / name


def is_torch_symbol(name: str) -> bool:
    """A mangled name in c10::, at::, torch:: or caffe2:: (or their vtables and type infos), or
    one of libtorch_python's C names: a symbol an extension expects torch to provide."""
    return _TORCH_SYMBOL.match(name) is not None


def demangle(names: Sequence[str], *, environ: Mapping[str, str]) -> tuple[str, ...]:
    """``names`` demangled by c++filt, one bounded run for all of them. Where c++filt is
    missing, fails or answers with another number of lines, the names stay mangled."""
    if not names:
        return ()
    import shutil  # only to demangle: a warm scan needs none

    program = shutil.which("c++filt", path=environ.get("PATH", os.defpath))
    if program is None:
        return tuple(names)
    ran = run_bounded(
        [program], timeout=_DEMANGLE_TIMEOUT_S, stdin=("\n".join(names) + "\n").encode()
    )
    lines = ran.stdout.splitlines() if ran is not None and ran.ok else []
    return tuple(lines) if len(lines) == len(names) else tuple(names)


class _TorchSymbols:
    """The installed torch's libraries, mapped once per scan: which names none of them defines."""

    def __init__(self, lib_dir: Path, stack: ExitStack) -> None:
        from ..elf import ElfError, open_elf

        self.images: list[tuple[Path, ElfImage]] = []
        self.broken: list[str] = []
        for name in TORCH_LIBRARIES:
            path = lib_dir / name
            try:
                image = stack.enter_context(open_elf(path))
            except (OSError, ElfError, struct.error) as exc:
                self.broken.append(f"{path}: its symbol table cannot be read ({exc})")
                continue
            if image is not None:
                self.images.append((path, image))

    def undefined(self, names: Iterable[str]) -> tuple[str, ...]:
        from ..elf import ElfError

        remaining = set(names)
        for path, image in self.images:
            if not remaining:
                break
            try:
                remaining -= image.defined_symbols(remaining)
            except (ElfError, struct.error) as exc:
                note = f"{path}: its symbol table cannot be read ({exc})"
                if note not in self.broken:
                    self.broken.append(note)
                return ()  # unknowable: say nothing rather than blame the extension
        return tuple(sorted(remaining))


def _torch_lib_dir(homes: Iterable[Path]) -> Path | None:
    """torch/lib of the torch that ``import torch`` finds (the first folder that has one)."""
    for home in homes:
        lib = home / "torch" / "lib"
        if (lib / "libc10.so").is_file():
            return lib
    return None


def _inspect(
    path: Path, torch_symbols: _TorchSymbols | None
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(SASS targets, PTX targets, torch symbols the installed torch lacks, notes) of one file."""
    from ..elf import ElfError, open_elf
    from ..fatbin import FatbinError, kernel_images

    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    notes: list[str] = []
    try:
        with open_elf(path) as image:
            if image is None:
                return sass, ptx, missing, ()
            try:
                images = kernel_images(image)
            except (FatbinError, ElfError, struct.error) as exc:
                notes.append(
                    f"{path}: its fat binary cannot be read ({exc}); which GPUs it runs "
                    "on is unknown"
                )
            else:
                if images is not None:
                    sass = tuple(c.sm for c in images.sass)
                    ptx = tuple(f"compute_{c.major}{c.minor}{c.suffix}" for c in images.ptx)
            if torch_symbols is not None:
                try:
                    wanted = [name for name in image.undefined_symbols() if is_torch_symbol(name)]
                except (ElfError, struct.error) as exc:
                    notes.append(f"{path}: its dynamic symbol table cannot be read ({exc})")
                else:
                    missing = torch_symbols.undefined(wanted)
    except (ElfError, struct.error) as exc:
        notes.append(f"{path}: not a readable ELF file ({exc})")
    except OSError as exc:
        notes.append(f"{path}: cannot be read ({exc.strerror or exc})")
    return sass, ptx, missing, tuple(notes)


class _Distributions:
    """Which installed distribution a file below a site-packages folder belongs to, by its
    top-level folder: the .dist-info of that name, else the one whose top_level.txt lists it."""

    def __init__(self, site: Path) -> None:
        self.site = site
        self.by_name: dict[str, str] | None = None
        self.by_top_level: dict[str, str] | None = None

    def _scan(self) -> dict[str, str]:
        if self.by_name is None:
            self.by_name = {}
            try:
                entries = [e.name for e in os.scandir(self.site) if e.name.endswith(".dist-info")]
            except OSError:
                entries = []
            for entry in sorted(entries):
                name, _, version = entry[: -len(".dist-info")].partition("-")
                self.by_name.setdefault(normalized_name(name), f"{name} {version}".strip())
        return self.by_name

    def owner(self, path: Path) -> str | None:
        try:
            top = path.relative_to(self.site).parts[0]
        except (ValueError, IndexError):
            return None
        top = top.split(".", 1)[0] if top.endswith(".so") or ".so." in top else top
        by_name = self._scan()
        if normalized_name(top) in by_name:
            return by_name[normalized_name(top)]
        if self.by_top_level is None:
            self.by_top_level = {}
            for label in by_name.values():
                name, _, version = label.partition(" ")
                for line in self._top_level(f"{name}-{version}.dist-info").splitlines():
                    if line.strip():
                        self.by_top_level.setdefault(line.strip(), label)
        return self.by_top_level.get(top)

    def _top_level(self, dist_info: str) -> str:
        try:
            return read_text(
                self.site / dist_info / "top_level.txt", limit=_DISTRIBUTION_TEXT_LIMIT
            )
        except (OSError, UnicodeDecodeError):
            return ""


def find_extensions(
    site_packages: Iterable[str],
    *,
    torch_sites: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    ld_cache: Path = Path("/etc/ld.so.cache"),
    default_dirs: Iterable[str] = _DEFAULT_DIRS,
) -> tuple[ExtensionBinary, ...]:
    """Every extension .so that needs CUDA or torch libraries, with the ones that won't load,
    the GPU code it carries and the torch symbols the installed torch lacks.

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
    torch_lib = _torch_lib_dir([*torch_homes, *sites])
    with ExitStack() as stack:
        torch_symbols = _TorchSymbols(torch_lib, stack) if torch_lib is not None else None
        for site in sites:
            owners = _Distributions(site)
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
                    p.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
                    for p in (*info.rpath, *info.runpath)
                ]
                visible = searchable | preloaded | _names_in(own_dirs)
                missing = tuple(name for name in needed if name not in visible)
                links_torch = any(name.startswith(("libc10", "libtorch")) for name in needed)
                sass, ptx, symbols, notes = _inspect(path, torch_symbols if links_torch else None)
                found.append(
                    ExtensionBinary(
                        path=str(path),
                        needed=needed,
                        missing=missing,
                        sass=sass,
                        ptx=ptx,
                        missing_symbols=symbols[:_MAX_SYMBOLS_SHOWN],
                        distribution=owners.owner(path),
                        notes=notes,
                    )
                )
        broken = tuple(torch_symbols.broken) if torch_symbols is not None else ()
    if broken and found:  # torch's own libraries could not be read: say so once, on the first
        found[0] = _with(found[0], notes=found[0].notes + broken)
    everything = sorted({name for ext in found for name in ext.missing_symbols})
    if everything:
        readable = dict(zip(everything, demangle(everything, environ=env), strict=True))
        found = [
            _with(ext, demangled=tuple(readable[name] for name in ext.missing_symbols))
            if ext.missing_symbols
            else ext
            for ext in found
        ]
    return tuple(found)


def _with(ext: ExtensionBinary, **changes: Any) -> ExtensionBinary:
    return replace(ext, **changes)


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
    digest = new_digest()
    digest.update(environ.get("LD_LIBRARY_PATH", "").encode())
    for home in torch_sites:
        torch, nvidia = (
            file_identity(os.path.join(home, name)) or "-" for name in ("torch", "nvidia")
        )
        digest.update(f"torch:{home}|{torch}|{nvidia};".encode())
    try:
        digest.update(str(ld_cache.stat().st_mtime_ns).encode())
    except OSError:
        digest.update(b"-")
    for site in site_packages:
        try:
            digest.update(f"{site}|{os.stat(site).st_mtime_ns}".encode())
            for entry in sorted(os.scandir(site), key=lambda e: e.name):
                digest.update(
                    f"{entry.name}:{entry.stat(follow_symlinks=False).st_mtime_ns};".encode()
                )
        except OSError:
            return None
    return digest.hexdigest()


def find_extensions_cached(
    site_packages: Sequence[str],
    *,
    environ: Mapping[str, str],
    cache: _Cache,
    torch_sites: Sequence[str] = (),
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
                return tuple(_from_cache(item) for item in cached)
            except (KeyError, TypeError, ValueError):
                pass
    found = find_extensions(site_packages, environ=environ, torch_sites=torch_sites)
    if key is not None:
        cache.put("extensions", key, [_to_cache(e) for e in found])
    return found


_CACHED_TUPLES = ("needed", "missing", "sass", "ptx", "missing_symbols", "demangled", "notes")


def _to_cache(ext: ExtensionBinary) -> dict[str, Any]:
    item: dict[str, Any] = {name: list(getattr(ext, name)) for name in _CACHED_TUPLES}
    item["path"] = ext.path
    item["distribution"] = ext.distribution
    return item


def _from_cache(item: dict[str, Any]) -> ExtensionBinary:
    """An entry written by :func:`_to_cache`; KeyError/TypeError/ValueError for one written by
    an older release (or damaged): the scan then runs again."""
    values = {name: tuple(item[name]) for name in _CACHED_TUPLES}
    if not all(isinstance(v, str) for name in _CACHED_TUPLES for v in values[name]):
        raise TypeError("not a list of strings")
    path, distribution = item["path"], item["distribution"]
    if not isinstance(path, str) or not (distribution is None or isinstance(distribution, str)):
        raise TypeError("not a path")
    return ExtensionBinary(path=path, distribution=distribution, **values)
