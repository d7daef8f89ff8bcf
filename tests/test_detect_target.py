"""The target interpreter probe: real interpreters, a fake torch that must never be imported.

The fake torch's ``__init__.py`` raises, so any import of it fails the test run; detection
must still report its version, CUDA version, C++ ABI and the nvidia-* wheels beside it.

The interpreter running the tests may itself sit in a venv full of torch and nvidia-*
wheels (a GPU host's), with more on its PYTHONPATH: targets are fresh, empty venvs, and the
in-process probe runs with a search path of the fake site and the standard library only.
"""

from __future__ import annotations

import glob
import os
import stat
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_resolve.detect import detect_environment
from cuda_resolve.detect.target import facts_from_report, probe_target
from cuda_resolve.errors import UsageError
from cuda_resolve.versions import CudaVersion

RECORDED = Path(__file__).parent / "data" / "recorded"
SYSTEM_PATH = "/usr/bin:/bin"
TORCH_BOOBY_TRAP = 'raise RuntimeError("cuda-resolve imported torch")\n'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def install_fake_torch(site: Path) -> None:
    """torch 2.5.1+cu124 as a wheel lays it out, plus three nvidia-* distributions."""
    write(site / "torch" / "__init__.py", TORCH_BOOBY_TRAP)
    write(
        site / "torch" / "version.py", (RECORDED / "torch/version-2.5.1-cu124.py.txt").read_text()
    )
    write(
        site / "torch/share/cmake/Torch/TorchConfig.cmake",
        (RECORDED / "torch/TorchConfig-cxx11-0.cmake").read_text(),
    )
    write(
        site / "torch-2.5.1+cu124.dist-info/METADATA",
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+cu124\nSummary: Tensors\n\nVersion: "
        "0.0 (in the description, not a header)\n",
    )
    write(site / "torch-2.5.1+cu124.dist-info/RECORD", "torch/__init__.py,,\n")
    runtime = "nvidia_cuda_runtime_cu12-12.4.127.dist-info"
    write(
        site / runtime / "METADATA",
        "Metadata-Version: 2.1\nName: nvidia-cuda-runtime-cu12\nVersion: 12.4.127\n",
    )
    write(
        site / runtime / "RECORD",
        "nvidia/__init__.py,,\nnvidia/cuda_runtime/__init__.py,,\n"
        "nvidia/cuda_runtime/include/cuda_runtime_api.h,sha256=x,1\nnvidia/cuda_runtime/lib/libcudart.so.12,sha256=y,2\n"
        f"{runtime}/RECORD,,\n",
    )
    write(site / "nvidia/cuda_runtime/include/cuda_runtime_api.h", "")
    write(site / "nvidia/cuda_runtime/lib/libcudart.so.12", "")
    cu13 = "nvidia_cublas-13.0.0.19.dist-info"
    write(
        site / cu13 / "METADATA", "Metadata-Version: 2.1\nName: nvidia-cublas\nVersion: 13.0.0.19\n"
    )
    write(
        site / cu13 / "RECORD",
        "nvidia/cu13/include/cublas_v2.h,,\nnvidia/cu13/lib/libcublas.so.13,,\n",
    )
    write(
        site / "torchvision-0.20.1+cu124.dist-info/METADATA",
        "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.20.1+cu124\n",
    )
    ml = "nvidia_ml_py-12.560.30.dist-info"
    write(site / ml / "METADATA", "Metadata-Version: 2.1\nName: nvidia-ml-py\nVersion: 12.560.30\n")
    write(site / ml / "RECORD", "pynvml.py,,\nexample.py,,\n")


def bare_venv(base: str, directory: Path) -> Path:
    """A venv of *base* with nothing installed: none of the host's packages are visible in it."""
    subprocess.run([base, "-m", "venv", "--without-pip", str(directory)], check=True)
    return directory / "bin" / "python"


