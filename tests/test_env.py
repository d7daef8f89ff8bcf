"""``cuda-resolve env``: exports computed from the extension scan, idempotent in each shell,
a Jupyter kernel spec, and (with a real single-node Slurm) a job under ``--export=NONE`` that
imports an extension only when the job script uses the ``--slurm`` lines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from _slurm import Cluster, cluster_fixture

from cuda_resolve.cli import main
from cuda_resolve.environment import Environment, ExtensionBinary, Machine, PythonInfo, Toolkit
from cuda_resolve.envvars import (
    JobEnvironment,
    job_environment,
    kernel_spec,
    library_locations,
    render,
)
from cuda_resolve.versions import CudaVersion

REPO = Path(__file__).resolve().parents[1]
CUDA_RESOLVE = str(Path(sys.executable).with_name("cuda-resolve"))


def _env(root: str | None = "/opt/cuda-x") -> Environment:
    toolkits = (Toolkit(version=CudaVersion.parse("12.4"), root=root),) if root else ()
    return Environment(
        machine=Machine(),
        python=PythonInfo(version="3.11.9", executable="/v/bin/python"),
        toolkits=toolkits,
    )


def _ext(*missing: str) -> ExtensionBinary:
    return ExtensionBinary(
        path="/v/site/ext/_C.so", needed=("libc10.so", *missing), missing=missing
    )


def test_library_path_only_for_what_the_loader_would_not_find(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "libcudart.so.12").write_bytes(b"")
    env = _env()
    found = library_locations(
        env,
        ["libcudart.so.12", "libcublas.so.12"],
        {"LD_LIBRARY_PATH": f"/nowhere:{tmp_path / 'a'}"},
    )
    assert found == {"libcudart.so.12": str(tmp_path / "a")}
    job = job_environment(env, [_ext("libcudart.so.12", "libcublas.so.12")], found)
    assert job.library_path == (str(tmp_path / "a"),)
    assert job.unresolved == (("/v/site/ext/_C.so", "libcublas.so.12"),)
    assert any("libcublas.so.12" in note for note in job.notes)
    assert job.cuda_home == "/opt/cuda-x" and job.path == ("/opt/cuda-x/bin",)
    nothing = job_environment(env, [_ext()], {})
    assert nothing.library_path == ()
    assert "LD_LIBRARY_PATH" not in render(nothing, "bash")


def test_toolkit_library_folder_is_searched(tmp_path: Path) -> None:
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "libcudart.so.12").write_bytes(b"")
    assert library_locations(_env(str(tmp_path)), ["libcudart.so.12"], {}) == {
        "libcudart.so.12": str(tmp_path / "lib64")
    }


JOB = JobEnvironment(
    cuda_home="/opt/cuda x",
    path=("/opt/cuda x/bin",),
    library_path=("/l/one", "/l/two"),
    arch_list="8.0;9.0+PTX",
)


def _shell_env(shell: list[str], script: str, environ: dict[str, str]) -> dict[str, str]:
    out = subprocess.run(
        [*shell, script], env=environ, capture_output=True, text=True, check=True, timeout=30
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@pytest.mark.parametrize("start", [{}, {"LD_LIBRARY_PATH": "/x"}, {"LD_LIBRARY_PATH": ""}])
def test_bash_lines_are_idempotent(start: dict[str, str]) -> None:
    lines = render(JOB, "bash")
    base = {"PATH": "/usr/bin:/bin", **start}
    once = _shell_env(["bash", "-c"], f"{lines}\nenv", base)
    twice = _shell_env(["bash", "-c"], f"{lines}\n{lines}\nenv", base)
    assert once == twice
    assert once["PATH"] == "/opt/cuda x/bin:/usr/bin:/bin"
    assert once["CUDA_HOME"] == "/opt/cuda x" and once["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0+PTX"
    expected = "/l/one:/l/two" + (":/x" if start.get("LD_LIBRARY_PATH") else "")
    assert once["LD_LIBRARY_PATH"] == expected  # never a trailing ':' (the current folder)


def test_bash_lines_move_the_toolkit_before_another_nvcc() -> None:
    base = {"PATH": "/other/cuda/bin:/opt/cuda x/bin:/usr/bin"}
    out = _shell_env(["bash", "-c"], render(JOB, "bash") + "env", base)
    assert out["PATH"].startswith("/opt/cuda x/bin:/other/cuda/bin")


@pytest.mark.parametrize(
    ("shell", "argv"),
    [("zsh", ["zsh", "-f", "-c"]), ("fish", ["fish", "-c"]), ("csh", ["tcsh", "-f", "-c"])],
)
def test_other_shells_are_idempotent(shell: str, argv: list[str]) -> None:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    lines = render(JOB, shell)  # type: ignore[arg-type]
    sep = "\n"
    base = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    once = _shell_env(argv, f"{lines}{sep}env", base)
    twice = _shell_env(argv, f"{lines}{sep}{lines}{sep}env", base)
    assert once == twice and once["LD_LIBRARY_PATH"] == "/l/one:/l/two"


def test_kernel_spec_is_jupyter_clients_format() -> None:
    spec = kernel_spec(JOB, "lab", "/v/bin/python")
    assert spec["argv"] == ["/v/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert spec["language"] == "python" and spec["display_name"] == "lab (cuda-resolve)"
    assert spec["env"]["LD_LIBRARY_PATH"] == "/l/one:/l/two:${LD_LIBRARY_PATH}"
    assert spec["env"]["PATH"].startswith("/opt/cuda x/bin:/v/bin:")


def test_cli_writes_kernel_spec_under_jupyter_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jd"))
    assert main(["env", "--jupyter", "cr-test", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    written = tmp_path / "jd" / "kernels" / "cr-test" / "kernel.json"
    assert document["kernel_spec"] == str(written)
    spec = json.loads(written.read_text())
    assert spec["argv"][0] == document["target"]
    if document["exports"]["CUDA_HOME"]:
        assert spec["env"]["CUDA_HOME"] == document["exports"]["CUDA_HOME"]
    jupyter = shutil.which("jupyter")
    if jupyter is None:
        return
    listed = subprocess.run(
        [jupyter, "kernelspec", "list", "--json"],
        env={**os.environ},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if listed.returncode == 0:
        assert "cr-test" in json.loads(listed.stdout)["kernelspecs"]


@pytest.mark.network
def test_kernelspec_list_shows_it(tmp_path: Path) -> None:
    """jupyter_client itself (from PyPI, in a venv of its own) lists the spec with its env."""
    from _torch_env import copy_venv

    python = copy_venv(tmp_path / "jupyter")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "jupyter_client",
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    environ = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path / "jd")}
    subprocess.run(
        [CUDA_RESOLVE, "env", "--jupyter", "cr-listed"],
        env=environ,
        check=True,
        capture_output=True,
        timeout=120,
    )
    listed = subprocess.run(
        [str(python.with_name("jupyter-kernelspec")), "list", "--json"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    spec = json.loads(listed.stdout)["kernelspecs"]["cr-listed"]
    assert spec["resource_dir"] == str(tmp_path / "jd" / "kernels" / "cr-listed")
    assert spec["spec"]["display_name"] == "cr-listed (cuda-resolve)"
    assert spec["spec"]["env"]["PATH"].endswith("${PATH}")


def test_bad_kernel_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--jupyter", "../evil"]) == 2
    assert "--jupyter" in capsys.readouterr().err


# --- a real job ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory)


def _compile(tmp: Path) -> tuple[Path, Path]:
    """A library named like CUDA's runtime in its own folder, and a venv whose extension module
    needs it (no RPATH): it loads only where LD_LIBRARY_PATH names that folder."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    libdir = tmp / "fakecuda"
    libdir.mkdir()
    (tmp / "lib.c").write_text("int fake_cudart_answer(void) { return 42; }\n")
    subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcudart.so.99",
            "-o",
            str(libdir / "libcudart.so.99"),
            str(tmp / "lib.c"),
        ],
        check=True,
    )
    venv = tmp / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (tmp / "ext.c").write_text(
        "#include <Python.h>\nint fake_cudart_answer(void);\n"
        'static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "fakeext", NULL, -1, NULL};\n'
        "PyMODINIT_FUNC PyInit_fakeext(void) { PyObject *o = PyModule_Create(&m); "
        'PyModule_AddIntConstant(o, "answer", fake_cudart_answer()); return o; }\n'
    )
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            f"-I{sysconfig.get_paths()['include']}",
            "-o",
            str(site / f"fakeext{suffix}"),
            str(tmp / "ext.c"),
            f"-L{libdir}",
            "-l:libcudart.so.99",
        ],
        check=True,
    )
    return libdir, python


