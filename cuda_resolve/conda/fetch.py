"""A prebuilt extension wheel the plan takes (kaolin from NVIDIA's find-links pages), fetched so
that it can become a ``.conda`` package like a built one.

The file's sha256 comes from the same page pip would read (a ``#sha256=`` fragment, or PEP 691
JSON); a file the page lists without one is refused: what goes into the local channel is a file
cuda-resolve has checked. The download goes through cuda-resolve's HTTP client (the system's
trust store, its mirrors and proxies), lands only when complete with that hash, and is kept by
hash in cuda-resolve's cache folder, so converting it again (after a prune) needs no second
download; the page is read again each time (a changed page must be seen).

The wheel states no arch list; its package's arch list is the one the index gives the torch
build it was made for (NVIDIA builds kaolin for that torch), and the record says it was assumed.
"""

from __future__ import annotations

from pathlib import Path

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .._frozen import frozen
from ..environment import Environment
from ..errors import UsageError
from ..index.model import Index
from ..net.client import HttpClient
from ..net.pages import file_name
from ..plan import PlanItem
from ..wheelhouse.key import WheelKey, canonical_arch_list
from .records import TorchRecord

__all__ = ["FetchedWheel", "fetch_wheel", "prebuilt_key"]

#: What a find-links or project page is asked for (PEP 691 JSON first, then HTML).
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


@frozen
class FetchedWheel:
    item: PlanItem
    path: Path
    url: str
    sha256: str
    cache_hit: bool  # the file was already in the download cache (no request for it)


def _listed(item: PlanItem, client: HttpClient) -> tuple[str, list[tuple[str, str, str | None]]]:
    """The page that lists ``item``'s wheels and its ``(filename, url, sha256)`` entries."""
    from ..install.pins import files_on_page

    page = item.find_links
    if not page:
        raise UsageError(
            f"{item.name} {item.version}: the plan names no page that lists its wheel's sha256",
            hint=f"conda cuda install {item.name} installs it through the environment's pip",
        )
    response = client.get(page, accept=_ACCEPT, ttl=0)
    if response.status != 200:
        raise UsageError(
            f"{item.name} {item.version}: {page} answered HTTP {response.status}",
            hint="check the mirror or proxy for it: cuda-resolve doctor --network",
        )
    files = files_on_page(
        response.text, response.headers.get("Content-Type", ""), response.final_url
    )
    return page, [(entry.filename, entry.url, entry.sha256) for entry in files]


def _chosen(
    item: PlanItem, env: Environment, files: list[tuple[str, str, str | None]]
) -> tuple[str, str, str | None] | None:
    """The plan's own file when it names one, else the wheel pip would take here (best tag)."""
    if item.url:
        wanted = file_name(item.url)
        return next((entry for entry in files if entry[0] == wanted), None)
    priority = {tag: rank for rank, tag in enumerate(env.wheel_tags())}
    best: tuple[int, tuple[str, str, str | None]] | None = None
    for entry in files:
        try:
            name, version, _, tags = parse_wheel_filename(entry[0])
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name != canonicalize_name(item.name) or version != Version(item.version):
            continue
        rank = min((priority[tag] for tag in tags if tag in priority), default=None)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, entry)
    return best[1] if best else None


def fetch_wheel(
    item: PlanItem, env: Environment, *, client: HttpClient, folder: Path
) -> FetchedWheel:
    """Download the wheel ``item`` names (checked against the sha256 its page lists) into
    ``folder/<sha256>/``; an already downloaded file with that hash is reused."""
    page, files = _listed(item, client)
    chosen = _chosen(item, env, files)
    if chosen is None:
        wanted = (
            file_name(item.url)
            if item.url
            else f"a {item.name} {item.version} wheel for this Python"
        )
        raise UsageError(
            f"{page} does not list {wanted}",
            hint="the index's wheel table may be ahead of the vendor's page: cuda-resolve index "
            "refresh, or conda cuda plan to see the choice",
        )
    filename, url, sha256 = chosen
    if not sha256:
        raise UsageError(
            f"{page} lists {filename} without a sha256: cuda-resolve puts no file into a conda "
            "channel that it could not check",
            hint=f"conda cuda install {item.name} installs it through the environment's pip "
            "(which installs it unchecked)",
        )
    target = folder / sha256 / filename
    cache_hit = target.is_file()
    client.download(url, target, sha256=sha256)
    return FetchedWheel(item=item, path=target, url=url, sha256=sha256, cache_hit=cache_hit)


def prebuilt_key(fetched: FetchedWheel, torch: TorchRecord, index: Index) -> tuple[WheelKey, bool]:
    """The wheel key a fetched wheel is packaged under: its own name, version and tags, the
    environment's torch, the torch build's arch list (the wheel states none) and the file's
    sha256 in the recipe's place (so the build string names the exact file). The flag says
    whether the arch list is known from the index (False: it is empty)."""
    try:
        _, version, _, tags = parse_wheel_filename(fetched.path.name)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        raise UsageError(
            f"{fetched.url}: not a wheel file name ({exc})",
            hint="the vendor's page lists a file that is not a wheel",
        ) from None
    tag: Tag = sorted(tags, key=str)[0]
    variant = (
        fetched.item.variant or (f"cu{torch.cuda.major}{torch.cuda.minor}" if torch.cuda else "cpu")
    ).lower()
    base = torch.version.split("+", 1)[0]
    found = index.torch_build_arch_list(base, variant)
    arch_list = (
        canonical_arch_list(";".join(str(entry) for entry in found[1]))
        if found and found[1]
        else ""
    )
    key = WheelKey(
        package=fetched.item.name,
        version=str(version),
        torch=base,
        variant=variant,
        python_tag=tag.interpreter,
        platform=tag.platform,
        arch_list=arch_list,
        recipe_digest=fetched.sha256,
    )
    return key, bool(arch_list)
