"""Machine profiles: every documented key, the saved-profile round trip, and bad input.

Bad input must raise ProfileError (exit code 2) with a message that names the file and the
key path, never a traceback-shaped surprise.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
from _factories import cc, cuda, drv, make_index
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cuda_resolve.environment import (
    Compiler,
    Driver,
    Environment,
    ExtensionBinary,
    Gpu,
    Machine,
    NvidiaWheel,
    PythonInfo,
    Scheduler,
    Toolkit,
    TorchInfo,
    Variables,
)
from cuda_resolve.errors import ProfileError, UsageError
from cuda_resolve.profile import dump_profile, environment_to_dict, load_profile, parse_profile
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

INDEX = make_index()

EVERY_KEY = """\
format = 1
notes = ["NVML: Driver/library version mismatch"]

[machine]
os = "linux"
arch = "aarch64"
glibc = "2.35"

[python]
version = "3.10.12"
implementation = "cpython"
executable = "/opt/conda/envs/k/bin/python"
abi = "cp310"
site_packages = ["/opt/conda/envs/k/lib/python3.10/site-packages"]
prefix = "/opt/conda/envs/k"
conda = true
venv = false

[driver]
version = "535.104.05"
cuda = "12.2"
source = "nvml"

[[gpu]]
name = "NVIDIA A100-SXM4-40GB"
compute_capability = "8.0"
uuid = "GPU-5c6e0f1b"
memory_mib = 40960

[[gpu]]
index = 3
name = "Tesla V100-SXM2-32GB"
compute_capability = "sm_70"

[[toolkit]]
version = "12.1"
root = "/usr/local/cuda-12.1"
nvcc = "/usr/local/cuda-12.1/bin/nvcc"
release = "12.1.105"
gpu_archs = ["5.0", "8.0", "9.0", "9.0a"]
missing_headers = ["cusparse.h"]
found_via = "CUDA_HOME"
nvcc_on_path_wrapper = "/usr/local/bin/nvcc"

[[toolkit]]
version = "11.8"

[compiler]
gcc = "11.4.0"
gxx = "11.4.0"
clang = "14.0.0"
nvcc_host = "/usr/bin/c++"
nvcc_host_version = "11.4.0"
other_gcc = ["12", "10.5.0"]

[torch]
version = "2.1.0+cu121"
cuda = "12.1"
build = "cuda"
git_version = "7bcf7da3a268b435777fe87c7794c382f444e86d"
cxx11_abi = false
arch_list = ["sm_50", "sm_80", "sm_90a", "compute_90"]
location = "/opt/conda/envs/k/lib/python3.10/site-packages/torch"

[[torch.nvidia_wheels]]
name = "nvidia-cusparse-cu12"
version = "12.1.0.106"
include_dir = "/site/nvidia/cusparse/include"
lib_dir = "/site/nvidia/cusparse/lib"

[scheduler]
slurm_job_id = "4242"
slurm_variables = ["SLURM_JOB_ID", "SLURM_NODELIST"]

[variables]
CUDA_HOME = "/usr/local/cuda-12.1"
CUDA_PATH = "/usr/local/cuda-12.1"
LD_LIBRARY_PATH = "/usr/local/cuda-12.1/lib64"
TORCH_CUDA_ARCH_LIST = "8.0;7.0"
CUDA_VISIBLE_DEVICES = "0,3"

