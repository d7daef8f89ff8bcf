"""The one SSLContext cuda-resolve verifies with: the OS trust store, via truststore.

``truststore.SSLContext`` verifies with the operating system's trust store (on Linux: OpenSSL's
default verify paths, which ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` steer). We hand this context to
our own connections only; truststore's process-wide patching of the ``ssl`` module is never used,
since it would change every other library in the process.

Inside a conda environment OpenSSL's default paths point at the environment's own Mozilla bundle
(``$CONDA_PREFIX/ssl/cacert.pem``), which lacks a campus CA that the OS store has. We detect that
(:func:`analyse_trust`) and load the distribution's bundle into the context as well.
Verification only ever gains roots here; it is never switched off.
"""

from __future__ import annotations

import os
import re
import ssl
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._frozen import frozen

__all__ = [
    "CA_ENV_VARIABLES",
    "DISTRO_CA_BUNDLES",
    "DISTRO_CA_DIRS",
    "TrustFacts",
    "analyse_trust",
    "build_ssl_context",
    "certifi_context",
    "os_store_context",
    "trust_facts",
]

#: Distribution CA bundles, most common first (Debian/Ubuntu, Fedora/RHEL, SUSE, Alpine/Arch/BSD).
DISTRO_CA_BUNDLES: tuple[str, ...] = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/cert.pem",
)

#: Distribution hashed-certificate directories.
DISTRO_CA_DIRS: tuple[str, ...] = ("/etc/ssl/certs", "/etc/pki/tls/certs")

#: Variables other tools read for a CA bundle. cuda-resolve does not: it verifies with the OS
#: store, and a bundle path here must not silently replace it (requests would let it).
CA_ENV_VARIABLES: tuple[str, ...] = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT")

_HASHED_NAME = re.compile(r"^[0-9a-fA-F]{8}\.[0-9]+$")


@frozen
class TrustFacts:
    """Where the OS-store context gets its roots, and whether conda's bundle hides the OS one."""

    backend: str  # "openssl" (Linux and other Unix), "macos", "windows"
    cafile: str | None  # OpenSSL's effective default CA file (SSL_CERT_FILE or compiled-in)
    capath: str | None  # OpenSSL's effective default CA directory, when it holds certificates
    cafile_env: str | None  # SSL_CERT_FILE as set
    capath_env: str | None  # SSL_CERT_DIR as set
    os_bundle: str | None  # the first distribution bundle that exists
    uses_os_store: bool  # OpenSSL's defaults are (or resolve to) the distribution store
    conda_openssl: bool  # OpenSSL's defaults lie inside a conda environment
    user_override: bool  # SSL_CERT_FILE/SSL_CERT_DIR set by the user (not by conda's activation)
    shadowed: bool  # the OS bundle exists but OpenSSL's defaults point elsewhere: we load it too
    ignored_env: tuple[tuple[str, str], ...] = ()  # CA_ENV_VARIABLES that are set (not read)

    @property
    def loads(self) -> tuple[str, ...]:
        """Bundles :func:`build_ssl_context` adds on top of truststore's own roots."""
        return (self.os_bundle,) if self.shadowed and self.os_bundle else ()

    def summary(self) -> str:
        if self.backend != "openssl":
            return f"the {self.backend} system trust store (through truststore)"
        used = ", ".join(p for p in (self.cafile, self.capath) if p) or "truststore's fallback list"
        text = f"OpenSSL default verify paths: {used}"
        if self.shadowed:
            text += f"; they are not the OS store, so {self.os_bundle} is loaded as well"
        return text


def _real(path: str | None) -> str | None:
    return os.path.realpath(path) if path else None


def _dir_has_certs(path: str) -> bool:
    try:
        return any(_HASHED_NAME.match(name) for name in os.listdir(path))
    except OSError:
        return False


def _in_conda_prefix(path: str | None, prefixes: Sequence[str]) -> bool:
    """Whether ``path`` lies in a conda environment: under a listed prefix, or below a directory
    holding ``conda-meta`` (``$PREFIX/ssl/cacert.pem``)."""
    if not path:
        return False
    real = Path(os.path.realpath(path))
    for prefix in prefixes:
        if prefix and real.is_relative_to(os.path.realpath(prefix)):
            return True
    return any((parent / "conda-meta").is_dir() for parent in list(real.parents)[:3])


