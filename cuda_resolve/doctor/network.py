"""``doctor --network``: can this machine reach the indexes, and will pip and conda cope with its
TLS?

Checks, in order (each returns :class:`~.findings.Finding` objects):

- ``tls-store``: where cuda-resolve's TLS roots come from (the OS store through truststore), and
  whether conda's OpenSSL bundle shadows the OS one (cuda-resolve loads the OS bundle then);
- ``pip-indexes``: the indexes the target's pip will really use and where each setting came
  from (command line, ``PIP_*`` variable, which ``pip.conf`` and section; see
  :mod:`cuda_resolve.install.pipconfig`); an error when pip itself cannot read its configuration;
- ``index:<name>``: pip's index (``index:pypi``: its ``index-url``, asked for ``torch/``), its
  extra indexes (``index:extra-index-<n>``: each index's root page) and find-links pages
  (``index:find-links-<n>``), fetched as pip would fetch them (no cuda-resolve mirror rewrite),
  then the PyTorch wheel index and kaolin's find-links pages (or their configured mirrors) answer,
  with latency, and the answer is an index (the start of its body is read: a PEP 503 page with
  distribution links, or PEP 691 JSON), not a login page that happens to say HTTP 200; an
  unreachable index is never replaced by another;
- ``tls-interception``: whether HTTPS to pip's index is re-signed by a CA only the OS store
  trusts, and by whom;
- ``target-openssl``: whether the target conda environment's OpenSSL (what pip there verifies
  with) sees the OS store;
- ``pip-trust``: whether the target's pip uses the system store (>= 24.2 on Python >= 3.10),
  needs ``--use-feature=truststore`` (22.2-24.1), or cannot (older); read from its dist-info;
- ``conda-trust``: whether conda verifies with the system store (``ssl_verify: truststore``).

Everything that touches the network goes through the :class:`~cuda_resolve.net.HttpClient` that
``client_factory`` returns, so mirrors and proxies from the configuration apply.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit
from urllib.request import url2pathname

from packaging.version import InvalidVersion, Version

from .._bounded import read_head
from ..environment import Environment
from ..index.model import Index
from ..install.pipconfig import IndexLocation, PipIndexes, pip_indexes
from ..net import HttpClient, Probe, TlsReport, client_from_config, redact, trust_facts
from ..net.pages import distribution_links
from ..net.tls import DISTRO_CA_BUNDLES, TrustFacts
from ..redaction import redact_urls
from .findings import Finding

if TYPE_CHECKING:
    from .findings import Status

__all__ = [
    "DEFAULT_TARGETS",
    "IndexTarget",
    "conda_ssl_verify",
    "index_answer",
    "network_findings",
    "pip_indexes_finding",
    "pip_trust_finding",
    "read_dist_version",
    "targets_for_pip",
    "targets_from_index",
]


#: How a target's answer is judged: a project page of an index (``<index>/torch/``), an index's
#: root page (PEP 503: one link per project), or a find-links page (links to files).
PageKind = Literal["project", "root", "links"]


class IndexTarget:
    """An index to reach: a name, a canonical URL to probe, and how bad it is not to reach it.

    ``source`` says where pip's setting came from (shown in the finding); ``as_is`` fetches the
    URL without cuda-resolve's mirror rewrite, as pip would; ``page`` is ``"project"``,
    ``"root"`` or ``"links"`` (see :data:`PageKind`)."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        required: bool,
        what: str,
        source: str | None = None,
        as_is: bool = False,
        page: PageKind = "project",
    ) -> None:
        self.name = name
        self.url = url
        self.required = required
        self.what = what
        self.source = source
        self.as_is = as_is
        self.page = page


DEFAULT_TARGETS: tuple[IndexTarget, ...] = (
    IndexTarget(
        "pypi",
        "https://pypi.org/simple/torch/",
        required=True,
        what="PyPI (torch's PyPI build and every pure-Python dependency)",
    ),
    IndexTarget(
        "pytorch",
        "https://download.pytorch.org/whl/torch/",
        required=False,
        what="the PyTorch wheel index (every CUDA variant other than PyPI's default)",
    ),
    IndexTarget(
        "kaolin",
        "https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-2.5.1_cu124.html",
        required=False,
        what="NVIDIA's kaolin find-links pages (prebuilt kaolin wheels)",
    ),
)


