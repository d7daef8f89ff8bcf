"""Streaming an artifact to disk: size and sha256 checked, then renamed into place.

Progress is reported through a callback (``progress(received, total)``); nothing here draws.

The body goes through :func:`cuda_resolve.paths.atomic_writer`, the writer every file of
cuda-resolve goes through: the file appears at its destination only once every byte arrived and
the hash matched, only a regular file is ever replaced (a FIFO or device at the destination is
refused), and a failure or Ctrl-C removes the partial file (a killed run's is removed by the
next). Called by :meth:`cuda_resolve.net.HttpClient.download`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .._bounded import NotRegularFileError
from ..errors import CudaResolveError
from ..paths import atomic_writer
from .errors import FetchError

if TYPE_CHECKING:
    import requests

__all__ = ["CHUNK", "Progress", "file_sha256", "normalize_sha256", "stream_to_file"]

#: ``progress(received, total)``: bytes received so far, and the expected total (None: unknown).
Progress = Callable[[int, "int | None"], None]

CHUNK = 1 << 16
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def normalize_sha256(value: str) -> str:
    """``"sha256:ABC..."`` or ``"abc..."`` -> 64 lower-case hex digits; ValueError otherwise."""
    text = value.strip().lower()
    if text.startswith("sha256:") or text.startswith("sha256="):
        text = text[7:]
    if not _HEX64.match(text):
        raise ValueError(f"not a sha256 hex digest: {value!r}")
    return text


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _content_length(response: requests.Response) -> int | None:
    raw = response.headers.get("Content-Length")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def stream_to_file(
    response: requests.Response,
    dest: Path,
    *,
    sha256: str,
    size: int | None,
    progress: Progress | None,
    url: str,
    canonical: str,
    max_bytes: int,
) -> Path:
    """Write ``response``'s body next to ``dest``, check it, and rename it into place."""
    import requests
    import urllib3.exceptions

    mirror = f" (mirror of {canonical})" if canonical != url else ""
    length = _content_length(response)
    if length is not None and length > max_bytes:
        raise FetchError(
            f"{url}{mirror} announces {length} bytes, more than the {max_bytes} expected; refused",
            kind="size" if size is None else "integrity",
            url=url,
            hint="the server sent a different file than the one recorded; it was not downloaded",
        )
    expected_total = length if length is not None else size
    digest = hashlib.sha256()
    received = 0
    try:
        with atomic_writer(dest) as out:  # raising inside removes the partial file
            try:
                for chunk in response.iter_content(CHUNK):
                    received += len(chunk)
                    if received > max_bytes:
                        raise FetchError(
                            f"{url}{mirror} sent more than the {max_bytes} bytes expected; refused",
                            kind="size" if size is None else "integrity",
                            url=url,
                            hint="the server sent a different file than the one recorded; it "
                            "was not kept",
                        )
                    out.write(chunk)
                    digest.update(chunk)
                    if progress is not None:
                        progress(received, expected_total)
            except (
                requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ConnectionError,
                urllib3.exceptions.ProtocolError,
            ) as exc:
                expected = f" of {length}" if length is not None else ""
                raise FetchError(
                    f"download truncated: received {received}{expected} bytes before the "
                    f"connection ended ({exc.__class__.__name__}) fetching {url}{mirror}",
                    kind="truncated",
                    url=url,
                    hint="the connection was cut; retry, or use a mirror closer to you",
                ) from exc
            _check(
                response,
                received,
                digest.hexdigest(),
                length=length,
                size=size,
                sha256=sha256,
                url=url,
                mirror=mirror,
            )
    except FetchError:
        raise
    except requests.exceptions.RequestException:  # an OSError too, but a network failure
        raise
    except OSError as exc:  # writing the file: not a network failure, not retried
        raise _local_error(dest, exc) from exc
    return dest


def _check(
    response: requests.Response,
    received: int,
    actual: str,
    *,
    length: int | None,
    size: int | None,
    sha256: str,
    url: str,
    mirror: str,
) -> None:
    """Refuse a body cut short, of the wrong size, or with the wrong hash."""
    wire = response.raw.tell() if response.raw is not None else received
    if length is not None and wire != length:
        raise FetchError(
            f"download truncated: received {wire} of {length} bytes (Content-Length) fetching "
            f"{url}{mirror}",
            kind="truncated",
            url=url,
            hint="the connection was cut; retry, or use a mirror closer to you",
        )
    if size is not None and received != size:
        raise FetchError(
            f"size mismatch for {url}{mirror}: the record says {size} bytes, received {received}",
            kind="integrity",
            url=url,
            hint="the server sent a different file than the one recorded; do not install it",
        )
    if actual != sha256:
        raise FetchError(
            f"sha256 mismatch for {url}{mirror}: expected {sha256}, got {actual}",
            kind="integrity",
            url=url,
            hint="the server sent a different file than the one recorded (a stale or tampered "
            "mirror, or a changed upload); it was not installed",
        )


def _local_error(dest: Path, exc: OSError) -> CudaResolveError:
    if isinstance(exc, (NotRegularFileError, IsADirectoryError)):
        hint = (
            "only a regular file is ever replaced by a download: move that away, or "
            "download elsewhere"
        )
    else:
        hint = "check free space and permissions of that directory"
    return CudaResolveError(
        f"cannot write the download to {dest}: {exc.strerror or exc}", hint=hint
    )
