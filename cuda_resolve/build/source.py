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

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._bounded import run
from ..errors import BuildError
from ..index.model import Patch, Recipe
from .archive import open_archive, unpack_archive

if TYPE_CHECKING:
    from ..net import HttpClient

__all__ = [
    "PreparedSource",
    "applicable_patches",
    "apply_patches",
    "describe_source",
    "prepare_source",
    "recipe_digest",
]

#: Folders never copied from a --source tree: build leftovers that would leak into the wheel.
_SKIPPED = ("build", "dist", "__pycache__", ".eggs", ".pytest_cache")

#: One git command's limit: a clone of kaolin takes seconds to minutes, never an hour.
_GIT_TIMEOUT = 900.0


@dataclass(frozen=True, kw_only=True, slots=True)
class PreparedSource:
    root: Path  # the whole copy (repository root)
    build_dir: Path  # root / recipe.subdirectory: what `pip wheel` is given
    origin: str  # describe_source(): "archive https://... (sha256 ...)", "git clone ... at <rev>", "--source DIR"
    revision_checked: bool  # the copy is known to be the recipe's pinned source (revision or sha256)
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
        "patches": [[p.file, p.find, p.replace, p.count] for p in applicable_patches(recipe, torch_version)],
    }
    if recipe.archive is not None:
        # The hash is the content (a moved URL builds the same wheel); strip changes the layout.
        # Only recipes with an archive carry the key, so the digests of the others stay as they were.
        document["archive"] = [recipe.archive.sha256, recipe.archive.strip]
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _git(args: Sequence[str], *, cwd: Path | None, environ: Mapping[str, str]) -> str:
    done = run(["git", *args], timeout=_GIT_TIMEOUT, env=environ, cwd=cwd)
    if done is None:
        raise BuildError("git is not installed, so the recipe's repository cannot be cloned",
                         hint="install git, or pass --source DIR with a copy of the repository")
    if done.returncode is None:
        raise BuildError(f"git {' '.join(args[:2])} took longer than {_GIT_TIMEOUT:.0f} s or wrote too much",
                         hint="check the network (cuda-resolve doctor --network), or pass --source DIR")
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise BuildError(
            f"git {' '.join(args)} failed: {' / '.join(detail) or f'exit {done.returncode}'}",
            hint="check the network and any proxy (cuda-resolve doctor --network), or pass --source DIR with a copy of the repository",
        )
    return done.stdout.strip()


def _head_revision(tree: Path, environ: Mapping[str, str]) -> str | None:
    if not (tree / ".git").exists():
        return None
    try:
        return _git(["rev-parse", "HEAD"], cwd=tree, environ=environ)
    except BuildError:
        return None


def _clone(recipe: Recipe, dest: Path, environ: Mapping[str, str], say: Callable[[str], None]) -> None:
    if recipe.repository is None or recipe.revision is None:  # the parser refuses such a recipe
        raise BuildError(f"recipe {recipe.name} names neither an archive nor a repository with a revision",
                         hint="fix the recipe (docs/index-format.md), or pass --source DIR")
    say(f"cloning {recipe.repository} at {recipe.revision[:12]}")
    _git(["init", "-q", str(dest)], cwd=None, environ=environ)
    _git(["remote", "add", "origin", recipe.repository], cwd=dest, environ=environ)
    # A pinned commit: fetch just it (GitHub serves any reachable commit by hash).
    _git(["fetch", "-q", "--depth", "1", "origin", recipe.revision], cwd=dest, environ=environ)
    _git(["checkout", "-q", "FETCH_HEAD"], cwd=dest, environ=environ)
    head = _head_revision(dest, environ)
    if head != recipe.revision:
        raise BuildError(
            f"recipe {recipe.name}: the clone is at {head}, not the pinned revision {recipe.revision}",
            hint="the repository may have been rewritten: report it, or pass --source DIR with a copy at the pinned revision",
        )
    if recipe.submodules:
        say("fetching submodules")
        _git(["submodule", "update", "--init", "--recursive", "--depth", "1"], cwd=dest, environ=environ)
        status = _git(["submodule", "status", "--recursive"], cwd=dest, environ=environ)
        bad = [line.strip() for line in status.splitlines() if line[:1] in ("-", "+", "U")]
        if bad:
            raise BuildError(
                f"recipe {recipe.name}: submodules not at the commits the revision pins: {'; '.join(bad)}",
                hint="retry; if it persists pass --source DIR with a complete checkout",
            )