[[extension]]
path = "/site/pointnet2_ops/_ext.cpython-310-x86_64-linux-gnu.so"
needed = ["libc10.so", "libcudart.so.11.0"]
missing = ["libcudart.so.11.0"]
"""


def test_every_documented_key_is_read() -> None:
    env = parse_profile(EVERY_KEY, origin="lab.toml")
    assert env.source == "lab.toml"
    assert env.machine == Machine(os="linux", arch="aarch64", glibc="2.35")
    assert env.python == PythonInfo(
        version="3.10.12",
        implementation="cpython",
        executable="/opt/conda/envs/k/bin/python",
        abi="cp310",
        site_packages=("/opt/conda/envs/k/lib/python3.10/site-packages",),
        prefix="/opt/conda/envs/k",
        is_conda=True,
        is_venv=False,
    )
    assert env.driver == Driver(version=drv("535.104.05"), cuda=cuda("12.2"), source="nvml")
    assert env.gpus == (
        Gpu(
            index=0,
            name="NVIDIA A100-SXM4-40GB",
            compute_capability=cc("8.0"),
            uuid="GPU-5c6e0f1b",
            memory_mib=40960,
        ),
        Gpu(index=3, name="Tesla V100-SXM2-32GB", compute_capability=cc("7.0")),
    )
    assert env.toolkits[0] == Toolkit(
        version=cuda("12.1"),
        root="/usr/local/cuda-12.1",
        nvcc="/usr/local/cuda-12.1/bin/nvcc",
        release="12.1.105",
        gpu_archs=(cc("5.0"), cc("8.0"), cc("9.0"), cc("9.0a")),
        missing_headers=("cusparse.h",),
        found_via="CUDA_HOME",
        nvcc_on_path_wrapper="/usr/local/bin/nvcc",
    )
    assert env.toolkits[1] == Toolkit(version=cuda("11.8"))
    assert env.compiler == Compiler(
        gcc="11.4.0",
        gxx="11.4.0",
        clang="14.0.0",
        nvcc_host="/usr/bin/c++",
        nvcc_host_version="11.4.0",
        other_gcc=("12", "10.5.0"),
    )
    assert env.torch is not None
    assert env.torch.version == "2.1.0+cu121"
    assert env.torch.cuda == cuda("12.1")
    assert env.torch.build == "cuda"
    assert env.torch.cxx11_abi is False
    assert env.torch.arch_list == ("sm_50", "sm_80", "sm_90a", "compute_90")
    assert env.torch.nvidia_wheels == (
        NvidiaWheel(
            name="nvidia-cusparse-cu12",
            version="12.1.0.106",
            include_dir="/site/nvidia/cusparse/include",
            lib_dir="/site/nvidia/cusparse/lib",
        ),
    )
    assert env.scheduler == Scheduler(
        slurm_job_id="4242", slurm_variables=("SLURM_JOB_ID", "SLURM_NODELIST")
    )
    assert env.scheduler.in_slurm_job
    assert env.variables == Variables(
        cuda_home="/usr/local/cuda-12.1",
        cuda_path="/usr/local/cuda-12.1",
        ld_library_path="/usr/local/cuda-12.1/lib64",
        torch_cuda_arch_list="8.0;7.0",
        cuda_visible_devices="0,3",
    )
    assert env.extensions == (
        ExtensionBinary(
            path="/site/pointnet2_ops/_ext.cpython-310-x86_64-linux-gnu.so",
            needed=("libc10.so", "libcudart.so.11.0"),
            missing=("libcudart.so.11.0",),
        ),
    )
    assert env.notes == ("NVML: Driver/library version mismatch",)


def test_only_python_version_is_required() -> None:
    env = parse_profile('[python]\nversion = "3.12"\n')
    assert env.python.version == "3.12"
    assert env.python.abi_tag == "cp312"
    assert env.machine == Machine()
    assert env.driver is None
    assert env.gpus == ()
    assert env.toolkits == ()
    assert env.extensions == ()
    assert env.torch is None
    assert env.compiler == Compiler()
    assert not env.has_gpu


@pytest.mark.parametrize(
    ("driver", "expected"),
    [("535.104.05", "12.2"), ("470.82.01", "11.4"), ("580.159.04", "13.0"), ("525.60.13", "12.0")],
)
def test_driver_cuda_is_derived_from_version(driver: str, expected: str) -> None:
    env = parse_profile(
        f'[python]\nversion = "3.10"\n[driver]\nversion = "{driver}"\n', index=INDEX
    )
    assert env.driver is not None
    assert env.driver.cuda == cuda(expected)
    assert env.driver.source == "profile"


def test_driver_too_old_to_derive_asks_for_cuda() -> None:
    with pytest.raises(ProfileError, match=r"driver\.version = '410\.48'") as info:
        parse_profile(
            '[python]\nversion = "3.10"\n[driver]\nversion = "410.48"\n',
            origin="old.toml",
            index=INDEX,
        )
    assert info.value.hint is not None and "cuda" in info.value.hint


def test_an_explicit_driver_cuda_wins() -> None:
    env = parse_profile(
        '[python]\nversion = "3.10"\n[driver]\nversion = "535.104.05"\ncuda = "12.1"\n', index=INDEX
    )
    assert env.driver is not None and env.driver.cuda == cuda("12.1")


@pytest.mark.parametrize(
    ("version", "cuda_key", "expected", "build"),
    [
        ("2.1.0+cu121", None, "12.1", "cuda"),
        ("2.11.0+cu130", None, "13.0", "cuda"),
        ("1.12.1+cu102", None, "10.2", "cuda"),
        ("2.1.0", "12.1", "12.1", "cuda"),  # PyPI's default wheel has no local tag
        ("2.1.0", None, None, "cpu"),
        ("2.1.0+cpu", None, None, "cpu"),
        ("2.5.1+rocm6.2", None, None, "cpu"),  # hip absent: treated as not CUDA
    ],
)
def test_torch_cuda_from_the_local_tag(
    version: str, cuda_key: str | None, expected: str | None, build: str
) -> None:
    extra = f'cuda = "{cuda_key}"\n' if cuda_key else ""
    env = parse_profile(f'[python]\nversion = "3.10"\n[torch]\nversion = "{version}"\n{extra}')
    assert env.torch is not None
    assert env.torch.cuda == (cuda(expected) if expected else None)
    assert env.torch.build == build


def test_torch_rocm_build() -> None:
    env = parse_profile(
        '[python]\nversion = "3.10"\n[torch]\nversion = "2.5.1+rocm6.2"\nhip = '
        '"6.2.41133"\nbuild = "rocm"\n'
    )
    assert env.torch is not None and env.torch.build == "rocm"


def test_single_table_gpu_is_accepted() -> None:
    """``[gpu]`` instead of ``[[gpu]]``: one GPU, reported under gpu[0] in errors."""
    text = (
        '[python]\nversion = "3.10"\n[driver]\nversion = "535.104.05"\ncuda = '
        '"12.2"\n[gpu]\ncompute_capability = "8.6"\n'
    )
    env = parse_profile(text)
    assert [g.compute_capability for g in env.gpus] == [cc("8.6")]
    assert env.gpus[0].name == "unknown GPU"


@pytest.mark.parametrize("version", ["3.10", "3.10.12", "3.14.0rc2", "3.15.0a1+", "3.13.1b3"])
def test_python_versions_interpreters_report(version: str) -> None:
    env = parse_profile(f'[python]\nversion = "{version}"\n')
    assert env.python.version == version
    assert env.python.short_version == ".".join(version.split(".")[:2])


@pytest.mark.parametrize("gcc", ["12", "12.2", "12.2.0"])
def test_compiler_versions_as_gcc_prints_them(gcc: str) -> None:
    env = parse_profile(
        f'[python]\nversion = "3.10"\n[compiler]\ngcc = "{gcc}"\nother_gcc = ["{gcc}"]\n'
    )
    assert env.compiler.gcc == gcc
    assert env.compiler.other_gcc == (gcc,)


# -- the round trip ----------------------------------------------------------------------


def _round_trip(env: Environment) -> Environment:
    text = dump_profile(env)
    return parse_profile(text, origin=env.source, index=INDEX)


def test_every_key_round_trips() -> None:
    env = parse_profile(EVERY_KEY, origin="lab.toml")
    assert _round_trip(env) == env
    assert _round_trip(_round_trip(env)) == env


def test_dump_starts_with_a_comment_naming_the_format() -> None:
    text = dump_profile(parse_profile('[python]\nversion = "3.10"\n'))
    assert text.startswith("# cuda-resolve machine profile")
    assert "docs/profile-format.md" in text.splitlines()[0]


def test_known_empty_arch_list_round_trips() -> None:
    """A CPU build's get_arch_list() is [] (known empty), which differs from unknown (None)."""
    base = parse_profile('[python]\nversion = "3.10"\n[torch]\nversion = "2.1.0+cpu"\n')
    assert base.torch is not None and base.torch.arch_list is None
    empty = dataclasses.replace(base, torch=dataclasses.replace(base.torch, arch_list=()))
    assert _round_trip(empty) == empty
    assert _round_trip(base) == base


