"""Who signed the certificate a server presents, and which trust stores accept it.

Every handshake here verifies (``CERT_REQUIRED`` and host name checking, as everywhere in
cuda-resolve). To name the certificates even when verification fails, the diagnostic handshake
is limited to TLS 1.2, where the server's Certificate message travels in the clear: the bytes
the server sent are read while OpenSSL verifies them and rejects them. A TLS 1.3-only server
leaves the chain unnamed, and the report says so.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable

from .._frozen import frozen
from ._x509 import CertNames, cert_names, certificates_from_tls12
from .proxy import open_tunnel

__all__ = ["TlsReport", "TrustVerdict", "inspect_tls"]


@frozen
class TrustVerdict:
    source: str  # "OS trust store", "certifi", "cuda-resolve"
    trusted: bool | None  # None: the handshake failed for another reason (see detail)
    detail: str = ""  # OpenSSL's verify message, or the error

    def describe(self) -> str:
        if self.trusted:
            return f"{self.source}: trusted"
        if self.trusted is None:
            return f"{self.source}: not tested ({self.detail})"
        return f"{self.source}: not trusted ({self.detail})"


@frozen
class TlsReport:
    host: str
    port: int
    proxy: str | None
    chain: tuple[CertNames, ...]  # as presented, leaf first; empty when it could not be read
    chain_note: str | None  # why the chain is empty
    verdicts: tuple[TrustVerdict, ...]

    def verdict(self, source: str) -> TrustVerdict | None:
        return next((v for v in self.verdicts if v.source == source), None)

    @property
    def leaf(self) -> CertNames | None:
        return self.chain[0] if self.chain else None

    @property
    def top_issuer(self) -> str | None:
        """The issuer of the last certificate presented: the root CA the chain claims."""
        return self.chain[-1].issuer if self.chain else None

    @property
    def intercepted(self) -> bool | None:
        """True when the OS store accepts the chain and Mozilla's roots do not: the certificate
        was issued by a CA only this machine trusts (a TLS-intercepting proxy, or a private CA).
        None when that cannot be told."""
        os_store, mozilla = self.verdict("OS trust store"), self.verdict("certifi")
        if (
            os_store is None
            or mozilla is None
            or os_store.trusted is None
            or mozilla.trusted is None
        ):
            return None
        if mozilla.trusted:
            return False
        return bool(os_store.trusted)

    def describe(self) -> str:
        leaf = self.leaf
        if leaf is not None:
            text = f"the server presented {leaf.subject!r} issued by {leaf.issuer!r}"
            if len(self.chain) > 1 and self.top_issuer != leaf.issuer:
                text += f" (chain up to {self.top_issuer!r})"
        else:
            text = f"the presented certificate could not be read ({self.chain_note})"
        return text + "; " + "; ".join(v.describe() for v in self.verdicts)


def _handshake(
    host: str, port: int, proxy: str | None, ctx: ssl.SSLContext, timeout: float
) -> TrustVerdict:
    sock = open_tunnel(host, port, proxy, timeout=timeout)
    try:
        with ctx.wrap_socket(sock, server_hostname=host):
            return TrustVerdict(source="", trusted=True)
    except ssl.SSLCertVerificationError as exc:
        return TrustVerdict(source="", trusted=False, detail=str(exc.verify_message or exc.reason))
    finally:
        sock.close()


def _capture_chain(
    host: str, port: int, proxy: str | None, ctx: ssl.SSLContext, timeout: float
) -> tuple[tuple[CertNames, ...], str | None]:
    """Run a verifying TLS 1.2 handshake over memory BIOs, keep what the server sent, and
    parse the Certificate message from it. The handshake's own outcome is ignored here."""
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    sock = open_tunnel(host, port, proxy, timeout=timeout)
    received = bytearray()
    try:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(incoming, outgoing, server_hostname=host)
        for _ in range(64):
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pending = outgoing.read()
                if pending:
                    sock.sendall(pending)
                data = sock.recv(65536)
                if not data:
                    break
                received += data
                incoming.write(data)
            except ssl.SSLError:
                break
        pending = outgoing.read()
        if pending:  # the alert telling the server why we stop
            try:
                sock.sendall(pending)
            except OSError:
                pass
    finally:
        sock.close()
    ders = certificates_from_tls12(bytes(received))
    if not ders:
        return (), "the server did not send a TLS 1.2 certificate message (TLS 1.3 only?)"
    try:
        return tuple(cert_names(der) for der in ders), None
    except ValueError as exc:
        return (), f"the certificate did not parse: {exc}"


def inspect_tls(
    host: str,
    port: int = 443,
    *,
    proxy: str | None = None,
    context_factory: Callable[[], ssl.SSLContext] | None = None,
    timeout: float = 5.0,
) -> TlsReport:
    """Name the presented chain and test it against the OS store, certifi and our context.

    ``context_factory`` builds cuda-resolve's own context (default :func:`.tls.build_ssl_context`).
    Network errors on the way (DNS, refused) become verdicts with ``trusted=None``.
    """
    from .tls import build_ssl_context, certifi_context, os_store_context

    ours = context_factory or build_ssl_context
    try:
        chain, note = _capture_chain(host, port, proxy, ours(), timeout)
    except OSError as exc:
        chain, note = (), f"{type(exc).__name__}: {exc}"
    verdicts = []
    for source, factory in (
        ("OS trust store", os_store_context),
        ("certifi", certifi_context),
        ("cuda-resolve", ours),
    ):
        try:
            verdict = _handshake(host, port, proxy, factory(), timeout)
            verdicts.append(
                TrustVerdict(source=source, trusted=verdict.trusted, detail=verdict.detail)
            )
        except (OSError, ssl.SSLError) as exc:
            detail = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
            if isinstance(exc, socket.timeout):
                detail = f"timed out after {timeout:g} s"
            verdicts.append(TrustVerdict(source=source, trusted=None, detail=detail))
    return TlsReport(
        host=host, port=port, proxy=proxy, chain=chain, chain_note=note, verdicts=tuple(verdicts)
    )
