"""The extension scan is remembered until something it depends on changes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect.extensions import find_extensions_cached, scan_key

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None, reason="needs gcc to build a real shared object"
)


def _extension(site: Path, package: str) -> Path:
    """A real .so that needs libcudart.so.11.0 (a stand-in library built beside it)."""
    libdir = site.parent / "fakelibs"
    libdir.mkdir(exist_ok=True)
    stub = libdir / "libcudart.so.11.0"
    if not stub.exists():
        (libdir / "stub.c").write_text("int cudart_stub(void) { return 0; }\n")
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-Wl,-soname,libcudart.so.11.0",
                "-o",
                str(stub),
                str(libdir / "stub.c"),
            ],
            check=True,
        )
        (libdir / "libcudart.so").symlink_to(stub.name)
    (site / package).mkdir(parents=True)
    source = site / package / "ext.c"
    source.write_text("int cudart_stub(void); int ext(void) { return cudart_stub(); }\n")
    target = site / package / "_ext.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(target), str(source), f"-L{libdir}", "-lcudart"],
        check=True,
    )
    return target


def test_second_scan_comes_from_the_cache_until_a_package_changes(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    first = _extension(site, "pkg_a")
    cache = ProbeCache(tmp_path / "cache")
    environ: dict[str, str] = {}

    found = find_extensions_cached([str(site)], environ=environ, cache=cache)
    assert [(e.path, e.missing) for e in found] == [(str(first), ("libcudart.so.11.0",))]

    # Same inputs: the answer comes from the cache, even though the file is now gone.
    first.unlink()
    key = scan_key([str(site)], environ)
    os.utime(site / "pkg_a", ns=(1, 1))  # undo the directory change the unlink made ...
    assert scan_key([str(site)], environ) != key  # ... which the key sees: mtimes are inputs
    os.utime(site / "pkg_a", ns=(2, 2))
    frozen = scan_key([str(site)], environ)
    assert frozen is not None
    remembered = {
        "path": "/remembered.so",
        "needed": ["libc10.so"],
        "missing": [],
        "sass": ["sm_80"],
        "ptx": [],
        "missing_symbols": [],
        "demangled": [],
        "notes": [],
        "distribution": "pkg 1.0",
    }
    cache.put("extensions", frozen, [remembered])
    hit = find_extensions_cached([str(site)], environ=environ, cache=cache)
    assert [(e.path, e.sass, e.distribution) for e in hit] == [
        ("/remembered.so", ("sm_80",), "pkg 1.0")
    ]
    # An entry an older release wrote lacks the kernel and symbol facts: it is scanned again.
    cache.put(
        "extensions", frozen, [{"path": "/remembered.so", "needed": ["libc10.so"], "missing": []}]
    )
    assert find_extensions_cached([str(site)], environ=environ, cache=cache) == ()
    cache.put("extensions", frozen, [remembered])

    # Installing another package changes the key: a fresh scan finds it.
    second = _extension(site, "pkg_b")
    rescanned = find_extensions_cached([str(site)], environ=environ, cache=cache)
    assert [e.path for e in rescanned] == [str(second)]


def test_loader_path_is_part_of_the_key(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    _extension(site, "pkg")
    cache = ProbeCache(tmp_path / "cache")
    missing = find_extensions_cached([str(site)], environ={}, cache=cache)
    assert missing[0].missing == ("libcudart.so.11.0",)
    found = find_extensions_cached(
        [str(site)], environ={"LD_LIBRARY_PATH": str(tmp_path / "fakelibs")}, cache=cache
    )
    assert found[0].missing == ()
