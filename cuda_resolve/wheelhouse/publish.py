"""Upload the wheelhouse's wheels to a lab's index server (pypiserver, devpi) with the legacy upload
API.

One multipart POST per wheel with ``:action=file_upload`` (the API ``twine upload`` speaks and both
servers accept), the wheel as ``content`` and its sha256. Each wheel is relabelled on the way when
it was published before the recipe word and the key file existed (:func:`~.rewrite.rewrite_wheel`
with its own key), so every uploaded wheel carries ``.dist-info/cuda_resolve_key.json``.

Credentials, first found wins: the URL's user info; ``~/.pypirc`` (a section whose ``repository``
is the URL, or the section named by ``--to NAME``); ``~/.netrc`` for the host; ``keyring`` where it
is importable. Every password is registered with :func:`cuda_resolve.redaction.register_secret`
and never printed, logged or written anywhere; only where it came from is said.

The server's answer: 200 uploaded; 409 (pypiserver, devpi: the file exists) "already there", not
an error; 400 naming an existing file (the same, from a server that answers twine's way) too;
401/403 a clear error naming the credentials' source.
"""

from __future__ import annotations

import base64
import configparser
import email.parser
import hashlib
import secrets
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from .._frozen import field, frozen
from ..errors import CudaResolveError, UsageError
from ..redaction import redact, register_secret, url_without_userinfo
from .errors import WheelhouseError
from .rewrite import read_wheel_key, rewrite_wheel

if TYPE_CHECKING:
    from ..net.client import HttpClient
    from .store import StoredWheel

__all__ = [
    "Credentials",
    "PublishIncomplete",
    "UploadOutcome",
    "default_pypirc",
    "find_credentials",
    "publish_entries",
    "resolve_target",
    "upload_wheel",
]

_SIMPLE_SUFFIXES = ("/+simple/", "/simple/")


@frozen
class Credentials:
    username: str
    password: str = field(default="", repr=False)  # never in a traceback or a log
    source: str  # "the URL", "~/.pypirc [lab]", "~/.netrc", "keyring"

    def header(self) -> str:
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")
        return f"Basic {token}"


@frozen
class UploadOutcome:
    filename: str
    size: int
    status: Literal["uploaded", "already there"]
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.filename,
            "size": self.size,
            "status": self.status,
            "detail": self.detail,
        }