def test_job_with_export_none_imports_only_with_the_slurm_lines(
    slurm: Cluster, tmp_path: Path
) -> None:
    libdir, python = _compile(tmp_path)
    terminal = {**slurm.environ, "LD_LIBRARY_PATH": str(libdir)}
    # In the terminal it imports (LD_LIBRARY_PATH set by hand).
    assert (
        subprocess.run(
            [str(python), "-c", "import fakeext; print(fakeext.answer)"],
            env=terminal,
            capture_output=True,
            text=True,
        ).stdout.strip()
        == "42"
    )
    lines = subprocess.run(
        [CUDA_RESOLVE, "env", "--slurm", "--python", str(python)],
        env=terminal,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    assert str(libdir) in lines
    check = "python -c 'import fakeext; print(\"answer\", fakeext.answer)'\n"
    doctor = f"{CUDA_RESOLVE} doctor --python {python} --json > {tmp_path}/doctor.json\n"
    bare = tmp_path / "bare.sh"
    bare.write_text(f"#!/bin/bash\nexport PATH={python.parent}:$PATH\n{doctor}{check}")
    with_lines = tmp_path / "with.sh"
    with_lines.write_text(f"#!/bin/bash\n{lines}{check}")
    outcomes = {}
    for script in (bare, with_lines):
        submitted = slurm.run(
            "sbatch",
            "--parsable",
            "--export=NONE",
            "-D",
            str(tmp_path),
            "-o",
            f"{script}.out",
            str(script),
        )
        job = submitted.stdout.strip().split(";")[0]
        outcomes[script.name] = (
            slurm.wait_job(job, timeout=300),
            Path(f"{script}.out").read_text(),
        )
    state, out = outcomes["bare.sh"]
    assert state == "FAILED" and "libcudart.so.99: cannot open shared object file" in out, out
    state, out = outcomes["with.sh"]
    assert state == "COMPLETED" and "answer 42" in out, out
    findings = {
        f["check"]: f for f in json.loads((tmp_path / "doctor.json").read_text())["findings"]
    }
    assert "libcudart.so.99" in findings["slurm"]["found"]
    assert 'eval "$(cuda-resolve env)"' in findings["slurm"]["fix"]


EVAL_IDIOMS = {
    "bash": (["bash", "--noprofile", "--norc", "-c"], 'eval "$({cli} env --shell bash)"'),
    "zsh": (["zsh", "-f", "-c"], 'eval "$({cli} env --shell zsh)"'),
    "fish": (["fish", "--no-config", "-c"], "{cli} env --shell fish | source"),
    "csh": (["tcsh", "-f", "-c"], 'eval "`{cli} env --shell csh`"'),
}


@pytest.mark.parametrize("shell", list(EVAL_IDIOMS))
def test_the_documented_eval_idiom_works_and_twice_changes_nothing(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, idiom = EVAL_IDIOMS[shell]
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    assert main(["env", "--json"]) == 0
    exports = json.loads(capsys.readouterr().out)["exports"]
    line = idiom.format(cli=CUDA_RESOLVE)
    base = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "SHELL": "/bin/false"}
    once = _shell_env(argv, f"{line}\nenv", base)
    twice = _shell_env(argv, f"{line}\n{line}\nenv", base)
    assert once == twice
    assert once.get("CUDA_HOME") == exports["CUDA_HOME"]
    assert once["PATH"] == ":".join([*exports["PATH"], "/usr/bin", "/bin"])
