"""Reading members of a remote zip by byte range: small reads only, CRC checked, zip64 too."""

from __future__ import annotations

import io
import os
import zipfile

import pytest
from test_net_support import BenchServer, Cas, ClientFactory, SystemTrust, ranged

from cuda_resolve.net import FetchError
from cuda_resolve.net.remote_zip import RemoteZip

pytest_plugins = ["test_net_support"]

METADATA = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\nRequires-Python: >=3.8.0\n"
VERSION_PY = b"__version__ = '2.5.1'\ncuda = '12.4'\n"


def build_zip(*, members: int = 3, filler: int = 2_000_000, zip64: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        archive.writestr("torch/version.py", VERSION_PY)
        archive.writestr(
            zipfile.ZipInfo("torch/lib/libtorch_cuda.so"),
            os.urandom(filler),
            compress_type=zipfile.ZIP_STORED,
        )
        for i in range(members):
            archive.writestr(f"torch/include/{'deep/' * 8}header_{i:05d}.h", b"// header\n")
        if zip64:
            info = zipfile.ZipInfo("torch-2.5.1.dist-info/METADATA")
            with archive.open(info, "w", force_zip64=True) as handle:
                handle.write(METADATA)
        else:
            archive.writestr("torch-2.5.1.dist-info/METADATA", METADATA)
    return buffer.getvalue()


@pytest.fixture
def trusted(cas: Cas, system_trust: SystemTrust) -> None:
    system_trust(cas.origin)


@pytest.mark.parametrize(
    "members", [3, 1500]
)  # 1500 entries: the directory is beyond the tail read
def test_members_are_read_by_range_without_the_whole_file(
    origin: BenchServer, trusted: None, make_client: ClientFactory, members: int
) -> None:
    body = build_zip(members=members)
    sent: list[int] = []
    origin.routes["/packages/torch.whl"] = ranged(body, sent)
    remote = RemoteZip(make_client(), origin.url("/packages/torch.whl"))
    assert remote.read("torch/version.py") == VERSION_PY
    name = remote.find(".dist-info/METADATA")
    assert name == "torch-2.5.1.dist-info/METADATA"
    assert remote.read(name) == METADATA
    assert sum(sent) == remote.bytes_read < len(body) // 4
    assert len(sent) == (4 if members > 1000 else 3)


def test_zip64_entries(origin: BenchServer, trusted: None, make_client: ClientFactory) -> None:
    origin.routes["/packages/torch.whl"] = ranged(build_zip(zip64=True))
    remote = RemoteZip(make_client(), origin.url("/packages/torch.whl"))
    assert remote.read("torch-2.5.1.dist-info/METADATA") == METADATA


def test_corrupt_member_fails_its_crc(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    body = bytearray(build_zip())
    at = body.find(b"torch/version.py") + len(b"torch/version.py")  # first local header's data
    body[at + 2] ^= 0xFF
    origin.routes["/packages/torch.whl"] = ranged(bytes(body))
    remote = RemoteZip(make_client(), origin.url("/packages/torch.whl"))
    with pytest.raises(FetchError) as info:
        remote.read("torch/version.py")
    assert info.value.kind == "content"
    assert "CRC" in str(info.value) or "inflate" in str(info.value)


def test_a_server_without_range_support_is_an_error_not_a_download(
    origin: BenchServer, trusted: None, make_client: ClientFactory
) -> None:
    origin.routes["/packages/torch.whl"] = ranged(build_zip(), honour_range=False)
    with pytest.raises(FetchError, match="ignored the byte-range request"):
        RemoteZip(make_client(), origin.url("/packages/torch.whl")).members()


def test_not_a_zip(origin: BenchServer, trusted: None, make_client: ClientFactory) -> None:
    origin.routes["/packages/torch.whl"] = ranged(b"<html>not a wheel</html>" * 100)
    with pytest.raises(FetchError, match="not a readable zip"):
        RemoteZip(make_client(), origin.url("/packages/torch.whl")).members()


def test_missing_member(origin: BenchServer, trusted: None, make_client: ClientFactory) -> None:
    origin.routes["/packages/torch.whl"] = ranged(build_zip())
    remote = RemoteZip(make_client(), origin.url("/packages/torch.whl"))
    assert remote.find("nothing-like-this") is None
    with pytest.raises(FetchError, match="no member"):
        remote.read("torch/missing.py")
