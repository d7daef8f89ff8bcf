"""cuda-resolve's own configuration: mirror rewrites, proxies, index overlays, the active preset.

The file is TOML at ``platformdirs.user_config_dir("cuda-resolve")/config.toml``; the environment
variable ``CUDA_RESOLVE_CONFIG`` names another file (tests, labs with a shared config). A missing
file is an empty configuration: everything canonical, no proxy, no overlays.

Plans and locks keep canonical upstream URLs. :meth:`Config.rewrite` maps a canonical URL to the
configured mirror at fetch time (longest matching prefix wins); the HTTP layer checks the hash
against the canonical record, so a mirror can make a download faster but never different.

```toml
preset = "tuna"                       # written by `cuda-resolve mirror set`
index_dirs = ["~/lab/index"]          # index overlays, relative to this file
wheelhouse = "/nfs/lab/wheelhouse"    # built wheels, shared by a lab (CUDA_RESOLVE_WHEELHOUSE wins)
wheelhouse_url = "https://pypi.lab.example/simple/"  # the lab's index server, asked before a build
                                      # (CUDA_RESOLVE_WHEELHOUSE_URL wins); docs/wheelhouse.md
lock_paths = ["~/lab/env/pylock.toml", "/nfs/lab/locks"]  # locks whose wheels `wheelhouse prune`
                                      # keeps: a file, or a folder's pylock*.toml; docs/lockfiles.md

[proxy]
https = "http://proxy.example:3128"
no_proxy = ["localhost", ".example.edu"]

[pytorch]                             # how pip is pointed at the PyTorch wheels
layout = "flat"                       # "simple" (--index-url) or "flat" (--find-links)
url = "https://mirrors.aliyun.com/pytorch-wheels/"

[[rewrite]]
canonical = "https://download.pytorch.org/whl/"
mirror = "https://mirrors.aliyun.com/pytorch-wheels/"
artifacts_only = true                 # only wheel/sdist/conda files, not index pages
```
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from ._docs import doc_path
from ._frozen import field, frozen
from .errors import UsageError
from .paths import CONFIG_ENV, config_path
from .redaction import redact

if TYPE_CHECKING:  # the TOML reader is imported only when a config file exists
    from ._toml import Table

__all__ = [
    "ARTIFACT_SUFFIXES",
    "CONFIG_ENV",
    "Config",
    "ConfigError",
    "Proxies",
    "Rewrite",
    "TorchIndex",
    "config_path",
    "config_to_dict",
    "is_loopback_url",
    "load_config",
    "parse_config",
    "parse_mirror_url",
]

#: File names a rule with ``artifacts_only = true`` applies to (distribution files, not pages).
ARTIFACT_SUFFIXES = (
    ".whl",
    ".whl.metadata",
    ".tar.gz",
    ".zip",
    ".tar.bz2",
    ".conda",
)

TorchLayout = Literal["simple", "flat"]
_LAYOUTS: tuple[TorchLayout, ...] = ("simple", "flat")
#: ``mirror set`` refuses to overwrite a config it cannot read, so the way out is an edit by hand.
_HINT = (
    f"fix the file by hand ({doc_path('mirrors.md')} lists the keys), or move it away and run "
    "`cuda-resolve mirror set PRESET` to write a new one"
)


class ConfigError(UsageError):
    """cuda-resolve's config file (or a mirror URL given for it) is not valid."""


# -- URLs -------------------------------------------------------------------------------


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_mirror_url(text: str, *, prefix: bool = True) -> str:
    """Check a mirror or index URL and return it normalized.

    Parsed with :func:`urllib.parse.urlsplit`: HTTPS only (plain http is accepted for loopback
    addresses, where a test server or a local caching proxy lives), a host, a port from 1 to
    65535 when one is given, no query or fragment. The host is lower-cased; user info is kept
    exactly as typed (a token's case matters). A "/" or "@" inside a password must be written
    %2F / %40: typed as is, the URL means another host. With ``prefix`` the result ends with
    ``/`` so that prefix matching stops at a path boundary. Raises ValueError with the reason;
    the reason never repeats the URL (it may hold a password).
    """
    text = text.strip()
    if any(char.isspace() or ord(char) < 32 or char == "\x7f" for char in text):
        raise ValueError("a URL has no spaces or control characters")
    parts = urlsplit(text)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise ValueError("expected an https:// URL")
    if "@" in parts.path or "@" in parts.query or "@" in parts.fragment:
        raise ValueError(
            "an '@' after the host: if it belongs to a user name or password, write a '/' in them "
            "as %2F (and '@' as %40)"
        )
    try:
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(
            f"the host or port is not valid ({_without_url(str(exc))}); a port is a number "
            "from 1 to 65535"
        ) from None
    if not host:
        raise ValueError("the URL names no host")
    if port == 0:
        raise ValueError("port 0 is not a port; a port is a number from 1 to 65535")
    if parts.scheme == "http" and not is_loopback_url(text):
        raise ValueError(
            "plain http is refused (no TLS: a mirror would need pip told to skip certificate "
            "checks, an upload would send its password in the clear); use the https:// URL"
        )
    if parts.query or parts.fragment:
        raise ValueError("a mirror URL has no query or fragment")
    userinfo, at, hostport = parts.netloc.rpartition("@")
    # the host is case-insensitive; credentials in the user info are not (a token stays as typed)
    normalized = f"{parts.scheme}://{userinfo}{at}{hostport.lower()}{parts.path}"
    if prefix and not normalized.endswith("/"):
        normalized += "/"
    return normalized


