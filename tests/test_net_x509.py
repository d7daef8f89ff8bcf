"""The DER and TLS 1.2 record parsing that names presented certificates, against cryptography."""

from __future__ import annotations

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from cuda_resolve.net._x509 import cert_names, certificates_from_tls12


def _der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


def _rfc4514(name: x509.Name) -> str:
    return name.rfc4514_string().replace(",", ", ")


@pytest.mark.parametrize("common_name", [None, "pypi.org", "Zürich mirror"])
def test_names_match_cryptography(common_name: str | None) -> None:
    ca = trustme.CA(organization_name="Bench Origin CA")
    leaf = ca.issue_cert("pypi.org", common_name=common_name)
    for pem in (leaf.cert_chain_pems[0].bytes(), ca.cert_pem.bytes()):
        cert = x509.load_pem_x509_certificate(pem)
        names = cert_names(_der(pem))
        assert names.subject == _rfc4514(cert.subject)
        assert names.issuer == _rfc4514(cert.issuer)


def test_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        cert_names(b"\x30\x03\x02\x01")
    with pytest.raises(ValueError):
        cert_names(b"")


def _record(content_type: int, body: bytes) -> bytes:
    return bytes([content_type, 3, 3]) + len(body).to_bytes(2, "big") + body


def _handshake(msg_type: int, body: bytes) -> bytes:
    return bytes([msg_type]) + len(body).to_bytes(3, "big") + body


def test_certificate_message_split_across_records() -> None:
    ca = trustme.CA()
    ders = [_der(ca.issue_cert("a.invalid").cert_chain_pems[0].bytes()), _der(ca.cert_pem.bytes())]
    listing = b"".join(len(d).to_bytes(3, "big") + d for d in ders)
    flight = _handshake(2, b"\x03\x03" + b"\x00" * 40) + _handshake(
        11, len(listing).to_bytes(3, "big") + listing
    )
    records = _record(22, flight[:100]) + _record(22, flight[100:]) + _record(20, b"\x01")
    assert certificates_from_tls12(records) == ders


def test_no_certificate_message() -> None:
    assert certificates_from_tls12(b"") is None
    assert (
        certificates_from_tls12(_record(22, _handshake(2, b"\x03\x03")) + _record(23, b"encrypted"))
        is None
    )
