"""Each locked file's canonical URL, size and sha256, from the index's PEP 691 JSON where it
answers; otherwise read from the file itself, once (downloaded, hashed and remembered in a
cache keyed by its URL), never left unhashed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path

from .._frozen import frozen
from ..errors import CudaResolveError, LockError
from ..net.client import HttpClient
from ..net.pages import file_name

__all__ = ["FileFacts", "FileFinder"]

PEP691 = "application/vnd.pypi.simple.v1+json"
#: How long an index page read for a lock is reused (the bench locks with the metadata cached).
PAGE_SECONDS = 3600.0


@frozen
class FileFacts:
    url: str
    size: int
    sha256: str


class FileFinder:
    """Finds a file's facts. ``canonical`` maps the URL pip fetched (a mirror's) to the canonical
    one."""

    def __init__(
        self,
        client: HttpClient,
        *,
        cache_dir: Path,
        canonical: Callable[[str], str] = lambda url: url,
        page_seconds: float = PAGE_SECONDS,
    ) -> None:
        self.client = client
        self.page_seconds = page_seconds
        self.cache_dir = cache_dir
        self.canonical = canonical
        self._pages: dict[str, Mapping[str, tuple[str | None, int | None]]] = {}
        self._links: dict[str, dict[str, tuple[str, str | None]]] = {}

    def locate(self, index: str, project: str, filename: str) -> tuple[str, str | None] | None:
        """(URL, sha256) of ``filename`` on ``index``'s page for ``project`` (PEP 691 JSON, else the
        PEP 503 HTML page: the served wheelhouse's reader), None when the index does not list it."""
        from ..wheelhouse.served import project_files

        page = f"{index.rstrip('/')}/{project}/"
        if page not in self._links:
            try:
                self._links[page] = project_files(
                    self.client, index, project, ttl=self.page_seconds
                )
            except CudaResolveError:
                self._links[page] = {}
        return self._links[page].get(filename)

    def _page(self, index: str, project: str) -> Mapping[str, tuple[str | None, int | None]]:
        """{file name: (sha256, size)} from ``index``'s PEP 691 page for ``project`` (empty when
        it has none)."""
        url = f"{index.rstrip('/')}/{project}/"
        if url in self._pages:
            return self._pages[url]
        found: dict[str, tuple[str | None, int | None]] = {}
        try:
            response = self.client.get(url, accept=PEP691, ttl=self.page_seconds)
            data = (
                response.json()
                if response.status == 200 and "json" in response.headers.get("Content-Type", "")
                else None
            )
        except CudaResolveError:
            data = None
        files = data.get("files") if isinstance(data, dict) else None
        for entry in files if isinstance(files, list) else ():
            if not isinstance(entry, dict) or not isinstance(entry.get("filename"), str):
                continue
            hashes = entry.get("hashes")
            sha = hashes.get("sha256") if isinstance(hashes, dict) else None
            size = entry.get("size")
            found[entry["filename"]] = (
                sha if isinstance(sha, str) else None,
                size if isinstance(size, int) else None,
            )
        self._pages[url] = found
        return found

    def _remembered(self, url: str) -> FileFacts | None:
        path = self.cache_dir / (hashlib.sha256(url.encode()).hexdigest() + ".json")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return FileFacts(url=url, size=int(data["size"]), sha256=str(data["sha256"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _remember(self, facts: FileFacts) -> None:
        from ..paths import write_atomic

        path = self.cache_dir / (hashlib.sha256(facts.url.encode()).hexdigest() + ".json")
        # The URL may carry credentials (a lab's index behind a login): the user's file alone.
        write_atomic(
            path,
            json.dumps({"url": facts.url, "size": facts.size, "sha256": facts.sha256}),
            private=True,
        )
        path.chmod(0o600)

    def facts(
        self,
        fetched_url: str,
        *,
        project: str,
        index: str | None,
        sha256: str | None,
        size: int | None = None,
    ) -> FileFacts:
        url = self.canonical(fetched_url.split("#", 1)[0])
        name = file_name(url)
        if (
            sha256 and size is not None
        ):  # a wheelhouse file, or one kept from the lock: nothing to ask
            return FileFacts(url=url, size=size, sha256=sha256)
        if index:
            page_sha, page_size = self._page(index, project).get(name, (None, None))
            size = size if size is not None else page_size
            if sha256 and page_sha and page_sha != sha256:
                raise LockError(
                    f"{name}: the index's page says sha256 {page_sha}, pip saw {sha256}",
                    hint="the index changed while locking, or a mirror serves another "
                    "file: lock again",
                )
            sha256 = sha256 or page_sha
        if sha256 and size is not None:
            return FileFacts(url=url, size=size, sha256=sha256)
        remembered = self._remembered(url)
        if remembered is not None and (sha256 is None or remembered.sha256 == sha256):
            return remembered
        try:
            response = self.client.get(
                fetched_url.split("#", 1)[0], ttl=0, max_bytes=self.client.limits.artifact
            )
        except CudaResolveError as exc:
            raise LockError(
                f"{name}: its index gives no {'size' if sha256 else 'hash'}, and reading the file "
                f"failed: {exc}",
                hint="lock from an index that publishes PEP 691 JSON (hashes and sizes), or "
                "check the network",
            ) from None
        digest = hashlib.sha256(response.content).hexdigest()
        if sha256 and digest != sha256:
            raise LockError(
                f"{name}: the file's sha256 is {digest}, its index says {sha256}",
                hint="the index or a mirror serves another file",
            )
        facts = FileFacts(url=url, size=len(response.content), sha256=digest)
        self._remember(facts)
        return facts
