"""A lab's wheelhouse served by an index server (pypiserver, devpi, any PEP 503 index), asked before
a build.

The URL is the index's simple root (``https://pypi.lab.example/simple/``; devpi's
``https://host/USER/INDEX/+simple/``), from ``$CUDA_RESOLVE_WHEELHOUSE_URL`` or the config file's
``wheelhouse_url``. :meth:`ServedIndex.fetch_into` reads the package's project page, keeps the
wheels whose file name fits the plan's key (package, version, torch release and variant, Python
tag, platform, recipe word, an arch list covering every GPU here: :func:`~.key.covers`), downloads
the best one with its ``#sha256=`` checked (a truncated or tampered body is refused by
:meth:`HttpClient.download`), checks the full key it carries in ``.dist-info``
(:data:`~.rewrite.KEY_FILE`: the whole recipe digest, the torch version), and publishes it into the
local wheelhouse under the key's lock, so the install that follows compiles nothing. A server that
cannot be reached is one note and a local build, never a failure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .._frozen import frozen
from ..errors import CudaResolveError, UsageError
from ..redaction import redact, register_secret
from ..versions import ComputeCapability
from .errors import WheelhouseError
from .key import Coverage, LabelParts, WheelKey, covers, parse_local_label

if TYPE_CHECKING:
    from ..net.client import HttpClient
    from .store import StoredWheel, Wheelhouse

__all__ = [
    "PEP691",
    "WHEELHOUSE_URL_ENV",
    "ServedIndex",
    "ServedResult",
    "ServedWheel",
    "parse_project_page",
    "project_files",
    "served_candidates",
    "served_index_from",
]

#: Environment variable naming the lab's index (wins over the config file's ``wheelhouse_url``).
WHEELHOUSE_URL_ENV = "CUDA_RESOLVE_WHEELHOUSE_URL"


@frozen
class ServedWheel:
    """One wheel a project page links, with what its file name says of its key."""

    url: str  # absolute, without the #sha256= fragment
    filename: str
    sha256: str | None  # from the link's fragment
    version: str  # the public version
    python_tags: tuple[str, ...]
    platforms: tuple[str, ...]
    label: LabelParts


@frozen
class ServedResult:
    """What asking the served index gave: a wheel now in the local wheelhouse (with the reason
    it was taken), and notes (the server down, a download refused), each one line."""

    stored: StoredWheel | None = None
    reason: str | None = None
    notes: tuple[str, ...] = ()


#: The JSON form of the simple API (PEP 691); an index that does not speak it sends its HTML page.
PEP691 = "application/vnd.pypi.simple.v1+json"


def parse_project_page(
    text: str, content_type: str, base_url: str
) -> dict[str, tuple[str, str | None]]:
    """{file name: (absolute URL without its fragment, sha256 or None)} of one project page:
    PEP 691 JSON when ``content_type`` says JSON, else the PEP 503 HTML page's links. Pure."""
    import json

    from ..net.pages import page_links

    files: dict[str, tuple[str, str | None]] = {}
    if "json" in content_type:
        try:
            data = json.loads(text)
        except ValueError:
            return files
        entries = data.get("files") if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("filename"), str)
                and isinstance(entry.get("url"), str)
            ):
                hashes = entry.get("hashes")
                sha = hashes.get("sha256") if isinstance(hashes, dict) else None
                address = urljoin(base_url, entry["url"]).partition("#")[0]
                files[entry["filename"]] = (address, sha.lower() if isinstance(sha, str) else None)
        return files
    for link in page_links(text, base_url):
        address, _, fragment = link.partition("#")
        values = dict(item.partition("=")[::2] for item in fragment.split("&") if item)
        files[unquote(urlsplit(address).path.rsplit("/", 1)[-1])] = (
            address,
            values.get("sha256", "").lower() or None,
        )
    return files


def project_files(
    client: HttpClient, index_url: str, project: str, *, ttl: float
) -> dict[str, tuple[str, str | None]]:
    """:func:`parse_project_page` of ``index_url``'s page for ``project`` (asked for PEP 691 JSON,
    HTML accepted). The one reader of a served index's pages: the served wheelhouse's and the
    lock's (lock/files.py). Raises FetchError as the client does (404 included)."""
    response = client.get(
        f"{index_url.rstrip('/')}/{project}/", accept=f"{PEP691}, text/html;q=0.1", ttl=ttl
    )
    return parse_project_page(
        response.text, response.headers.get("Content-Type", ""), response.final_url
    )


