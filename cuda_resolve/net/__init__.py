"""The HTTP layer: the only code in cuda-resolve that opens network connections.

- :class:`HttpClient` fetches pages, JSON, byte ranges and artifacts over requests, verifying TLS
  with the OS trust store (:func:`build_ssl_context`, truststore), with proxies from the
  configuration or the environment, timeouts (per read, and a total deadline for each fetch), a size
  cap on every answer, retries with back-off, a page cache, and a mirror ``rewrite`` applied to
  every URL. Artifacts are streamed to a temporary file and moved into place only after their sha256
  matched the canonical record.
- Every failure raises :class:`FetchError` (a :class:`cuda_resolve.errors.NetworkError`) that
  says what failed: DNS, connection, proxy, TLS (naming the certificate presented and which trust
  stores accept it), HTTP status, integrity. Nothing here ever falls back to another index, and
  nothing turns certificate verification off.
"""

from __future__ import annotations

from .client import (
    HttpClient,
    HttpResponse,
    Limits,
    Probe,
    RangeResponse,
    RetryPolicy,
    Timeouts,
    user_agent,
)
from .errors import FailureKind, FetchError
from .factory import client_from_config
from .inspect import TlsReport, TrustVerdict, inspect_tls
from .proxy import proxy_for, redact
from .tls import TrustFacts, build_ssl_context, trust_facts

__all__ = [
    "FailureKind",
    "FetchError",
    "HttpClient",
    "HttpResponse",
    "Limits",
    "Probe",
    "RangeResponse",
    "RetryPolicy",
    "Timeouts",
    "TlsReport",
    "TrustFacts",
    "TrustVerdict",
    "build_ssl_context",
    "client_from_config",
    "inspect_tls",
    "proxy_for",
    "redact",
    "trust_facts",
    "user_agent",
]
