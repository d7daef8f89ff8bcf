"""A recipe's source tree, ready to build, always in a temporary folder with the recipe's patches
applied there.

Where the source comes from, first match wins: ``--source DIR`` (copied); the recipe's archive
(downloaded once, its sha256 checked, cached by hash, unpacked safely: :mod:`.archive`); a clone
of the recipe's repository at its pinned revision. The archive goes before the clone because its
hash is verifiable end to end and it needs no git.

The user's own tree is never written to. A patch whose ``find`` text is missing fails here, with
the recipe, the file and the text it looked for, before anything compiles.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .._bounded import run
from .._docs import doc_path
from .._frozen import frozen
from ..errors import BuildError, UsageError
from ..index.model import Patch, Recipe

if TYPE_CHECKING:
    from ..net import HttpClient

__all__ = [
    "PreparedSource",
    "SourceIdentity",
    "applicable_patches",
    "apply_patches",
    "describe_source",
    "prepare_source",
    "recipe_digest",
    "source_identity",
    "source_recipe_digest",
    "tree_identity",
]

#: Never copied from a --source tree, at any depth: caches and leftovers that would leak into the
#: wheel.
_SKIPPED_EVERYWHERE = frozenset({"__pycache__", ".eggs", ".pytest_cache"})
#: A previous build's output: left out only where a build writes it (the tree's root and the
#: recipe's build folder); a package named ``build`` deeper in the tree is source.
_BUILD_OUTPUT = frozenset({"build", "dist"})
#: A source tree deeper than this is a runaway folder or link, not a source tree.
_MAX_DEPTH = 256
_CHUNK = 1 << 20

#: One git command's limit: a clone of kaolin takes seconds to minutes, never an hour.
_GIT_TIMEOUT = 900.0


@frozen
class PreparedSource:
    """A package's source copied for a build, and whether it is the recipe's pinned one."""

    root: Path  # the whole copy (repository root)
    build_dir: Path  # root / recipe.subdirectory: what `pip wheel` is given
    # describe_source(): "archive https://... (sha256 ...)", "git clone ... at <rev>",
    # "--source DIR"
    origin: str
    #: a --source copy that is not the pinned source, by its content as copied (None: the
    #: pinned source, or not a --source copy)
    identity: SourceIdentity | None
    patches: tuple[Patch, ...]  # applied
    notes: tuple[str, ...] = ()


def applicable_patches(recipe: Recipe, torch_version: str) -> tuple[Patch, ...]:
    return tuple(patch for patch in recipe.patches if patch.applies_to(torch_version))


def describe_source(recipe: Recipe, source_dir: Path | None = None) -> str:
    """Where the build's source comes from, in words (the first of --source, archive, clone)."""
    if source_dir is not None:
        return f"--source {source_dir}"
    if recipe.archive is not None:
        return f"archive {recipe.archive.url} (sha256 {recipe.archive.sha256})"
    return f"git clone {recipe.repository} at {(recipe.revision or '')[:12]}"


def recipe_digest(recipe: Recipe, torch_version: str) -> str:
    """sha256 over everything in the recipe that changes the built wheel."""
    document: dict[str, object] = {
        "name": recipe.name,
        "version": str(recipe.version),
        "repository": recipe.repository,
        "revision": recipe.revision,
        "subdirectory": recipe.subdirectory,
        "submodules": recipe.submodules,
        "build_requires": list(recipe.build_requires),
        "env": [list(pair) for pair in recipe.env],
        "patches": [
            [p.file, p.find, p.replace, p.count] for p in applicable_patches(recipe, torch_version)
        ],
    }
    if recipe.archive is not None:
        # The hash is the content (a moved URL builds the same wheel); strip changes the layout.
        # Only recipes with an archive carry the key, so the digests of the others stay as they
        # were.
        document["archive"] = [recipe.archive.sha256, recipe.archive.strip]
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _git(
    args: Sequence[str],
    *,
    cwd: Path | None,
    environ: Mapping[str, str],
    remote: str | None = None,
) -> str:
    """git's output; ``remote``: the URL a fetch reaches, named in the hint when it fails."""
    done = run(["git", *args], timeout=_GIT_TIMEOUT, env=environ, cwd=cwd)
    # doctor --network tries the package indexes, not git hosts (user walk C8): for a fetch, the
    # way to test the host is git's own.
    network = (
        f"check that this machine reaches {remote} (`git ls-remote {remote}` tries it, with "
        "git's proxy settings: http.proxy, HTTPS_PROXY)"
        if remote
        else "check the network and any proxy (cuda-resolve doctor --network)"
    )
    if done is None:
        raise BuildError(
            "git is not installed, so the recipe's repository cannot be cloned",
            hint="install git, or pass --source DIR with a copy of the repository",
        )
    if done.returncode is None:
        raise BuildError(
            f"git {' '.join(args[:2])} took longer than {_GIT_TIMEOUT:.0f} s or wrote too much",
            hint=f"{network}, or pass --source DIR with a copy of the repository",
        )
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise BuildError(
            f"git {' '.join(args)} failed: {' / '.join(detail) or f'exit {done.returncode}'}",
            hint=f"{network}, or pass --source DIR with a copy of the repository",
        )
    return done.stdout.strip()


