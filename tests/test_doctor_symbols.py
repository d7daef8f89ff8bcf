"""doctor predicts 'ImportError: ... undefined symbol: _ZNK3c106IValue9toGenericEv' (issue 20).

Fast: two builds of a stand-in ``libc10.so`` (gcc), the new one without
``c10::IValue::toGeneric() const``, and a real Python extension module that uses it, built
against the old one. Installed beside the new one, Python's import fails; the scan must name
the same symbol (demangled by c++filt where present), and doctor must say which torch the
extension was built for. Slow: the same with real torch releases from PyPI's files here (an
extension built against torch 2.14.1's headers and libraries, installed beside torch 2.13.0,
calling an operator 2.13.0 does not have).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from _factories import make_index

from cuda_resolve.detect.extensions import find_extensions, is_torch_symbol
from cuda_resolve.doctor.checks import check_extension_symbols
from cuda_resolve.elf import ElfImage, open_elf
from cuda_resolve.environment import Environment, ExtensionBinary, Machine, PythonInfo, TorchInfo

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None, reason="needs gcc to build shared objects"
)

# the guides print it as ...3c104IValue..., which is no valid name
TO_GENERIC = "_ZNK3c106IValue9toGenericEv"
CHECK_FAIL = "_ZN3c106detail14torchCheckFailEPKcS2_jS2_"
MODULE = "fakeext"

OLD_C10 = f"""
void {TO_GENERIC}(void) {{}}
void {CHECK_FAIL}(void) {{}}
int c10_weak_only(void) {{ return 0; }}
"""
NEW_C10 = f"void {CHECK_FAIL}(void) {{}}\n"
EXTENSION = f"""
#include <Python.h>
extern void {TO_GENERIC}(void);
extern void {CHECK_FAIL}(void);
extern void _ZN3c1015never_declared_anywhereEv(void) __attribute__((weak));
void uses_torch(void) {{
    {TO_GENERIC}(); {CHECK_FAIL}();
    if (_ZN3c1015never_declared_anywhereEv) _ZN3c1015never_declared_anywhereEv();
}}
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit__C(void) {{ return PyModule_Create(&module); }}
"""


def _gcc(*args: str | Path) -> None:
    subprocess.run(["gcc", *map(str, args)], check=True, capture_output=True, timeout=120)


def _c10(directory: Path, source: str, *hash_style: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "c10.c").write_text(source, encoding="utf-8")
    _gcc(
        "-shared",
        "-fPIC",
        "-Wl,-soname,libc10.so",
        *hash_style,
        "-o",
        directory / "libc10.so",
        directory / "c10.c",
    )
    (directory / "c10.c").unlink()
    return directory / "libc10.so"


@dataclass
class Sites:
    root: Path
    old_torch: Path  # a site-packages folder whose torch/lib has the old libc10
    new_torch: Path  # ... the new one
    extension_site: Path  # the extension and its dist-info, no torch

    @property
    def extension(self) -> Path:
        return next((self.extension_site / MODULE).glob("_C*.so"))


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Sites:
    root = tmp_path_factory.mktemp("symbols")
    old_torch, new_torch = root / "old" / "site-packages", root / "new" / "site-packages"
    old_lib = _c10(old_torch / "torch" / "lib", OLD_C10)
    _c10(new_torch / "torch" / "lib", NEW_C10)
    site = root / "ext" / "site-packages"
    (site / MODULE).mkdir(parents=True)
    (site / MODULE / "__init__.py").write_text("", encoding="utf-8")
    (site / f"{MODULE}-1.0+pt2141cpu.dist-info").mkdir()
    (site / MODULE / "ext.c").write_text(EXTENSION, encoding="utf-8")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    _gcc(
        "-shared",
        "-fPIC",
        f"-I{sysconfig.get_paths()['include']}",
        "-o",
        site / MODULE / f"_C{suffix}",
        site / MODULE / "ext.c",
        f"-L{old_lib.parent}",
        "-lc10",
    )
    (site / MODULE / "ext.c").unlink()
    return Sites(root=root, old_torch=old_torch, new_torch=new_torch, extension_site=site)


def _scan(sites: Sites, torch_site: Path) -> ExtensionBinary:
    (found,) = find_extensions(
        [str(sites.extension_site)],
        torch_sites=[str(torch_site)],
        environ=dict(os.environ),
        ld_cache=sites.root / "none",
        default_dirs=(),
    )
    return found


def _import_error(sites: Sites, torch_site: Path) -> str:
    """What Python says importing the extension after 'torch' (its libc10) is loaded."""
    code = (
        "import ctypes, sys\n"
        f"ctypes.CDLL({str(torch_site / 'torch' / 'lib' / 'libc10.so')!r}, "
        "mode=ctypes.RTLD_GLOBAL)\n"
        f"sys.path.insert(0, {str(sites.extension_site)!r})\n"
        "try:\n"
        f"    import {MODULE}._C\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    print('imported')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_python_and_the_scan_name_the_same_missing_symbol(sites: Sites) -> None:
    message = _import_error(sites, sites.new_torch)
    assert f"undefined symbol: {TO_GENERIC}" in message
    ext = _scan(sites, sites.new_torch)
    assert ext.missing_symbols == (
        TO_GENERIC,
    )  # the weak reference is no failure; the other is defined
    assert re.search(r"undefined symbol: (\S+)", message).group(1) == ext.missing_symbols[0]  # type: ignore[union-attr]
    if shutil.which("c++filt"):
        assert ext.demangled == ("c10::IValue::toGeneric() const",)
    assert ext.distribution == f"{MODULE} 1.0+pt2141cpu"


def test_against_the_torch_it_was_built_for_nothing_is_missing(sites: Sites) -> None:
    assert _import_error(sites, sites.old_torch) == "imported"
    assert _scan(sites, sites.old_torch).missing_symbols == ()


def _env(ext: ExtensionBinary, torch: str) -> Environment:
    return Environment(
        machine=Machine(),
        python=PythonInfo(version="3.11"),
        extensions=(ext,),
        torch=TorchInfo(version=torch, cuda=None, location="/t/torch"),
    )


def test_doctor_error_names_symbol_both_torches_and_the_fix(sites: Sites) -> None:
    ext = _scan(sites, sites.new_torch)
    (finding,) = check_extension_symbols(_env(ext, "2.15.0+cpu"), make_index())
    assert finding.status == "error" and finding.check == "extension-symbols"
    assert f"undefined symbol: {TO_GENERIC}'" in finding.found
    assert "installed torch 2.15.0+cpu" in finding.found
    assert "built for torch 2.14.1 (its version label pt2141cpu)" in finding.found
    assert finding.fix is not None
    assert "`cuda-pip install --repair`" in finding.fix and "torch==2.14.1" in finding.fix


def test_another_torch_whose_symbols_resolve_is_a_warning(sites: Sites) -> None:
    ext = _scan(sites, sites.old_torch)
    (warning,) = check_extension_symbols(_env(ext, "2.15.0+cpu"), make_index())
    assert warning.status == "warn" and "built for torch 2.14.1" in warning.found
    # the one command that rebuilds every such extension (issue 27), as for the error
    assert warning.fix is not None and "(`cuda-pip install --repair`)" in warning.fix
    assert check_extension_symbols(_env(ext, "2.14.1+cpu"), make_index()) == []
    assert check_extension_symbols(_env(ext, "2.14.1"), make_index()) == []
    assert (
        check_extension_symbols(_env(ext, "2.14.1+cu130"), make_index())[0].status == "warn"
    )  # another variant
    pyg = dataclasses.replace(ext, distribution="torch_scatter 2.1.2+pt21cu121")
    assert check_extension_symbols(_env(pyg, "2.1.2+cu121"), make_index()) == []
    assert (
        check_extension_symbols(
            _env(dataclasses.replace(ext, distribution=None), "2.15.0"), make_index()
        )
        == []
    )


def test_gnu_hash_lookup_answers_as_a_full_table_read(sites: Sites, tmp_path: Path) -> None:
    """The loader's GNU hash lookup and (for a library without one) reading the whole table
    agree."""
    sysv = _c10(tmp_path / "sysv", OLD_C10, "-Wl,--hash-style=sysv")
    gnu = sites.old_torch / "torch" / "lib" / "libc10.so"
    names = [TO_GENERIC, CHECK_FAIL, "c10_weak_only", "nope", "_ZN3c10nope", "", "puts"]
    answers = []
    for library in (gnu, sysv):
        with open_elf(library) as image:
            assert image is not None
            kinds = {section.type for section in image.sections}
            answers.append((image.defined_symbols(names), 0x6FFFFFF6 in kinds))
    assert answers[0][0] == answers[1][0] == {TO_GENERIC, CHECK_FAIL, "c10_weak_only"}
    assert answers[0][1] and not answers[1][1]
    # on every symbol of a real library with thousands: libpython, or libstdc++
    libraries = [Path(p) for p in (sysconfig.get_config_var("LIBDIR") or "",) if p]
    candidates = [p for d in libraries for p in d.glob("libpython3*.so*")] + [
        Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    ]
    real = next((p for p in candidates if p.is_file()), None)
    if real is None:
        pytest.skip("no large shared library to compare on")
    with open_elf(real) as image:
        assert image is not None
        every = _all_defined(image)
        assert len(every) > 1000
        sample = sorted(every)[::7] + [name + "_not" for name in sorted(every)[:200]]
        assert image.defined_symbols(sample) == {name for name in sample if name in every}


def _all_defined(image: ElfImage) -> set[str]:
    import struct

    dynsym = next(s for s in image.sections if s.type == 11)
    strtab = image.sections[dynsym.link]
    names = set()
    for name_at, info, _other, shndx, _value, _size in struct.iter_unpack(
        "<IBBHQQ", image.data[dynsym.offset : dynsym.offset + dynsym.size]
    ):
        if shndx and name_at and info >> 4 in (1, 2):
            end = image.data.find(b"\0", strtab.offset + name_at)
            names.add(image.data[strtab.offset + name_at : end].decode())
    return names


def test_torch_symbol_names() -> None:
    assert is_torch_symbol(TO_GENERIC)
    assert is_torch_symbol("_ZN2at4_ops12linalg_polar4callERKNS_6TensorE")
    assert is_torch_symbol("_ZN5torch8autograd12VariableInfoC1Ev")
    assert is_torch_symbol("_ZTVN3c1011VariableHooksE")  # a vtable
    assert is_torch_symbol("THPVariable_Wrap")
    assert not is_torch_symbol("_ZNSt6vectorIiSaIiEE9push_backERKi")
    assert not is_torch_symbol("_ZN8pybind116detail11get_internalsEv")
    assert not is_torch_symbol("cudaLaunchKernel")


def test_corrupt_symbol_table_is_a_note(sites: Sites, tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    shutil.copytree(sites.extension_site, site)
    library = next((site / MODULE).glob("_C*.so"))
    with open_elf(library) as image:
        assert image is not None
        dynsym = next(s for s in image.sections if s.type == 11)
        strtab = image.sections[dynsym.link]
        offset, strtab_size = dynsym.offset, strtab.size
    data = bytearray(library.read_bytes())
    for index in range(1, 4):  # names far outside the string table
        data[offset + 24 * index : offset + 24 * index + 4] = (strtab_size + 10_000).to_bytes(
            4, "little"
        )
    library.write_bytes(bytes(data))
    (ext,) = find_extensions(
        [str(site)],
        torch_sites=[str(sites.new_torch)],
        environ={},
        ld_cache=tmp_path / "n",
        default_dirs=(),
    )
    assert ext.missing_symbols == ()
    assert any(str(library) in note and "symbol table" in note for note in ext.notes)


# -- real torch releases (slow) ----------------------------------------------------------------

TORCH_2141 = Path("/opt/pypi-more/files/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl")
POLAR = "_ZN2at4_ops12linalg_polar4callERKNS_6TensorE"  # at::linalg_polar: new in torch 2.14
REAL_EXTENSION = """
#include <Python.h>
#include <ATen/ATen.h>
std::tuple<at::Tensor, at::Tensor> polar(const at::Tensor& x) { return at::linalg_polar(x); }
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""


