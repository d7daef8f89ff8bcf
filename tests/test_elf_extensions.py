"""The ELF reader and the extension scan, on real shared objects compiled here with gcc.

A fake ``libcudart.so.11.0`` (its soname set with -Wl,-soname) and a fake ``libc10.so`` stand in
for CUDA and torch; an "extension" links both and sits in a fake site-packages. The scan must
report libcudart.so.11.0 missing until LD_LIBRARY_PATH (or RPATH/RUNPATH, or the ld.so cache)
names its directory, and never report what torch itself loads (torch/lib, nvidia/*/lib).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from cuda_resolve.detect.extensions import find_extensions, ldconfig_sonames
from cuda_resolve.elf import parse_dynamic, read_dynamic
from cuda_resolve.environment import ExtensionBinary

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build ELF files")

EXT = "pointnet2_ops/_ext.cpython-311-x86_64-linux-gnu.so"
NO_DEFAULT_DIRS: tuple[str, ...] = ()


def _gcc(*args: str | Path) -> None:
    subprocess.run(["gcc", *map(str, args)], check=True, capture_output=True, timeout=60)


def _library(directory: Path, soname: str, *, link_name: str | None = None) -> Path:
    """A shared library whose DT_SONAME is ``soname``; ``link_name`` adds lib<x>.so for -l<x>."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{soname}.c"
    symbol = "".join(ch if ch.isalnum() else "_" for ch in soname)
    source.write_text(f"int {symbol}(void) {{ return 1; }}\n", encoding="utf-8")
    target = directory / soname
    _gcc("-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", target, source)
    source.unlink()
    if link_name:
        (directory / f"lib{link_name}.so").symlink_to(soname)
    return target


