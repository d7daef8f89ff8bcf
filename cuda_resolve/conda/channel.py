"""The local conda channel cuda-resolve owns: the ``.conda`` packages it converted, with the
repodata every conda solver reads (classic, libmamba, rattler: a channel plus records is what
they all understand, so nothing here depends on the user's solver).

Where it lives: ``$CUDA_RESOLVE_CONDA_CHANNEL``, else the folder the caller names (the plugin's
``.condarc`` setting), else ``conda-channel`` in cuda-resolve's cache folder, beside the
default wheelhouse. The wheelhouse is the cache of builds; the channel is a view of the builds
environments use: :meth:`LocalChannel.prune` removes every package no environment has installed
(a wheel still in the wheelhouse converts again in a second, without compiling).

Repodata is written here directly (``repodata.json`` with ``packages.conda``, per subdir, and an
empty ``noarch``), under a file lock, from each package's own ``info/index.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..paths import cache_root, write_atomic
from .package import read_package_info
from .records import CondaRecord

__all__ = ["CHANNEL_ENV", "LocalChannel"]

CHANNEL_ENV = "CUDA_RESOLVE_CONDA_CHANNEL"
_SUBDIRS = ("linux-64", "linux-aarch64", "linux-ppc64le", "win-64")


class LocalChannel:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().absolute()

    def __repr__(self) -> str:
        return f"LocalChannel({str(self.root)!r})"

    @classmethod
    def default(
        cls, configured: str | None = None, environ: Mapping[str, str] | None = None
    ) -> LocalChannel:
        env = os.environ if environ is None else environ
        named = env.get(CHANNEL_ENV, "").strip() or (configured or "").strip()
        return cls(Path(named) if named else cache_root() / "conda-channel")

    @property
    def url(self) -> str:
        return self.root.as_uri()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        from filelock import FileLock

        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / ".lock"), timeout=600):
            yield

    def packages(self) -> list[Path]:
        return sorted(path for subdir in _SUBDIRS for path in (self.root / subdir).glob("*.conda"))

    def records(self) -> list[CondaRecord]:
        """The records of the channel's packages (read from the packages themselves)."""
        found = []
        for path in self.packages():
            index, _ = read_package_info(path)
            found.append(CondaRecord.from_json(index, origin=str(path), fn=path.name))
        return found

    def add(self, package_file: Path, subdir: str) -> Path:
        """Move ``package_file`` into the channel's ``subdir`` and index the channel."""
        with self._locked():
            destination = self.root / subdir / package_file.name
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(package_file, destination)
            self._index()
        return destination

    def index(self) -> None:
        with self._locked():
            self._index()

    def prune(self, in_use: Collection[str]) -> list[Path]:
        """Remove the packages whose file name no environment has installed (``in_use``: the
        ``fn`` of every record the environments have); returns what was removed."""
        removed = []
        with self._locked():
            for path in self.packages():
                if path.name not in in_use:
                    path.unlink()
                    removed.append(path)
            self._index()
        return removed

    def _index(self) -> None:
        for subdir in ("noarch", *_SUBDIRS):
            folder = self.root / subdir
            if subdir != "noarch" and not folder.is_dir():
                continue
            folder.mkdir(parents=True, exist_ok=True)
            entries: dict[str, dict[str, object]] = {}
            for path in sorted(folder.glob("*.conda")):
                index, _ = read_package_info(path)
                data = path.read_bytes()
                entry: dict[str, object] = {
                    key: index[key]
                    for key in (
                        "name",
                        "version",
                        "build",
                        "build_number",
                        "depends",
                        "constrains",
                        "subdir",
                        "timestamp",
                        "license",
                    )
                    if key in index
                }
                entry.update(
                    md5=hashlib.md5(data, usedforsecurity=False).hexdigest(),
                    sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data),
                )
                entries[path.name] = entry
            repodata = {
                "info": {"subdir": subdir},
                "packages": {},
                "packages.conda": entries,
                "removed": [],
                "repodata_version": 1,
            }
            write_atomic(folder / "repodata.json", json.dumps(repodata, indent=1, sort_keys=True))