def _head_revision(tree: Path, environ: Mapping[str, str]) -> str | None:
    if not (tree / ".git").exists():
        return None
    head = _git_here(["rev-parse", "HEAD"], tree, environ)
    return head.strip() if head else None


def _git_in(tree: Path, *args: str) -> str:
    """``git -C TREE ARGS`` to paste (a path with a space stays one word)."""
    import shlex

    return shlex.join(["git", "-C", str(tree), *args])


def _holds_commit(tree: Path, revision: str, environ: Mapping[str, str]) -> bool:
    """Whether the repository at ``tree`` has ``revision`` (a checkout of it can then work)."""
    return _git_here(["cat-file", "-e", f"{revision}^{{commit}}"], tree, environ) is not None


def _clone(
    recipe: Recipe, dest: Path, environ: Mapping[str, str], say: Callable[[str], None]
) -> None:
    if recipe.repository is None or recipe.revision is None:  # the parser refuses such a recipe
        raise BuildError(
            f"recipe {recipe.name} names neither an archive nor a repository with a revision",
            hint=f"fix the recipe ({doc_path('index-format.md')}), or pass --source DIR",
        )
    say(f"cloning {recipe.repository} at {recipe.revision[:12]}")
    _git(["init", "-q", str(dest)], cwd=None, environ=environ)
    _git(["remote", "add", "origin", recipe.repository], cwd=dest, environ=environ)
    # A pinned commit: fetch just it (GitHub serves any reachable commit by hash).
    _git(
        ["fetch", "-q", "--depth", "1", "origin", recipe.revision],
        cwd=dest,
        environ=environ,
        remote=recipe.repository,
    )
    _git(["checkout", "-q", "FETCH_HEAD"], cwd=dest, environ=environ)
    head = _head_revision(dest, environ)
    if head != recipe.revision:
        raise BuildError(
            f"recipe {recipe.name}: the clone is at {head}, not the pinned revision "
            f"{recipe.revision}",
            hint="the repository may have been rewritten: report it, or pass --source DIR with a "
            "copy at the pinned revision",
        )
    if recipe.submodules:
        say("fetching submodules")
        _git(
            ["submodule", "update", "--init", "--recursive", "--depth", "1"],
            cwd=dest,
            environ=environ,
        )
        status = _git(["submodule", "status", "--recursive"], cwd=dest, environ=environ)
        bad = [line.strip() for line in status.splitlines() if line[:1] in ("-", "+", "U")]
        if bad:
            raise BuildError(
                f"recipe {recipe.name}: submodules not at the commits the revision pins: "
                f"{'; '.join(bad)}",
                hint="retry; if it persists pass --source DIR with a complete checkout",
            )


