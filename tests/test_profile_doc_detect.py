"""docs/profile-format.md's tables against what ``cuda-resolve detect --save-profile FILE`` really
writes (issue 29).

The real command runs twice, here, with no GPU needed: on a bare target (a fresh venv, no GPU,
no driver), and on a target dressed as a lab node (GPU and driver from the overrides, a stand-in
CUDA toolkit as ``CUDA_HOME``, inside a Slurm job, with the CUDA variables set) whose venv holds
a stand-in torch (``torch/version.py``, ``TorchConfig.cmake``, a real ``torch/lib/libc10.so``),
torchvision and torchaudio, an ``nvidia-*`` wheel with its include and lib folders, and
pointnet2_ops installed with a real extension ``.so`` that links libc10 and a libcudart the loader
cannot find and needs a c10 symbol libc10 does not define.

- Every key either saved profile has is in the doc's table for its section.
- Every key a table lists is one of them, or one the program writes where this machine cannot
  make the fact (:data:`ONLY_WHERE`, each checked against the profile writer with that fact
  added, so the list cannot name a key the program never writes), or in a section the doc says
  ``detect --save-profile`` never writes.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _torch_env import copy_venv, standin_cuda_toolkit, standin_torch_venv
from test_hints_profile_doc import DOC, documented, saved_keys

from cuda_resolve.environment import Environment
from cuda_resolve.profile import dump_profile, load_profile
from cuda_resolve.versions import ComputeCapability

BIN = Path(sys.executable).parent


def _replace(env: Environment, part: str, **changes: object) -> Environment:
    """``env`` with ``changes`` made to ``part`` (``torch``, ``compiler``, ...), or to the first
    entry of a repeatable part (``gpus``, ``toolkits``, ``extensions``)."""
    value: Any = getattr(env, part)
    if isinstance(value, tuple):
        changed: Any = (dataclasses.replace(value[0], **changes), *value[1:])
    else:
        changed = dataclasses.replace(value, **changes)
    fields: dict[str, Any] = {part: changed}
    return dataclasses.replace(env, **fields)


#: Keys ``detect`` writes only where the machine has a fact this test cannot count on here: the
#: part of the lab node's Environment that holds it, and the fact (the writer must then write the
#: key: :func:`test_a_key_written_only_elsewhere_is_written_where_the_fact_is`).
ONLY_WHERE: dict[tuple[str, str], tuple[str, dict[str, object]]] = {
    # NVML of a real GPU
    ("gpu", "uuid"): ("gpus", {"uuid": "GPU-0"}),
    ("gpu", "memory_mib"): ("gpus", {"memory_mib": 81920}),
    # a conda environment as the target
    ("python", "conda"): ("python", {"is_conda": True}),
    # a real nvcc (its release and architectures), reached through a wrapper script on PATH
    ("toolkit", "release"): ("toolkits", {"release": "13.0.88"}),
    ("toolkit", "gpu_archs"): ("toolkits", {"gpu_archs": (ComputeCapability.parse("8.0"),)}),
    ("toolkit", "nvcc_on_path_wrapper"): ("toolkits", {"nvcc_on_path_wrapper": "/usr/bin/nvcc"}),
    # compilers, which this machine may lack
    ("compiler", "gcc"): ("compiler", {"gcc": "13.3.0"}),
    ("compiler", "gxx"): ("compiler", {"gxx": "13.3.0"}),
    ("compiler", "clang"): ("compiler", {"clang": "18.1.3"}),
    ("compiler", "nvcc_host"): ("compiler", {"nvcc_host": "/usr/bin/g++"}),
    ("compiler", "nvcc_host_version"): ("compiler", {"nvcc_host_version": "13.3.0"}),
    ("compiler", "other_gcc"): ("compiler", {"other_gcc": ("10",)}),
    # a ROCm torch; a real torch's CUDA library (its fat binaries give the arch list)
    ("torch", "hip"): ("torch", {"hip": "6.0.32830"}),
    ("torch", "arch_list"): ("torch", {"arch_list": ("sm_80",)}),
    # an extension with CUDA kernels (nvcc's fat binaries), or one that cannot be read
    ("extension", "sass"): ("extensions", {"sass": ("sm_80",)}),
    ("extension", "ptx"): ("extensions", {"ptx": ("sm_80",)}),
    ("extension", "notes"): ("extensions", {"notes": ("a fat binary could not be read",)}),
}

#: The lab node's variables: a Slurm job with the CUDA variables set.
NODE = {
    "CUDA_RESOLVE_CUDA_ARCH": "8.0",
    "CUDA_RESOLVE_DRIVER": "580.65.06",
    "TORCH_CUDA_ARCH_LIST": "8.0",
    "CUDA_VISIBLE_DEVICES": "0",
    "SLURM_JOB_ID": "4242",
    "SLURM_NTASKS": "1",
}


def _gcc(*args: str | Path) -> None:
    subprocess.run(["gcc", *map(str, args)], check=True, capture_output=True, timeout=60)


def _shared(path: Path, source: str, *link: str | Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    c_file = path.parent / f"{path.name}.c"
    c_file.write_text(source, encoding="utf-8")
    _gcc("-shared", "-fPIC", f"-Wl,-soname,{path.name}", "-o", path, c_file, *link)
    c_file.unlink()
    return path


def _dist_info(site: Path, name: str, version: str, files: list[str]) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(name.split("-")[0] + "\n")
    record = [f"{f},," for f in files] + [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


def _node_target(folder: Path) -> tuple[Path, Path]:
    """(the lab node's target python, its CUDA_HOME): see the module docstring."""
    python = standin_torch_venv(folder)
    site = next((folder / "venv" / "lib").glob("python*/site-packages"))
    torch = site / "torch"
    (torch / "version.py").write_text(
        "__version__ = '2.14.1'\ncuda = '13.0'\ngit_version = 'abc123'\n", encoding="utf-8"
    )
    cmake = torch / "share" / "cmake" / "Torch"
    cmake.mkdir(parents=True)
    (cmake / "TorchConfig.cmake").write_text('set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")\n')
    _shared(torch / "lib" / "libc10.so", "int c10_present(void) { return 1; }\n")
    cudart = _shared(folder / "elsewhere" / "libcudart.so.13", "int cudart(void) { return 1; }\n")
    _shared(
        site / "pointnet2_ops" / "_ext.cpython-311-x86_64-linux-gnu.so",
        "extern void _ZN3c104cuda9SetDeviceEi(int);\n"
        "int PyInit__ext(void) { _ZN3c104cuda9SetDeviceEi(0); return 0; }\n",
        "-Wl,--no-as-needed",
        torch / "lib" / "libc10.so",
        cudart,
    )
    (site / "pointnet2_ops" / "__init__.py").write_text("")
    _dist_info(
        site,
        "pointnet2_ops",
        "3.0.0+pt2141cu130.sm80",
        ["pointnet2_ops/__init__.py", "pointnet2_ops/_ext.cpython-311-x86_64-linux-gnu.so"],
    )
    for companion, version in (("torchvision", "0.29.1"), ("torchaudio", "2.14.1")):
        _dist_info(site, companion, version, [])
    runtime = site / "nvidia" / "cuda_runtime"
    for part in ("include/cuda_runtime_api.h", "lib/libcudart.so.13"):
        (runtime / part).parent.mkdir(parents=True, exist_ok=True)
        (runtime / part).write_text("")
    _dist_info(
        site,
        "nvidia_cuda_runtime",
        "13.0.96",
        [
            "nvidia/cuda_runtime/include/cuda_runtime_api.h",
            "nvidia/cuda_runtime/lib/libcudart.so.13",
        ],
    )
    cuda = standin_cuda_toolkit(folder / "cuda")
    (cuda / "include" / "cusparse.h").unlink()  # a minimal toolkit: torch's headers missing
    return python, cuda


def _detect(folder: Path, out: Path, extra: dict[str, str], *args: str) -> str:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CUDA_RESOLVE_", "SLURM_", "PIP_"))
        and k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH")
    }
    environ.update(
        HOME=str(folder),
        XDG_CACHE_HOME=str(folder / ".cache"),
        XDG_CONFIG_HOME=str(folder / ".config"),
        CUDA_RESOLVE_CUDA_ARCH="",
        CUDA_RESOLVE_DRIVER="",
    )
    environ.update(extra)
    done = subprocess.run(
        [str(BIN / "cuda-resolve"), "detect", "--save-profile", str(out), *args],
        env=environ,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """{"bare": the bare target's saved profile, "node": the lab node's}."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the stand-in extension and libc10")
    if not (BIN / "cuda-resolve").exists():
        pytest.skip(f"cuda-resolve is not installed next to {sys.executable}")
    bare = tmp_path_factory.mktemp("bare")
    node = tmp_path_factory.mktemp("node")
    python, cuda = _node_target(node)
    (node / "libs").mkdir()
    return {
        "bare": _detect(bare, bare / "bare.toml", {"VIRTUAL_ENV": str(copy_venv(bare / "venv"))}),
        "node": _detect(
            node,
            node / "node.toml",
            {
                **NODE,
                "CUDA_HOME": str(cuda),
                "CUDA_PATH": str(cuda),
                "LD_LIBRARY_PATH": str(node / "libs"),
            },
            "--python",
            str(python),
        ),
    }


def never_written() -> set[str]:
    """Sections whose text says ``detect --save-profile`` never writes them."""
    sections: set[str] = set()
    section = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^###\s+`\[\[?([\w.]+)\]?\]`", line)
        if line.startswith("#"):
            section = heading.group(1) if heading else None
        elif section and "`detect --save-profile` never writes it" in line:
            sections.add(section)
    return sections


def test_the_node_profile_has_what_the_target_holds(saved: dict[str, str]) -> None:
    """The stand-ins were read as meant (else the checks below would check little)."""
    keys = saved_keys(saved["node"])
    assert {"version", "cuda", "git_version", "cxx11_abi", "torchvision", "pip_version"} <= keys[
        "torch"
    ]
    assert {"include_dir", "lib_dir"} <= keys["torch.nvidia_wheels"]
    assert {"needed", "missing", "missing_symbols", "distribution"} <= keys["extension"]
    assert {"slurm_job_id", "slurm_variables"} <= keys["scheduler"]
    assert {"CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "LD_LIBRARY_PATH"} <= keys["variables"]
    assert "missing_headers" in keys["toolkit"] and "installed_extension" in keys
    assert "driver" not in saved_keys(saved["bare"]) and "torch" not in saved_keys(saved["bare"])


@pytest.mark.parametrize("name", ["bare", "node"])
def test_every_key_detect_saves_is_in_the_doc(saved: dict[str, str], name: str) -> None:
    doc = documented()
    for section, keys in saved_keys(saved[name]).items():
        missing = keys - doc.get(section, set())
        assert not missing, f"{DOC.name} lacks {sorted(missing)} in [{section}] ({name})"


def test_every_key_the_doc_lists_is_one_detect_writes(saved: dict[str, str]) -> None:
    seen: dict[str, set[str]] = {}
    for text in saved.values():
        for section, keys in saved_keys(text).items():
            seen.setdefault(section, set()).update(keys)
    skipped = never_written()
    assert "slurm" in skipped  # the sentence the parser looks for is still there
    unwritten = {
        (section, key)
        for section, keys in documented().items()
        if section not in skipped
        for key in keys
        if key not in seen.get(section, set()) and (section, key) not in ONLY_WHERE
    }
    assert not unwritten, f"{DOC.name} lists keys detect --save-profile never wrote: {unwritten}"


@pytest.mark.parametrize("where", sorted(ONLY_WHERE), ids=".".join)
def test_a_key_written_only_elsewhere_is_written_where_the_fact_is(
    saved: dict[str, str], where: tuple[str, str], tmp_path: Path
) -> None:
    (tmp_path / "node.toml").write_text(saved["node"], encoding="utf-8")
    part, changes = ONLY_WHERE[where]
    env = _replace(load_profile(tmp_path / "node.toml"), part, **changes)
    section, key = where
    assert key in saved_keys(dump_profile(env)).get(section, set()), (
        f"the profile writer never writes {section}.{key}"
    )