def targets_from_index(index: Index) -> tuple[IndexTarget, ...]:
    """The default targets, with kaolin's page taken from the index's ``find_links`` pattern and
    its newest listed build (so the probe asks for a page that should exist)."""
    targets = list(DEFAULT_TARGETS)
    package = index.package("kaolin")
    if package is not None and package.find_links and package.wheels:
        torch, variants = max(package.wheels, key=lambda w: w.version).torch[-1]
        variant = variants[-1]
        url = package.find_links.format(
            torch=torch,
            cuda=f"{variant[2:-1]}.{variant[-1]}",
            cuda_nodot=variant[2:],
            variant=variant,
        )
        targets = [
            t if t.name != "kaolin" else IndexTarget("kaolin", url, required=False, what=t.what)
            for t in targets
        ]
    return tuple(targets)


def _with_slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def targets_for_pip(
    indexes: PipIndexes, others: Sequence[IndexTarget] = DEFAULT_TARGETS
) -> tuple[IndexTarget, ...]:
    """What an install with ``indexes`` contacts, each an :class:`IndexTarget` fetched as is:
    ``pypi`` (the ``index-url``'s ``torch/`` page; PyPI itself when nothing is set), one
    ``extra-index-<n>`` per extra index (its root page) and one ``find-links-<n>`` per find-links
    page that is a URL; then ``others`` except their ``pypi`` guess (the PyTorch index, kaolin)."""
    found: list[IndexTarget] = []
    extras = links = 0
    for where in indexes.locations:
        if not where.is_url:
            continue  # a local folder: pip_indexes_finding says whether it is there
        source = f"pip's {where.option}, from {where.origin}"
        if where.option == "index-url":
            found.append(
                IndexTarget(
                    "pypi",
                    f"{_with_slash(where.url)}torch/",
                    required=True,
                    source=source,
                    as_is=True,
                    what="pip's index (torch's PyPI build and every pure-Python dependency)",
                )
            )
        elif where.option == "extra-index-url":
            extras += 1
            found.append(
                IndexTarget(
                    f"extra-index-{extras}",
                    _with_slash(where.url),
                    required=True,
                    source=source,
                    as_is=True,
                    page="root",
                    what="this extra index (pip skips an index it cannot reach and takes "
                    "the package from another)",
                )
            )
        else:
            links += 1
            found.append(
                IndexTarget(
                    f"find-links-{links}",
                    where.url,
                    required=True,
                    source=source,
                    as_is=True,
                    page="links",
                    what="this find-links page (pip skips a page it cannot read)",
                )
            )
    found.extend(target for target in others if target.name != "pypi")
    return tuple(found)


PIP_SYSTEM_STORE = Version("24.2")
PIP_TRUSTSTORE_FLAG = Version("22.2")
PIP_VENDORED_TRUSTSTORE = Version("23.3")
PIP_IP_LITERAL_FIX = Version("26.1")
CONDA_TRUSTSTORE = Version("23.9")


# -- reading the target's files ---------------------------------------------------------------


def read_dist_version(site_packages: Sequence[str], name: str) -> Version | None:
    """The version of distribution ``name`` installed in ``site_packages``, read by
    ``importlib.metadata`` from its metadata (no import, no subprocess); the first on the path
    wins. None when absent or unreadable."""
    from importlib.metadata import distributions

    try:
        for dist in distributions(name=name, path=[str(path) for path in site_packages]):
            try:
                return Version(dist.version)
            except (InvalidVersion, TypeError):  # no Version header, or not a version
                continue
    except OSError:
        return None
    return None