class _TreeCopy:
    """A real copy of a ``--source`` tree: nothing in it leads back into the user's files.

    A symbolic link that stays inside the tree becomes a relative link to the same place in the
    copy; one that leads outside is replaced by a copy of what it points at (so a patch or the
    build writes the copy, never the user's file). Build output (``build``, ``dist``) is left out
    only at the tree's root and at the recipe's build folder; caches and ``*.egg-info`` anywhere.
    A FIFO, socket or device, an unreadable file, a link that leads into its own folder, a tree
    deeper than :data:`_MAX_DEPTH` folders: one :class:`UsageError` naming the path."""

    def __init__(self, source: Path, dest: Path, build_roots: frozenset[str]) -> None:
        self.source = source
        self.real_root = os.path.realpath(source)
        self.dest = dest
        self.build_roots = build_roots  # paths relative to the root ("" for the root itself)
        self.notes: list[str] = []

    def _refuse(self, path: str, why: str, hint: str) -> UsageError:
        return UsageError(f"--source {self.source}: {path} {why}; nothing was built", hint=hint)

    def _skipped(self, relative: str, name: str) -> bool:
        if name in _SKIPPED_EVERYWHERE or name.endswith(".egg-info"):
            return True
        return name in _BUILD_OUTPUT and relative in self.build_roots

    def takes(self, path: str) -> bool:
        """Whether the tree's ``path`` (``a/b/c``, relative to its root) is one this walk takes:
        none of its parts is left out where it stands."""
        parts = path.split("/")
        return not any(
            self._skipped("/".join(parts[:depth]), name) for depth, name in enumerate(parts)
        )

    def copy(self) -> list[str]:
        try:
            self.dest.parent.mkdir(parents=True, exist_ok=True)
            self._folder(self.real_root, self.dest, "", 0, frozenset())
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise BuildError(
                    f"copying --source {self.source}: the disk holding {self.dest.parent} is "
                    "full; the partial copy was removed",
                    hint="free space there, or point TMPDIR at a folder with room (the copy "
                    f"needs about as much as {self.source})",
                ) from None
            raise
        return self.notes

    def _folder(
        self,
        real: str,
        dest: Path,
        relative: str,
        depth: int,
        ancestors: frozenset[tuple[int, int]],
    ) -> None:
        shown = relative or "."
        if depth > _MAX_DEPTH:
            raise self._refuse(
                shown,
                f"is more than {_MAX_DEPTH} folders deep",
                "that is not a source tree: check for a runaway folder or link",
            )
        try:
            info = os.stat(real)
            entries = sorted(os.scandir(real), key=lambda entry: entry.name)
        except OSError as exc:
            raise self._refuse(
                shown,
                f"cannot be read ({exc.strerror or exc})",
                "make the folder readable, or give a copy you can read",
            ) from None
        ancestors = ancestors | {(info.st_dev, info.st_ino)}
        self._made_folder(dest, relative, info)
        for entry in entries:
            if self._skipped(relative, entry.name):
                continue
            self._entry(
                entry,
                dest / entry.name,
                f"{relative}/{entry.name}" if relative else entry.name,
                depth,
                ancestors,
            )

    def _entry(
        self,
        entry: os.DirEntry[str],
        dest: Path,
        relative: str,
        depth: int,
        ancestors: frozenset[tuple[int, int]],
    ) -> None:
        path = entry.path
        if entry.is_symlink():
            real = os.path.realpath(path)
            if os.path.commonpath([self.real_root, real]) == self.real_root:
                self._inside_link(dest, relative, os.path.relpath(real, self.real_root))
                return
            if not os.path.lexists(real):
                # Outside and missing: a write through it would create the user's file. Left out.
                self.notes.append(
                    f"--source {self.source}: {relative} is a link to {os.readlink(path)}, "
                    "outside the tree and missing: left out of the copy"
                )
                return
            path = real  # outside the tree: what it points at is copied, the link is not
        try:
            info = os.stat(path)
        except OSError as exc:
            raise self._refuse(
                relative,
                f"cannot be read ({exc.strerror or exc})",
                "make it readable, or remove it from the tree",
            ) from None
        if (
            entry.name == ".git"
            and stat.S_ISREG(info.st_mode)
            and self._git_pointer_outside(path, relative)
        ):
            return
        if stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in ancestors:
                raise self._refuse(
                    relative,
                    "is a link to a folder that holds it: the tree would never end",
                    "remove the link, or give a copy of the source without it",
                )
            self._folder(path, dest, relative, depth + 1, ancestors)
        elif stat.S_ISREG(info.st_mode):
            self._file(path, dest, relative, info)
        else:
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(info.st_mode)
                else "a socket"
                if stat.S_ISSOCK(info.st_mode)
                else "a device"
                if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "not a regular file"
            )
            raise self._refuse(
                relative,
                f"is {kind}, which a source tree never holds",
                "remove it from the tree, or give a clean copy of the source",
            )

    def _made_folder(self, dest: Path, relative: str, info: os.stat_result) -> None:
        dest.mkdir(mode=info.st_mode & 0o777 | stat.S_IRWXU)

    def _inside_link(self, dest: Path, relative: str, target: str) -> None:
        """A link to ``target`` (relative to the tree's root), which is inside the tree."""
        # The same place in the copy, by a relative link: writes through it stay in the copy.
        os.symlink(os.path.relpath(self.dest / target, dest.parent), dest)

    def _git_pointer_outside(self, path: str, relative: str) -> bool:
        """Whether the ``.git`` file at ``path`` is a ``gitdir:`` pointer (a worktree's, a
        submodule's) that leads outside the tree: git run by the build in the copy would write
        there (its index, its locks), so it is left out, with a note."""
        try:
            with open(path, "rb") as handle:
                head = handle.read(4096).decode("utf-8", "replace")
        except OSError:
            return False
        pointer = head[len("gitdir:") :].strip().splitlines() if head.startswith("gitdir:") else []
        if not pointer:
            return False
        real = os.path.realpath(os.path.join(os.path.dirname(path), pointer[0].strip()))
        if os.path.commonpath([self.real_root, real]) == self.real_root:
            return False
        self.notes.append(
            f"--source {self.source}: {relative} points git at {real}, outside the tree: "
            "left out of the copy, so git run by the build cannot write there"
        )
        return True

    def _open(self, path: str, relative: str) -> BinaryIO:
        """``path`` opened to read, refused (naming ``relative``) where it cannot be read or is
        no longer a regular file."""
        try:
            # Non-blocking: if it became a FIFO since it was looked at, opening it must not wait.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise self._refuse(
                relative,
                f"cannot be read ({exc.strerror or exc})",
                "make it readable, or remove it from the tree",
            ) from None
        opened = os.fdopen(fd, "rb")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            opened.close()
            raise self._refuse(
                relative,
                "changed into something other than a file while it was read",
                "retry once nothing else writes the tree",
            )
        return opened

    def _file(self, path: str, dest: Path, relative: str, info: os.stat_result) -> None:
        with self._open(path, relative) as source:
            out_fd = os.open(
                dest,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                info.st_mode & 0o777 | stat.S_IRUSR | stat.S_IWUSR,
            )  # no set-id bits in a copy
            with os.fdopen(out_fd, "wb") as out:
                try:
                    shutil.copyfileobj(source, out, _CHUNK)
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:
                        raise
                    raise self._refuse(
                        relative,
                        f"cannot be read ({exc.strerror or exc})",
                        "make it readable, or remove it from the tree",
                    ) from None
        os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy_tree(
    source: Path, dest: Path, build_roots: frozenset[str] = frozenset({""})
) -> list[str]:
    """Copy ``source`` into the new folder ``dest`` (see :class:`_TreeCopy`); notes on what was
    left out. On any failure ``dest`` is removed."""
    try:
        return _TreeCopy(source, dest, build_roots).copy()
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


