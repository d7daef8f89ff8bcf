"""``mirror test``: fetch a known page through each configured mirror and judge the answer.

Per mirror (PyPI simple index, PyTorch wheel index, conda channel, kaolin pages):

- the page answers (HTTP status, latency until the headers arrived, redirects followed);
- its file links are counted, and links that point back upstream (``files.pythonhosted.org``,
  ``download.pytorch.org`` ...) are a warning: those multi-GB downloads would silently bypass
  the mirror;
- one listed file is requested up to its headers: a 4xx/5xx fails, a redirect upstream warns.

PyPI is tested where the target's pip really goes: :func:`targets_from_pip` turns
:func:`cuda_resolve.install.pipconfig.pip_indexes` into targets (its ``index-url``'s ``pip/``
page, each extra index's root page, each find-links page that is a URL), each with the origin of
its setting; a PyPI mirror in cuda-resolve's own configuration that pip does not use is still
tested, with a warning that pip goes elsewhere.

A failure is reported per mirror (a :class:`CheckResult` with ``ok = False``), never raised.
:meth:`CheckResult.to_dict` is what is shown: credentials in the mirror URLs become ``***``.
All traffic goes through :class:`cuda_resolve.net.HttpClient` (OS trust store, proxies).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from .._frozen import field, frozen, replace
from ..config import Config
from ..errors import CudaResolveError
from ..net.pages import distribution_links
from ..redaction import redact_data
from .presets import Canonical, Preset

if TYPE_CHECKING:
    from ..install.pipconfig import PipIndexes
    from ..net import HttpClient

__all__ = [
    "CheckResult",
    "MirrorTarget",
    "check_mirrors",
    "targets_from_config",
    "targets_from_pip",
    "targets_from_preset",
    "upstream_hosts",
]

PageKind = Literal["simple", "flat", "probe"]

#: The project whose simple page is fetched from a PyPI mirror: small, present everywhere.
PYPI_PROJECT = "pip"
#: The longest one fetch of ``mirror test`` may take, body included (a mirror that answers one
#: byte every few seconds fails here instead of holding the command).
FETCH_DEADLINE = 20.0
#: A kaolin page known upstream (NVIDIAGameWorks/kaolin docs/notes/installation.rst).
KAOLIN_PAGE = "torch-2.4.0_cu121.html"


@frozen
class MirrorTarget:
    ecosystem: str  # "pypi" | "pytorch" | "conda" | "kaolin"
    url: str  # the page to fetch
    kind: PageKind  # how to judge it: a simple page, a flat find-links page, or headers only
    mirror: str  # the mirror prefix being tested (for display)
    origin: str | None = None  # where the setting naming it came from ("pip's index-url, from ...")
    warnings: tuple[str, ...] = ()  # known before fetching (pip does not use this mirror ...)


@frozen
class CheckResult:
    target: MirrorTarget
    ok: bool
    status: int | None = None
    latency_ms: float | None = None
    final_url: str | None = None
    files: int | None = None  # file links on the page
    upstream_files: int = 0  # of which point upstream
    upstream_hosts: tuple[str, ...] = ()
    sample: str | None = None  # the listed file requested up to its headers
    warnings: tuple[str, ...] = ()
    error: str | None = None
    hint: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The result as shown (text or ``--json``): credentials in URLs replaced by ``***``."""
        data: dict[str, Any] = {
            "ecosystem": self.target.ecosystem,
            "mirror": self.target.mirror,
            "url": self.target.url,
            "ok": self.ok,
            "status": self.status,
            "latency_ms": self.latency_ms,
            "final_url": self.final_url,
            "files": self.files,
            "upstream_files": self.upstream_files,
            "upstream_hosts": list(self.upstream_hosts),
            "sample": self.sample,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "error": self.error,
            "hint": self.hint,
            "origin": self.target.origin,
        }
        return dict(redact_data(data))


def upstream_hosts(canonical: Canonical) -> frozenset[str]:
    """Hosts of the canonical indexes: a mirror page linking there sends downloads upstream."""
    urls = [
        canonical.pypi_simple,
        canonical.pypi_files,
        canonical.kaolin,
        canonical.conda_channel_alias,
        *canonical.pytorch,
        *canonical.conda_default_channels,
    ]
    return frozenset(urlsplit(url).hostname or "" for url in urls) - {""}


# -- what to test -----------------------------------------------------------------------


def _pypi_target(simple: str) -> MirrorTarget:
    return MirrorTarget(
        ecosystem="pypi", url=f"{simple}{PYPI_PROJECT}/", kind="simple", mirror=simple
    )


def _torch_target(layout: str, base: str, variant: str) -> MirrorTarget:
    if layout == "flat":
        return MirrorTarget(ecosystem="pytorch", url=f"{base}{variant}/", kind="flat", mirror=base)
    return MirrorTarget(
        ecosystem="pytorch", url=f"{base}{variant}/torch/", kind="simple", mirror=base
    )


