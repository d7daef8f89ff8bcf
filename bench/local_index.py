"""A PEP 503 index on loopback that counts the bytes it serves, for first-install figures where
nothing outside the machine can be reached (the H200; issue 28).

    python bench/local_index.py repack ROOT torch setuptools ...   # wheels of installed dists
    python bench/local_index.py serve ROOT --port 8081 --log served.jsonl
    python bench/local_index.py count served.jsonl [--since N]     # bytes per file, as JSON

``repack`` turns the named distributions installed in this interpreter, and every distribution
their requirements need (markers evaluated here, no extras), into wheels: the files each one's
RECORD lists under site-packages, and scripts that are not console-script wrappers (ninja's
binary) as the wheel's data (compiled ``__pycache__`` and the wrappers left out: pip makes those
again), its ``.dist-info`` with a new RECORD of
sha256 hashes, named with the first tag of its WHEEL file, stored uncompressed. So a machine with
a CUDA torch installed can serve exactly those bytes to a fresh environment, as a mirror would.
``ROOT/simple/<project>/index.html`` links each wheel with its sha256; ``ROOT/files`` holds them.
``/whl/<variant>/<project>/`` serves the same pages, as a ``[pytorch] url`` mirror of the PyTorch
index would.

``serve`` sends no caching headers (as download.pytorch.org sends none: pip's own HTTP cache then
keeps nothing), and writes one JSON line per request: path, status, bytes sent.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import http.server
import importlib.metadata as metadata
import json
import re
import sys
import threading
import time
import urllib.parse
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import packaging.tags
from packaging.requirements import Requirement

SKIPPED_DIST_INFO = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(names: list[str]) -> list[metadata.Distribution]:
    """The named distributions and all they require, extras followed (torch 2.11 needs CUDA's
    libraries through ``cuda-toolkit[cublas,cudart,...]``)."""
    found: dict[str, metadata.Distribution] = {}
    extras_done: dict[str, set[str]] = {}
    roots = [Requirement(name) for name in names]
    todo: list[tuple[str, set[str]]] = [(root.name, set(root.extras)) for root in roots]
    while todo:
        name, extras = todo.pop()
        key = normalized(name)
        done = extras_done.setdefault(key, set())
        if key in found and extras <= done:
            continue
        dist = found.get(key)
        if dist is None:
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                print(f"not installed here, not served: {name}", file=sys.stderr)
                continue
        found[key] = dist
        done |= extras
        for text in dist.requires or []:
            requirement = Requirement(text)
            marker = requirement.marker
            wanted = marker is None or any(
                marker.evaluate({"extra": extra}) for extra in ["", *sorted(extras)]
            )
            if wanted:
                _say_unmet(requirement)
                todo.append((requirement.name, set(requirement.extras)))
    return sorted(found.values(), key=lambda d: normalized(d.metadata["Name"]))


def _say_unmet(requirement: Requirement) -> None:
    """Name a requirement the installed version does not meet: pip will not find it served."""
    try:
        installed = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return
    if not requirement.specifier.contains(installed, prereleases=True):
        print(
            f"installed {requirement.name} {installed} does not meet {requirement}", file=sys.stderr
        )


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def repack_one(name: str, files_dir: str) -> tuple[str, str, int, str]:
    """Write one installed distribution as a wheel; return (project, file name, size, sha256)."""
    dist = metadata.distribution(name)
    wheel_text = dist.read_text("WHEEL") or ""
    tags = [
        line.split(":", 1)[1].strip() for line in wheel_text.splitlines() if line.startswith("Tag:")
    ]
    # The first tag this interpreter takes: a WHEEL file may list py2-none-any before
    # py3-none-any, and pip here skips a file named for Python 2.
    here = {str(tag) for tag in packaging.tags.sys_tags()}
    tags = [tag for tag in tags if tag in here] or tags
    if not tags:
        raise SystemExit(f"{name}: its WHEEL file names no tag")
    project = dist.metadata["Name"]
    version = dist.version
    file_name = f"{re.sub(r'[-_.]+', '_', project)}-{version}-{tags[0]}.whl"
    target = Path(files_dir) / file_name
    records: list[str] = []
    dist_info = None
    console_scripts = {
        e.name for e in dist.entry_points if e.group in ("console_scripts", "gui_scripts")
    }
    scripts_dir = Path(sys.prefix, "bin").resolve()
    with zipfile.ZipFile(target.with_suffix(".part"), "w", zipfile.ZIP_STORED) as archive:
        for entry in dist.files or []:
            parts = entry.parts
            if "__pycache__" in parts:
                continue
            if parts[0] == "..":
                # A script that is no console-script wrapper (ninja's binary) travels as data.
                installed = Path(str(dist.locate_file(entry))).resolve()
                if installed.parent != scripts_dir or installed.name in console_scripts:
                    continue
                parts = (
                    f"{re.sub(r'[-_.]+', '_', project)}-{version}.data",
                    "scripts",
                    installed.name,
                )
            if parts[0].endswith(".dist-info"):
                dist_info = parts[0]
                if len(parts) == 2 and parts[1] in SKIPPED_DIST_INFO:
                    continue
            source = Path(str(dist.locate_file(entry)))
            if not source.is_file():
                continue
            data = source.read_bytes()
            arcname = "/".join(parts)
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (source.stat().st_mode & 0o777 | 0o100000) << 16
            archive.writestr(info, data)
            records.append(f"{arcname},{_record_hash(data)},{len(data)}")
        if dist_info is None:
            raise SystemExit(f"{name}: its RECORD lists no .dist-info folder")
        records.append(f"{dist_info}/RECORD,,")
        archive.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    target.with_suffix(".part").rename(target)
    sha256 = hashlib.sha256()
    with target.open("rb") as stream:
        while chunk := stream.read(1 << 22):
            sha256.update(chunk)
    return project, file_name, target.stat().st_size, sha256.hexdigest()


def repack(root: Path, names: list[str], jobs: int) -> list[dict[str, object]]:
    files_dir = root / "files"
    files_dir.mkdir(parents=True, exist_ok=True)
    dists = closure(names)
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        results = list(
            pool.map(repack_one, [d.metadata["Name"] for d in dists], [str(files_dir)] * len(dists))
        )
    simple = root / "simple"
    links = []
    for project, file_name, _size, sha256 in results:
        page = simple / normalized(project)
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(
            f'<!DOCTYPE html><html><body><a href="/files/{html.escape(file_name)}#sha256={sha256}">'
            f"{html.escape(file_name)}</a></body></html>\n"
        )
        links.append(f'<a href="{normalized(project)}/">{normalized(project)}</a>')
    (simple / "index.html").write_text(
        "<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>\n"
    )
    table = [{"project": p, "file": f, "size": s, "sha256": h} for p, f, s, h in results]
    (root / "wheels.json").write_text(json.dumps(table, indent=1) + "\n")
    print(
        f"repacked {len(table)} distributions, {sum(s for _, _, s, _ in results) / 1e6:.1f} MB, "
        f"in {time.monotonic() - started:.1f} s"
    )
    return table


class CountingHandler(http.server.SimpleHTTPRequestHandler):
    log_path: Path
    lock = threading.Lock()

    def send_header(self, keyword: str, value: str) -> None:
        if keyword.lower() != "last-modified":  # as download.pytorch.org: nothing to cache by
            super().send_header(keyword, value)

    def translate_path(self, path: str) -> str:
        # /whl/<variant>/... is the PyTorch index's layout ([pytorch] url): the same pages
        return super().translate_path(re.sub(r"^/whl/[^/]+/", "/simple/", path))

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        sent = 0
        while chunk := source.read(1 << 20):
            outputfile.write(chunk)
            sent += len(chunk)
        self._sent = sent

    def log_request(self, code="-", size="-") -> None:  # type: ignore[no-untyped-def]
        pass

    def do_GET(self) -> None:
        self._sent = 0
        try:
            super().do_GET()
        finally:
            line = json.dumps({"t": round(time.time(), 3), "path": self.path, "bytes": self._sent})
            with self.lock, self.log_path.open("a") as log:
                log.write(line + "\n")


def serve(root: Path, port: int, log_path: Path) -> None:
    log_path.touch()
    handler = type("Handler", (CountingHandler,), {"log_path": log_path})

    def factory(*args, **kwargs):  # type: ignore[no-untyped-def]
        return handler(*args, directory=str(root), **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), factory)
    print(f"serving {root} on http://127.0.0.1:{port}/simple/, log {log_path}", flush=True)
    server.serve_forever()


def count(log_path: Path, since: int) -> dict[str, object]:
    lines = log_path.read_text().splitlines()[since:]
    per_file: dict[str, dict[str, int]] = {}
    pages = 0
    missing = []
    for line in lines:
        record = json.loads(line)
        path = record["path"]
        if path.startswith("/files/"):
            name = urllib.parse.unquote(path.rsplit("/", 1)[1])
            entry = per_file.setdefault(name, {"requests": 0, "bytes": 0})
            entry["requests"] += 1
            entry["bytes"] += record["bytes"]
        else:
            pages += 1
            if record["bytes"] == 0:
                missing.append(path)
    return {
        "requests": len(lines),
        "page_requests": pages,
        "pages_not_found_or_empty": missing,
        "files": per_file,
        "file_bytes": sum(entry["bytes"] for entry in per_file.values()),
        "files_requested_more_than_once": sorted(
            name for name, e in per_file.items() if e["requests"] > 1
        ),
        "log_lines": len(lines) + since,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    repack_parser = commands.add_parser("repack")
    repack_parser.add_argument("root", type=Path)
    repack_parser.add_argument("names", nargs="+")
    repack_parser.add_argument("--jobs", type=int, default=8)
    serve_parser = commands.add_parser("serve")
    serve_parser.add_argument("root", type=Path)
    serve_parser.add_argument("--port", type=int, default=8081)
    serve_parser.add_argument("--log", type=Path, required=True)
    count_parser = commands.add_parser("count")
    count_parser.add_argument("log", type=Path)
    count_parser.add_argument("--since", type=int, default=0)
    args = parser.parse_args()
    if args.command == "repack":
        repack(args.root, args.names, args.jobs)
    elif args.command == "serve":
        serve(args.root, args.port, args.log)
    else:
        print(json.dumps(count(args.log, args.since), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