def _pypirc(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise UsageError(
            f"{path}: cannot be read ({type(exc).__name__})",
            hint="fix the file (twine's format: [distutils] index-servers, then one "
            "section per server)",
        ) from None
    return parser


def _same_url(a: str, b: str) -> bool:
    def bare(url: str) -> str:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return urlunsplit(
            (parts.scheme.lower(), host.lower() + port, parts.path.rstrip("/"), "", "")
        )

    try:
        return bare(a) == bare(b)
    except ValueError:
        return False


def resolve_target(
    target: str | None, *, served_url: str | None, pypirc: Path
) -> tuple[str, str | None]:
    """(upload URL, the ~/.pypirc section it came from) for ``--to``: a URL, a section name of
    ``~/.pypirc``, or None for the configured ``wheelhouse_url`` (its ``simple/`` or devpi's
    ``+simple/`` taken off: uploads go to the index's root)."""
    from ..config import parse_mirror_url

    if target is None:
        if served_url is None:
            raise UsageError(
                "wheelhouse publish: no server to publish to",
                hint="give --to URL (the index's upload URL), or set wheelhouse_url in the config "
                "file (or $CUDA_RESOLVE_WHEELHOUSE_URL)",
            )
        url = served_url
        for suffix in _SIMPLE_SUFFIXES:
            if url.endswith(suffix):
                url = url[: -len(suffix) + 1]
                break
        return url, None
    if "://" not in target:
        parser = _pypirc(pypirc) if pypirc.is_file() else None
        if (
            parser is None
            or not parser.has_section(target)
            or not parser.get(target, "repository", fallback="")
        ):
            raise UsageError(
                f"wheelhouse publish --to {target!r}: not a URL, and {pypirc} has no [{target}] "
                "with a repository",
                hint="give the index's URL (https://host/ for pypiserver, "
                "https://host/USER/INDEX/ for devpi)",
            )
        target_url, section = parser.get(target, "repository"), target
    else:
        target_url, section = target, None
    try:
        return parse_mirror_url(target_url), section
    except ValueError as exc:
        raise UsageError(
            f"wheelhouse publish --to {redact(target_url)!r}: {exc}",
            hint="the index's upload URL: https://host/ for pypiserver, "
            "https://host/USER/INDEX/ for devpi",
        ) from None


def find_credentials(
    url: str,
    *,
    section: str | None,
    pypirc: Path,
    netrc_file: Path | None,
    environ: Mapping[str, str],
) -> Credentials | None:
    """The first credentials for ``url`` (see the module doc); each password is registered as a
    secret the moment it is read."""
    parts = urlsplit(url)
    if parts.username:
        found = Credentials(
            username=unquote(parts.username),
            password=unquote(parts.password or ""),
            source="the URL",
        )
        return _registered(found)
    if pypirc.is_file():
        parser = _pypirc(pypirc)
        names = (
            [section]
            if section
            else [
                s
                for s in parser.sections()
                if _same_url(parser.get(s, "repository", fallback=""), url)
            ]
        )
        for name in names:
            username = parser.get(name, "username", fallback="")
            if username:
                return _registered(
                    Credentials(
                        username=username,
                        password=parser.get(name, "password", fallback=""),
                        source=f"{pypirc} [{name}]",
                    )
                )
    host = parts.hostname or ""
    netrc_path = (
        netrc_file
        if netrc_file is not None
        else Path(environ.get("NETRC") or Path.home() / ".netrc")
    )
    if netrc_path.is_file():
        import netrc

        try:
            entry = netrc.netrc(str(netrc_path)).authenticators(host)
        except (netrc.NetrcParseError, OSError) as exc:
            raise UsageError(
                f"{netrc_path}: cannot be read ({type(exc).__name__})",
                hint="fix the file, or give the credentials another way",
            ) from None
        if entry is not None and entry[0]:
            return _registered(
                Credentials(username=entry[0], password=entry[2] or "", source=str(netrc_path))
            )
    try:
        import keyring  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        credential = keyring.get_credential(url, None)
    except Exception:  # a keyring backend can fail in any way; it only offers credentials
        return None
    if credential is not None and credential.username:
        return _registered(
            Credentials(
                username=credential.username, password=credential.password or "", source="keyring"
            )
        )
    return None


def _registered(found: Credentials) -> Credentials:
    register_secret(found.password)
    return found


def _upload_target(url: str) -> str:
    """Where the upload is posted: ``url`` less its user info (sent as a header instead) and
    its fragment (never sent). The host is kept as written: ``[::1]`` keeps its brackets."""
    return url_without_userinfo(url).partition("#")[0]


def _metadata(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(
            (
                n
                for n in archive.namelist()
                if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
            ),
            None,
        )
        if name is None:
            raise WheelhouseError(
                f"{wheel.name} has no .dist-info/METADATA",
                hint="remove the entry and build it again",
            )
        headers = email.parser.HeaderParser().parsestr(
            archive.read(name).decode("utf-8", "replace")
        )
    return {
        "name": headers.get("Name", ""),
        "version": headers.get("Version", ""),
        "metadata_version": headers.get("Metadata-Version", "2.1"),
    }


def _form(fields: Sequence[tuple[str, str]], wheel: Path) -> tuple[bytes, str]:
    boundary = secrets.token_hex(16)
    parts: list[bytes] = []
    for name, value in fields:
        parts.append(
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
            ).encode()
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="content"; '
        f'filename="{quote(wheel.name, safe="+")}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + wheel.read_bytes()
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def upload_wheel(
    client: HttpClient, url: str, wheel: Path, credentials: Credentials | None
) -> UploadOutcome:
    """POST one wheel to ``url`` (the legacy upload API); see the module doc for the answers."""
    data = wheel.read_bytes()
    meta = _metadata(wheel)
    fields = [
        (":action", "file_upload"),
        ("protocol_version", "1"),
        ("name", meta["name"]),
        ("version", meta["version"]),
        ("metadata_version", meta["metadata_version"]),
        ("filetype", "bdist_wheel"),
        ("pyversion", wheel.name.split("-")[-3]),
        ("sha256_digest", hashlib.sha256(data).hexdigest()),
        ("md5_digest", hashlib.md5(data, usedforsecurity=False).hexdigest()),
    ]
    body, content_type = _form(fields, wheel)
    headers = {"Content-Type": content_type}
    if credentials is not None:
        headers["Authorization"] = credentials.header()
    target = _upload_target(url)
    response = client.post(target, body=body, headers=headers)
    said = redact(response.text.strip().splitlines()[0] if response.text.strip() else "")
    if 200 <= response.status < 300:
        return UploadOutcome(filename=wheel.name, size=len(data), status="uploaded")
    if response.status == 409 or (response.status == 400 and "exist" in said.lower()):
        return UploadOutcome(
            filename=wheel.name, size=len(data), status="already there", detail=said
        )
    if response.status in (401, 403):
        who = (
            f"the credentials from {credentials.source} (user {credentials.username!r})"
            if credentials
            else "no credentials"
        )
        raise WheelhouseError(
            f"{redact(target)} refused the upload of {wheel.name} with HTTP "
            f"{response.status}: {who}",
            hint="put the index's user and password in ~/.pypirc (a section whose repository is "
            "this URL), ~/.netrc, keyring, or the URL",
        )
    raise WheelhouseError(
        f"{redact(target)} answered HTTP {response.status} to the upload of {wheel.name}"
        + (f": {said}" if said else ""),
        hint="check that the URL is the index's upload URL (https://host/ for pypiserver, "
        "https://host/USER/INDEX/ for devpi)",
    )


class PublishIncomplete(WheelhouseError):
    """A publish stopped by an error: the error (its message, hint and exit status), and what it
    leaves on the server: the wheels uploaded or found there before it (:attr:`done`), the one it
    failed on and those not tried. ``to_json`` carries all of them beside the error."""

    def __init__(
        self,
        cause: CudaResolveError,
        *,
        done: Sequence[UploadOutcome],
        failed: str,
        left: Sequence[str],
    ) -> None:
        there = (
            f"; {len(done)} wheel{'s' if len(done) != 1 else ''} already on the server "
            f"({', '.join(o.filename for o in done)})"
            if done
            else "; no wheel was published"
        )
        untried = f", {len(left)} not tried" if left else ""
        super().__init__(f"{cause.message}{there}{untried}", hint=cause.hint)
        self.exit_code = cause.exit_code
        self.cause = cause
        self.done = tuple(done)
        self.failed = failed
        self.left = tuple(left)

    def to_json(self) -> dict[str, object]:  # type: ignore[override]
        return {
            **self.cause.to_json(),
            "error": self.message,
            "partial": True,
            "wheels": [o.to_json() for o in self.done],
            "failed": self.failed,
            "not_tried": list(self.left),
        }


def publish_entries(
    entries: Sequence[StoredWheel],
    client: HttpClient,
    url: str,
    credentials: Credentials | None,
    *,
    progress: Callable[[UploadOutcome], None] | None = None,
) -> list[UploadOutcome]:
    """Upload every entry's wheel (relabelled first where it has no key file: see the module
    doc); ``progress`` hears each outcome as it comes. An error part of the way is raised as
    :class:`PublishIncomplete`, naming the wheels already on the server."""
    outcomes: list[UploadOutcome] = []
    for index, entry in enumerate(entries):
        try:
            outcome = _publish_one(entry, client, url, credentials)
        except CudaResolveError as exc:
            raise PublishIncomplete(
                exc,
                done=outcomes,
                failed=entry.path.name,
                left=[e.path.name for e in entries[index + 1 :]],
            ) from None
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return outcomes


def _publish_one(
    entry: StoredWheel, client: HttpClient, url: str, credentials: Credentials | None
) -> UploadOutcome:
    with tempfile.TemporaryDirectory(prefix="cuda-resolve-publish-") as scratch:
        wheel = entry.path
        if (
            read_wheel_key(wheel) is None
            or entry.path.name.split("-")[1] != entry.key.labelled_version
        ):
            written = rewrite_wheel(entry.path, entry.key, Path(scratch), strip=None)
            wheel = Path(scratch) / written.filename
        return upload_wheel(client, url, wheel, credentials)


def default_pypirc(environ: Mapping[str, str]) -> Path:
    """``~/.pypirc`` (``$HOME`` from ``environ``)."""
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".pypirc"
