"""Download once (issue 28): the build overlay's install of torch and the target's install of the
same torch share one download folder (:mod:`cuda_resolve.install.downloads`), so a first install
fetches each file once, and a later install of the same files fetches none.

Real pip (the target venv's), a real build overlay (``build()`` installs torch into it with the
target's :class:`~cuda_resolve.install.downloads.DownloadingPip`, as the transaction gives it;
only ``pip wheel`` is played), and a loopback HTTPS index that counts the files it sends: a
stand-in torch and the CUDA wheel it requires, served as PyPI serves files
(``Cache-Control: max-age=365000000, immutable``), as an S3 bucket behind a CDN does (an
``ETag``, no ``Cache-Control``) or as download.pytorch.org does (neither: pip's HTTP cache keeps
nothing from it, and before the download folder each install fetched torch again).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import os
import ssl
import threading
import zipfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import pytest
import trustme
from _torch_env import copy_venv
from test_builder_runner import _spec, _value, _write_wheel
from test_lock_support import StaticIndex, _Handler

from cuda_resolve.build.builder import build
from cuda_resolve.build.runner import logged_runner
from cuda_resolve.build.spec import BuildSpec
from cuda_resolve.install.downloads import DownloadingPip, downloads_root
from cuda_resolve.wheelhouse.store import Wheelhouse

TORCH = "torch-2.14.1-py3-none-any.whl"
CUDA = "nvidia_standin_cu13-13.0.1-py3-none-any.whl"


def _wheel(folder: Path, name: str, version: str, requires: Sequence[str] = ()) -> Path:
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    package = name.replace("-", "_")
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    contents = {
        f"{package}/__init__.py": f"__version__ = '{version}'\n" + "# padding\n" * 2000,
        f"{dist}/METADATA": metadata,
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = [
        f"{path},sha256="
        + base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        + f",{len(text.encode())}"
        for path, text in contents.items()
    ]
    contents[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, text in contents.items():
            archive.writestr(member, text)
    path.write_bytes(buffer.getvalue())
    return path


class _Counting(_Handler):
    """The static index, counting each file it sends whole, with the caching headers of
    ``style``."""

    sent: Counter[str]
    style: str

    def end_headers(self) -> None:
        if self.path.endswith(".whl"):
            if self.style == "pypi":
                self.send_header("Cache-Control", "max-age=365000000, immutable, public")
            elif self.style == "s3":
                self.send_header("ETag", '"' + hashlib.md5(self.path.encode()).hexdigest() + '"')
        super().end_headers()

    def do_GET(self) -> None:
        if self.path.endswith(".whl") and self.style == "s3":
            tag = '"' + hashlib.md5(self.path.encode()).hexdigest() + '"'
            if self.headers.get("If-None-Match") == tag:
                self.send_response(304)
                self.end_headers()
                return
        if self.path.endswith(".whl"):
            self.sent[self.path.rsplit("/", 1)[-1]] += 1
        super().do_GET()


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def _serve(root: Path, ca: trustme.CA, style: str) -> tuple[str, Counter[str], Callable[[], None]]:
    sent: Counter[str] = Counter()
    handler = type("Handler", (_Counting,), {"sent": sent, "style": style})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(root))
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"https://127.0.0.1:{server.server_address[1]}", sent, stop


class _RealInstalls:
    """A ProcessRunner: ``pip install`` and ``pip download`` run for real, ``pip wheel`` is
    played."""

    def __call__(
        self,
        command: Sequence[str],
        *,
        environ: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        if command[3] in ("install", "download"):
            return logged_runner(
                command, environ=environ, log_path=log_path, cwd=cwd, on_line=on_line
            )
        out = Path(_value(command, "-w"))
        out.mkdir(parents=True, exist_ok=True)
        _write_wheel(out / "fakeext-1.0-cp311-cp311-linux_x86_64.whl")
        return 0, []


def _environ(tmp_path: Path, ca: trustme.CA) -> dict[str, str]:
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PIP_", "XDG_", "SSL_CERT_"))
        and name not in ("HOME", "VIRTUAL_ENV", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    }
    environ.update(
        HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),  # pip's cache: new, shared by every pip here
        PIP_CERT=str(bundle),  # the venv's pip (ensurepip's) verifies with its own bundle
        SSL_CERT_FILE=str(bundle),  # pip >= 24.2 verifies with the system's store: this one
        SSL_CERT_DIR=str(tmp_path),
        PIP_CONFIG_FILE=os.devnull,  # not this machine's pip.conf
    )
    return environ


def _build_through_the_folder(
    spec: BuildSpec, venv: Path, environ: dict[str, str], tmp_path: Path
) -> DownloadingPip:
    """The build of ``spec`` (its overlay gets torch through the download folder), with real
    pip; returns the runner, which the target's torch step then uses."""
    source = tmp_path / "src"
    source.mkdir()
    pip = DownloadingPip(
        str(venv),
        environ=environ,
        log_path=tmp_path / "pip.log",
        runner=_RealInstalls(),
        downloads=downloads_root(),
    )
    build(
        spec,
        Wheelhouse(tmp_path / "wheelhouse"),
        source_dir=source,
        installed={},
        environ=environ,
        pip=pip,
    )
    return pip


