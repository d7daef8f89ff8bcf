"""InstallOptions: how the user asked a plan to be carried out (pip's options, sources, checks)."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from .._frozen import frozen

__all__ = ["InstallOptions", "source_folder"]


@frozen
class InstallOptions:
    """How an install is carried out: pip options, source folders, checks, mirror, hash mode."""

    pip_args: tuple[str, ...] = ()  # the user's pip options, passed through untouched
    source_dirs: tuple[tuple[str, Path], ...] = ()  # (package or "*", folder) from --source
    smoke: bool = False
    verify: bool = True
    ptx: bool = False
    rebuild: bool = False
    explicit_arch_list: bool = False  # --arch-list was given: no reuse of a wider wheel by coverage
    torch_index: str | None = None  # the configured PyTorch mirror base, "https://mirror/whl/"
    torch_index_option: str = "--index-url"  # or "--find-links" for a flat mirror
    hash_mode: str | None = (
        None  # where pip's hash-checking mode comes from (None: off): see .hashmode
    )
    #: The only distributions the run can replace (a ``--no-deps`` install of named files, as
    #: ``sync`` runs); None: any. Only their files are stashed for the undo (see Stash.begin).
    replaces: tuple[str, ...] | None = None
    #: Which engine installs a step whose files are all local, with their sha256 (a lock's
    #: cached files, wheelhouse wheels): "auto" (uv where found), "uv" or "pip" (see .uv).
    installer: str = "auto"

    def source_for(self, package: str) -> Path | None:
        return source_folder(self.source_dirs, package)


def source_folder(sources: tuple[tuple[str, Path], ...], package: str) -> Path | None:
    """The ``--source`` folder ``package`` builds from: the first given for its name (any
    spelling) or for every package (``*``, a bare ``--source DIR``)."""
    wanted = canonicalize_name(package)
    for name, folder in sources:
        if name == "*" or canonicalize_name(name) == wanted:
            return folder
    return None