def _extension(path: Path, *link: str | Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    source = path.parent / "ext.c"
    source.write_text("int PyInit__ext(void) { return 0; }\n", encoding="utf-8")
    _gcc("-shared", "-fPIC", "-o", path, source, "-Wl,--no-as-needed", *link)
    source.unlink()
    return path


@dataclass
class Tree:
    root: Path
    site: Path
    cuda_lib: Path  # holds libcudart.so.11.0
    extension: Path


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    root = tmp_path_factory.mktemp("elf")
    cuda_lib = root / "cuda-11.8" / "lib64"
    _library(cuda_lib, "libcudart.so.11.0", link_name="fakecudart")
    site = root / "site-packages"
    torch_lib = site / "torch" / "lib"
    _library(torch_lib, "libc10.so")
    # torch itself links CUDA: its tree is never scanned as an extension
    _extension(torch_lib / "libtorch_cuda.so", f"-L{cuda_lib}", "-lfakecudart")
    extension = _extension(site / EXT, f"-L{cuda_lib}", "-lfakecudart", f"-L{torch_lib}", "-lc10")
    # not an extension of interest: links only libc
    _extension(site / "plain" / "_speedups.so")
    # not ELF at all, and an ELF file that is cut short
    (site / "fake").mkdir()
    (site / "fake" / "notelf.so").write_bytes(b"#!/bin/sh\necho not a library\n")
    (site / "fake" / "truncated.so").write_bytes(extension.read_bytes()[:100])
    return Tree(root=root, site=site, cuda_lib=cuda_lib, extension=extension)


def _scan(
    tree: Tree, ld_library_path: str | None = None, *, site: Path | None = None
) -> tuple[ExtensionBinary, ...]:
    environ = {} if ld_library_path is None else {"LD_LIBRARY_PATH": ld_library_path}
    return find_extensions(
        [str(site or tree.site)],
        environ=environ,
        ld_cache=tree.root / "no-ld.so.cache",
        default_dirs=NO_DEFAULT_DIRS,
    )


# -- the ELF reader ------------------------------------------------------------------------


def test_read_dynamic_lists_needed_sonames(tree: Tree) -> None:
    info = read_dynamic(tree.extension)
    assert info is not None
    assert "libcudart.so.11.0" in info.needed  # the soname, not the -l name or file name
    assert "libc10.so" in info.needed
    assert "libfakecudart.so" not in info.needed
    assert info.needed.index("libcudart.so.11.0") < info.needed.index("libc10.so")  # link order
    assert info.rpath == info.runpath == ()


def test_read_dynamic_rpath_and_runpath(tmp_path: Path, tree: Tree) -> None:
    runpath = _extension(
        tmp_path / "a.so",
        f"-L{tree.cuda_lib}",
        "-lfakecudart",
        "-Wl,--enable-new-dtags",
        f"-Wl,-rpath,{tree.cuda_lib}:/opt/x",
    )
    rpath = _extension(
        tmp_path / "b.so",
        f"-L{tree.cuda_lib}",
        "-lfakecudart",
        "-Wl,--disable-new-dtags",
        f"-Wl,-rpath,{tree.cuda_lib}",
    )
    first, second = read_dynamic(runpath), read_dynamic(rpath)
    assert first is not None and second is not None
    assert first.runpath == (str(tree.cuda_lib), "/opt/x")
    assert first.rpath == ()
    assert second.rpath == (str(tree.cuda_lib),)
    assert second.runpath == ()


def test_read_dynamic_of_a_library_without_dependencies(tree: Tree) -> None:
    info = read_dynamic(tree.cuda_lib / "libcudart.so.11.0")
    assert info is not None
    assert all(not name.startswith("libcudart") for name in info.needed)


@pytest.mark.parametrize(
    "content", [b"", b"\x7fEL", b"\x7fELF", b"#!/bin/sh\n", b"\x7fELF\x01\x01\x01" + b"\0" * 64]
)
def test_read_dynamic_rejects_what_is_not_a_64_bit_elf(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.so"
    path.write_bytes(content)
    assert read_dynamic(path) is None


def test_read_dynamic_of_missing_file_and_directory(tmp_path: Path) -> None:
    assert read_dynamic(tmp_path / "absent.so") is None
    assert read_dynamic(tmp_path) is None


def test_read_dynamic_respects_the_size_limit(tree: Tree) -> None:
    assert read_dynamic(tree.extension, limit=64) is None


@pytest.mark.parametrize("cut", [16, 64, 200, 1000, 3000])
def test_truncated_elf_is_none_not_a_crash(tree: Tree, cut: int) -> None:
    assert parse_dynamic(tree.extension.read_bytes()[:cut]) is None


def _dynamic_entries(data: bytes) -> list[tuple[int, int, int]]:
    """(file position, tag, value) of each dynamic entry of a little-endian ELF64."""
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for number in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + number * phentsize
        )
        if p_type == 2:
            entries = []
            for position in range(p_offset, p_offset + p_filesz, 16):
                tag, value = struct.unpack_from("<qQ", data, position)
                entries.append((position, tag, value))
                if tag == 0:
                    break
            return entries
    raise AssertionError("no PT_DYNAMIC")


def test_string_offset_past_the_end_is_none_not_a_crash(tree: Tree) -> None:
    """A DT_NEEDED pointing outside the file once raised ValueError out of detection."""
    data = bytearray(tree.extension.read_bytes())
    position = next(pos for pos, tag, _ in _dynamic_entries(bytes(data)) if tag == 1)
    struct.pack_into("<Q", data, position + 8, len(data) * 4)
    assert parse_dynamic(bytes(data)) is None


def test_string_table_outside_every_segment_is_none(tree: Tree) -> None:
    data = bytearray(tree.extension.read_bytes())
    position = next(pos for pos, tag, _ in _dynamic_entries(bytes(data)) if tag == 5)
    struct.pack_into("<Q", data, position + 8, 2**40)
    assert parse_dynamic(bytes(data)) is None


# -- the extension scan --------------------------------------------------------------------


def test_missing_cudart_is_reported(tree: Tree) -> None:
    (found,) = _scan(tree)
    assert found.path == str(tree.extension)
    assert set(found.needed) == {"libcudart.so.11.0", "libc10.so"}
    assert found.missing == ("libcudart.so.11.0",)  # libc10 comes with torch/lib


def test_ld_library_path_makes_it_loadable(tree: Tree) -> None:
    (found,) = _scan(tree, f"/nonexistent:{tree.cuda_lib}")
    assert found.missing == ()
    (found,) = _scan(tree, f"{tree.root}")  # the parent directory is not searched
    assert found.missing == ("libcudart.so.11.0",)
    (found,) = _scan(tree, "")
    assert found.missing == ("libcudart.so.11.0",)


def test_default_directories_count(tree: Tree) -> None:
    found = find_extensions(
        [str(tree.site)],
        environ={},
        ld_cache=tree.root / "none",
        default_dirs=(str(tree.cuda_lib),),
    )
    assert [f.missing for f in found] == [()]


def test_the_ld_so_cache_counts(tree: Tree, tmp_path: Path) -> None:
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(
        b"glibc-ld.so.cache1.1\0\0libfoo.so.1\0/x/libfoo.so.1\0libcudart.so.11.0\0/usr/lib/libcudart.so.11.0\0"
    )
    assert {"libfoo.so.1", "libcudart.so.11.0"} <= ldconfig_sonames(cache)
    (found,) = find_extensions(
        [str(tree.site)], environ={}, ld_cache=cache, default_dirs=NO_DEFAULT_DIRS
    )
    assert found.missing == ()


def test_ldconfig_sonames_of_a_missing_cache(tmp_path: Path) -> None:
    assert ldconfig_sonames(tmp_path / "absent") == frozenset()


def test_real_ld_so_cache_is_readable() -> None:
    """On a Linux machine with a cache, libc is in it; elsewhere the reader returns nothing."""
    cache = Path("/etc/ld.so.cache")
    names = ldconfig_sonames(cache)
    if cache.exists():
        assert any(name.startswith("libc.so") for name in names)
    else:
        assert names == frozenset()


@pytest.mark.parametrize("origin", ["$ORIGIN", "${ORIGIN}"])
def test_runpath_relative_to_origin(tmp_path: Path, tree: Tree, origin: str) -> None:
    site = tmp_path / "site-packages"
    package = site / "kaolin"
    libs = package / "lib"
    _library(libs, "libcudart.so.11.0", link_name="fakecudart")
    _extension(package / "_C.so", f"-L{libs}", "-lfakecudart", f"-Wl,-rpath,{origin}/lib")
    (found,) = _scan(tree, site=site)
    assert found.missing == ()
    assert found.needed == ("libcudart.so.11.0",)


def test_nvidia_wheels_libraries_count_as_loaded(tmp_path: Path, tree: Tree) -> None:
    """torch preloads its nvidia-* wheels' libraries, so an extension may rely on them."""
    site = tmp_path / "site-packages"
    _library(site / "nvidia" / "cuda_runtime" / "lib", "libcudart.so.11.0")
    (site / "kaolin").mkdir(parents=True)
    shutil.copy(tree.extension, site / "kaolin" / "_C.so")
    (found,) = _scan(tree, site=site)
    assert found.needed  # libc10.so is absent here (no torch/lib) ...
    assert found.missing == ("libc10.so",)  # ... but libcudart comes with the wheel


def test_torch_nvidia_and_metadata_trees_are_not_scanned(tree: Tree) -> None:
    paths = [found.path for found in _scan(tree)]
    assert not any("/torch/" in path for path in paths)
    assert paths == [str(tree.extension)]


def test_scan_of_absent_or_empty_site_packages(tmp_path: Path) -> None:
    assert find_extensions([str(tmp_path / "absent"), ""], environ={}) == ()
    assert find_extensions([str(tmp_path)], environ={}) == ()


def test_versioned_file_names_are_scanned(tmp_path: Path, tree: Tree) -> None:
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    shutil.copy(tree.extension, site / "pkg" / "libpkg_cuda.so.2")
    (found,) = _scan(tree, site=site)
    assert found.path.endswith("libpkg_cuda.so.2")


def test_a_huge_extension_is_still_read(tmp_path: Path, tree: Tree) -> None:
    """flash-attn-sized binaries (hundreds of MB) were skipped by a 256 MB read limit."""
    big = tmp_path / "flash_attn_2_cuda.so"
    shutil.copy(tree.extension, big)
    with big.open("r+b") as handle:
        handle.truncate(600 * 1024 * 1024)  # sparse: costs no disk, the headers stay valid
    info = read_dynamic(big)
    assert info is not None
    assert "libcudart.so.11.0" in info.needed
    assert read_dynamic(big, limit=1024) is None


def test_a_torch_outside_the_scanned_folders_counts_as_loaded(tmp_path: Path, tree: Tree) -> None:
    """A venv reaching a shared environment's torch through a .pth file (or --system-site-packages):
    `import torch` loads that torch's libraries, so an extension in the venv finds libc10.so."""
    venv_site = tmp_path / "venv-site-packages"
    (venv_site / "pointnet2_ops").mkdir(parents=True)
    shutil.copy(tree.extension, venv_site / EXT)
    environ = {"LD_LIBRARY_PATH": str(tree.cuda_lib)}
    common = {
        "environ": environ,
        "ld_cache": tree.root / "no-ld.so.cache",
        "default_dirs": NO_DEFAULT_DIRS,
    }
    (alone,) = find_extensions([str(venv_site)], **common)  # type: ignore[arg-type]
    assert alone.missing == ("libc10.so",)
    (with_torch,) = find_extensions([str(venv_site)], torch_sites=[str(tree.site)], **common)  # type: ignore[arg-type]
    assert with_torch.missing == ()


def test_the_scan_cache_tells_apart_where_torch_lives(tmp_path: Path, tree: Tree) -> None:
    from cuda_resolve.detect._cache import ProbeCache
    from cuda_resolve.detect.extensions import find_extensions_cached

    venv_site = tmp_path / "venv-site-packages"
    (venv_site / "pointnet2_ops").mkdir(parents=True)
    shutil.copy(tree.extension, venv_site / EXT)
    cache = ProbeCache(tmp_path / "cache")
    environ = {"LD_LIBRARY_PATH": str(tree.cuda_lib)}
    first = find_extensions_cached([str(venv_site)], environ=environ, cache=cache)
    second = find_extensions_cached(
        [str(venv_site)], environ=environ, cache=cache, torch_sites=[str(tree.site)]
    )
    assert "libc10.so" in first[0].missing
    assert "libc10.so" not in second[0].missing


def test_detection_passes_the_targets_torch_to_the_scan(tmp_path: Path, tree: Tree) -> None:
    """The H200 case (docs/detection.md): a fresh venv whose .pth reaches the image's torch, an
    extension cuda-pip built into the venv; doctor must not call it unloadable."""
    from cuda_resolve.detect import detect_environment

    shared = tmp_path / "shared-site-packages"
    shutil.copytree(tree.site / "torch" / "lib", shared / "torch" / "lib")
    (shared / "torch" / "version.py").write_text("__version__ = '2.11.0+cu130'\ncuda = '13.0'\n")
    (shared / "torch-2.11.0+cu130.dist-info").mkdir()
    (shared / "torch-2.11.0+cu130.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n"
    )
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True
    )
    python = tmp_path / "venv" / "bin" / "python"
    venv_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (venv_site / "shared.pth").write_text(f"{shared}\n")
    (venv_site / "pointnet2_ops").mkdir()
    shutil.copy(tree.extension, venv_site / EXT)

    env = detect_environment(
        python=str(python),
        root=tmp_path / "no-driver-no-toolkit",  # the machine's own probes are beside the point
        environ={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(tree.cuda_lib)},
        cache_dir=tmp_path / "cache",
    )
    assert env.torch is not None and env.torch.location == str(shared / "torch")
    (extension,) = [e for e in env.extensions if e.path.startswith(str(venv_site))]
    assert extension.missing == ()
