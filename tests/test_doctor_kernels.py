"""doctor predicts 'no kernel image is available for execution on the device' (issue 20).

Real nvcc output: a tiny .cu compiled into shared libraries for ``8.0;8.6`` (SASS only), for
``8.0;8.6+PTX`` and for arch/family-specific targets. The fat binary reader must list what
``cuobjdump --list-elf/--list-ptx`` lists (where the toolkit or the nvidia-cuda-cuobjdump wheel
has it); doctor, run as users run it on a venv holding the ``8.0;8.6`` build, must flag a 9.0 GPU
and pass an 8.0 one, and pass the ``+PTX`` build on 9.0 with a warning. A corrupt fat binary is
a note naming the file, never a traceback; a wheel's gaps are what the install's verify step asks.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from _factories import cc, gpu, make_index

from cuda_resolve.detect.extensions import find_extensions
from cuda_resolve.doctor.checks import check_extension_kernels, check_extension_notes, run_checks
from cuda_resolve.elf import ElfError, open_elf
from cuda_resolve.environment import Environment, ExtensionBinary, Machine, PythonInfo
from cuda_resolve.fatbin import FatbinError, gpu_kernel, kernel_gaps, read_kernel_images

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(
    NVCC is None, reason="needs nvcc (CUDA toolkit) to compile fat binaries"
)

SOURCE = """
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
extern "C" void launch(float* x, int n) { add_one<<<(n + 255) / 256, 256>>>(x, n); }
"""
EXT = "pointnet2_ops/_ext.cpython-311-x86_64-linux-gnu.so"

#: name -> nvcc -gencode options
BUILDS = {
    "sass": ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_86,code=sm_86"],
    "ptx": [
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_86,code=[sm_86,compute_86]",
    ],
    "specific": [
        "-gencode",
        "arch=compute_90a,code=sm_90a",
        "-gencode",
        "arch=compute_100f,code=sm_100f",
        "-gencode",
        "arch=compute_120f,code=compute_120f",
    ],
    "compressed": [
        "-Xfatbin",
        "-compress-all",
        "-gencode",
        "arch=compute_75,code=[sm_75,compute_75]",
    ],
}


@dataclass
class Built:
    root: Path
    libraries: dict[str, Path]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("fatbin")
    source = root / "add_one.cu"
    source.write_text(SOURCE, encoding="utf-8")
    libraries = {}
    for name, gencode in BUILDS.items():
        target = root / f"{name}.so"
        # -cudart shared: as torch's CUDAExtension links it (the scan looks at libraries that need
        # CUDA)
        subprocess.run(
            [
                str(NVCC),
                "-shared",
                "-Xcompiler",
                "-fPIC",
                "-cudart",
                "shared",
                *gencode,
                "-o",
                str(target),
                str(source),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        libraries[name] = target
    return Built(root=root, libraries=libraries)


def _cuobjdump() -> str | None:
    """The toolkit's cuobjdump (beside nvcc, through a wrapper script too) or one on PATH."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    assert NVCC is not None
    text = Path(NVCC).read_bytes()[:4096]
    candidates = [Path(os.path.realpath(NVCC)).parent / "cuobjdump"]
    candidates += [
        Path(m.decode()).parent / "cuobjdump" for m in re.findall(rb"(/[\w./-]+/nvcc)\b", text)
    ]
    return next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def _cuobjdump_lists(program: str, library: Path) -> tuple[list[str], list[str]]:
    """(ELF targets, PTX targets) cuobjdump lists, one per code object: 'sm_80', ..."""
    lists = []
    for option in ("--list-elf", "--list-ptx"):
        done = subprocess.run(
            [program, option, str(library)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        lists.append(
            re.findall(r"\.(sm_\d+[af]?)\.(?:cubin|ptx)\s*$", done.stdout, flags=re.MULTILINE)
        )
    return lists[0], lists[1]


# -- the reader --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "names"),
    [
        ("sass", ("sm_80", "sm_86")),
        ("ptx", ("sm_80", "sm_86", "compute_86")),
        ("specific", ("sm_90a", "sm_100f", "compute_120f")),
        ("compressed", ("sm_75", "compute_75")),
    ],
)
def test_reader_lists_the_targets_nvcc_was_asked_for(
    built: Built, build: str, names: tuple[str, ...]
) -> None:
    images = read_kernel_images(built.libraries[build])
    assert images is not None
    assert images.names() == names


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_reader_agrees_with_cuobjdump(built: Built, build: str) -> None:
    program = _cuobjdump()
    if program is None:
        pytest.skip("no cuobjdump beside nvcc or on PATH (pip: nvidia-cuda-cuobjdump)")
    elf, ptx = _cuobjdump_lists(program, built.libraries[build])
    images = read_kernel_images(built.libraries[build])
    assert images is not None
    assert images.entries == len(elf) + len(ptx) and elf
    # cuobjdump names family-specific SASS without its 'f' (sm_100f's cubin is listed as sm_100)
    assert {c.sm.removesuffix("f") for c in images.sass} == {name.removesuffix("f") for name in elf}
    assert {c.sm for c in images.ptx} == set(ptx)


def test_wrappers_lead_to_the_same_fat_binaries(built: Built, tmp_path: Path) -> None:
    """Without a .nv_fatbin section, .nvFatBinSegment's wrappers point at the fat binaries."""
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        pytest.skip("needs binutils' objcopy")
    renamed = tmp_path / "renamed.so"
    subprocess.run(
        [
            objcopy,
            "--rename-section",
            ".nv_fatbin=.nv_elsewhere",
            str(built.libraries["ptx"]),
            str(renamed),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with open_elf(renamed) as image:
        assert image is not None and image.section(".nv_fatbin") is None
    assert read_kernel_images(renamed) == read_kernel_images(built.libraries["ptx"])


def test_host_only_library_has_no_device_code(tmp_path: Path) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    source = tmp_path / "host.c"
    source.write_text("int f(void) { return 1; }\n", encoding="utf-8")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "host.so"), str(source)],
        check=True,
        timeout=60,
    )
    assert read_kernel_images(tmp_path / "host.so") is None
    assert read_kernel_images(source) is None  # not ELF at all