def _copy_tree(source: Path, dest: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n in _SKIPPED or n.endswith(".egg-info")}
        return skipped

    shutil.copytree(source, dest, symlinks=True, ignore=ignore)


def apply_patches(recipe: Recipe, root: Path, patches: Sequence[Patch]) -> None:
    """Apply each literal substitution; every ``find`` must occur exactly ``count`` times."""
    for number, patch in enumerate(patches, start=1):
        target = root / patch.file
        where = f"recipe {recipe.name}, patch {number} ({patch.file})"
        try:
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BuildError(
                f"{where}: {patch.file} does not exist in the source tree",
                hint="the source is not the revision the recipe pins: use the pinned revision, or fix the recipe's patch",
            ) from None
        found = text.count(patch.find)
        if found != patch.count:
            first_line = patch.find.strip().splitlines()[0] if patch.find.strip() else patch.find
            raise BuildError(
                f"{where}: expected {patch.count} occurrence(s) of {first_line!r}, found {found}",
                hint="the source is not the revision the recipe pins, or was already patched: use a clean copy at the pinned revision",
            )
        target.write_text(text.replace(patch.find, patch.replace), encoding="utf-8")


def _unpack(
    recipe: Recipe, dest: Path, *, client: HttpClient | None, cache_dir: Path | None, say: Callable[[str], None]
) -> None:
    archive = recipe.archive
    assert archive is not None
    label = f"recipe {recipe.name}"
    with open_archive(archive, label=label, client=client, cache_dir=cache_dir, say=say) as handle:
        say("unpacking the source archive")
        unpack_archive(handle, dest, strip=archive.strip, label=label)


def _copy_source_dir(recipe: Recipe, source_dir: Path, dest: Path, env: Mapping[str, str], say: Callable[[str], None]) -> tuple[bool, list[str]]:
    """Copy ``--source DIR``; returns whether its revision was checked, and notes."""
    if not source_dir.is_dir():
        raise BuildError(f"--source {source_dir}: not a folder",
                         hint="give the folder holding a copy of the recipe's repository")
    if recipe.subdirectory and not (source_dir / recipe.subdirectory).is_dir():
        raise BuildError(
            f"--source {source_dir}: has no {recipe.subdirectory}/ (recipe {recipe.name} builds that folder)",
            hint=f"give the source's root ({recipe.repository or (recipe.archive.url if recipe.archive else '')}), not a subfolder",
        )
    head = _head_revision(source_dir, env)
    if head is not None and recipe.revision is not None and head != recipe.revision:
        raise BuildError(
            f"--source {source_dir} is at {head[:12]}, but recipe {recipe.name} pins {recipe.revision[:12]}",
            hint=f"check out {recipe.revision} there (git -C {source_dir} checkout {recipe.revision}), so the patches and the wheelhouse key hold",
        )
    say(f"copying {source_dir}")
    _copy_tree(source_dir, dest)
    if recipe.revision is None:
        return False, [f"{source_dir} was used as given: recipe {recipe.name} pins an archive by sha256, which a folder cannot be checked against"]
    if head is None:
        return False, [f"{source_dir} is not a git checkout: its revision could not be checked against {recipe.revision[:12]}"]
    return True, []


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
        checked, notes = _copy_source_dir(recipe, source_dir, dest, env, say)
    elif recipe.archive is not None:
        _unpack(recipe, dest, client=client, cache_dir=cache_dir, say=say)
        checked = True
    else:
        _clone(recipe, dest, env, say)
        checked = True
    origin = describe_source(recipe, source_dir)
    build_dir = dest / recipe.subdirectory if recipe.subdirectory else dest
    if not build_dir.is_dir():
        raise BuildError(f"recipe {recipe.name}: the source has no {recipe.subdirectory}/ to build",
                         hint=f"the source ({origin}) is not laid out as the recipe expects: fix the recipe's subdirectory or archive.strip")
    patches = applicable_patches(recipe, torch_version)
    apply_patches(recipe, dest, patches)
    return PreparedSource(root=dest, build_dir=build_dir, origin=origin, revision_checked=checked,
                          patches=patches, notes=tuple(notes))