def _links(files: Mapping[str, tuple[str, str | None]]) -> list[ServedWheel]:
    """The wheels of a project page whose version carries a build label."""
    wheels: list[ServedWheel] = []
    for filename, (url, sha256) in files.items():
        if not filename.endswith(".whl"):
            continue
        try:
            _, version, _, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        label = parse_local_label(version.local or "") if version.local else None
        if label is None:
            continue  # no build label: not a wheel of ours
        wheels.append(
            ServedWheel(
                url=url,
                filename=filename,
                sha256=sha256,
                version=version.public,
                python_tags=tuple(sorted({t.interpreter for t in tags})),
                platforms=tuple(sorted({t.platform for t in tags})),
                label=label,
            )
        )
    return wheels


def served_candidates(
    wheels: Sequence[ServedWheel],
    key: WheelKey,
    capabilities: Sequence[ComputeCapability],
    *,
    exact_arch_list: bool,
) -> list[tuple[ServedWheel, Coverage | None]]:
    """The served wheels whose file name fits ``key``: its version, torch release and variant,
    Python tag, platform and recipe word, and an arch list covering every capability (the
    exact arch list where ``exact_arch_list`` or there is no GPU), best first. Pure."""
    torch_part = key.local_label.split(".", 1)[0]
    fitting: list[tuple[ServedWheel, Coverage | None]] = []
    for wheel in wheels:
        if (
            Version(wheel.version) != Version(key.version)
            or wheel.label.torch != torch_part
            or wheel.label.recipe != key.recipe_word
            or key.python_tag not in wheel.python_tags
            or key.platform not in wheel.platforms
        ):
            continue
        if exact_arch_list or not capabilities:
            if wheel.label.arch_list == key.arch_list:
                fitting.append((wheel, None))
            continue
        coverage = covers(wheel.label.arch_list, capabilities) if wheel.label.arch_list else None
        if coverage is not None:
            fitting.append((wheel, coverage))
    fitting.sort(key=lambda pair: (pair[1].rank if pair[1] else ((), 0, ""), pair[0].filename))
    return fitting