def _condarc_files(environ: Mapping[str, str], prefix: str | None) -> list[Path]:
    """conda's search path, lowest precedence first (conda's use-condarc docs)."""
    home = Path(environ.get("HOME", str(Path.home())))
    xdg = Path(environ.get("XDG_CONFIG_HOME", str(home / ".config")))
    candidates = [
        Path("/etc/conda/.condarc"),
        Path("/etc/conda/condarc"),
        Path("/var/lib/conda/.condarc"),
        Path("/var/lib/conda/condarc"),
    ]
    root = environ.get("CONDA_ROOT") or (
        str(Path(environ["CONDA_EXE"]).parent.parent) if environ.get("CONDA_EXE") else None
    )
    if root:
        candidates += [Path(root, ".condarc"), Path(root, "condarc")]
    candidates += [
        xdg / "conda" / ".condarc",
        xdg / "conda" / "condarc",
        home / ".config" / "conda" / ".condarc",
        home / ".conda" / ".condarc",
        home / ".conda" / "condarc",
        home / ".condarc",
    ]
    if prefix:
        candidates.append(Path(prefix, ".condarc"))
    if environ.get("CONDARC"):
        candidates.append(Path(environ["CONDARC"]))
    seen: list[Path] = []
    for path in candidates:
        if path not in seen:
            seen.append(path)
    return seen


_SSL_VERIFY = re.compile(r"^ssl_verify\s*:\s*(?P<value>[^#]*?)\s*(?:#.*)?$")


