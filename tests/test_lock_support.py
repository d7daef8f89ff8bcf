"""Helpers for the lock and sync tests (no tests here): small wheels, and a loopback index server
that answers PEP 503 pages, PEP 691 JSON where asked for it, and a PyTorch-style /whl/VARIANT/ tree.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import threading
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["StaticIndex", "make_cpu_torch", "make_wheel", "serve", "write_profile"]


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    *,
    requires: Sequence[str] = (),
    tag: str = "py3-none-any",
    files: dict[str, str] | None = None,
) -> Path:
    """A minimal valid wheel with a correct RECORD; its module ``NAME`` holds ``VERSION``."""
    module = name.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    contents = dict(files or {f"{module}/__init__.py": f"VERSION = {version!r}\n"})
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    contents[f"{dist}/METADATA"] = metadata
    contents[f"{dist}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"
    )
    record = []
    for path, text in contents.items():
        digest = (
            base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        )
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    contents[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{module}-{version}-{tag}.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, text in sorted(contents.items()):
            info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
            archive.writestr(info, text)
    path.write_bytes(buffer.getvalue())
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_cpu_torch(folder: Path, label: str = "2.13.0+cpu") -> Path:
    """A stand-in for a CPU torch wheel: ``torch/version.py`` says ``cuda = None``, as the real
    one does, and the version carries the ``+cpu`` label."""
    return make_wheel(
        folder,
        "torch",
        label,
        files={
            "torch/__init__.py": "from .version import __version__\n",
            "torch/version.py": f"__version__ = {label!r}\ncuda = None\nhip = None\n",
        },
    )


class StaticIndex:
    """A folder laid out as an index: ``simple/`` (PEP 503 pages plus PEP 691 JSON beside them,
    files under ``files/``) and ``whl/VARIANT/`` (PyTorch's layout: pages only, files beside them).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = ""  # set by serve()

    def add(self, wheel: Path, *, variant: str | None = None, metadata: bool = True) -> None:
        from packaging.utils import canonicalize_name, parse_wheel_filename

        project = canonicalize_name(parse_wheel_filename(wheel.name)[0])
        if variant is None:
            files, page_dir, href_base = (
                self.root / "files",
                self.root / "simple" / project,
                "/files/",
            )
        else:
            files, page_dir, href_base = (
                self.root / "whl" / variant,
                self.root / "whl" / variant / project,
                f"/whl/{variant}/",
            )
        files.mkdir(parents=True, exist_ok=True)
        target = files / wheel.name
        target.write_bytes(wheel.read_bytes())
        if metadata:  # PEP 658: pip reads this instead of the wheel
            with zipfile.ZipFile(target) as archive:
                member = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
                (files / f"{wheel.name}.metadata").write_bytes(archive.read(member))
        page_dir.mkdir(parents=True, exist_ok=True)
        entries = sorted(
            p
            for p in files.glob("*.whl")
            if canonicalize_name(parse_wheel_filename(p.name)[0]) == project
        )
        links = []
        records = []
        for path in entries:
            quoted = path.name.replace("+", "%2B")
            meta = path.with_name(path.name + ".metadata")
            extra = (
                f' data-dist-info-metadata="sha256={_sha(meta)}" '
                f'data-core-metadata="sha256={_sha(meta)}"'
                if meta.exists()
                else ""
            )
            links.append(
                "<a "
                f'href="{href_base}{quoted}#sha256={_sha(path)}"{extra}>{html.escape(path.name)}</a><br>'
            )
            record = {
                "filename": path.name,
                "url": f"{href_base}{quoted}",
                "hashes": {"sha256": _sha(path)},
                "size": path.stat().st_size,
            }
            if meta.exists():
                record["core-metadata"] = {"sha256": _sha(meta)}
            records.append(record)
        (page_dir / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n",
            encoding="utf-8",
        )
        if variant is None:
            (page_dir / "index.json").write_text(
                json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": records}),
                encoding="utf-8",
            )


class _Handler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_head(self):  # type: ignore[no-untyped-def]
        path = Path(self.translate_path(self.path))
        if (
            "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
            and (path / "index.json").is_file()
        ):
            body = (path / "index.json").read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return io.BytesIO(body)
        return super().send_head()


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on loopback; yields its base URL (no trailing slash)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def write_profile(
    path: Path,
    *,
    python: str = "3.11.7",
    driver: str | None = None,
    gpus: Sequence[tuple[str, str]] = (),
    torch: str | None = None,
    glibc: str = "2.35",
    name: str | None = None,
    toolkit: str | None = None,
    gcc: str | None = None,
    arch_list: Sequence[str] = (),
) -> Path:
    """A profile file; ``toolkit`` ("13.0") is one at /usr/local/cuda-13.0, ``arch_list``
    torch's."""
    lines = [f'name = "{name}"'] if name else []
    lines += [
        "[machine]",
        'os = "linux"',
        'arch = "x86_64"',
        f'glibc = "{glibc}"',
        "[python]",
        f'version = "{python}"',
    ]
    if driver:
        lines += ["[driver]", f'version = "{driver}"']
    for gpu, capability in gpus:
        lines += ["[[gpu]]", f'name = "{gpu}"', f'compute_capability = "{capability}"']
    if toolkit:
        root = f"/usr/local/cuda-{toolkit}"
        lines += [
            "[[toolkit]]",
            f'version = "{toolkit}"',
            f'root = "{root}"',
            f'nvcc = "{root}/bin/nvcc"',
        ]
    if gcc:
        lines += ["[compiler]", f'gcc = "{gcc}"']
    if torch:
        lines += ["[torch]", f'version = "{torch}"']
        if arch_list:
            lines.append("arch_list = [" + ", ".join(f'"{arch}"' for arch in arch_list) + "]")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