def site_of(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real venv (made by ``python -m venv``) with the fake torch in its site-packages."""
    directory = tmp_path_factory.mktemp("target") / "venv"
    python = bare_venv(sys.executable, directory)
    site = site_of(python)
    install_fake_torch(site)
    # A sitecustomize that talks on stdout must not hide the probe's report.
    write(site / "sitecustomize.py", "print('hello from sitecustomize')\n")
    (directory / "conda-meta").mkdir()
    return python, site


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This Python, but without the packages of the venv (or PYTHONPATH) running the tests."""
    return bare_venv(sys.executable, tmp_path_factory.mktemp("bare") / "venv")


def stdlib_only(path: list[str]) -> list[str]:
    """*path* without site-packages, PYTHONPATH entries or the working directory."""
    stdlib = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
    return [
        entry
        for entry in path
        if "-packages" not in entry
        and (
            entry.endswith(".zip")
            or any(entry == top or entry.startswith(top + os.sep) for top in stdlib)
        )
    ]


def fake_site(tmp_path: Path) -> Path:
    site = tmp_path / "pythonpath-site"
    install_fake_torch(site)
    return site


def assert_fake_torch(torch: object, site: Path) -> None:
    from cuda_resolve.environment import TorchInfo

    assert isinstance(torch, TorchInfo)
    assert torch.version == "2.5.1+cu124"
    assert torch.cuda == CudaVersion(12, 4)
    assert torch.build == "cuda"
    assert torch.git_version == "a8d6afb511a69687bbb2b7e88a3cf67917e1697e"
    assert torch.hip is None
    assert torch.cxx11_abi is False
    assert torch.arch_list is None
    assert torch.location == str(site / "torch")
    assert torch.torchvision == "0.20.1+cu124"  # installed beside it: plan keeps the pair together
    assert torch.torchaudio is None
    wheels = {wheel.name: wheel for wheel in torch.nvidia_wheels}
    assert set(wheels) == {
        "nvidia-cuda-runtime-cu12",
        "nvidia-cublas",
    }  # nvidia-ml-py carries no CUDA files
    runtime = wheels["nvidia-cuda-runtime-cu12"]
    assert runtime.version == "12.4.127"
    assert runtime.include_dir == str(site / "nvidia/cuda_runtime/include")
    assert runtime.lib_dir == str(site / "nvidia/cuda_runtime/lib")
    assert wheels["nvidia-cublas"].include_dir == str(site / "nvidia/cu13/include")


def test_venv_target_reports_torch_without_importing_it(venv: tuple[Path, Path]) -> None:
    python, site = venv
    facts = probe_target(str(python), environ={"PATH": SYSTEM_PATH}, timeout=10.0)
    assert_fake_torch(facts.torch, site)
    assert facts.notes == ()
    info = facts.python
    assert info.version == "{}.{}.{}".format(*sys.version_info[:3])
    assert info.abi == f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert info.executable == str(python)
    assert info.prefix == str(python.parent.parent)
    assert info.is_venv and info.is_conda
    assert str(site) in info.site_packages
    assert facts.platform == sys.platform and facts.machine == os.uname().machine


def test_detect_environment_with_a_venv_target(venv: tuple[Path, Path], tmp_path: Path) -> None:
    python, site = venv
    root = tmp_path / "root"
    root.mkdir()
    env = detect_environment(
        python=str(python), root=root, environ={"PATH": SYSTEM_PATH}, cache_dir=tmp_path / "cache"
    )
    assert env.source == "detected"
    assert env.python.executable == str(python)
    assert_fake_torch(env.torch, site)
    assert env.machine.os == "linux" and env.machine.glibc is not None


def test_in_process_probe_reads_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = fake_site(tmp_path)
    monkeypatch.setattr(sys, "path", [str(site), *stdlib_only(sys.path)])
    facts = probe_target(None, environ={}, timeout=5.0)
    assert_fake_torch(facts.torch, site)
    assert "torch" not in sys.modules
    assert facts.python.executable == sys.executable


def test_pythonpath_is_honoured_as_the_users_python_would(
    tmp_path: Path, bare_python: Path
) -> None:
    site = fake_site(tmp_path)
    facts = probe_target(
        str(bare_python), environ={"PATH": SYSTEM_PATH, "PYTHONPATH": str(site)}, timeout=10.0
    )
    assert_fake_torch(facts.torch, site)


def test_the_working_directory_cannot_shadow_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "json.py", "raise RuntimeError('shadowed')\n")
    monkeypatch.chdir(tmp_path)
    facts = probe_target(sys.executable, environ={"PATH": SYSTEM_PATH}, timeout=10.0)
    assert facts.python.version.startswith(f"{sys.version_info[0]}.")


def _pyenv(version: str) -> str | None:
    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python")))
    return found[0] if found else None


@pytest.mark.skipif(_pyenv("3.7") is None, reason="needs a Python 3.7 interpreter (pyenv)")
def test_python_3_7_target(tmp_path: Path) -> None:
    site = fake_site(tmp_path)
    base = _pyenv("3.7")
    assert base is not None
    python = str(bare_venv(base, tmp_path / "venv37"))
    facts = probe_target(
        python, environ={"PATH": SYSTEM_PATH, "PYTHONPATH": str(site)}, timeout=10.0
    )
    assert facts.python.version.startswith("3.7.")
    assert facts.python.abi == "cp37m"
    assert_fake_torch(facts.torch, site)


@pytest.mark.skipif(_pyenv("2.7") is None, reason="needs a Python 2.7 interpreter (pyenv)")
def test_python_2_target_is_too_old() -> None:
    with pytest.raises(UsageError, match=r"Python 2\.7\.\d+ is too old"):
        probe_target(_pyenv("2.7"), environ={"PATH": SYSTEM_PATH}, timeout=10.0)