def _first_then_later(
    tmp_path: Path, ca: trustme.CA, monkeypatch: pytest.MonkeyPatch, style: str
) -> tuple[Counter[str], Counter[str]]:
    links = tmp_path / "links"
    links.mkdir()
    index = StaticIndex(tmp_path / "index")
    index.add(_wheel(links, "nvidia-standin-cu13", "13.0.1"))
    index.add(_wheel(links, "torch", "2.14.1", ["nvidia-standin-cu13==13.0.1"]))
    url, sent, stop = _serve(index.root, ca, style)
    environ = _environ(tmp_path, ca)
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cr-cache"))
    try:
        venv = copy_venv(tmp_path / "venv")
        spec = _spec(build_requires=())
        spec = type(spec)(
            **{
                **{f: getattr(spec, f) for f in spec.__dataclass_fields__},
                "python": str(venv),
                "torch_index": f"{url}/simple",
            }
        )
        pip = _build_through_the_folder(spec, venv, environ, tmp_path)
        overlay_only = Counter(sent)
        # The target's install of the same torch, as the transaction runs it (the torch step).
        status, tail = pip.install(
            ["torch==2.14.1", "--index-url", f"{url}/simple"], torch_index_only=True
        )
        assert status == 0, tail
        first = Counter(sent)
        assert overlay_only == first, (overlay_only, first)
        # A later install of the same files into another environment.
        later_venv = copy_venv(tmp_path / "later")
        later = DownloadingPip(
            str(later_venv),
            environ=environ,
            log_path=tmp_path / "later.log",
            downloads=downloads_root(),
        )
        status, tail = later.install(
            ["torch==2.14.1", "--index-url", f"{url}/simple"], torch_index_only=True
        )
        assert status == 0, tail
        return first, Counter(sent) - first
    finally:
        stop()


@pytest.mark.parametrize("style", ["pypi", "s3", "none"])
def test_a_first_install_fetches_each_file_once_and_a_later_one_none(
    tmp_path: Path, ca: trustme.CA, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    first, later = _first_then_later(tmp_path, ca, monkeypatch, style)
    assert first == Counter({TORCH: 1, CUDA: 1}), first  # the overlay's; the target's: none
    assert not later, later


def _first_from_pypi(
    tmp_path: Path, ca: trustme.CA, monkeypatch: pytest.MonkeyPatch, style: str
) -> tuple[Counter[str], Counter[str], str]:
    """A first install whose torch comes from PyPI (F8): the overlay's torch asks the plan's
    index (``--index-url .../simple``); the target's torch step names no index (the user's PyPI
    mirror is PIP_INDEX_URL, written with the slash pip.conf files often have), as the plan's
    step from PyPI runs it. (files sent by the overlay, by both, the torch step's log)"""
    links = tmp_path / "links"
    links.mkdir()
    index = StaticIndex(tmp_path / "index")
    index.add(_wheel(links, "nvidia-standin-cu13", "13.0.1"))
    index.add(_wheel(links, "torch", "2.14.1", ["nvidia-standin-cu13==13.0.1"]))
    url, sent, stop = _serve(index.root, ca, style)
    environ = {**_environ(tmp_path, ca), "PIP_INDEX_URL": f"{url}/simple/"}
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cr-cache"))
    try:
        venv = copy_venv(tmp_path / "venv")
        spec = _spec(build_requires=())
        fields = {f: getattr(spec, f) for f in spec.__dataclass_fields__}
        spec = type(spec)(**{**fields, "python": str(venv), "torch_index": f"{url}/simple"})
        pip = _build_through_the_folder(spec, venv, environ, tmp_path)
        overlay_only = Counter(sent)
        step_log = tmp_path / "torch-step.log"
        status, tail = pip.install(
            ["torch==2.14.1"], torch_index_only=True, pypi_index=True, log_path=step_log
        )
        assert status == 0, tail
        return overlay_only, Counter(sent), step_log.read_text()
    finally:
        stop()


@pytest.mark.parametrize("style", ["pypi", "none"])
def test_a_first_install_of_torch_from_pypi_fetches_each_file_once(
    tmp_path: Path, ca: trustme.CA, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    overlay, first, log = _first_from_pypi(tmp_path, ca, monkeypatch, style)
    assert overlay == first == Counter({TORCH: 1, CUDA: 1}), (overlay, first)
    # The torch step installed from the overlay's folder: the same folder, its files only (the
    # run's view of the files its download chose, in that folder).
    folder = next((tmp_path / "cr-cache" / "downloads").iterdir())
    assert f"--no-index --find-links {folder / 'views'}{os.sep}" in log, log
    assert " torch==2.14.1\n" in log.split(f"--find-links {folder / 'views'}")[1], log
    assert "Successfully installed nvidia-standin-cu13-13.0.1 torch-2.14.1" in log