class _TreeDigest(_TreeCopy):
    """What :class:`_TreeCopy` would copy (paths, file contents, executable bits, links inside
    the tree), read and never written; ``.git`` is left out too: the working tree is what
    builds. The same refusals as a copy (a FIFO is refused, never opened). Gives the tree's
    sha256 (:meth:`digest`), and each file's git blob id and each link's target, to compare with
    the pinned commit's tree (``blob``: git's object hash, sha1 or sha256)."""

    def __init__(self, source: Path, build_roots: frozenset[str], blob: str = "sha1") -> None:
        super().__init__(source, Path(os.devnull), build_roots)  # dest: never written
        self.hasher = hashlib.sha256()
        self.blob = blob
        self.files: dict[str, tuple[bool, str]] = {}  # path -> (executable, git blob id)
        self.links: dict[str, str] = {}  # path -> its target, relative to the tree's root

    def digest(self) -> str:
        self._folder(self.real_root, self.dest, "", 0, frozenset())
        return self.hasher.hexdigest()

    def _record(self, *words: str) -> None:
        self.hasher.update("\0".join(words).encode("utf-8", "surrogateescape") + b"\0\0")

    def _skipped(self, relative: str, name: str) -> bool:
        return name == ".git" or super()._skipped(relative, name)

    def _made_folder(self, dest: Path, relative: str, info: os.stat_result) -> None:
        self._record("folder", relative)

    def _inside_link(self, dest: Path, relative: str, target: str) -> None:
        self._record("link", relative, target)
        self.links[relative] = target

    def _file(self, path: str, dest: Path, relative: str, info: os.stat_result) -> None:
        with self._open(path, relative) as source:
            opened = os.fstat(source.fileno())
            content = hashlib.sha256()
            blob = hashlib.new(self.blob, f"blob {opened.st_size}\0".encode())
            size = 0
            while chunk := source.read(_CHUNK):
                content.update(chunk)
                blob.update(chunk)
                size += len(chunk)
        if size != opened.st_size:
            raise self._refuse(
                relative, "changed while it was read", "retry once nothing else writes the tree"
            )
        executable = bool(info.st_mode & 0o111)
        self._record("file", relative, "x" if executable else "-", content.hexdigest())
        # git records a file as executable where its owner may run it
        self.files[relative] = (bool(info.st_mode & stat.S_IXUSR), blob.hexdigest())