def _without_url(message: str) -> str:
    """urllib's messages quote the bad part ("Port out of range 0-65535", "Port could not be
    cast to integer value as 'x'"): keep the words, drop what was quoted."""
    return message.split(" as ", 1)[0].split("'", 1)[0].strip()


def _url_field(table: Table, key: str, *, prefix: bool = True, required: bool = True) -> str | None:
    """A URL key of the config, checked; the error shows the URL with its password masked."""
    value = table.string(key) if required else table.string(key, None)
    if value is None:
        return None
    try:
        return parse_mirror_url(value, prefix=prefix)
    except ValueError as exc:
        raise table.fail(key, f"= {redact(value)!r}: {exc}") from None


def _parse_proxy_url(text: str) -> str:
    parts = urlsplit(text.strip())
    if "@" in parts.path:
        raise ValueError("an '@' after the host: write a '/' in the user name or password as %2F")
    try:
        parts.port  # noqa: B018 - raises on a port that is not 1-65535
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(f"the host or port is not valid ({_without_url(str(exc))})") from None
    if parts.scheme not in ("http", "https", "socks5", "socks5h") or not host:
        raise ValueError("expected a proxy URL such as http://proxy.example:3128")
    return text.strip()


def _proxy_field(table: Table, key: str) -> str | None:
    value = table.string(key, None)
    if value is None:
        return None
    try:
        return _parse_proxy_url(value)
    except ValueError as exc:
        raise table.fail(key, f"= {redact(value)!r}: {exc}") from None


def _split_origin(url: str) -> tuple[str, str]:
    """``("https://host", "/path...")`` with scheme and host lower-cased (user info kept as is)."""
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    return f"{scheme.lower()}://{userinfo}{at}{host.lower()}", slash + path


# -- model ------------------------------------------------------------------------------


@frozen
class Rewrite:
    """``canonical`` URL prefix served by ``mirror``; both end with ``/``."""

    canonical: str
    mirror: str
    #: Only distribution files (``ARTIFACT_SUFFIXES``), not index pages: for mirrors that carry
    #: the files under the same paths but lay out their pages differently (flat find-links).
    artifacts_only: bool = False

    def matches(self, url: str) -> bool:
        origin, path = _split_origin(url)
        if not (origin + path).startswith(self.canonical):
            return False
        if self.artifacts_only:
            name = path.split("#", 1)[0].split("?", 1)[0].rsplit("/", 1)[-1].lower()
            return name.endswith(ARTIFACT_SUFFIXES)
        return True

    def apply(self, url: str) -> str:
        origin, path = _split_origin(url)
        return self.mirror + (origin + path)[len(self.canonical) :]


@frozen
class TorchIndex:
    """Where pip finds PyTorch wheels for a variant, and in which form."""

    layout: TorchLayout
    url: str  # base, ends with "/"; the variant ("cu121") is appended

    def for_variant(self, variant: str) -> str:
        return f"{self.url}{variant}/"

    @property
    def pip_option(self) -> str:
        """``--index-url`` for a PEP 503 tree, ``--find-links`` for a flat listing."""
        return "--index-url" if self.layout == "simple" else "--find-links"


@frozen
class Proxies:
    """The HTTP proxies cuda-resolve's own downloads go through."""

    http: str | None = None
    https: str | None = None
    no_proxy: tuple[str, ...] = ()

    def as_requests(self) -> dict[str, str]:
        """The mapping requests takes as ``proxies=`` (empty when none is configured)."""
        out: dict[str, str] = {}
        if self.http:
            out["http"] = self.http
        if self.https:
            out["https"] = self.https
        if self.no_proxy:
            out["no_proxy"] = ",".join(self.no_proxy)
        return out


@frozen
class Config:
    """Everything cuda-resolve's own config file says; the defaults are "canonical, direct"."""

    path: Path | None = None
    preset: str | None = None
    rewrites: tuple[Rewrite, ...] = ()
    pytorch: TorchIndex | None = None
    proxies: Proxies = field(default_factory=Proxies)
    index_dirs: tuple[Path, ...] = ()
    wheelhouse: Path | None = None
    #: The lab's index server (PEP 503 simple URL) asked for a built wheel before a build.
    wheelhouse_url: str | None = None
    #: Locks (files, or folders of pylock*.toml) whose wheels ``wheelhouse prune`` never removes.
    lock_paths: tuple[Path, ...] = ()

    def rewrite(self, url: str) -> str:
        """The mirror URL for a canonical URL (longest matching prefix), else ``url`` itself."""
        best: Rewrite | None = None
        for rule in self.rewrites:
            if rule.matches(url) and (best is None or len(rule.canonical) > len(best.canonical)):
                best = rule
        return best.apply(url) if best is not None else url

    def mirror_for(self, canonical: str) -> str | None:
        """The mirror prefix configured for exactly this canonical prefix, if any."""
        for rule in self.rewrites:
            if rule.canonical == canonical:
                return rule.mirror
        return None