def conda_ssl_verify(
    environ: Mapping[str, str], files: Sequence[Path]
) -> tuple[str | None, str | None]:
    """(value, where it came from) of conda's ``ssl_verify``: ``CONDA_SSL_VERIFY`` beats the
    files, later files beat earlier ones. (None, None) when nothing sets it (conda's default:
    verify with its own CA bundle)."""
    if environ.get("CONDA_SSL_VERIFY"):
        return environ["CONDA_SSL_VERIFY"].strip(), "CONDA_SSL_VERIFY"
    value: str | None = None
    where: str | None = None
    for path in files:
        try:
            lines = read_head(path, 1024 * 1024).decode("utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            match = _SSL_VERIFY.match(line)
            if match:
                value, where = match.group("value").strip().strip("'\""), str(path)
    return value, where


def _conda_version(environ: Mapping[str, str]) -> Version | None:
    exe = environ.get("CONDA_EXE")
    if not exe:
        return None
    meta = Path(exe).parent.parent / "conda-meta"
    try:
        for entry in sorted(meta.iterdir()):
            match = re.fullmatch(r"conda-(\d[^-]*)-[^-]+\.json", entry.name)
            if match:
                return Version(match.group(1))
    except (OSError, InvalidVersion):
        return None
    return None


# -- the checks -------------------------------------------------------------------------------


def _store_finding(facts: TrustFacts) -> list[Finding]:
    findings = []
    if facts.shadowed:
        findings.append(
            Finding(
                check="tls-store",
                status="info",
                title="cuda-resolve's TLS trust",
                found=f"{facts.summary()}. OpenSSL's default CA file here is {facts.cafile} "
                f"({'a conda environment' if facts.conda_openssl else 'not the OS store'}); "
                f"cuda-resolve adds the OS bundle {facts.os_bundle} so a campus CA "
                "there is trusted",
            )
        )
    else:
        findings.append(
            Finding(
                check="tls-store",
                status="ok",
                title="cuda-resolve's TLS trust",
                found=facts.summary(),
            )
        )
    if facts.ignored_env:
        names = ", ".join(f"{name}={value}" for name, value in facts.ignored_env)
        findings.append(
            Finding(
                check="tls-ca-variables",
                status="info",
                title="CA bundle variables",
                found=f"{names} set: cuda-resolve does not read them (it verifies with the OS "
                "store); pip and requests do, and then use that bundle instead of the "
                "system store",
                fix="if that bundle holds a CA the OS store lacks, add the CA to the OS "
                "store instead",
            )
        )
    return findings


#: How much of an index's answer is read to tell a real index from a login page.
SAMPLE_BYTES = 128 * 1024
_JSON_TYPES = ("application/vnd.pypi.simple.v1+json", "application/json")


def index_answer(probe: Probe) -> str | None:
    """What the start of ``probe``'s body shows: ``"a PEP 503 page (N file links)"`` or
    ``"PEP 691 JSON"``; None when it is neither (a login page, an error page, nothing)."""
    content_type = (probe.content_type or "").split(";")[0].strip().lower()
    body = probe.body
    if content_type in _JSON_TYPES or body.lstrip()[:1] == b"{":
        head = body.lstrip()
        if head[:1] == b"{" and (b'"files"' in head or b'"projects"' in head or b'"meta"' in head):
            return "PEP 691 JSON"
        return None
    links = distribution_links(body.decode("utf-8", "replace"))
    if not links:
        return None
    more = "+" if not probe.complete else ""
    return f"a page with {len(links)}{more} file link{'s' if len(links) != 1 else ''}"


_ANCHOR = re.compile(rb"<a\s[^>]*href", re.IGNORECASE)


def _root_answer(probe: Probe) -> str | None:
    """What an index's root page shows: PEP 691 JSON, or a page of project links (PEP 503)."""
    answer = index_answer(probe)
    if answer is not None:
        return answer
    return "a page of project links" if _ANCHOR.search(probe.body) else None


def _reach_finding(target: IndexTarget, probe: Probe, client: HttpClient) -> Finding:
    mirror = f" (mirror of {target.url})" if probe.fetched_url != target.url else ""
    if target.source:
        mirror += f" ({target.source})"
    proxy = client.proxy_for(probe.fetched_url)
    via = f" through proxy {redact(proxy)}" if proxy else ""
    consequence = (
        f"without it, {target.what} cannot be used: cuda-resolve fails rather than fall back to "
        "another index"
        + (
            " (PyPI's 'kaolin 0.1' is a placeholder, never a substitute)"
            if target.name == "kaolin"
            else ""
        )
    )
    status: Status = "error" if target.required else "warn"
    if probe.ok and probe.status is not None and probe.status < 400:
        latency = f"{probe.latency * 1000:.0f} ms" if probe.latency is not None else "?"
        moved = (
            f", redirected to {probe.final_url}"
            if probe.final_url and probe.final_url != probe.fetched_url
            else ""
        )
        answer = _root_answer(probe) if target.page == "root" else index_answer(probe)
        if answer is None:
            return Finding(
                check=f"index:{target.name}",
                status=status,
                title=f"reach {target.name}",
                found=redact_urls(
                    f"{probe.fetched_url}{mirror}{via}: HTTP {probe.status}{moved}, but the "
                    "answer is not an index (no distribution links, no PEP 691 JSON); "
                )
                + consequence,
                fix="a captive portal or proxy may be answering: open the URL in a browser (log "
                "in if asked), or check the mirror (`cuda-resolve mirror test`)",
            )
        return Finding(
            check=f"index:{target.name}",
            status="ok",
            title=f"reach {target.name}",
            found=redact_urls(
                f"{probe.fetched_url}{mirror}{via}: HTTP {probe.status} in {latency}{moved}, "
                f"{answer}"
            ),
        )
    error = probe.error
    found = (
        error.message
        if error is not None
        else redact_urls(f"{probe.fetched_url}{mirror}: HTTP {probe.status}")
    )
    if error is not None and target.source:
        found += redact_urls(f" ({target.source})")
    fix = error.hint if error is not None else None
    return Finding(
        check=f"index:{target.name}",
        status=status,
        title=f"reach {target.name}",
        found=f"{found}{via if error is None else ''}; {consequence}",
        fix=fix or "configure a mirror (`cuda-resolve mirror list`) or a proxy (HTTPS_PROXY)",
    )


def _interception_finding(host: str, report: TlsReport) -> Finding:
    if report.intercepted:
        return Finding(
            check="tls-interception",
            status="info",
            title="TLS interception",
            found=f"HTTPS to {host} is re-signed by {report.top_issuer!r}, a CA only this "
            "machine's OS store trusts (certifi/Mozilla does not): tools that verify with "
            "certifi alone fail here (plain requests, pip < 24.2, uv without --system-certs, "
            "conda without ssl_verify: truststore)",
        )
    if report.intercepted is False:
        issuer = f" by {report.top_issuer!r}" if report.top_issuer else ""
        return Finding(
            check="tls-interception",
            status="ok",
            title="TLS interception",
            found=f"{host} presents a certificate issued{issuer}, trusted by Mozilla's roots: no "
            "interception",
        )
    return Finding(
        check="tls-interception",
        status="info",
        title="TLS interception",
        found=f"could not tell for {host}: {report.describe()}",
    )


def pip_trust_finding(
    pip: Version | None,
    python: tuple[int, int],
    *,
    intercepted: bool | None,
    truststore_installed: bool,
    ip_literal_index: str | None = None,
    cert: str | None = None,
) -> Finding:
    """Will the target's pip verify with the system store? (pure; see the module docs)
    ``cert``: the CA bundle PIP_CERT names (an existing file), which pip uses instead of its own."""
    title = "pip and the system trust store"
    bad: Status = "error" if intercepted else "warn"
    if pip is None:
        return Finding(
            check="pip-trust", status="info", title=title, found="no pip in the target environment"
        )
    if cert and (pip < PIP_SYSTEM_STORE or python < (3, 10)):
        return Finding(
            check="pip-trust",
            status="ok",
            title=title,
            found=f"pip {pip} verifies with PIP_CERT={cert} instead of its own CA bundle",
        )
    if pip >= PIP_SYSTEM_STORE and python >= (3, 10):
        if ip_literal_index and pip < PIP_IP_LITERAL_FIX:
            return Finding(
                check="pip-trust",
                status="warn",
                title=title,
                found=f"pip {pip} uses the system store, but crashes on an HTTPS index given by "
                f"IP address ({ip_literal_index}: 'check_hostname requires "
                "server_hostname', pip #12905)",
                fix=f"upgrade pip to >= {PIP_IP_LITERAL_FIX} (python -m pip install -U pip), or "
                "give the index a host name",
            )
        return Finding(
            check="pip-trust",
            status="ok",
            title=title,
            found=f"pip {pip} on Python {python[0]}.{python[1]} verifies with the system "
            "store and certifi",
        )
    if pip >= PIP_SYSTEM_STORE:
        return Finding(
            check="pip-trust",
            status=bad,
            title=title,
            found=f"pip {pip} on Python {python[0]}.{python[1]} uses certifi only (system store "
            "needs Python >= 3.10)",
            fix="use Python >= 3.10 for this environment, or add the proxy's CA with "
            "PIP_CERT=<bundle>",
        )
    if pip >= PIP_TRUSTSTORE_FLAG and python >= (3, 10):
        needs = (
            ""
            if pip >= PIP_VENDORED_TRUSTSTORE or truststore_installed
            else "; it also needs the truststore package installed next to it, which is missing"
        )
        status: Status = (
            "error" if needs and intercepted else "warn" if needs or intercepted else "info"
        )
        return Finding(
            check="pip-trust",
            status=status,
            title=title,
            found=f"pip {pip} uses the system store only with --use-feature=truststore "
            f"(cuda-resolve passes it){needs}",
            fix=f"upgrade pip to >= {PIP_SYSTEM_STORE}: python -m pip install -U pip "
            "--use-feature=truststore",
        )
    return Finding(
        check="pip-trust",
        status=bad,
        title=title,
        found=f"pip {pip} cannot use the system store (Python {python[0]}.{python[1]}; needs pip "
        f">= {PIP_TRUSTSTORE_FLAG} on Python >= 3.10)",
        fix="upgrade pip once with the OS bundle: "
        f"PIP_CERT={_os_bundle() or '<distro CA bundle>'} python -m pip install -U pip",
    )


def _os_bundle() -> str | None:
    return next((b for b in DISTRO_CA_BUNDLES if os.path.isfile(b)), None)


def _conda_finding(
    environ: Mapping[str, str], files: Sequence[Path], intercepted: bool | None
) -> Finding | None:
    if not environ.get("CONDA_EXE") and not any(p.is_file() for p in files):
        return None
    title = "conda and the system trust store"
    value, where = conda_ssl_verify(environ, files)
    version = _conda_version(environ)
    at = f" ({where})" if where else ""
    if value is not None and value.lower() == "truststore":
        if version is not None and version < CONDA_TRUSTSTORE:
            return Finding(
                check="conda-trust",
                status="warn",
                title=title,
                found=f"ssl_verify: truststore{at}, but conda {version} predates it "
                f"({CONDA_TRUSTSTORE})",
                fix="a newer conda is needed for that; meanwhile point it at the OS bundle: "
                f"conda config --set ssl_verify {_os_bundle() or '<bundle>'}",
            )
        return Finding(
            check="conda-trust", status="ok", title=title, found=f"ssl_verify: truststore{at}"
        )
    if value is not None and value.lower() in ("false", "no", "0", "off"):
        return Finding(
            check="conda-trust",
            status="error",
            title=title,
            found=f"ssl_verify: {value}{at} turns certificate checks off for conda",
            fix="conda config --set ssl_verify truststore (conda >= 23.9 on Python >= 3.10)",
        )
    if value is not None and value.lower() not in ("true", "yes", "1", "on"):
        exists = Path(os.path.expanduser(value)).is_file()
        return Finding(
            check="conda-trust",
            status="info" if exists else "warn",
            title=title,
            found=f"ssl_verify: {value}{at}: conda verifies with that bundle"
            + ("" if exists else ", which does not exist"),
            fix=None if exists else "conda config --set ssl_verify truststore",
        )
    return Finding(
        check="conda-trust",
        status="warn" if intercepted else "info",
        title=title,
        found="conda verifies with its own CA bundle (ssl_verify is not 'truststore')"
        + ("; this network's interception CA is not in it" if intercepted else ""),
        fix="conda config --set ssl_verify truststore (conda >= 23.9 on Python >= 3.10)",
    )


def _target_openssl_finding(
    env: Environment, environ: Mapping[str, str], intercepted: bool | None
) -> Finding | None:
    prefix = env.python.prefix
    if not env.python.is_conda or not prefix:
        return None
    bundle = Path(prefix, "ssl", "cacert.pem")
    os_bundle = _os_bundle()
    if not bundle.is_file() or os_bundle is None:
        return None
    user = environ.get("SSL_CERT_FILE")
    if user and not Path(user).resolve().is_relative_to(Path(prefix).resolve()):
        return Finding(
            check="target-openssl",
            status="ok",
            title="target environment's OpenSSL",
            found=f"SSL_CERT_FILE={user} overrides the conda bundle for pip in {prefix}",
        )
    return Finding(
        check="target-openssl",
        status="error" if intercepted else "warn",
        title="target environment's OpenSSL",
        found=f"pip in {prefix} verifies with conda's bundle {bundle} (OpenSSL's default there), "
        f"not the OS store {os_bundle}"
        + ("; this network's interception CA is only in the OS store" if intercepted else ""),
        fix=f"conda env config vars set -p {prefix} SSL_CERT_FILE={os_bundle} (cuda-resolve sets "
        "it for the pip it runs)",
    )


def _ip_literal(url: str) -> str | None:
    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    return redact(url)  # shown in the finding


def _local_path(location: IndexLocation) -> Path:
    parts = urlsplit(location.url)
    if parts.scheme.lower() == "file":
        return Path(url2pathname(parts.path))
    return Path(os.path.expanduser(location.url))


def pip_indexes_finding(indexes: PipIndexes) -> Finding:
    """``pip-indexes``: what pip will use and where each setting came from; an error when pip
    cannot read its own configuration, a warning when it could not be asked or a local folder it
    names is missing (pip ignores that folder)."""
    who = f"pip in {indexes.python}" if indexes.python else "pip"
    missing = [
        where for where in indexes.locations if not where.is_url and not _local_path(where).exists()
    ]
    found = f"{who}: {indexes.describe()}"
    if missing:
        found += "; missing here (pip ignores it): " + ", ".join(
            redact(where.url) for where in missing
        )
    for note in indexes.notes:
        found += f"; {note}"
    title = "where pip's indexes come from"
    if indexes.error:
        return Finding(
            check="pip-indexes",
            status="error",
            title=title,
            found=redact_urls(f"{found}; {indexes.error}"),
            fix="fix the file or variable pip names: `pip install` stops on it before "
            "asking any index",
        )
    if (indexes.python and not indexes.config_read) or missing:
        return Finding(
            check="pip-indexes",
            status="warn",
            title=title,
            found=redact_urls(found),
            fix=(
                f"check that `{indexes.python} -m pip config debug` works"
                if not indexes.config_read
                else "create the folder, or remove the setting that names it"
            ),
        )
    return Finding(check="pip-indexes", status="ok", title=title, found=redact_urls(found))


@contextmanager
def _fetched_as_is(client: HttpClient, as_is: bool) -> Iterator[None]:
    """Fetch without the client's mirror rewrite while inside (pip knows nothing of it)."""
    if not as_is:
        yield
        return
    saved = client.rewrite
    client.rewrite = None
    try:
        yield
    finally:
        client.rewrite = saved


def network_findings(
    env: Environment,
    *,
    client_factory: Callable[[], HttpClient] = client_from_config,
    index: Index | None = None,
    targets: Sequence[IndexTarget] | None = None,
    environ: Mapping[str, str] | None = None,
    condarc_files: Sequence[Path] | None = None,
    indexes: PipIndexes | None = None,
) -> list[Finding]:
    """All network checks for ``doctor --network`` (see the module docs).

    ``indexes`` is what the target's pip uses (default:
    :func:`~cuda_resolve.install.pipconfig.pip_indexes` asked of ``env.python.executable`` when
    ``env`` was detected here; a profile describes a machine, not an interpreter here, so only the
    ``PIP_*`` variables count for it). ``targets`` default to :func:`targets_for_pip` of it, with
    the PyTorch index and kaolin's page from :func:`targets_from_index` when ``index`` is given,
    else from :data:`DEFAULT_TARGETS`. Given ``targets`` are probed as they are (and ``indexes``,
    when given too, only reported)."""
    environment = os.environ if environ is None else environ
    if targets is None:
        if indexes is None:
            python = env.python.executable if env.source == "detected" else None
            indexes = pip_indexes(python, environment)
        others = targets_from_index(index) if index is not None else DEFAULT_TARGETS
        targets = targets_for_pip(indexes, others)
    findings = _store_finding(trust_facts(environment))
    if indexes is not None:
        findings.append(pip_indexes_finding(indexes))
    intercepted: bool | None = None
    pypi_fetched: str | None = None
    with client_factory() as client:
        for target in targets:
            with _fetched_as_is(client, target.as_is):
                probe = client.probe(target.url, accept="text/html", sample=SAMPLE_BYTES)
                findings.append(_reach_finding(target, probe, client))
                if target.name == "pypi":
                    pypi_fetched = probe.fetched_url
                    host = urlsplit(probe.fetched_url).hostname or ""
                    if probe.ok and urlsplit(probe.fetched_url).scheme == "https":
                        report = client.inspect_tls(target.url)
                        intercepted = report.intercepted
                        findings.append(_interception_finding(host, report))
                    elif probe.error is not None and probe.error.tls is not None:
                        intercepted = probe.error.tls.intercepted
    target_openssl = _target_openssl_finding(env, environment, intercepted)
    if target_openssl is not None:
        findings.append(target_openssl)
    site = env.python.site_packages
    findings.append(
        pip_trust_finding(
            read_dist_version(site, "pip"),
            env.python.version_tuple,
            intercepted=intercepted,
            truststore_installed=read_dist_version(site, "truststore") is not None,
            ip_literal_index=_ip_literal(pypi_fetched) if pypi_fetched else None,
            cert=environment.get("PIP_CERT")
            if os.path.isfile(environment.get("PIP_CERT") or "")
            else None,
        )
    )
    files = (
        list(condarc_files)
        if condarc_files is not None
        else _condarc_files(environment, env.python.prefix)
    )
    conda = _conda_finding(environment, files, intercepted)
    if conda is not None:
        findings.append(conda)
    return findings