@frozen
class SourceIdentity:
    """A ``--source`` tree that cannot be tied to its recipe's pinned source, named by its
    content: a wheel built from it is kept in the wheelhouse under that content, never as the
    pinned source's (a copy of another revision, or a checkout with edits, would otherwise be
    reused as the pinned build, in a lab's shared wheelhouse too)."""

    digest: str  # sha256 over the tree as a copy of it takes it (_TreeDigest)
    why: str  # why the tree is not the pinned source, in words: "is not a git checkout"


def _build_roots(recipe: Recipe) -> frozenset[str]:
    """Where a build writes its output (``build``, ``dist``): the tree's root and the recipe's
    build folder."""
    return frozenset({"", recipe.subdirectory.strip("/")} if recipe.subdirectory else {""})


#: git's variables that point it at another repository, index or work tree than the folder's.
_GIT_LOCATION_VARIABLES = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    }
)
#: Reading a commit's tree: seconds even for a large repository.
_TREE_TIMEOUT = 120.0


def _git_here(args: Sequence[str], repository: Path, environ: Mapping[str, str]) -> str | None:
    """git's output for the repository at ``repository`` itself (never one that the variables
    name, nor one above it), or None where git is missing, fails or refuses (a repository owned
    by another user, say). Commands that only read objects: nothing in the folder is written."""
    clean = {k: v for k, v in environ.items() if k not in _GIT_LOCATION_VARIABLES}
    clean["GIT_TERMINAL_PROMPT"] = "0"
    done = run(["git", *args], timeout=_TREE_TIMEOUT, env=clean, cwd=repository)
    if done is None or done.returncode != 0:
        return None
    return done.stdout


def _pinned_tree(
    repository: Path, revision: str, environ: Mapping[str, str], prefix: str = ""
) -> dict[str, tuple[str, str]] | str:
    """Every file, link and submodule file of ``revision``'s tree in ``repository`` (path ->
    (git mode, object id)), submodules read from their own checkouts; or why it cannot be read."""
    if not (repository / ".git").exists():
        return "is not a git checkout" if not prefix else f"has no checkout of submodule {prefix}"
    listing = _git_here(["ls-tree", "-r", "-z", "--full-tree", revision], repository, environ)
    if listing is None:
        return (
            f"is a git checkout whose commit {revision[:12]} git could not read (git missing, "
            "the commit absent, or a repository owned by another user)"
        )
    tree: dict[str, tuple[str, str]] = {}
    for record in filter(None, listing.split("\0")):
        meta, _, path = record.partition("\t")
        mode, kind, object_id = meta.split(" ")
        if kind == "commit":  # a submodule: its files, at the commit recorded here
            inner = _pinned_tree(repository / path, object_id, environ, f"{prefix}{path}/")
            if isinstance(inner, str):
                return inner
            tree.update(inner)
        else:
            tree[prefix + path] = (mode, object_id)
    return tree