def _conda_target(channel_url: str) -> MirrorTarget:
    return MirrorTarget(
        ecosystem="conda",
        url=f"{channel_url}noarch/repodata.json",
        kind="probe",
        mirror=channel_url,
    )


def _kaolin_target(base: str) -> MirrorTarget:
    return MirrorTarget(ecosystem="kaolin", url=f"{base}{KAOLIN_PAGE}", kind="flat", mirror=base)


def targets_from_preset(preset: Preset, *, variant: str = "cpu") -> tuple[MirrorTarget, ...]:
    out: list[MirrorTarget] = []
    if preset.pypi is not None:
        out.append(_pypi_target(preset.pypi.simple))
    torch = preset.pytorch
    if torch is not None and torch.layout != "none" and torch.url is not None:
        out.append(_torch_target(torch.layout, torch.url, variant))
    if preset.conda is not None:
        for name, base in preset.conda.custom_channels:
            if name == "conda-forge":
                out.append(_conda_target(f"{base}{name}/"))
    if preset.kaolin is not None:
        out.append(_kaolin_target(preset.kaolin))
    return tuple(out)


def targets_from_config(
    config: Config, canonical: Canonical, *, variant: str = "cpu"
) -> tuple[MirrorTarget, ...]:
    """The mirrors cuda-resolve's config points at (empty when everything is canonical)."""
    out: list[MirrorTarget] = []
    simple = config.mirror_for(canonical.pypi_simple)
    if simple is not None:
        out.append(_pypi_target(simple))
    if config.pytorch is not None:
        out.append(_torch_target(config.pytorch.layout, config.pytorch.url, variant))
    forge = config.mirror_for(f"{canonical.conda_channel_alias}conda-forge/")
    if forge is not None:
        out.append(_conda_target(forge))
    kaolin = config.mirror_for(canonical.kaolin)
    if kaolin is not None:
        out.append(_kaolin_target(kaolin))
    return tuple(out)


def _with_slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def targets_from_pip(
    indexes: PipIndexes, others: Sequence[MirrorTarget] = (), *, others_origin: str | None = None
) -> tuple[MirrorTarget, ...]:
    """What the target's pip really contacts, then ``others`` (the configured or upstream mirrors).

    pip's ``index-url`` becomes the ``pypi`` target (its ``pip/`` page), each extra index a
    ``pypi-extra`` target (its root page, headers only: PEP 503 requires one) and each find-links
    page that is a URL a ``find-links`` target (judged as a flat page); local folders are left
    out. A ``pypi`` target among ``others`` is dropped when it is the index pip uses or when
    ``others_origin`` is None (the upstream guess); otherwise it is kept, named by
    ``others_origin`` and with a warning that pip goes elsewhere."""
    found: list[MirrorTarget] = []
    for where in indexes.locations:
        if not where.is_url:
            continue
        origin = f"pip's {where.option}, from {where.origin}"
        if where.option == "index-url":
            base = _with_slash(where.url)
            found.append(
                MirrorTarget(
                    ecosystem="pypi",
                    url=f"{base}{PYPI_PROJECT}/",
                    kind="simple",
                    mirror=base,
                    origin=origin,
                )
            )
        elif where.option == "extra-index-url":
            base = _with_slash(where.url)
            found.append(
                MirrorTarget(
                    ecosystem="pypi-extra", url=base, kind="probe", mirror=base, origin=origin
                )
            )
        else:
            found.append(
                MirrorTarget(
                    ecosystem="find-links",
                    url=where.url,
                    kind="flat",
                    mirror=where.url,
                    origin=origin,
                )
            )
    used = None if indexes.no_index else _with_slash(indexes.index_url)
    if indexes.no_index:
        elsewhere = (
            f"pip does not use this mirror: no-index is set (from {indexes.no_index_origin})"
        )
    else:
        elsewhere = (
            f"pip does not use this mirror: its index-url is {indexes.index_url} (from "
            f"{indexes.index_url_origin})"
        )
    for target in others:
        if target.ecosystem != "pypi":
            found.append(target)
        elif others_origin is not None and _with_slash(target.mirror) != used:
            found.append(
                replace(target, origin=others_origin, warnings=(*target.warnings, elsewhere))
            )
    return tuple(found)


# -- judging ----------------------------------------------------------------------------


def file_links(html: str, base_url: str) -> list[str]:
    """Absolute URLs of the distribution files a page links to."""
    return distribution_links(html, base_url)


def _host(url: str | None) -> str:
    return (urlsplit(url).hostname or "") if url else ""


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 1)