def analyse_trust(
    paths: ssl.DefaultVerifyPaths,
    *,
    environ: Mapping[str, str],
    platform: str = sys.platform,
    bundles: Sequence[str] = DISTRO_CA_BUNDLES,
    dirs: Sequence[str] = DISTRO_CA_DIRS,
    conda_prefixes: Sequence[str] = (),
) -> TrustFacts:
    """Decide, from OpenSSL's default verify paths and the environment, what truststore will trust.

    Pure apart from looking at the files named. ``shadowed`` is true when the OS bundle exists,
    OpenSSL's defaults point somewhere else (typically conda's ``$PREFIX/ssl``), and the user did
    not choose that by setting ``SSL_CERT_FILE``/``SSL_CERT_DIR`` themselves (conda's activation
    script setting ``SSL_CERT_FILE`` to its own bundle does not count as a choice).
    """
    ignored = tuple((name, environ[name]) for name in CA_ENV_VARIABLES if environ.get(name))
    if platform == "darwin" or platform.startswith("win"):
        return TrustFacts(
            backend="macos" if platform == "darwin" else "windows",
            cafile=None,
            capath=None,
            cafile_env=None,
            capath_env=None,
            os_bundle=None,
            uses_os_store=True,
            conda_openssl=False,
            user_override=False,
            shadowed=False,
            ignored_env=ignored,
        )
    cafile_env = environ.get(paths.openssl_cafile_env) or None
    capath_env = environ.get(paths.openssl_capath_env) or None
    cafile = paths.cafile
    capath = paths.capath if paths.capath and _dir_has_certs(paths.capath) else None
    existing_bundles = [b for b in bundles if os.path.isfile(b)]
    os_bundle = existing_bundles[0] if existing_bundles else None
    os_files = {_real(b) for b in existing_bundles}
    os_dirs = {_real(d) for d in dirs if os.path.isdir(d) and _dir_has_certs(d)}
    if cafile is None and capath is None:
        # truststore falls back to its own list of distribution bundles.
        uses_os_store = os_bundle is not None
    else:
        uses_os_store = _real(cafile) in os_files or _real(capath) in os_dirs
    conda_openssl = _in_conda_prefix(cafile, conda_prefixes) or _in_conda_prefix(
        capath, conda_prefixes
    )
    user_override = bool(
        (cafile_env and not _in_conda_prefix(cafile_env, conda_prefixes))
        or (capath_env and not _in_conda_prefix(capath_env, conda_prefixes))
    )
    shadowed = os_bundle is not None and not uses_os_store and not user_override
    return TrustFacts(
        backend="openssl",
        cafile=cafile,
        capath=capath,
        cafile_env=cafile_env,
        capath_env=capath_env,
        os_bundle=os_bundle,
        uses_os_store=uses_os_store,
        conda_openssl=conda_openssl,
        user_override=user_override,
        shadowed=shadowed,
        ignored_env=ignored,
    )


def trust_facts(environ: Mapping[str, str] | None = None) -> TrustFacts:
    """:func:`analyse_trust` for this process (read at call time: tests change the environment)."""
    env = os.environ if environ is None else environ
    candidates = (sys.prefix, sys.base_prefix, env.get("CONDA_PREFIX", ""))
    prefixes = [p for p in candidates if p and os.path.isdir(os.path.join(p, "conda-meta"))]
    return analyse_trust(ssl.get_default_verify_paths(), environ=env, conda_prefixes=prefixes)


def os_store_context() -> ssl.SSLContext:
    """truststore alone: exactly what the OS store trusts (used to diagnose, not to fetch)."""
    import truststore

    return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def certifi_context() -> ssl.SSLContext:
    """Mozilla's roots alone, as plain requests and pip < 24.2 verify (used to diagnose)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def build_ssl_context(
    *,
    extra_cafiles: Sequence[str | os.PathLike[str]] = (),
    include_certifi: bool = True,
    facts: TrustFacts | None = None,
) -> ssl.SSLContext:
    """The context every connection of cuda-resolve verifies with.

    truststore's OS-store context, plus the distribution bundle when conda's bundle shadows it,
    plus certifi's Mozilla roots (as pip >= 24.2 does), plus ``extra_cafiles`` the user named.
    Certificate and host name verification are required, always.
    """
    ctx = os_store_context()
    facts = trust_facts() if facts is None else facts
    for bundle in facts.loads:
        ctx.load_verify_locations(cafile=bundle)
    if include_certifi:
        import certifi

        ctx.load_verify_locations(cafile=certifi.where())
    for extra in extra_cafiles:
        ctx.load_verify_locations(cafile=os.fspath(extra))
    if ctx.verify_mode != ssl.CERT_REQUIRED or not ctx.check_hostname:  # pragma: no cover
        raise AssertionError("the TLS context must verify certificates and host names")
    return ctx