class ServedIndex:
    """A lab's index server: the PEP 503 simple root ``url`` (credentials may be in it; they are
    registered as secrets and never shown). ``client`` is made from cuda-resolve's config when
    not given (the OS trust store, the configured proxies; short timeouts, one retry)."""

    def __init__(self, url: str, *, origin: str, client: HttpClient | None = None) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.origin = origin
        parts = urlsplit(self.url)
        for secret in (parts.password, parts.username):
            if secret:
                register_secret(unquote(secret))
        self._client = client

    def __repr__(self) -> str:
        return f"ServedIndex({self.shown!r}, origin={self.origin!r})"

    @property
    def shown(self) -> str:
        """The URL as it may be printed (credentials masked)."""
        return redact(self.url)

    def client(self) -> HttpClient:
        if self._client is None:
            from ..net.client import RetryPolicy, Timeouts
            from ..net.factory import client_from_config

            self._client = client_from_config(
                timeouts=Timeouts(connect=3.0, read=15.0, deadline=6.0),
                retry=RetryPolicy(attempts=2, backoff=0.5),
                use_cache=False,
            )
        return self._client

    def project_url(self, package: str) -> str:
        return f"{self.url}{canonicalize_name(package)}/"

    def wheels(self, package: str) -> list[ServedWheel]:
        """The wheels of ``package`` the index lists with a build label (none where it has no
        such project). Raises FetchError when the index cannot be read."""
        from ..net.errors import FetchError

        try:
            return _links(
                project_files(self.client(), self.url, str(canonicalize_name(package)), ttl=0)
            )
        except FetchError as exc:
            if exc.status == 404:
                return []
            raise

    def fetch_into(
        self,
        house: Wheelhouse,
        key: WheelKey,
        capabilities: Sequence[ComputeCapability],
        *,
        exact_arch_list: bool = False,
    ) -> ServedResult:
        """The best served wheel that fits ``key`` (:func:`served_candidates`), downloaded
        (sha256 checked), its carried key checked, and published into ``house`` under the key's
        lock (a process that got there first is reused: one wheel). Never raises for the
        server: unreachable, refusing or sending a wrong file is a note, and nothing is taken."""
        try:
            listed = self.wheels(key.package)
        except CudaResolveError as exc:
            return ServedResult(
                notes=(
                    f"the lab's wheelhouse {self.shown} (from {self.origin}) cannot be read "
                    f"({_first_line(exc)}): building locally",
                )
            )
        notes: list[str] = []
        for wheel, coverage in served_candidates(
            listed, key, capabilities, exact_arch_list=exact_arch_list
        ):
            full = key.query().with_arch_list(wheel.label.arch_list)
            try:
                stored = self._take(house, wheel, full)
            except CudaResolveError as exc:
                notes.append(
                    f"{wheel.filename} from the lab's wheelhouse {self.shown} is not used: "
                    f"{_first_line(exc)}"
                )
                continue
            how = (
                f"covers every GPU here ({coverage.describe()})"
                if coverage
                else "is this exact build"
            )
            reason = (
                f"{key.package} {full.labelled_version} from the lab's wheelhouse "
                f"{self.shown} {how}"
            )
            return ServedResult(stored=stored, reason=reason, notes=tuple(notes))
        return ServedResult(notes=tuple(notes))

    def _take(self, house: Wheelhouse, wheel: ServedWheel, key: WheelKey) -> StoredWheel:
        if wheel.sha256 is None:
            raise WheelhouseError(
                "its link carries no #sha256=, so the download could not be checked",
                hint="serve the wheelhouse with an index that publishes hashes (pypiserver "
                "and devpi do)",
            )
        with house.lock(key):
            found = house.lookup(key)
            if found is not None:
                return found  # another process here downloaded (or built) it meanwhile
            house.root.mkdir(parents=True, exist_ok=True)
            # Only for a download: plan's lookups import neither (zipfile, csv; issue 28).
            import tempfile

            from .rewrite import KEY_FILE, read_wheel_key

            with tempfile.TemporaryDirectory(prefix=".download-", dir=house.root) as scratch:
                target = Path(scratch) / wheel.filename
                self.client().download(wheel.url, target, sha256=wheel.sha256)
                carried = read_wheel_key(target)
                if carried is None:
                    raise WheelhouseError(
                        f"it carries no {KEY_FILE} (not published by cuda-resolve's wheelhouse)",
                        hint="publish it again with `cuda-resolve wheelhouse publish`",
                    )
                if not carried.same_as(key):
                    different = [
                        f
                        for f, v in carried.to_json().items()
                        if v != key.to_json()[f] and f != "package"
                    ]
                    raise WheelhouseError(
                        f"the key it carries differs from this plan's in {', '.join(different)}",
                        hint="it was built for another torch or recipe; a local build is "
                        "made instead",
                    )
                return house.publish(key, target, strip_debug=False)


def _first_line(exc: CudaResolveError) -> str:
    return redact(exc.message.splitlines()[0] if exc.message else type(exc).__name__)


def served_index_from(environ: Mapping[str, str] | None = None) -> ServedIndex | None:
    """``$CUDA_RESOLVE_WHEELHOUSE_URL``, else the config file's ``wheelhouse_url``, else None."""
    from ..config import load_config, parse_mirror_url

    env = os.environ if environ is None else environ
    named = env.get(WHEELHOUSE_URL_ENV, "").strip()
    if named:
        try:
            return ServedIndex(parse_mirror_url(named), origin=f"${WHEELHOUSE_URL_ENV}")
        except ValueError as exc:
            raise UsageError(
                f"${WHEELHOUSE_URL_ENV} = {redact(named)!r}: {exc}",
                hint="set it to the lab index's simple URL, such as https://pypi.lab.example/simple/",
            ) from None
    config = load_config(environ=env)
    if config.wheelhouse_url is None:
        return None
    return ServedIndex(config.wheelhouse_url, origin=f"the config file {config.path}")