def test_detected_environment_round_trips_except_its_source() -> None:
    env = Environment(
        machine=Machine(glibc="2.39"),
        python=PythonInfo(
            version="3.12.3",
            executable="/usr/bin/python3",
            site_packages=("/a", "/b"),
            is_venv=True,
        ),
        driver=Driver(version=drv("580.159.04"), cuda=cuda("13.0"), source="sysfs"),
        gpus=(
            Gpu(
                index=0,
                name="NVIDIA H200",
                compute_capability=cc("9.0"),
                uuid="GPU-1",
                memory_mib=143771,
            ),
        ),
        toolkits=(
            Toolkit(
                version=cuda("13.0"),
                root="/usr/local/cuda-13.0",
                release="13.0.88",
                gpu_archs=(cc("7.5"), cc("9.0a")),
                found_via="PATH",
            ),
        ),
        compiler=Compiler(gcc="13.3.0", other_gcc=("12",)),
        torch=TorchInfo(
            version="2.11.0+cu130",
            cuda=cuda("13.0"),
            cxx11_abi=True,
            arch_list=("sm_75", "sm_90"),
            location="/b/torch",
        ),
        scheduler=Scheduler(slurm_job_id="7", slurm_variables=("SLURM_JOB_ID",)),
        variables=Variables(ld_library_path="/x"),
        extensions=(ExtensionBinary(path="/b/k/_C.so", needed=("libc10.so",), missing=()),),
        notes=("nvidia-smi timed out",),
        source="detected",
    )
    assert _round_trip(env) == env


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_PATHS = st.from_regex(r"/[a-z0-9_.-]{1,10}(/[a-z0-9_.+-]{1,10}){0,3}", fullmatch=True)
_CUDAS = st.builds(
    CudaVersion, st.integers(min_value=9, max_value=13), st.integers(min_value=0, max_value=9)
)
_CAPS = st.builds(
    ComputeCapability,
    st.integers(min_value=3, max_value=12),
    st.integers(min_value=0, max_value=9),
    st.sampled_from(["", "a", "f"]),
)
_DRIVER_VERSIONS = st.builds(
    lambda a, b, c: DriverVersion.parse(f"{a}.{b}.{c:02d}"),
    st.integers(min_value=400, max_value=700),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=99),
)
_COMPILER = st.from_regex(r"[1-9][0-9]?(\.[0-9]{1,2}){0,2}", fullmatch=True)