def _fatbin_offset(library: Path) -> tuple[int, int]:
    with open_elf(library) as image:
        assert image is not None
        section = image.section(".nv_fatbin")
        assert section is not None
        return section.offset, section.size


def test_corrupt_fat_binaries_raise_fatbin_error_never_anything_else(
    built: Built, tmp_path: Path
) -> None:
    original = built.libraries["ptx"].read_bytes()
    offset, size = _fatbin_offset(built.libraries["ptx"])
    broken = tmp_path / "broken.so"
    # an entry whose payload size runs past its fat binary
    data = bytearray(original)
    struct.pack_into("<Q", data, offset + 16 + 8, 1 << 40)
    broken.write_bytes(bytes(data))
    with pytest.raises(FatbinError, match="past the end"):
        read_kernel_images(broken)
    # random damage inside the section, and cuts anywhere in the file: FatbinError, ElfError or
    # an answer, never another exception and never a hang
    rng = random.Random(20)
    for _ in range(150):
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            data[offset + rng.randrange(size)] = rng.randrange(256)
        broken.write_bytes(bytes(data))
        try:
            read_kernel_images(broken)
        except (FatbinError, ElfError):
            pass
    for cut in [
        *sorted(rng.sample(range(64, len(original)), 60)),
        offset + 8,
        offset + 40,
        offset + size - 1,
    ]:
        broken.write_bytes(original[:cut])
        try:
            read_kernel_images(broken)
        except (FatbinError, ElfError):
            pass


# -- coverage: compat's rule ---------------------------------------------------------------------


def test_gpu_kernel_uses_the_resolvers_rule() -> None:
    sass, ptx = (cc("8.0"), cc("8.6")), (cc("8.6"),)
    assert gpu_kernel(sass, (), cc("8.0")) == "sass"
    assert gpu_kernel(sass, (), cc("8.9")) == "sass"  # same major, higher minor
    assert gpu_kernel(sass, (), cc("9.0")) is None
    assert gpu_kernel(sass, ptx, cc("9.0")) == "ptx"
    assert gpu_kernel((), ptx, cc("8.0")) is None  # PTX runs only at or above its own
    assert gpu_kernel((cc("9.0a"),), (), cc("9.0")) == "sass"
    assert gpu_kernel((cc("9.0a"),), (), cc("10.0")) is None  # arch-specific: only its own


# -- doctor over a scanned site-packages -------------------------------------------------------


def _site_with(library: Path, root: Path) -> Path:
    site = root / "site-packages"
    (site / EXT).parent.mkdir(parents=True)
    shutil.copyfile(library, site / EXT)
    (site / "pointnet2_ops-3.0.0+pt2141cu130.sm80.sm86.dist-info").mkdir()
    return site