def _link_targets(
    repository: Path, links: dict[str, str], environ: Mapping[str, str]
) -> dict[str, str | None]:
    """The pinned links' targets relative to the tree's root (None: one that leads outside it,
    which a copy replaces by what it points at), from their blobs (git stores a link's text)."""
    found: dict[str, str | None] = {}
    for path, object_id in links.items():
        text = _git_here(["cat-file", "blob", object_id], repository, environ)
        if text is None or os.path.isabs(text):
            found[path] = None
            continue
        target = os.path.normpath(os.path.join(os.path.dirname(path), text))
        found[path] = None if target == ".." or target.startswith("../") else target
    return found


def _difference(walk: _TreeDigest, tree: dict[str, tuple[str, str]], repository: Path,
                environ: Mapping[str, str]) -> str | None:  # fmt: skip
    """How the walked tree differs from the pinned one, in words (None: not at all)."""
    files = {p: v for p, v in tree.items() if v[0] in ("100644", "100755", "100664")}
    links = {p: v[1] for p, v in tree.items() if v[0] == "120000"}
    pinned_files = {p: (mode == "100755", oid) for p, (mode, oid) in files.items()}
    pinned_links = _link_targets(repository, links, environ) if links else {}
    changed = sorted(
        p for p in pinned_files.keys() & walk.files.keys() if pinned_files[p] != walk.files[p]
    )
    changed += sorted(
        p for p in pinned_links.keys() & walk.links.keys() if pinned_links[p] != walk.links[p]
    )
    pinned = pinned_files.keys() | pinned_links.keys()
    walked = walk.files.keys() | walk.links.keys()
    added = sorted(walked - pinned)
    missing = sorted(pinned - walked)
    # a pinned link the copy replaces by what it points at: a file or folder in the walk
    changed += sorted(p for p in pinned_links.keys() & walk.files.keys())
    added = [p for p in added if p not in pinned_links]
    missing = [p for p in missing if p not in walk.files]
    if not (changed or added or missing):
        return None
    parts = [
        f"{len(found)} {what} (first: {found[0]})"
        for found, what in ((changed, "changed"), (added, "added"), (missing, "missing"))
        if found
    ]
    return "has files other than its pinned commit's: " + ", ".join(parts)


def _check_revision(recipe: Recipe, source_dir: Path, environ: Mapping[str, str]) -> str | None:
    """The checkout's HEAD (None: not a git checkout); a checkout at another revision than the
    recipe pins is refused, with the command that checks the pinned one out."""
    head = _head_revision(source_dir, environ)
    if head is None or recipe.revision is None or head == recipe.revision:
        return head
    if not _holds_commit(source_dir, recipe.revision, environ):  # user walk C7
        origin = recipe.repository or "the recipe's repository"
        raise BuildError(
            f"--source {source_dir} does not hold recipe {recipe.name}'s revision "
            f"{recipe.revision[:12]}: its history has no such commit (a copy of another "
            "repository, or a shallow clone)",
            hint=f"give a clone of {origin} (git clone {origin} DIR && git -C DIR checkout "
            f"{recipe.revision}); in a shallow clone of it, fetch the commit first: "
            f"{_git_in(source_dir, 'fetch', 'origin', recipe.revision)} && "
            f"{_git_in(source_dir, 'checkout', recipe.revision)}",
        )
    raise BuildError(
        f"--source {source_dir} is at {head[:12]}, but recipe {recipe.name} pins "
        f"{recipe.revision[:12]}",
        hint=f"check out {recipe.revision} there "
        f"({_git_in(source_dir, 'checkout', recipe.revision)}), so the patches and the "
        "wheelhouse key hold",
    )