@st.composite
def environments(draw: st.DrawFn) -> Environment:
    driver = draw(
        st.none()
        | st.builds(
            Driver,
            version=_DRIVER_VERSIONS,
            cuda=_CUDAS,
            source=st.sampled_from(["nvml", "sysfs", "profile"]),
        )
    )
    if driver is not None:
        # Profiles reject a CUDA whose family needs a newer driver (test_impossible_driver_cuda).
        family_minimum = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}.get(
            driver.cuda.major
        )
        assume(family_minimum is None or driver.version.parts >= family_minimum)
    gpus: tuple[Gpu, ...] = ()
    if driver is not None:
        gpus = tuple(
            Gpu(index=i, name=name, compute_capability=cap, uuid=uuid, memory_mib=memory)
            for i, (name, cap, uuid, memory) in enumerate(
                draw(
                    st.lists(
                        st.tuples(
                            _TEXT, _CAPS, st.none() | _TEXT, st.none() | st.integers(0, 2**20)
                        ),
                        max_size=3,
                    )
                )
            )
        )
    toolkits = tuple(
        draw(
            st.lists(
                st.builds(
                    Toolkit,
                    version=_CUDAS,
                    root=st.none() | _PATHS,
                    gpu_archs=st.lists(_CAPS, max_size=4).map(tuple),
                    missing_headers=st.lists(
                        st.sampled_from(["cusparse.h", "cublas_v2.h"]), max_size=2
                    ).map(tuple),
                    found_via=st.sampled_from(["PATH", "CUDA_HOME", "/usr/local/cuda"]),
                    nvcc_on_path_wrapper=st.none() | _PATHS,
                ),
                max_size=2,
            )
        )
    )
    torch_cuda = draw(st.none() | _CUDAS)
    torch = draw(
        st.none()
        | st.builds(
            TorchInfo,
            version=st.just(f"2.5.1+{torch_cuda.variant}" if torch_cuda else "2.5.1"),
            cuda=st.just(torch_cuda),
            cxx11_abi=st.none() | st.booleans(),
            arch_list=st.none()
            | st.lists(
                st.sampled_from(["sm_50", "sm_86", "sm_90a", "compute_120"]), max_size=4
            ).map(tuple),
            nvidia_wheels=st.lists(
                st.builds(
                    NvidiaWheel,
                    name=st.just("nvidia-cudart-cu12"),
                    version=st.just("12.1.105"),
                    include_dir=st.none() | _PATHS,
                ),
                max_size=2,
            ).map(tuple),
        )
    )
    return Environment(
        machine=Machine(
            os=draw(st.sampled_from(["linux", "windows"])),
            arch=draw(st.sampled_from(["x86_64", "aarch64"])),
            glibc=draw(st.none() | st.just("2.31")),
        ),
        python=PythonInfo(
            version=draw(st.sampled_from(["3.8", "3.10.12", "3.13.0rc1"])),
            site_packages=tuple(draw(st.lists(_PATHS, max_size=2))),
            is_conda=draw(st.booleans()),
        ),
        driver=driver,
        gpus=gpus,
        toolkits=toolkits,
        compiler=Compiler(
            gcc=draw(st.none() | _COMPILER), other_gcc=tuple(draw(st.lists(_COMPILER, max_size=2)))
        ),
        torch=torch,
        variables=Variables(
            cuda_home=draw(st.none() | _PATHS), ld_library_path=draw(st.none() | _TEXT.filter(bool))
        ),
        extensions=tuple(
            ExtensionBinary(path=path, needed=("libc10.so", "libcudart.so.12"), missing=missing)
            for path, missing in draw(
                st.lists(st.tuples(_PATHS, st.sampled_from([(), ("libcudart.so.12",)])), max_size=2)
            )
        ),
        notes=tuple(draw(st.lists(_TEXT, max_size=2))),
        source="generated.toml",
    )