def _environment(extensions: tuple[ExtensionBinary, ...], *capabilities: str) -> Environment:
    gpus = tuple(
        gpu(c, name="NVIDIA H200" if c == "9.0" else "NVIDIA A100", index=i)
        for i, c in enumerate(capabilities)
    )
    return Environment(
        machine=Machine(), python=PythonInfo(version="3.11"), gpus=gpus, extensions=extensions
    )


def test_scan_records_targets_and_doctor_flags_a_gpu_without_a_kernel(
    built: Built, tmp_path: Path
) -> None:
    site = _site_with(built.libraries["sass"], tmp_path)
    found = find_extensions([str(site)], environ={}, ld_cache=tmp_path / "none", default_dirs=())
    assert len(found) == 1
    ext = found[0]
    assert (ext.sass, ext.ptx, ext.notes) == (("sm_80", "sm_86"), (), ())
    assert ext.distribution == "pointnet2_ops 3.0.0+pt2141cu130.sm80.sm86"

    (error,) = check_extension_kernels(_environment(found, "9.0"), make_index())
    assert error.status == "error"
    assert "pointnet2_ops" in error.found and str(site / EXT) in error.found
    assert "sm_80, sm_86 (no PTX)" in error.found and "NVIDIA H200 (9.0)" in error.found
    assert "no kernel image is available" in error.found
    assert error.fix is not None and "`cuda-pip install --rebuild pointnet2_ops`" in error.fix
    # cuda-pip sets TORCH_CUDA_ARCH_LIST itself: the targets to keep go in --arch-list (walk C2).
    assert "`cuda-pip install --rebuild pointnet2_ops --arch-list '8.0;8.6;9.0'`" in error.fix
    assert "TORCH_CUDA_ARCH_LIST" not in error.fix
    # A target that cuda-pip would not choose by itself is named, in both commands (walk C2).
    elsewhere = _environment(found, "9.0")
    elsewhere = replace(
        elsewhere,
        source="detected",
        python=replace(elsewhere.python, executable="/elsewhere/venv/bin/python"),
    )
    (named,) = check_extension_kernels(elsewhere, make_index())
    assert named.fix is not None and named.fix.count("--python /elsewhere/venv/bin/python`") == 2

    (ok,) = check_extension_kernels(_environment(found, "8.0"), make_index())
    assert ok.status == "ok"
    (ok,) = check_extension_kernels(_environment(found, "8.0", "8.9"), make_index())
    assert ok.status == "ok"  # sm_86 runs on 8.9
    assert (
        check_extension_kernels(_environment(found), make_index()) == []
    )  # no GPU: nothing to say


def test_ptx_build_passes_a_newer_gpu_with_a_warning(built: Built, tmp_path: Path) -> None:
    site = _site_with(built.libraries["ptx"], tmp_path)
    found = find_extensions([str(site)], environ={}, ld_cache=tmp_path / "none", default_dirs=())
    (warning,) = check_extension_kernels(_environment(found, "9.0"), make_index())
    assert warning.status == "warn"
    assert "compute_86" in warning.found and "JIT" in warning.found
    (ok,) = check_extension_kernels(_environment(found, "8.6"), make_index())
    assert ok.status == "ok"


def test_corrupt_extension_is_a_note_naming_the_file(built: Built, tmp_path: Path) -> None:
    site = _site_with(built.libraries["sass"], tmp_path)
    offset, _size = _fatbin_offset(site / EXT)
    data = bytearray((site / EXT).read_bytes())
    struct.pack_into("<I", data, offset + 16 + 28, 3)  # an architecture that is none
    (site / EXT).write_bytes(bytes(data))
    found = find_extensions([str(site)], environ={}, ld_cache=tmp_path / "none", default_dirs=())
    (ext,) = found
    assert ext.sass == ext.ptx == ()
    (note,) = ext.notes
    assert str(site / EXT) in note and "fat binary" in note
    findings = run_checks(_environment(found, "9.0"), make_index())
    (finding,) = check_extension_notes(_environment(found, "9.0"), make_index())
    assert finding in findings and finding.status == "info"


# -- the wheel check the install's verify step uses --------------------------------------------


