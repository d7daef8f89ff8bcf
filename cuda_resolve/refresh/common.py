"""What the torch and kaolin refreshes share: change records, wheel-tag helpers, progress, the
check that an answer has the shape it should, and writing an overlay that reads back."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from .._frozen import frozen
from ..errors import IndexDataError
from ..net.errors import FetchError
from ..paths import write_atomic

__all__ = [
    "UNREACHABLE_KINDS",
    "Change",
    "Progress",
    "Unreachable",
    "python_versions",
    "variant_order",
    "wheel_platform",
    "write_overlay_file",
    "wrong_shape",
]

#: ``progress(step, done, total)``: ``step`` names what is read now (``"torch 2.5.1"``), ``done``
#: counts it (1-based) among ``total``. The CLI renders it; nothing in the library prints.
Progress = Callable[[str, int, int], None]

#: Failures that mean "the host cannot be reached" (the other pages there are skipped).
UNREACHABLE_KINDS = frozenset({"dns", "refused", "timeout", "proxy", "tls", "connection"})


@frozen
class Change:
    version: str
    key: str  # a field name, or "release" for a release the index does not have
    old: str | None
    new: str | None
    package: str = "torch"

    def describe(self) -> str:
        if self.key == "release":
            return f"{self.package} {self.version}: new release ({self.new})"
        return (
            f"{self.package} {self.version}: {self.key}: {_shown(self.old)} -> {_shown(self.new)}"
        )


def _shown(value: str | None) -> str:
    return "(none)" if value is None else value


@frozen
class Unreachable:
    url: str
    error: str


def wrong_shape(url: str, what: str, found: str) -> FetchError:
    """An answer that is not what that URL serves (a login page, an error page, other JSON):
    never index data."""
    return FetchError(
        f"{url} did not answer with {what}: {found}",
        kind="content",
        url=url,
        hint="a captive portal, proxy or misconfigured mirror may be answering in its place; open "
        "the URL in a browser, log in if asked, or check the mirror; nothing was written",
    )


def python_versions(filenames: Iterable[str]) -> tuple[str, ...]:
    """``3.10``, ``3.13t`` for each CPython wheel tag (``cp313-cp313t``), sorted."""
    found: set[tuple[int, int, str]] = set()
    for name in filenames:
        try:
            _, _, _, tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        for tag in tags:
            match = re.fullmatch(r"cp(\d)(\d+)", tag.interpreter)
            if not match:
                continue
            free = "t" if tag.abi.endswith("t") and tag.abi.startswith("cp") else ""
            found.add((int(match.group(1)), int(match.group(2)), free))
    return tuple(f"{major}.{minor}{free}" for major, minor, free in sorted(found))


def wheel_platform(filename: str) -> str | None:
    """``linux_x86_64`` / ``linux_aarch64`` for a Linux wheel of that machine, else None."""
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    platforms = {tag.platform for tag in tags}
    if any(p.endswith("_x86_64") and ("linux" in p) for p in platforms):
        return "linux_x86_64"
    if any(p.endswith("_aarch64") and ("linux" in p) for p in platforms):
        return "linux_aarch64"
    return None


def variant_order(name: str) -> tuple[int, int]:
    return (0, 0) if name == "cpu" else (1, int(name[2:]))


def write_overlay_file(directory: Path, relative: Path, document: str) -> Path:
    """Write ``directory/relative`` atomically, after checking that the file reads back on top
    of the shipped index (a refresh never leaves an overlay that breaks the index)."""
    from ..index.load import validate_directory

    target = directory / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".refresh-") as scratch:
        probe = Path(scratch) / relative
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_text(document, encoding="utf-8")
        problems = validate_directory(Path(scratch))
        if problems:
            raise IndexDataError(
                "index refresh produced an overlay that does not validate: " + "; ".join(problems),
                hint="this is a bug in cuda-resolve; the previous overlay was left as it was",
            )
        write_atomic(target, document)
    return target
