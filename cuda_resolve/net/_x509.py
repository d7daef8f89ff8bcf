"""Just enough DER and TLS 1.2 record parsing to name the certificates a server presented.

Used only by :mod:`.inspect` to say *who* signed a certificate that failed verification. It
reads bytes observed on the wire during a handshake that verifies (and fails); it decides
nothing about trust.
"""

from __future__ import annotations

from .._frozen import frozen

__all__ = ["CertNames", "cert_names", "certificates_from_tls12"]

# X.520 attribute types we name; others are shown by their dotted OID.
_ATTRIBUTES = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "1.2.840.113549.1.9.1": "emailAddress",
}
_STRING_TAGS = {0x0C, 0x13, 0x14, 0x16, 0x1C, 0x1E}  # UTF8, Printable, T61, IA5, Universal, BMP


@frozen
class CertNames:
    subject: str  # RFC 4514 style, most specific first: "CN=pypi.org, O=..., C=US"
    issuer: str


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of value, end of value) of the DER element at ``pos``."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out = []
    pos = start
    while pos < end:
        tag, vstart, vend = _tlv(data, pos)
        out.append((tag, vstart, vend))
        pos = vend
    return out


def _oid(raw: bytes) -> str:
    if not raw:
        raise ValueError("empty OID")
    parts = [min(raw[0] // 40, 2), raw[0] - 40 * min(raw[0] // 40, 2)]
    value = 0
    for byte in raw[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(str(p) for p in parts)


def _string(tag: int, raw: bytes) -> str:
    if tag == 0x1E:
        return raw.decode("utf-16-be", "replace")
    if tag == 0x1C:
        return raw.decode("utf-32-be", "replace")
    return raw.decode("utf-8" if tag == 0x0C else "latin-1", "replace")


def _name(data: bytes, start: int, end: int) -> str:
    parts: list[str] = []
    for set_tag, sstart, send in _children(data, start, end):
        if set_tag != 0x31:
            raise ValueError("bad RDN")
        for seq_tag, astart, aend in _children(data, sstart, send):
            if seq_tag != 0x30:
                raise ValueError("bad attribute")
            (otag, ostart, oend), (vtag, vstart, vend) = _children(data, astart, aend)[:2]
            if otag != 0x06:
                raise ValueError("bad attribute type")
            oid = _oid(data[ostart:oend])
            key = _ATTRIBUTES.get(oid, oid)
            value = (
                _string(vtag, data[vstart:vend])
                if vtag in _STRING_TAGS
                else data[vstart:vend].hex()
            )
            parts.append(f"{key}={value}")
    return ", ".join(reversed(parts))


def cert_names(der: bytes) -> CertNames:
    """Subject and issuer of an X.509 certificate; ValueError when it does not parse."""
    tag, start, _end = _tlv(der, 0)
    if tag != 0x30:
        raise ValueError("not a certificate")
    tbs_tag, tstart, tend = _tlv(der, start)
    if tbs_tag != 0x30:
        raise ValueError("not a certificate")
    fields = _children(der, tstart, tend)
    if fields and fields[0][0] == 0xA0:  # [0] EXPLICIT version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[2][0] != 0x30 or fields[4][0] != 0x30:
        raise ValueError("not a certificate")
    issuer = _name(der, fields[2][1], fields[2][2])
    subject = _name(der, fields[4][1], fields[4][2])
    return CertNames(subject=subject, issuer=issuer)


def certificates_from_tls12(server_bytes: bytes) -> list[bytes] | None:
    """The DER certificates of the Certificate message in a server's TLS 1.2 handshake flight.

    ``None`` when the bytes hold no plaintext Certificate message (TLS 1.3 encrypts it).
    """
    handshake = bytearray()
    pos = 0
    while pos + 5 <= len(server_bytes):
        content_type = server_bytes[pos]
        length = int.from_bytes(server_bytes[pos + 3 : pos + 5], "big")
        body = server_bytes[pos + 5 : pos + 5 + length]
        pos += 5 + length
        if content_type == 22:  # handshake
            handshake += body
        elif content_type == 20:  # ChangeCipherSpec: what follows is encrypted
            break
    hpos = 0
    while hpos + 4 <= len(handshake):
        msg_type = handshake[hpos]
        msg_len = int.from_bytes(handshake[hpos + 1 : hpos + 4], "big")
        msg = bytes(handshake[hpos + 4 : hpos + 4 + msg_len])
        hpos += 4 + msg_len
        if msg_type == 11 and len(msg) >= 3:  # Certificate
            total = int.from_bytes(msg[0:3], "big")
            certs: list[bytes] = []
            cpos = 3
            while cpos + 3 <= min(len(msg), 3 + total):
                clen = int.from_bytes(msg[cpos : cpos + 3], "big")
                certs.append(msg[cpos + 3 : cpos + 3 + clen])
                cpos += 3 + clen
            return certs
    return None