def test_kernel_gaps_of_a_wheel_and_a_folder(built: Built, tmp_path: Path) -> None:
    wheel = tmp_path / "pointnet2_ops-3.0.0+pt2141cu130.sm80.sm86-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(built.libraries["sass"], EXT)
        archive.writestr("pointnet2_ops/__init__.py", "")
    (gap,) = kernel_gaps(wheel, [cc("8.0"), cc("9.0")])
    assert (gap.file, gap.capability) == (EXT, cc("9.0"))
    assert "sm_80, sm_86 (no PTX)" in gap.describe()
    assert kernel_gaps(wheel, [cc("8.0"), cc("8.6")]) == ()
    site = _site_with(built.libraries["ptx"], tmp_path)
    assert kernel_gaps(site, [cc("9.0")]) == ()  # PTX runs there
    assert [g.capability for g in kernel_gaps(site, [cc("7.5")])] == [cc("7.5")]
    assert [g.file for g in kernel_gaps(site / EXT, [cc("7.5")])] == [Path(EXT).name]
    broken = tmp_path / "broken.whl"
    data = bytearray(built.libraries["sass"].read_bytes())
    offset, _size = _fatbin_offset(built.libraries["sass"])
    data[offset : offset + 4] = b"\x00\x00\x00\x01"
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr(EXT, bytes(data))
    with pytest.raises(FatbinError, match=re.escape(f"{broken}!{EXT}")):
        kernel_gaps(broken, [cc("9.0")])


# -- the command users run ---------------------------------------------------------------------


def _doctor(python: Path, arch: str, cache: Path) -> Any:
    environ = dict(
        os.environ,
        CUDA_RESOLVE_CUDA_ARCH=arch,
        CUDA_RESOLVE_DRIVER="580.65.06",
        XDG_CACHE_HOME=str(cache),
        CUDA_RESOLVE_CONFIG=str(cache / "none.toml"),
    )
    done = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "doctor", "--python", str(python), "--json"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_doctor_json_on_a_venv_flags_9_0_and_passes_8_0(built: Built, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    (Path(purelib) / EXT).parent.mkdir(parents=True)
    shutil.copyfile(built.libraries["sass"], Path(purelib) / EXT)
    (Path(purelib) / "pointnet2_ops-3.0.0+pt2141cu130.sm80.sm86.dist-info").mkdir()

    for arch, cache in (
        ("9.0", tmp_path / "cold"),
        ("9.0", tmp_path / "cold"),
        ("8.0", tmp_path / "other"),
    ):
        report = _doctor(python, arch, cache)
        kernels = [f for f in report["findings"] if f["check"] == "extension-kernels"]
        (extension,) = report["environment"]["extension"]
        assert extension["sass"] == ["sm_80", "sm_86"] and "ptx" not in extension
        assert extension["distribution"] == "pointnet2_ops 3.0.0+pt2141cu130.sm80.sm86"
        expected = "error" if arch == "9.0" else "ok"
        assert [f["status"] for f in kernels] == [expected]
        assert (report["status"] == "error") == (arch == "9.0")


def test_profile_round_trip_carries_the_facts_and_doctor_profile_flags_them(
    built: Built, tmp_path: Path
) -> None:
    """A saved profile keeps the scan's facts; `doctor --profile` judges them for that machine."""
    from cuda_resolve.profile import environment_to_dict, load_profile

    site = _site_with(built.libraries["ptx"], tmp_path)
    found = find_extensions([str(site)], environ={}, ld_cache=tmp_path / "none", default_dirs=())
    base = (
        Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"
    ).read_text(encoding="utf-8")
    extension = found[0]
    profile = tmp_path / "h200.toml"
    profile.write_text(
        base
        + f'\n[[extension]]\npath = "{extension.path}"\nneeded = {list(extension.needed)!r}\n'
        f"sass = {list(extension.sass)!r}\nptx = {list(extension.ptx)!r}\ndistribution = "
        f'"{extension.distribution}"\n'.replace("'", '"'),
        encoding="utf-8",
    )
    loaded = load_profile(profile, index=make_index())
    assert loaded.extensions[0].sass == ("sm_80", "sm_86") and loaded.extensions[0].ptx == (
        "compute_86",
    )
    assert environment_to_dict(loaded)["extension"][0]["ptx"] == ["compute_86"]
    done = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "doctor", "--profile", str(profile), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")),
    )
    findings = json.loads(done.stdout)["findings"]
    assert [f["status"] for f in findings if f["check"] == "extension-kernels"] == [
        "warn"
    ]  # 9.0 runs compute_86
    bad = profile.read_text(encoding="utf-8").replace(
        'ptx = ["compute_86"]', 'ptx = ["compute_8x"]'
    )
    profile.write_text(bad, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", "doctor", "--profile", str(profile)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")),
    )
    assert done.returncode == 2 and "compute_8x" in done.stderr and "Traceback" not in done.stderr