@settings(max_examples=150)
@given(environments())
def test_round_trip_property(env: Environment) -> None:
    assert _round_trip(env) == env


def test_environment_to_dict_is_plain_data() -> None:
    data = environment_to_dict(parse_profile(EVERY_KEY))
    assert data["format"] == 1
    assert data["driver"] == {"version": "535.104.05", "cuda": "12.2", "source": "nvml"}
    assert data["gpu"][1] == {
        "index": 3,
        "name": "Tesla V100-SXM2-32GB",
        "compute_capability": "7.0",
    }
    assert data["torch"]["build"] == "cuda"
    assert data["torch"]["arch_list"] == ["sm_50", "sm_80", "sm_90a", "compute_90"]
    assert data["extension"][0]["missing"] == ["libcudart.so.11.0"]


# -- bad input ---------------------------------------------------------------------------

_PY = '[python]\nversion = "3.10"\n'
_DRIVER = '[driver]\nversion = "535.104.05"\ncuda = "12.2"\n'

# (profile text, text the message must contain after "bad.toml: ")
BAD = [
    ("[python\nversion = 1", "not valid TOML"),
    ('[python]\nversion = "3.10"\nversion = "3.11"\n', "not valid TOML"),
    ("", "python: is required but missing"),
    ('[machine]\nos = "linux"\n', "python: is required but missing"),
    ("[python]\n", "python.version: is required but missing"),
    ('python = "3.10"\n', "python = '3.10': expected a table"),
    # unknown keys, top level and nested, name the key path
    ('colour = "red"\n' + _PY, "colour: unknown key"),
    (_PY + 'colour = "red"\n', "python.colour: unknown key"),
    (_PY + "[gpus]\n", "gpus: unknown key"),
    (_PY + '[machine]\nglib = "2.35"\n', "machine.glib: unknown key"),
    ('[python]\nversion = "3.10"\nvrsion = "3.11"\n', "python.vrsion: unknown key"),
    (
        _PY
        + _DRIVER
        + '[[gpu]]\ncompute_capability = "8.6"\n[[gpu]]\ncompute_capability = "8.6"\ncc = "8.6"\n',
        "gpu[1].cc: unknown key",
    ),
    (
        _PY + '[[toolkit]]\nversion = "12.1"\nhome = "/usr/local/cuda"\n',
        "toolkit[0].home: unknown key",
    ),
    (
        _PY + '[torch]\nversion = "2.1.0"\n[[torch.nvidia_wheels]]\nname = "x"\nversion = '
        '"1"\nextra = 1\n',
        "torch.nvidia_wheels[0].extra: unknown key",
    ),
    (_PY + '[variables]\ncuda_home = "/x"\n', "variables.cuda_home: unknown key"),
    # bad version strings
    (
        _PY + '[driver]\nversion = "abc"\n',
        "driver.version = 'abc': driver version 'abc' is not a dotted version number",
    ),
    (
        _PY + '[driver]\nversion = "12.2"\n',
        "driver.version = '12.2': driver version '12.2' looks like a CUDA version",
    ),
    (
        _PY + '[driver]\nversion = "535.104.05"\ncuda = "12"\n',
        "driver.cuda = '12': CUDA version '12' needs a minor part",
    ),
    (
        _PY + _DRIVER + '[[gpu]]\ncompute_capability = "8.x"\n',
        "gpu[0].compute_capability = '8.x': compute capability '8.x' is not of the form",
    ),
    (
        _PY + _DRIVER + '[[gpu]]\nname = "A100"\n',
        "gpu[0].compute_capability: is required but missing",
    ),
    (_PY + '[[toolkit]]\nversion = "twelve"\n', "toolkit[0].version = 'twelve'"),
    (
        _PY + '[[toolkit]]\nroot = "/usr/local/cuda"\n',
        "toolkit[0].version: is required but missing",
    ),
    (
        _PY + '[[toolkit]]\nversion = "12.1"\ngpu_archs = ["8.0", "8.x"]\n',
        "toolkit[0].gpu_archs[1] = '8.x'",
    ),
    ('[python]\nversion = "3"\n', "python.version = '3': expected a Python version"),
    ('[python]\nversion = "three"\n', "python.version = 'three'"),
    (_PY + '[compiler]\ngcc = "eleven"\n', "compiler.gcc = 'eleven': expected a compiler version"),
    (_PY + '[compiler]\nother_gcc = ["12", "gcc-11"]\n', "compiler.other_gcc[1] = 'gcc-11'"),
    (_PY + '[machine]\nglibc = "2"\n', "machine.glibc = '2': expected a glibc version"),
    (
        _PY + '[machine]\nos = "solaris"\n',
        "machine.os = 'solaris': expected one of linux, windows, darwin",
    ),
    (_PY + "[python]\n", "not valid TOML"),
    (
        _PY + '[torch]\nversion = "not a version"\n',
        "torch.version = 'not a version': not a valid version",
    ),
    (_PY + '[torch]\ncuda = "12.1"\n', "torch.version: is required but missing"),
    (
        _PY + '[torch]\nversion = "2.1.0+cu121"\ncuda = "11.8"\n',
        "torch.cuda = '11.8' but version '2.1.0+cu121' is a CUDA 12.1 build",
    ),
    (
        _PY + '[torch]\nversion = "2.1.0+cpu"\ncuda = "12.1"\n',
        "torch.cuda = '12.1' but version '2.1.0+cpu' is a CPU build",
    ),
    (
        _PY + '[torch]\nversion = "2.1.0"\nbuild = "cuda"\n',
        "torch.build = 'cuda' but the table describes a cpu build",
    ),
    (
        _PY + '[torch]\nversion = "2.1.0+cu121"\nbuild = "gpu"\n',
        "torch.build = 'gpu': expected one of cpu, cuda, rocm",
    ),
    (
        _PY + '[torch]\nversion = "2.1.0+cu121"\narch_list = ["8.6"]\n',
        "torch.arch_list[0] = '8.6': expected an entry of torch.cuda.get_arch_list()",
    ),
    # wrong types
    ("[python]\nversion = 3.1\n", "python.version = 3.1: expected a string"),
    (_PY + "[driver]\nversion = 535\n", "driver.version = 535: expected a string"),
    (
        _PY + _DRIVER + "[[gpu]]\ncompute_capability = 8.6\n",
        "gpu[0].compute_capability = 8.6: expected a string",
    ),
    (
        _PY + _DRIVER + '[[gpu]]\ncompute_capability = "8.6"\nindex = "0"\n',
        "gpu[0].index = '0': expected an integer",
    ),
    (
        _PY + _DRIVER + '[[gpu]]\ncompute_capability = "8.6"\nindex = true\n',
        "gpu[0].index = True: expected an integer",
    ),
    (
        _PY + _DRIVER + '[[gpu]]\ncompute_capability = "8.6"\nmemory_mib = 1.5\n',
        "gpu[0].memory_mib = 1.5: expected an integer",
    ),
    ('gpu = "A100"\n' + _PY, "gpu = 'A100': expected an array of tables"),
    ("gpu = [1]\n" + _PY, "gpu[0] = 1: expected a table"),
    ('driver = "535"\n' + _PY, "driver = '535': expected a table"),
    ('[python]\nversion = "3.10"\nconda = "yes"\n', "python.conda = 'yes': expected true or false"),
    (
        '[python]\nversion = "3.10"\nsite_packages = "/x"\n',
        "python.site_packages = '/x': expected a list of strings",
    ),
    (
        '[python]\nversion = "3.10"\nsite_packages = ["/x", 2]\n',
        "python.site_packages[1] = 2: expected a string",
    ),
    (
        _PY + '[torch]\nversion = "2.1.0"\ncxx11_abi = 1\n',
        "torch.cxx11_abi = 1: expected true or false",
    ),
    ('notes = "x"\n' + _PY, "notes = 'x': expected a list of strings"),
    ('format = "1"\n' + _PY, "format = '1': expected an integer"),
    ("format = 2\n" + _PY, "format = 2: this cuda-resolve reads profile format 1"),
    ("format = 0\n" + _PY, "format = 0"),
    # extensions
    (_PY + '[[extension]]\nneeded = ["libc10.so"]\n', "extension[0].path: is required but missing"),
    (
        _PY
        + '[[extension]]\npath = "/x.so"\nneeded = ["libc10.so"]\nmissing = ["libcudart.so.12"]\n',
        "extension[0].missing = 'libcudart.so.12' is not listed in needed",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_profiles_name_file_and_key(text: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(text, origin="bad.toml", index=INDEX)
    error = info.value
    assert isinstance(error, UsageError)
    assert error.exit_code == 2
    assert str(error).startswith("bad.toml: "), str(error)
    assert message in str(error)
    assert error.hint
    assert error.to_json() == {"error": str(error), "hint": error.hint}


def test_unknown_key_hint_lists_the_known_keys() -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(_PY + '[machine]\nglib = "2.35"\n', origin="bad.toml")
    assert info.value.hint is not None
    for key in ("arch", "glibc", "os"):
        assert key in info.value.hint


def test_toml_error_points_at_the_line() -> None:
    with pytest.raises(ProfileError, match=r"line 3"):
        parse_profile('[python]\nversion = "3.10"\nversion2 = \n', origin="bad.toml")


# -- files -------------------------------------------------------------------------------


def test_load_profile_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "lab.toml"
    path.write_text(EVERY_KEY, encoding="utf-8")
    env = load_profile(path)
    assert env.source == str(path)
    assert env == parse_profile(EVERY_KEY, origin=str(path))


def test_load_profile_names_the_file_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "lab.toml"
    path.write_text(
        '[python]\nversion = "3.10"\n[[gpu]]\ncompute_capability = "8.x"\n', encoding="utf-8"
    )
    with pytest.raises(ProfileError, match=f"^{path}: gpu\\[0\\].compute_capability = '8.x'"):
        load_profile(path)


def test_missing_profile_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no such file") as info:
        load_profile(tmp_path / "nope.toml")
    assert str(tmp_path / "nope.toml") in str(info.value)
    assert info.value.hint and "--save-profile" in info.value.hint


def test_profile_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="is a directory"):
        load_profile(tmp_path)


def test_profile_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[python]\nversion = "3.10"\n# caf\xe9\n')
    with pytest.raises(ProfileError, match="cannot be read"):
        load_profile(path)


def test_profiles_in_tests_data_all_load() -> None:
    """Every scenario profile shipped with the tests is itself a valid profile."""
    profiles = sorted((Path(__file__).parent / "data" / "profiles").glob("*.toml"))
    assert profiles
    for path in profiles:
        env = load_profile(path, index=INDEX)
        assert _round_trip(env) == dataclasses.replace(env, source=str(path))


def test_profile_text_is_stable_under_dedent() -> None:
    """A hand-written profile indented inside a script still reads (TOML ignores indentation)."""
    text = textwrap.indent(EVERY_KEY, "    ")
    assert parse_profile(text, origin="x") == parse_profile(EVERY_KEY, origin="x")


@pytest.mark.parametrize(
    ("driver", "expected"), [("535.104.05", "12.2"), ("580.159.04", "13.0"), ("470.82.01", "11.4")]
)
def test_driver_cuda_is_derived_with_the_shipped_index(driver: str, expected: str) -> None:
    env = parse_profile(f'[python]\nversion = "3.10"\n[driver]\nversion = "{driver}"\n')
    assert env.driver is not None
    assert env.driver.cuda == cuda(expected)


DOC = Path(__file__).parent.parent / "docs" / "profile-format.md"


def test_the_documented_example_reads() -> None:
    import re

    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"## A hand-written example\n\n```toml\n(.*?)```", text, re.S)
    assert match is not None
    env = parse_profile(match.group(1), origin="example", index=INDEX)
    assert env.driver is not None and env.driver.cuda == cuda("12.2")
    assert env.torch is not None and env.torch.cuda == cuda("12.1")
    assert len(env.gpus) == 2


def test_every_key_is_documented() -> None:
    """Each key a saved profile can hold appears in docs/profile-format.md."""
    documented = DOC.read_text(encoding="utf-8")

    def keys(value: object) -> list[str]:
        if isinstance(value, dict):
            return [k for key, item in value.items() for k in [key, *keys(item)]]
        if isinstance(value, list):
            return [k for item in value for k in keys(item)]
        return []

    for key in set(keys(environment_to_dict(parse_profile(EVERY_KEY)))):
        spellings = (f"`{key}`", f"[{key}]", f"[[{key}]]", f".{key}]]")
        assert any(spelling in documented for spelling in spellings), key


def test_gpus_without_a_driver_describe_a_build_node() -> None:
    """CUDA_RESOLVE_CUDA_ARCH on a GPU-less login node gives GPUs and no driver; it must
    round-trip."""
    env = parse_profile(_PY + '[[gpu]]\ncompute_capability = "8.6"\n')
    assert env.driver is None
    assert [str(g.compute_capability) for g in env.gpus] == ["8.6"]
    assert parse_profile(dump_profile(env)).gpus == env.gpus


def test_impossible_driver_cuda_is_refused() -> None:
    """nvidia-smi on a 535 driver never says CUDA 13.0: that profile has a typo."""
    with pytest.raises(
        ProfileError,
        match=r"driver\.cuda = '13\.0': driver 535\.104\.05 cannot support CUDA 13\.x \(that "
        r"needs driver >= 580",
    ):
        parse_profile(_PY + '[driver]\nversion = "535.104.05"\ncuda = "13.0"\n')
    # a driver newer than the index knows may still claim a newer CUDA of a family it meets
    assert (
        str(parse_profile(_PY + '[driver]\nversion = "640.10"\ncuda = "13.9"\n').driver.cuda)
        == "13.9"
    )  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("written", "read"), [("amd64", "x86_64"), ("arm64", "aarch64"), ("x86_64", "x86_64")]
)
def test_a_profiles_arch_is_read_in_the_spelling_detection_writes(
    tmp_path: Path, written: str, read: str
) -> None:
    path = tmp_path / "node.toml"
    path.write_text(
        f'format = 1\n[machine]\nos = "linux"\narch = "{written}"\n[python]\nversion = "3.11"\n',
        encoding="utf-8",
    )
    machine = load_profile(path).machine
    assert machine.arch == read
    assert any(tag.platform.endswith(read) for tag in load_profile(path).wheel_tags()[:3])