def tree_identity(
    recipe: Recipe, tree: Path, repository: Path, environ: Mapping[str, str]
) -> SourceIdentity | None:
    """None where ``tree`` (a ``--source`` folder, or the build's copy of one) holds exactly the
    files of the recipe's pinned commit, as read from ``repository`` (the ``--source`` folder);
    else the tree's content. Compared file by file (content, executable bit, links), not by
    ``git status``: an ignored file the copy takes, a file git is told to skip, a mode change git
    is told to ignore all count."""
    roots = _build_roots(recipe)
    if recipe.revision is None:
        walk = _TreeDigest(tree, roots)
        return SourceIdentity(
            digest=walk.digest(),
            why=f"is a folder, and recipe {recipe.name} pins an archive by sha256, which a "
            "folder cannot be checked against",
        )
    pinned = _pinned_tree(repository, recipe.revision, environ)
    blob = "sha256" if not isinstance(pinned, str) and any(
        len(object_id) == 64 for _, object_id in pinned.values()
    ) else "sha1"  # fmt: skip
    walk = _TreeDigest(tree, roots, blob=blob)
    digest = walk.digest()
    if isinstance(pinned, str):
        return SourceIdentity(digest=digest, why=pinned)
    kept = {path: entry for path, entry in pinned.items() if walk.takes(path)}
    why = _difference(walk, kept, repository, environ)
    return None if why is None else SourceIdentity(digest=digest, why=why)


def source_identity(
    recipe: Recipe, source_dir: Path | None, environ: Mapping[str, str]
) -> SourceIdentity | None:
    """What the wheelhouse key of a build from ``source_dir`` must add to the recipe's digest:
    None where the build's source is the recipe's pinned one (no ``--source``: the archive's
    sha256 or the clone's revision is checked; a folder holding exactly the pinned commit's
    files), else the tree's content (:func:`tree_identity`). A checkout at another revision is
    refused (:class:`BuildError`, as the build refuses it); a folder that is missing, not a
    folder or without the recipe's subfolder is None: the build refuses it, naming it."""
    if source_dir is None:
        return None
    source_dir = source_dir.expanduser()
    if not source_dir.is_dir() or (
        recipe.subdirectory and not (source_dir / recipe.subdirectory).is_dir()
    ):
        return None
    _check_revision(recipe, source_dir, environ)
    return tree_identity(recipe, source_dir, source_dir, environ)


def source_recipe_digest(recipe: Recipe, torch_version: str, source: SourceIdentity | None) -> str:
    """The wheelhouse key's recipe digest for a build of ``recipe`` from ``source``: the recipe's
    own digest for its pinned source, else one that also covers the tree's content."""
    digest = recipe_digest(recipe, torch_version)
    if source is None:
        return digest
    return hashlib.sha256(f"{digest}\0source tree\0{source.digest}".encode()).hexdigest()


def apply_patches(recipe: Recipe, root: Path, patches: Sequence[Patch]) -> None:
    """Apply each literal substitution; every ``find`` must occur exactly ``count`` times."""
    real_root = os.path.realpath(root)
    for number, patch in enumerate(patches, start=1):
        target = root / patch.file
        where = f"recipe {recipe.name}, patch {number} ({patch.file})"
        if os.path.commonpath([real_root, os.path.realpath(target)]) != real_root:
            raise BuildError(
                f"{where}: {patch.file} leads outside the source tree ({os.path.realpath(target)})",
                hint="a patch only ever changes the copy of the source: fix the "
                "recipe's patch file",
            )
        try:
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BuildError(
                f"{where}: {patch.file} does not exist in the source tree",
                hint="the source is not the revision the recipe pins: use the pinned revision, or "
                "fix the recipe's patch",
            ) from None
        found = text.count(patch.find)
        if found != patch.count:
            first_line = patch.find.strip().splitlines()[0] if patch.find.strip() else patch.find
            raise BuildError(
                f"{where}: expected {patch.count} occurrence(s) of {first_line!r}, found {found}",
                hint="the source is not the revision the recipe pins, or was already patched: use "
                "a clean copy at the pinned revision",
            )
        target.write_text(text.replace(patch.find, patch.replace), encoding="utf-8")