def _torch_wheel(version: str) -> Path | None:
    """A torch wheel for this Python from the files this machine has (PIP_FIND_LINKS, the pip
    cap)."""
    if version == "2.14.1":
        return TORCH_2141 if TORCH_2141.is_file() else None
    folder = Path(os.environ.get("PIP_FIND_LINKS", "/nonexistent"))
    return (
        next(iter(sorted(folder.glob(f"torch-{version}*-cp311-*.whl"))), None)
        if folder.is_dir()
        else None
    )


@pytest.mark.slow
@pytest.mark.network  # torch 2.13.0's dependencies come from PyPI
def test_real_torch_mismatch_matches_the_import_error(tmp_path: Path) -> None:
    """An extension built against torch 2.14.1 that calls at::linalg_polar, installed beside
    torch 2.13.0 (CPU), fails to import with the symbol doctor names."""
    from _torch_env import _venv

    new, old = _torch_wheel("2.14.1"), _torch_wheel("2.13.0")
    if sys.version_info[:2] != (3, 11) or new is None or old is None or shutil.which("g++") is None:
        pytest.skip("needs Python 3.11, g++ and the torch 2.13.0 and 2.14.1 cp311 wheels on disk")
    headers = tmp_path / "torch-2.14.1"
    with zipfile.ZipFile(new) as wheel:
        wheel.extractall(
            headers,
            [
                n
                for n in wheel.namelist()
                if n.startswith(
                    (
                        "torch/include/",
                        "torch/lib/libc10.so",
                        "torch/lib/libtorch_cpu.so",
                        "torch/lib/libtorch.so",
                    )
                )
            ],
        )
    python = _venv(tmp_path / "venv")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(old)], check=True, timeout=900
    )
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    package = purelib / "polarext"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (purelib / "polarext-1.0+pt2141cpu.dist-info").mkdir()
    (tmp_path / "polar.cpp").write_text(REAL_EXTENSION, encoding="utf-8")
    include = headers / "torch" / "include"
    subprocess.run(
        [
            "g++",
            "-shared",
            "-fPIC",
            "-O0",
            "-std=c++20",
            "-D_GLIBCXX_USE_CXX11_ABI=1",
            f"-I{include}",
            f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}",
            f"-I{sysconfig.get_paths()['include']}",
            "-o",
            str(package / f"_C{sysconfig.get_config_var('EXT_SUFFIX')}"),
            str(tmp_path / "polar.cpp"),
            f"-L{headers / 'torch' / 'lib'}",
            "-lc10",
            "-ltorch_cpu",
        ],
        check=True,
        capture_output=True,
        timeout=900,
    )
    done = subprocess.run(
        [str(python), "-c", "import torch, polarext._C"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert f"undefined symbol: {POLAR}" in done.stderr

    environ = dict(
        os.environ,
        CUDA_RESOLVE_DRIVER="",
        CUDA_RESOLVE_CUDA_ARCH="",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        CUDA_RESOLVE_CONFIG=str(tmp_path / "none.toml"),
    )
    report = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "doctor", "--python", str(python), "--json"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        check=False,
    )
    import json

    result = json.loads(report.stdout)
    (extension,) = [e for e in result["environment"]["extension"] if "polarext" in e["path"]]
    assert extension["missing_symbols"] == [POLAR]
    (error,) = [f for f in result["findings"] if f["check"] == "extension-symbols"]
    assert error["status"] == "error" and f"undefined symbol: {POLAR}'" in error["found"]
    assert "torch 2.13.0" in error["found"] and "built for torch 2.14.1" in error["found"]