# -- --python that is not an interpreter -------------------------------------------------------


def executable(path: Path, text: str) -> Path:
    write(path, text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing" / "python", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: write(d / "notes.txt", "just text\n"), "is not executable"),
        (lambda d: executable(d / "no-shebang", "just text\n"), "could not be run as a program"),
        (
            lambda d: executable(d / "shell", "#!/bin/sh\necho hello\n"),
            "is not a Python interpreter (it printed 'hello')",
        ),
        (
            lambda d: executable(d / "silent", "#!/bin/sh\nexit 3\n"),
            "is not a Python interpreter (it printed 'nothing (exit status 3)')",
        ),
    ],
)
def test_not_an_interpreter_is_a_usage_error(
    tmp_path: Path, make: Callable[[Path], Path], message: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(UsageError) as raised:
        detect_environment(
            python=str(path),
            root=tmp_path,
            environ={"PATH": SYSTEM_PATH},
            cache_dir=tmp_path / "cache",
        )
    assert raised.value.message.startswith(f"--python {path}: ")
    assert message in raised.value.message
    assert raised.value.hint
    assert raised.value.exit_code == 2


def test_interpreter_name_is_looked_up_on_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--python python9\.9: not found on PATH"):
        detect_environment(
            python="python9.9", root=tmp_path, environ={"PATH": SYSTEM_PATH}, cache_dir=tmp_path
        )
    link = tmp_path / "bin" / "python-target"
    link.parent.mkdir()
    link.symlink_to(sys.executable)
    facts = probe_target(
        "python-target", environ={"PATH": f"{link.parent}:{SYSTEM_PATH}"}, timeout=10.0
    )
    assert facts.python.version.startswith(f"{sys.version_info[0]}.")


def test_hanging_interpreter_times_out(tmp_path: Path) -> None:
    python = executable(tmp_path / "python", "#!/bin/sh\nsleep 30\n")
    with pytest.raises(UsageError, match=r"did not answer within 0\.5 s") as caught:
        probe_target(str(python), environ={"PATH": SYSTEM_PATH}, timeout=0.5)
    # the check to run names the interpreter (it said `PATH -c pass`)
    assert f"check that it starts ({python} -c pass)" in (caught.value.hint or "")


# -- the report, as data ---------------------------------------------------------------------


def report(**torch: object) -> dict[str, object]:
    return {
        "version": "3.10.12",
        "implementation": "cpython",
        "abi": "cp310",
        "torch": torch or None,
    }


def test_metadata_and_version_py_disagree() -> None:
    facts = facts_from_report(
        report(
            location="/s/torch",
            metadata_version="2.1.0+cu121",
            version_py={"__version__": "2.1.2+cu121", "cuda": "12.1"},
        )
    )
    assert facts.torch is not None and facts.torch.version == "2.1.2+cu121"
    assert facts.notes == (
        "torch: metadata says 2.1.0+cu121 but torch/version.py says 2.1.2+cu121 (a mixed or "
        "broken install)",
    )


def test_pypi_metadata_without_the_local_tag_is_not_a_mixed_install() -> None:
    """PyPI's torch wheels say 2.11.0 in their metadata and 2.11.0+cu130 in version.py (seen on
    the H200)."""
    facts = facts_from_report(
        report(
            location="/s/torch",
            metadata_version="2.11.0",
            version_py={"__version__": "2.11.0+cu130", "cuda": "13.0"},
        )
    )
    assert facts.torch is not None and facts.torch.version == "2.11.0+cu130"
    assert facts.notes == ()


def test_metadata_only_falls_back_to_the_local_tag() -> None:
    facts = facts_from_report(
        report(location=None, metadata_version="2.1.0+cu121", version_py=None)
    )
    assert facts.torch is not None and facts.torch.cuda == CudaVersion(12, 1)
    assert "package directory is missing" in facts.notes[0]


def test_torch_directory_without_any_version_is_a_note() -> None:
    facts = facts_from_report(report(location="/s/torch", metadata_version=None, version_py=None))
    assert facts.torch is None
    assert facts.notes == (
        "torch at /s/torch has neither torch/version.py nor metadata: a broken install",
    )


def test_unreadable_cuda_field_is_a_note() -> None:
    facts = facts_from_report(
        report(location="/s/torch", version_py={"__version__": "2.0.0", "cuda": "twelve"})
    )
    assert facts.torch is not None and facts.torch.cuda is None
    assert facts.notes == ("torch: torch.version.cuda 'twelve' is not a CUDA version",)


def test_no_torch_means_no_torch_info() -> None:
    facts = facts_from_report(
        {
            "version": "3.12.1",
            "torch": None,
            "nvidia_wheels": [{"name": "nvidia-x", "version": "1"}],
        }
    )
    assert facts.torch is None and facts.notes == ()
