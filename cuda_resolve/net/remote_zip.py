"""Read single members of a remote zip (a wheel) with HTTP range requests.

A torch wheel is 0.7-3 GB; its METADATA or ``torch/version.py`` is a few kilobytes. Where an
index serves no PEP 658 ``.metadata`` file, the zip's central directory (the tail of the file,
about 1 MB for torch) and then the one member are fetched by byte range. Each member's CRC-32 is
checked. A server that does not honour Range is an error, never a full download.
"""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING

from .._frozen import frozen
from .errors import FetchError

if TYPE_CHECKING:
    from .client import HttpClient

__all__ = ["RemoteZip", "ZipMember"]

_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_TAIL = 65536 + 22
_MAX_MEMBER = 64 * 1024 * 1024


@frozen
class ZipMember:
    name: str
    offset: int  # of the local file header
    compressed_size: int
    size: int
    method: int  # 0 stored, 8 deflate
    crc32: int


class RemoteZip:
    """The members of the zip at ``url`` (read lazily through ``client``)."""

    def __init__(self, client: HttpClient, url: str) -> None:
        self.client = client
        self.url = url
        self._members: dict[str, ZipMember] | None = None
        self.bytes_read = 0

    def _bad(self, what: str) -> FetchError:
        return FetchError(f"{self.url} is not a readable zip: {what}", kind="content", url=self.url)

    def _range(self, start: int, end: int) -> bytes:
        part = self.client.get_range(self.url, start=start, end=end)
        self.bytes_read += len(part.content)
        return part.content

    def members(self) -> dict[str, ZipMember]:
        if self._members is None:
            self._members = self._read_directory()
        return self._members

    def _read_directory(self) -> dict[str, ZipMember]:
        tail_part = self.client.get_range(self.url, suffix=_TAIL)
        tail, tail_start, total = tail_part.content, tail_part.start, tail_part.total
        self.bytes_read += len(tail)
        at = tail.rfind(_EOCD)
        if at < 0 or at + 22 > len(tail):
            raise self._bad("no end-of-central-directory record")
        (_, _, _, _, count, cd_size, cd_offset, _) = struct.unpack("<4sHHHHIIH", tail[at : at + 22])
        if 0xFFFFFFFF in (cd_size, cd_offset) or count == 0xFFFF:
            loc = at - 20
            if loc < 0 or tail[loc : loc + 4] != _ZIP64_LOCATOR:
                raise self._bad("zip64 locator missing")
            (eocd64_offset,) = struct.unpack("<Q", tail[loc + 8 : loc + 16])
            rel = eocd64_offset - tail_start
            record = (
                tail[rel : rel + 56] if 0 <= rel else self._range(eocd64_offset, eocd64_offset + 55)
            )
            if record[:4] != _ZIP64_EOCD:
                raise self._bad("zip64 end record missing")
            count, cd_size, cd_offset = struct.unpack("<QQQ", record[32:56])
        if total is not None and cd_offset + cd_size > total:
            raise self._bad("central directory beyond the end of the file")
        if cd_offset >= tail_start:
            directory = tail[cd_offset - tail_start : cd_offset - tail_start + cd_size]
        else:
            directory = self._range(cd_offset, cd_offset + cd_size - 1)
        return self._parse_directory(directory, count)

    def _parse_directory(self, data: bytes, count: int) -> dict[str, ZipMember]:
        members: dict[str, ZipMember] = {}
        pos = 0
        for _ in range(count):
            if data[pos : pos + 4] != _CENTRAL:
                raise self._bad(f"bad central directory entry at {pos}")
            (method, crc, csize, usize, name_len, extra_len, comment_len) = struct.unpack(
                "<H4xIIIHHH", data[pos + 10 : pos + 34]
            )
            (offset,) = struct.unpack("<I", data[pos + 42 : pos + 46])
            name = data[pos + 46 : pos + 46 + name_len].decode("utf-8", "replace")
            extra = data[pos + 46 + name_len : pos + 46 + name_len + extra_len]
            usize, csize, offset = _zip64_sizes(extra, usize, csize, offset)
            members[name] = ZipMember(
                name=name,
                offset=offset,
                compressed_size=csize,
                size=usize,
                method=method,
                crc32=crc,
            )
            pos += 46 + name_len + extra_len + comment_len
        return members

    def read(self, name: str) -> bytes:
        member = self.members().get(name)
        if member is None:
            raise self._bad(f"no member {name!r}")
        if member.size > _MAX_MEMBER or member.compressed_size > _MAX_MEMBER:
            raise self._bad(f"member {name!r} is {member.size} bytes, too large to read by range")
        guess = 30 + len(name.encode()) + 256 + member.compressed_size
        blob = self._range(member.offset, member.offset + guess - 1)
        if blob[:4] != _LOCAL:
            raise self._bad(f"bad local header for {name!r}")
        name_len, extra_len = struct.unpack("<HH", blob[26:30])
        start = 30 + name_len + extra_len
        end = start + member.compressed_size
        if end > len(blob):
            blob += self._range(member.offset + len(blob), member.offset + end - 1)
        raw = blob[start:end]
        if member.method == 0:
            data = raw
        elif member.method == 8:
            try:
                data = zlib.decompressobj(-15).decompress(raw)
            except zlib.error as exc:
                raise self._bad(f"member {name!r} does not inflate: {exc}") from None
        else:
            raise self._bad(f"member {name!r} uses compression method {member.method}")
        if len(data) != member.size or zlib.crc32(data) != member.crc32:
            raise self._bad(f"member {name!r} fails its CRC-32 check")
        return data

    def find(self, suffix: str) -> str | None:
        """The first member whose name ends with ``suffix`` (``.dist-info/METADATA``)."""
        return next((n for n in self.members() if n.endswith(suffix)), None)


def _zip64_sizes(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        header_id, length = struct.unpack("<HH", extra[pos : pos + 4])
        body = extra[pos + 4 : pos + 4 + length]
        if header_id == 0x0001:
            fields = [v for (v,) in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            if usize == 0xFFFFFFFF and fields:
                usize = fields.pop(0)
            if csize == 0xFFFFFFFF and fields:
                csize = fields.pop(0)
            if offset == 0xFFFFFFFF and fields:
                offset = fields.pop(0)
            break
        pos += 4 + length
    return usize, csize, offset