def _check_one(target: MirrorTarget, client: HttpClient, upstream: frozenset[str]) -> CheckResult:
    from ..net import FetchError

    mirror_host = _host(target.mirror)
    is_upstream = mirror_host in upstream  # testing the canonical index itself
    warnings: list[str] = list(target.warnings)
    notes: list[str] = []

    deadline = min(client.timeouts.total, FETCH_DEADLINE)
    if target.kind == "probe":
        probe = client.probe(target.url, total=deadline)
        if not probe.ok or probe.error is not None or (probe.status or 0) >= 400:
            failure = probe.error
            return CheckResult(
                target=target,
                ok=False,
                status=probe.status,
                error=failure.message if failure is not None else f"HTTP {probe.status}",
                hint=failure.hint if failure is not None else None,
                warnings=tuple(warnings),
            )
        final_host = _host(probe.final_url)
        if final_host != mirror_host:
            if final_host in upstream and not is_upstream:
                warnings.append(
                    f"the mirror redirected to upstream {final_host}: downloads bypass it"
                )
            else:
                notes.append(f"served by {final_host} (redirected)")
        return CheckResult(
            target=target,
            ok=True,
            status=probe.status,
            latency_ms=_ms(probe.latency),
            final_url=probe.final_url,
            warnings=tuple(warnings),
            notes=tuple(notes),
        )

    try:
        response = client.get(target.url, ttl=0, total=deadline)
    except FetchError as exc:
        return CheckResult(
            target=target,
            ok=False,
            status=exc.status,
            error=exc.message,
            hint=exc.hint,
            warnings=tuple(warnings),
        )
    except CudaResolveError as exc:
        return CheckResult(
            target=target, ok=False, error=exc.message, hint=exc.hint, warnings=tuple(warnings)
        )

    final_host = _host(response.final_url)
    if final_host != mirror_host:
        if final_host in upstream and not is_upstream:
            warnings.append(f"the mirror redirected the page to upstream {final_host}")
        else:
            notes.append(f"served by {final_host} (redirected)")
    files = file_links(response.text, response.final_url)
    latency = _ms(response.elapsed)
    if not files:
        what = "simple index page" if target.kind == "simple" else "find-links page"
        return CheckResult(
            target=target,
            ok=False,
            status=response.status,
            latency_ms=latency,
            final_url=response.final_url,
            files=0,
            error=f"{target.url} answered but lists no distribution files (not a {what}?)",
            hint="check the mirror URL and its layout (`cuda-resolve mirror show PRESET`)",
            warnings=tuple(warnings),
            notes=tuple(notes),
        )
    upstream_links = [
        link for link in files if _host(link) in upstream and _host(link) != mirror_host
    ]
    hosts = tuple(sorted({_host(link) for link in upstream_links}))
    if upstream_links and not is_upstream:
        warnings.append(
            f"{len(upstream_links)} of {len(files)} file links point upstream "
            f"({', '.join(hosts)}): those downloads bypass the mirror"
        )
    ok = True
    message: str | None = None
    hint: str | None = None
    own = [link for link in files if link not in upstream_links]
    sample = own[-1] if own else None  # a file served by the mirror itself (upstream is not tested)
    if sample is not None:
        sample_probe = client.probe(sample, total=deadline)
        if (
            sample_probe.error is not None
            or not sample_probe.ok
            or (sample_probe.status or 0) >= 400
        ):
            ok = False
            message = f"the page lists {sample}, but fetching it failed: " + (
                sample_probe.error.message
                if sample_probe.error is not None
                else f"HTTP {sample_probe.status}"
            )
            hint = (
                sample_probe.error.hint
                if sample_probe.error is not None
                else "the mirror's index and files are out of step"
            )
        else:
            sample_host = _host(sample_probe.final_url)
            if sample_host in upstream and not is_upstream:
                warnings.append(
                    f"a listed file redirects to upstream {sample_host}: downloads "
                    "bypass the mirror"
                )
    return CheckResult(
        target=target,
        ok=ok,
        status=response.status,
        latency_ms=latency,
        final_url=response.final_url,
        files=len(files),
        upstream_files=len(upstream_links),
        upstream_hosts=hosts,
        sample=sample,
        warnings=tuple(warnings),
        notes=tuple(notes),
        error=message,
        hint=hint,
    )


def check_mirrors(
    targets: Iterable[MirrorTarget],
    client: HttpClient,
    *,
    canonical: Canonical,
    upstream: frozenset[str] | None = None,
) -> tuple[CheckResult, ...]:
    """Each target checked in turn; failures are results, not exceptions.

    ``upstream`` (default: the canonical indexes' hosts) are the hosts whose links mean "this
    download bypasses the mirror".
    """
    hosts = upstream_hosts(canonical) if upstream is None else upstream
    return tuple(_check_one(target, client, hosts) for target in targets)