# -- reading ----------------------------------------------------------------------------


def load_config(path: Path | None = None, *, environ: Mapping[str, str] | None = None) -> Config:
    """Read the config file; a missing file is the empty configuration."""
    target = config_path(environ) if path is None else path
    if not target.exists():
        return Config(path=target)
    from ._toml import load_toml_file

    table = load_toml_file(target, error=ConfigError, hint=_HINT)
    return _config(table, path=target)


def parse_config(text: str, *, origin: str = "<config>", base_dir: Path | None = None) -> Config:
    from ._toml import parse_toml_text

    table = parse_toml_text(text, origin=origin, error=ConfigError, hint=_HINT)
    path = None if base_dir is None else base_dir / "config.toml"
    return _config(table, path=path)


def _config(top: Table, *, path: Path | None) -> Config:
    preset = top.string("preset", None)
    base_dir = path.parent if path is not None else Path.cwd()
    index_dirs = tuple(_resolve_dir(text, base_dir) for text in top.strings("index_dirs", ()))
    wheelhouse_text = top.string("wheelhouse", None)
    wheelhouse = _resolve_dir(wheelhouse_text, base_dir) if wheelhouse_text else None
    wheelhouse_url = _url_field(top, "wheelhouse_url", required=False)
    lock_paths = tuple(_resolve_dir(text, base_dir) for text in top.strings("lock_paths", ()))
    proxies = _proxies(top.table("proxy"))
    pytorch = _pytorch(top.table("pytorch"))
    rewrites: list[Rewrite] = []
    seen: dict[str, str] = {}
    for rule in top.tables("rewrite"):
        canonical = str(_url_field(rule, "canonical"))
        mirror = str(_url_field(rule, "mirror"))
        artifacts_only = rule.boolean("artifacts_only", False)
        rule.finish()
        if canonical in seen:
            raise rule.fail(
                "canonical",
                f"= {canonical!r}: already mapped to {redact(seen[canonical])!r}",
                hint="keep one [[rewrite]] per canonical prefix",
            )
        seen[canonical] = mirror
        rewrites.append(Rewrite(canonical=canonical, mirror=mirror, artifacts_only=artifacts_only))
    top.finish()
    return Config(
        path=path,
        preset=preset,
        rewrites=tuple(rewrites),
        pytorch=pytorch,
        proxies=proxies,
        index_dirs=index_dirs,
        wheelhouse=wheelhouse,
        wheelhouse_url=wheelhouse_url,
        lock_paths=lock_paths,
    )


def _resolve_dir(text: str, base_dir: Path) -> Path:
    candidate = Path(text).expanduser()
    return candidate if candidate.is_absolute() else base_dir / candidate


def _proxies(table: Table | None) -> Proxies:
    if table is None:
        return Proxies()
    http = _proxy_field(table, "http")
    https = _proxy_field(table, "https")
    no_proxy = table.strings("no_proxy", ())
    table.finish()
    return Proxies(http=http, https=https, no_proxy=no_proxy)


def _layout(text: str) -> TorchLayout:
    for layout in _LAYOUTS:
        if text == layout:
            return layout
    raise ValueError("expected 'simple' (a PEP 503 index) or 'flat' (a find-links page)")


def _pytorch(table: Table | None) -> TorchIndex | None:
    if table is None:
        return None
    layout = table.parsed("layout", _layout)
    url = str(_url_field(table, "url"))
    table.finish()
    return TorchIndex(layout=layout, url=url)


# -- writing ----------------------------------------------------------------------------


def config_to_dict(config: Config) -> dict[str, Any]:
    """The TOML document for ``config`` (paths written as given, relative to the file)."""
    data: dict[str, Any] = {}
    if config.preset is not None:
        data["preset"] = config.preset
    if config.index_dirs:
        data["index_dirs"] = [str(path) for path in config.index_dirs]
    if config.wheelhouse is not None:
        data["wheelhouse"] = str(config.wheelhouse)
    if config.wheelhouse_url is not None:
        data["wheelhouse_url"] = config.wheelhouse_url
    if config.lock_paths:
        data["lock_paths"] = [str(path) for path in config.lock_paths]
    proxy: dict[str, Any] = {}
    if config.proxies.http:
        proxy["http"] = config.proxies.http
    if config.proxies.https:
        proxy["https"] = config.proxies.https
    if config.proxies.no_proxy:
        proxy["no_proxy"] = list(config.proxies.no_proxy)
    if proxy:
        data["proxy"] = proxy
    if config.pytorch is not None:
        data["pytorch"] = {"layout": config.pytorch.layout, "url": config.pytorch.url}
    if config.rewrites:
        data["rewrite"] = [
            {
                "canonical": rule.canonical,
                "mirror": rule.mirror,
                "artifacts_only": rule.artifacts_only,
            }
            for rule in config.rewrites
        ]
    return data
