"""Read the index: the shipped TOML files plus overlay directories, merged into one Index.

An index directory holds ``cuda.toml`` (CUDA families and toolkits), ``torch.toml`` (torch
releases) and ``packages/*.toml`` (one extension package each); an overlay may hold any subset.
Directories are read in order and later entries replace earlier ones by key: toolkit version,
family major, torch release, package name, and within a package its wheel versions and recipe
names (scalar ``[package]`` keys are replaced one by one). ``Index.origins`` records the file each
entry came from. The format is documented in ``docs/index-format.md``; parsing lives in
:mod:`._parse` and every error names the file, the key path and the value.

Order: the shipped index, the user's config directory (``<user config dir>/index``), the
directories of ``CUDA_RESOLVE_INDEX_PATH`` (``os.pathsep``-separated), then explicit directories
(``--index DIR``). :func:`load_default_index` parses once per process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .._docs import doc_path
from ..errors import IndexDataError, UsageError
from ..paths import config_path, user_config_dir
from ..versions import CudaVersion
from .cuda import CudaFacts, CudaFamily, ToolkitFacts

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import TypeVar

    from packaging.version import Version

    from ._parse import Layer, PackageDraft
    from .model import Index, Package, TorchRelease

    _T = TypeVar("_T")

    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

__all__ = [
    "INDEX_PATH_ENV",
    "clear_cache",
    "index_files",
    "load_cuda_facts",
    "load_default_cuda_facts",
    "load_default_index",
    "load_index",
    "overlay_dirs",
    "shipped_index_dir",
    "user_index_dir",
    "validate_directory",
    "validate_shipped",
]

#: Environment variable naming overlay directories, separated by ``os.pathsep``.
INDEX_PATH_ENV = "CUDA_RESOLVE_INDEX_PATH"

_HINT = f"see {doc_path('index-format.md')}; `cuda-resolve index validate DIR` lists every problem"


# -- locating files ---------------------------------------------------------------------------


def shipped_index_dir() -> Traversable:
    """The index shipped inside the wheel (the repository's top-level ``index/``).

    A plain folder on disk, as pip installs it, is found from the package's import spec;
    ``importlib.resources`` (whose import costs every command a few milliseconds) serves
    the rest, such as a zipped install."""
    import importlib.util

    spec = importlib.util.find_spec("cuda_resolve.index_data")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if len(locations) == 1 and os.path.isdir(locations[0]):
        return Path(locations[0])
    from importlib import resources

    return resources.files("cuda_resolve.index_data")


def user_index_dir() -> Path:
    """``<user config dir>/index``: a user's or lab's overlay, used when it exists."""
    if sys.platform != "linux":  # where it always was there (platformdirs' default app author)
        import platformdirs

        return Path(platformdirs.user_config_dir("cuda-resolve")) / "index"
    return user_config_dir() / "index"


def _configured_index_dirs(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The config file's ``index_dirs``; without a config file, none (and the config module,
    with its URL and proxy parsing, is not even imported: every command reads the index)."""
    path = config_path(environ)
    if not path.exists():
        return ()
    from ..config import load_config

    return load_config(path, environ=environ).index_dirs


def overlay_dirs(environ: dict[str, str] | None = None) -> list[Path]:
    """The configured overlays, in reading order: the user config dir, the ``index_dirs`` of
    cuda-resolve's config file (a lab's shared directory), then INDEX_PATH_ENV."""
    env = os.environ if environ is None else environ
    dirs: list[Path] = []
    user = user_index_dir()
    if user.is_dir():
        dirs.append(user)
    for path in _configured_index_dirs(env):
        if not path.is_dir():
            raise IndexDataError(
                f"{config_path(env)}: index_dirs names {str(path)!r}, which is not a directory",
                hint="create it, or remove it from index_dirs in that file",
            )
        dirs.append(path)
    for part in env.get(INDEX_PATH_ENV, "").split(os.pathsep):
        if not part.strip():
            continue
        path = Path(part.strip()).expanduser()
        if not path.is_dir():
            raise IndexDataError(
                f"{INDEX_PATH_ENV}: {part!r} is not a directory",
                hint=f"fix or unset {INDEX_PATH_ENV} (directories separated by {os.pathsep!r})",
            )
        dirs.append(path)
    return dirs


def index_files(root: Traversable) -> tuple[list[tuple[str, Traversable]], list[str]]:
    """The index files of a directory as (kind, file), and the TOML files it does not expect.

    Entries are taken by name, whatever they are: a FIFO, a device, a folder or a dangling link
    named like an index file is listed too, so reading it fails with an error naming it instead
    of the overlay silently losing what it should define. Emacs's lock links (``.#NAME``, there
    while a buffer is unsaved) are not index files."""
    files: list[tuple[str, Traversable]] = []
    strays: list[str] = []
    for entry in sorted(root.iterdir(), key=lambda item: item.name):
        if entry.name.startswith(".#"):
            continue
        if entry.name in ("cuda.toml", "torch.toml"):
            files.append((entry.name.removesuffix(".toml"), entry))
        elif entry.name == "packages":
            if not entry.is_dir():
                # A file where the packages folder belongs would silently define no package.
                strays.append(f"{entry} (not a folder)")
                continue
            for item in sorted(entry.iterdir(), key=lambda item: item.name):
                if item.name.endswith(".toml") and not item.name.startswith(".#"):
                    files.append(("package", item))
        elif entry.name.endswith(".toml"):
            strays.append(str(entry))
    return files, strays


def _read_layer(root: Traversable, *, collect: list[str] | None = None) -> Layer:
    """Parse one directory. With ``collect``, record each file's error there and go on."""
    # Imported here: a command whose index comes from the parsed-index cache never parses TOML
    # (this module and packaging.requirements cost ~25 ms of every `doctor --json`).
    from . import _parse

    layer = _parse.Layer()
    files, strays = index_files(root)
    for stray in strays:
        message = (
            f"{stray}: unexpected file: an index directory holds cuda.toml, torch.toml and "
            "packages/*.toml"
        )
        if collect is None:
            raise IndexDataError(message, hint=_HINT)
        collect.append(message)
    for kind, file in files:
        try:
            _parse.parse_file(kind, file, layer)
        except IndexDataError as exc:
            if collect is None:
                raise
            collect.append(exc.message)
    return layer


# -- merging ----------------------------------------------------------------------------------


def _merge(layers: Iterable[Layer]) -> Index:
    from .model import Index

    families: dict[int, CudaFamily] = {}
    toolkits: dict[CudaVersion, ToolkitFacts] = {}
    torch: dict[Version, TorchRelease] = {}
    drafts: dict[str, PackageDraft] = {}
    sources: dict[str, str] = {}
    origins: dict[str, str] = {}
    citations: list[tuple[str, str]] = []
    for layer in layers:
        families.update(layer.families)
        toolkits.update(layer.toolkits)
        torch.update(layer.torch)
        sources.update(layer.sources)
        origins.update(layer.origins)
        citations.extend(layer.citations)
        for key, draft in layer.packages.items():
            known = drafts.get(key)
            merged = draft if known is None else known.merged_with(draft)
            drafts[key] = merged
            if known is None or draft.has_facts:
                origins[f"package {merged.name}"] = draft.origin
            for version in draft.wheels:
                origins[f"package {merged.name} wheels {version}"] = draft.origin
            for recipe in draft.recipes:
                origins[f"package {merged.name} recipe {recipe}"] = draft.origin
    for key, where in citations:
        if key not in sources:
            raise IndexDataError(
                f"{where}: cites [{key}], which no [sources] table defines",
                hint="add the key to a [sources] table, or write the citation as plain text",
            )
    packages: list[Package] = [draft.build() for _, draft in sorted(drafts.items())]
    return Index(
        toolkits=tuple(toolkits[key] for key in sorted(toolkits)),
        families=tuple(families[key] for key in sorted(families)),
        torch=tuple(torch[key] for key in sorted(torch)),
        packages=tuple(packages),
        sources=tuple(sorted(sources.items())),
        origins=tuple(sorted(origins.items())),
    )


def _roots(dirs: Sequence[Path], *, include_shipped: bool, include_user: bool) -> list[Traversable]:
    roots: list[Traversable] = []
    if include_shipped:
        roots.append(shipped_index_dir())
    if include_user:
        roots.extend(overlay_dirs())
    for directory in dirs:
        path = Path(directory).expanduser()
        if not path.is_dir():
            raise IndexDataError(
                f"--index {directory}: not a directory",
                hint="give a directory holding cuda.toml, torch.toml or packages/*.toml",
            )
        roots.append(path)
    return roots


def load_index(
    dirs: Sequence[Path] = (), *, include_shipped: bool = True, include_user: bool = True
) -> Index:
    """Parse and merge: shipped, then configured overlays, then ``dirs`` (later wins)."""
    roots = _roots(dirs, include_shipped=include_shipped, include_user=include_user)
    return _index_of(roots, _parsed_cache_key(roots))


def _index_of(roots: Sequence[Traversable], key: str | None) -> Index:
    from .model import Index

    cached = _read_parsed(key, _INDEX_SUFFIX, Index)
    if cached is not None:
        return cached
    index = _merge(_read_layer(root) for root in roots)
    _write_parsed(key, _INDEX_SUFFIX, index)
    return index


def load_cuda_facts(
    dirs: Sequence[Path] = (), *, include_shipped: bool = True, include_user: bool = True
) -> CudaFacts:
    """The CUDA facts of :func:`load_index` for the same directories. Cached beside the
    parsed index under the same key: a cache hit never imports the package catalogue."""
    return _cuda_facts(dirs, include_shipped=include_shipped, include_user=include_user)[0]


def _cuda_facts(
    dirs: Sequence[Path], *, include_shipped: bool = True, include_user: bool = True
) -> tuple[CudaFacts, Index | None]:
    """The facts, and the whole index when it had to be read to make them."""
    roots = _roots(dirs, include_shipped=include_shipped, include_user=include_user)
    key = _parsed_cache_key(roots)
    cached = _read_parsed(key, _FACTS_SUFFIX, CudaFacts)
    if cached is not None:
        return cached, None
    index = _index_of(roots, key)
    facts = index.cuda_facts()
    _write_parsed(key, _FACTS_SUFFIX, facts)
    return facts, index


# -- parsed-index cache -------------------------------------------------------------------------
# Parsing ~100 KB of TOML into frozen dataclasses costs tens of milliseconds on every command;
# unpickling the result costs a few. The cache is keyed by every file's path, size and mtime
# plus the code version, so an edited overlay or an upgraded cuda-resolve is parsed afresh.


def _parsed_cache_key(roots: Sequence[Traversable]) -> str | None:
    from .. import __version__
    from .._digest import new_digest

    digest = new_digest(f"{__version__}|{sys.version_info[:2]}|{_PARSED_FORMAT}".encode())
    for root in roots:
        if not isinstance(root, Path):
            return None  # a zipped install: no stable file identities to key on
        files, strays = index_files(root)
        if strays:
            return None  # let parsing raise its error
        for _, file in files:
            try:
                stat = os.stat(str(file))
            except OSError:
                return None
            digest.update(f"{file}|{stat.st_size}|{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


#: Bumped when the parsed model's shape changes (2: recipes gained ``archive``; repository and
#: revision became optional; 3: the CUDA facts moved to index/cuda.py and got a file of their
#: own; 5: the facts' torch releases are text), so a cache written by an older build is never
#: unpickled into it.
_PARSED_FORMAT = 5
_INDEX_SUFFIX = ".pickle"
_FACTS_SUFFIX = ".cuda.marshal"  # plain data (index/cuda.py): reading it imports no pickle
#: Keys of edited or upgraded indexes never match again: the newest few keys' files are kept.
_KEPT_FILES = 14


def _parsed_cache_paths(key: str, suffix: str) -> list[Path]:
    """Where a parsed index may be, in the order read: ``cache_root()`` (which may be a lab's
    shared, read-only folder), then the user's own cache folder; written to the first of them
    that can be written."""
    from ..paths import own_cache_roots

    return [root / "index" / f"{key}{suffix}" for root in own_cache_roots()]


def _trusted(path: Path) -> bool:
    """A pickle is code, and marshal's data can crash the interpreter: only a file written by
    this user or by root is loaded (a shared cache folder's files written by someone else are
    parsed again instead)."""
    try:
        owner = path.stat().st_uid
    except OSError:
        return False
    return owner in (0, os.getuid())


#: The shipped index pickles to ~50 KB, and a pickle is smaller than the TOML it came from;
#: a cache file larger than this was not written here, and one this large is not written.
_PARSED_LIMIT = 64 * 1024 * 1024


def _read_parsed(key: str | None, suffix: str, expected: type[_T]) -> _T | None:
    """The cached object, or None: a cache that is missing, not a regular file (a FIFO would
    block the read), too large, corrupt or from other code is ignored, never an error."""
    from .._bounded import read_bytes

    def load(path: Path) -> object:
        try:
            data = read_bytes(path, limit=_PARSED_LIMIT)
        except OSError:
            return None
        if not _trusted(path):
            return None
        try:
            return _loads(suffix, data)
        except Exception:  # corrupt bytes raise almost anything (OverflowError, MemoryError, ...)
            return None

    for path in _parsed_cache_paths(key, suffix) if key else []:
        loaded = load(path)
        if isinstance(loaded, expected):
            return loaded
    return None


def _loads(suffix: str, data: bytes) -> object:
    if suffix == _FACTS_SUFFIX:
        import marshal

        from .cuda import facts_from_plain

        return facts_from_plain(marshal.loads(data))  # noqa: S302 - checked as the pickle is
    import pickle

    return pickle.loads(data)  # noqa: S301 - written by this user (or root): see _trusted


def _dumps(suffix: str, value: object) -> bytes:
    if suffix == _FACTS_SUFFIX:
        import marshal

        from .cuda import CudaFacts, facts_to_plain

        assert isinstance(value, CudaFacts)
        return marshal.dumps(facts_to_plain(value))
    import pickle

    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _write_parsed(key: str | None, suffix: str, value: object) -> None:
    from ..paths import write_atomic

    if not key:
        return
    try:
        data = _dumps(suffix, value)
    except (TypeError, ValueError):  # a value the cache cannot hold: parsed again next time
        return
    if len(data) > _PARSED_LIMIT:
        return  # it would never be read back
    for path in _parsed_cache_paths(key, suffix):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            kept = sorted(
                (old for old in path.parent.iterdir() if old.name.endswith(_CACHE_SUFFIXES)),
                key=lambda p: p.lstat().st_mtime,
            )
            for old in kept[:-_KEPT_FILES]:
                old.unlink(missing_ok=True)
            write_atomic(path, data)
        except OSError:
            # a read-only cache (or a FIFO where the file goes): the next folder, else parse again
            continue
        return


#: The files of this cache, those older versions wrote (``.cuda.pickle``) included.
_CACHE_SUFFIXES = (_INDEX_SUFFIX, _FACTS_SUFFIX)


# Read once per process, whichever is asked first: the facts of an index already read come
# from it, and an index read to make the facts is kept.
_DEFAULT_INDEXES: dict[tuple[Path, ...], Index] = {}
_DEFAULT_FACTS: dict[tuple[Path, ...], CudaFacts] = {}


def load_default_index(extra_dirs: Sequence[Path] = ()) -> Index:
    """The shipped index with the configured overlays and ``extra_dirs``; parsed once per
    process."""
    dirs = tuple(Path(d) for d in extra_dirs)
    index = _DEFAULT_INDEXES.get(dirs)
    if index is None:
        index = _DEFAULT_INDEXES[dirs] = load_index(dirs)
    return index


def load_default_cuda_facts(extra_dirs: Sequence[Path] = ()) -> CudaFacts:
    """The CUDA facts of :func:`load_default_index`; read once per process."""
    dirs = tuple(Path(d) for d in extra_dirs)
    facts = _DEFAULT_FACTS.get(dirs)
    if facts is None:
        index = _DEFAULT_INDEXES.get(dirs)
        if index is not None:
            facts = index.cuda_facts()
        else:
            facts, built = _cuda_facts(dirs)
            if built is not None:
                _DEFAULT_INDEXES[dirs] = built
        _DEFAULT_FACTS[dirs] = facts
    return facts


def clear_cache() -> None:
    """Forget the default index and its facts (tests; a long-lived process after editing an
    overlay)."""
    _DEFAULT_INDEXES.clear()
    _DEFAULT_FACTS.clear()


# -- validation -------------------------------------------------------------------------------


def validate_directory(path: str | Path) -> list[str]:
    """Every problem of an index directory, read on top of the shipped index; empty = fine."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise UsageError(
            f"{path}: not a directory",
            hint="give an index directory (cuda.toml, torch.toml, packages/*.toml)",
        )
    shipped = shipped_index_dir()
    is_shipped = isinstance(shipped, Path) and shipped.resolve() == root.resolve()
    return _validate(root, base=None if is_shipped else shipped)


def validate_shipped() -> list[str]:
    """Every problem of the shipped index; empty = fine."""
    return _validate(shipped_index_dir(), base=None)


def _validate(root: Traversable, *, base: Traversable | None) -> list[str]:
    problems: list[str] = []
    files, _ = index_files(root)
    layer = _read_layer(root, collect=problems)
    if not files:
        problems.append(
            f"{root}: no index files (expected cuda.toml, torch.toml or packages/*.toml)"
        )
    if problems:
        return problems
    layers = [_read_layer(base), layer] if base is not None else [layer]
    try:
        index = _merge(layers)
    except IndexDataError as exc:
        return [exc.message]
    from . import _parse

    problems.extend(_parse.cross_check(index, layer))
    return problems