def _unpack(
    recipe: Recipe,
    dest: Path,
    *,
    client: HttpClient | None,
    cache_dir: Path | None,
    say: Callable[[str], None],
) -> None:
    archive = recipe.archive
    assert archive is not None
    label = f"recipe {recipe.name}"
    from .archive import open_archive, unpack_archive  # tarfile, zipfile: only to unpack

    with open_archive(archive, label=label, client=client, cache_dir=cache_dir, say=say) as handle:
        say("unpacking the source archive")
        unpack_archive(handle, dest, strip=archive.strip, label=label)


def _copy_source_dir(
    recipe: Recipe, source_dir: Path, dest: Path, env: Mapping[str, str], say: Callable[[str], None]
) -> tuple[SourceIdentity | None, list[str]]:
    """Copy ``--source DIR``; returns the copy's identity (:func:`tree_identity`: None for the
    pinned commit's files exactly), and notes."""
    if not source_dir.is_dir():
        raise BuildError(
            f"--source {source_dir}: not a folder",
            hint="give the folder holding a copy of the recipe's repository",
        )
    if recipe.subdirectory and not (source_dir / recipe.subdirectory).is_dir():
        raise BuildError(
            f"--source {source_dir}: has no {recipe.subdirectory}/ (recipe {recipe.name} builds "
            "that folder)",
            hint="give the source's root "
            f"({recipe.repository or (recipe.archive.url if recipe.archive else '')}), "
            "not a subfolder",
        )
    head = _check_revision(recipe, source_dir, env)
    say(f"copying {source_dir}")
    copied = _copy_tree(source_dir, dest, _build_roots(recipe))
    # What is built is the copy: its content decides the key (the folder may have changed since
    # the plan, or while the build waited for the key's lock).
    identity = tree_identity(recipe, dest, source_dir, env)
    if recipe.revision is None:
        return identity, [
            f"{source_dir} was used as given: recipe {recipe.name} pins an archive by sha256, "
            "which a folder cannot be checked against",
            *copied,
        ]
    if head is None:
        return identity, [
            f"{source_dir} is not a git checkout: its revision could not be checked against "
            f"{recipe.revision[:12]}",
            *copied,
        ]
    return identity, copied


def prepare_source(
    recipe: Recipe,
    workdir: Path,
    *,
    torch_version: str,
    source_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    say: Callable[[str], None] = lambda _: None,
    client: HttpClient | None = None,
    cache_dir: Path | None = None,
) -> PreparedSource:
    """Copy, unpack or clone the recipe's source into ``workdir/src`` (see the module docstring
    for which) and apply its patches there.

    ``client`` fetches an archive (default: one from the configuration, made only when the
    archive is not cached); ``cache_dir`` holds verified archives (default:
    :func:`.archive.archive_cache_dir`)."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault("GIT_TERMINAL_PROMPT", "0")  # never wait for a password on a private URL
    dest = workdir / "src"
    notes: list[str] = []
    if source_dir is not None:
        source_dir = source_dir.expanduser()
        identity, notes = _copy_source_dir(recipe, source_dir, dest, env, say)
    elif recipe.archive is not None:
        _unpack(recipe, dest, client=client, cache_dir=cache_dir, say=say)
        identity = None
    else:
        _clone(recipe, dest, env, say)
        identity = None
    origin = describe_source(recipe, source_dir)
    build_dir = dest / recipe.subdirectory if recipe.subdirectory else dest
    if not build_dir.is_dir():
        raise BuildError(
            f"recipe {recipe.name}: the source has no {recipe.subdirectory}/ to build",
            hint=f"the source ({origin}) is not laid out as the recipe expects: fix the recipe's "
            "subdirectory or archive.strip",
        )
    patches = applicable_patches(recipe, torch_version)
    apply_patches(recipe, dest, patches)
    return PreparedSource(
        root=dest,
        build_dir=build_dir,
        origin=origin,
        identity=identity,
        patches=patches,
        notes=tuple(notes),
    )
