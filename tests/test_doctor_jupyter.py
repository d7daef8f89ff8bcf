"""``doctor`` inside a Jupyter kernel compares what the kernel started with against what
``cuda-resolve env`` says the target needs, and names the fix (``cuda-resolve env --jupyter``).

The default tests start a stand-in kernel process with the command line a kernel spec gives
(``python -m ipykernel_launcher -f FILE``; the module is a stand-in that runs a shell command the
way IPython's ``!`` does), so the real detection runs: the walk up the process tree, the kernel's
start environment read from ``/proc``. The network test installs jupyter_client and ipykernel
from PyPI and runs ``!cuda-resolve doctor --json`` in a real kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_env import CUDA_RESOLVE, _compile

from cuda_resolve.cli import main
from cuda_resolve.doctor.kernel import (
    KERNEL_SPEC_VARIABLE,
    KernelContext,
    check_kernel,
    detect_kernel,
    is_ipykernel,
)
from cuda_resolve.envvars import JobEnvironment

STAND_IN = '''"""A stand-in for ipykernel's launcher: only its command line matters to doctor."""
import json, os, subprocess, sys
plan = json.load(open(sys.argv[sys.argv.index("-f") + 1]))
if plan.get("late"):
    os.environ.update(plan["late"])  # what a notebook cell does: too late for this process's loader
with open(plan["import_result"], "w") as out:
    try:
        import fakeext
        out.write("imported %d" % fakeext.answer)
    except ImportError as exc:
        out.write("ImportError: %s" % exc)
sys.exit(subprocess.run(plan["command"], shell=True).returncode)
'''


def _bare(environ: dict[str, str]) -> dict[str, str]:
    """The Jupyter server's environment: no LD_LIBRARY_PATH, no Jupyter variables of its own."""
    return {
        k: v
        for k, v in environ.items()
        if k not in ("LD_LIBRARY_PATH", "JPY_PARENT_PID", "JPY_SESSION_NAME", KERNEL_SPEC_VARIABLE)
    }


def _start_kernel(
    tmp: Path,
    python: Path,
    environ: dict[str, str],
    *,
    late: dict[str, str] | None = None,
    name: str = "doctor",
) -> tuple[dict[str, Any], str, int]:
    """Run ``python -m ipykernel_launcher -f FILE`` (the stand-in) whose cell runs
    ``!cuda-resolve doctor --json --python PYTHON``; the doctor's document, the import's outcome
    and the kernel's pid."""
    launcher = tmp / "stand-in"
    launcher.mkdir(exist_ok=True)
    (launcher / "ipykernel_launcher.py").write_text(STAND_IN)
    out, imported = tmp / f"{name}.json", tmp / f"{name}.import"
    plan = {
        "late": late,
        "import_result": str(imported),
        "command": f"{CUDA_RESOLVE} doctor --json --python {python} > {out}",
    }
    (tmp / f"{name}-connection.json").write_text(json.dumps(plan))
    kernel = subprocess.Popen(
        [str(python), "-m", "ipykernel_launcher", "-f", str(tmp / f"{name}-connection.json")],
        env={**environ, "PYTHONPATH": str(launcher)},
        cwd=tmp,
    )
    assert kernel.wait(timeout=300) in (0, 1)
    return json.loads(out.read_text()), imported.read_text(), kernel.pid


def _kernel_finding(document: dict[str, Any]) -> dict[str, Any]:
    found = [f for f in document["findings"] if f["check"] == "jupyter-kernel"]
    assert len(found) == 1, document["findings"]
    finding: dict[str, Any] = found[0]
    return finding


def test_a_value_set_in_the_notebook_is_too_late_and_doctor_says_so(tmp_path: Path) -> None:
    libdir, python = _compile(tmp_path)
    server = {**_bare(dict(os.environ)), "JPY_PARENT_PID": str(os.getpid())}
    document, imported, pid = _start_kernel(
        tmp_path, python, server, late={"LD_LIBRARY_PATH": str(libdir)}
    )
    assert imported.startswith("ImportError") and "libcudart.so.99" in imported
    finding = _kernel_finding(document)
    assert finding["status"] == "error"
    # The library's folder is known (the notebook set it), but the kernel did not start with it.
    assert f"{libdir} on LD_LIBRARY_PATH (for libcudart.so.99)" in finding["found"]
    assert "too late" in finding["found"]
    assert (
        f"`cuda-resolve env --jupyter {tmp_path.name} --python {python}`" in finding["fix"]
    )  # the folder holding venv/
    assert "restart it" in finding["fix"] and "Change Kernel" in finding["fix"]
    kernel = document["jupyter_kernel"]
    assert kernel["pid"] == pid and kernel["variables_from"].startswith(f"/proc/{pid}/environ")
    assert "LD_LIBRARY_PATH" not in kernel["variables"]
    assert document["status"] == "error"


def test_a_library_no_folder_here_holds_is_named_with_where_to_run_the_fix(tmp_path: Path) -> None:
    _, python = _compile(tmp_path)
    document, imported, _ = _start_kernel(tmp_path, python, _bare(dict(os.environ)))
    finding = _kernel_finding(document)
    assert imported.startswith("ImportError")
    assert finding["status"] == "error"
    assert "libcudart.so.99, which the kernel's loader does not find" in finding["found"]
    assert "in a terminal where the extensions import" in finding["fix"]
    assert "ipykernel_launcher" in document["jupyter_kernel"]["evidence"]


def _spec_environment(spec: dict[str, Any], server: dict[str, str]) -> dict[str, str]:
    """What jupyter_client's provisioner gives the kernel: the server's variables, then the
    spec's env with ``${NAME}`` replaced by the server's value."""
    import string

    environ = dict(server)
    for name, value in spec["env"].items():
        environ[name] = string.Template(value).safe_substitute(server)
    return environ


def test_a_kernel_from_the_spec_env_jupyter_wrote_passes_and_a_stale_one_is_named(
    tmp_path: Path,
) -> None:
    libdir, python = _compile(tmp_path)
    data = tmp_path / "jupyter-data"
    terminal = {**os.environ, "LD_LIBRARY_PATH": str(libdir), "JUPYTER_DATA_DIR": str(data)}
    subprocess.run(
        [CUDA_RESOLVE, "env", "--jupyter", "lab-gpu", "--python", str(python)],
        env=terminal,
        check=True,
        capture_output=True,
        timeout=300,
    )
    spec = json.loads((data / "kernels" / "lab-gpu" / "kernel.json").read_text())
    assert spec["env"][KERNEL_SPEC_VARIABLE] == "lab-gpu"
    server = _bare(dict(os.environ))
    document, imported, _ = _start_kernel(
        tmp_path, python, _spec_environment(spec, server), name="fresh"
    )
    assert imported == "imported 42"
    finding = _kernel_finding(document)
    assert finding["status"] == "ok" and "kernel spec 'lab-gpu'" in finding["found"], finding
    assert document["jupyter_kernel"]["spec"] == "lab-gpu"
    # The same spec, written before the extension's library moved: the fix rewrites it and restarts.
    stale = {**spec, "env": {k: v for k, v in spec["env"].items() if k != "LD_LIBRARY_PATH"}}
    document, _, _ = _start_kernel(
        tmp_path,
        python,
        _spec_environment(stale, server),
        late={"LD_LIBRARY_PATH": str(libdir)},
        name="stale",
    )
    finding = _kernel_finding(document)
    assert finding["status"] == "error"
    assert "started from the kernel spec 'lab-gpu' cuda-resolve wrote" in finding["found"]
    assert finding["fix"].startswith(
        f"rewrite the kernel spec with `cuda-resolve env --jupyter lab-gpu --python {python}`"
    )
    assert "restart this kernel" in finding["fix"]


def test_the_text_report_shows_the_finding(tmp_path: Path) -> None:
    _, python = _compile(tmp_path)
    launcher = tmp_path / "stand-in"
    launcher.mkdir()
    (launcher / "ipykernel_launcher.py").write_text(STAND_IN)
    plan = {
        "import_result": str(tmp_path / "i"),
        "command": f"{CUDA_RESOLVE} doctor --python {python} > {tmp_path / 'out.txt'}",
    }
    (tmp_path / "c.json").write_text(json.dumps(plan))
    subprocess.run(
        [str(python), "-m", "ipykernel_launcher", "-f", str(tmp_path / "c.json")],
        timeout=300,
        env={**_bare(dict(os.environ)), "PYTHONPATH": str(launcher), "COLUMNS": "200"},
    )
    # Words compared across line breaks: a long path moves the whole command to a line of its
    # own (a command is never split, so it can be pasted), as under CI's long temporary folders.
    text = " ".join((tmp_path / "out.txt").read_text().split())
    assert (
        "Jupyter kernel:" in text
        and "fix: write a kernel spec that carries them with `cuda-resolve env --jupyter" in text
    )


def test_outside_a_kernel_there_is_no_kernel_finding(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("JPY_PARENT_PID", raising=False)
    assert detect_kernel(os.environ) is None
    main(["doctor", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert "jupyter_kernel" not in document
    assert not [f for f in document["findings"] if f["check"] == "jupyter-kernel"]


def test_jpy_parent_pid_alone_is_a_kernel_whose_variables_are_this_process() -> None:
    kernel = detect_kernel(
        {"JPY_PARENT_PID": "4242", "PATH": "/usr/bin", "JPY_SESSION_NAME": "/n/a.ipynb"}
    )
    assert kernel is not None and kernel.pid is None
    assert "JPY_PARENT_PID=4242" in kernel.evidence and kernel.variables == (("PATH", "/usr/bin"),)
    assert (
        kernel.variables_from.startswith("this process's environment")
        and kernel.notebook == "/n/a.ipynb"
    )


def test_the_walk_reads_proc_as_the_kernel_left_it(tmp_path: Path) -> None:
    # A process tree in a proc-like folder: 30 (doctor) <- 20 (a shell) <- 10 (the kernel, whose
    # comm holds ") " the way a renamed process's may).
    def process(pid: int, parent: int, argv: list[str], environ: dict[str, str]) -> None:
        folder = tmp_path / str(pid)
        folder.mkdir()
        (folder / "stat").write_bytes(f"{pid} (odd) name) S {parent} 1 1 0".encode())
        (folder / "cmdline").write_bytes(b"\0".join(w.encode() for w in argv) + b"\0")
        (folder / "environ").write_bytes(
            b"\0".join(f"{k}={v}".encode() for k, v in environ.items()) + b"\0"
        )

    process(
        10,
        1,
        ["/e/bin/python", "-m", "ipykernel_launcher", "-f", "/r/kernel-1.json"],
        {"PATH": "/e/bin:/usr/bin", KERNEL_SPEC_VARIABLE: "lab", "SECRET": "x"},
    )
    process(20, 10, ["/bin/sh", "-c", "cuda-resolve doctor"], {"LD_LIBRARY_PATH": "/late"})
    process(
        30, 20, ["/v/bin/python", "/v/bin/cuda-resolve", "doctor"], {"LD_LIBRARY_PATH": "/late"}
    )
    kernel = detect_kernel({"LD_LIBRARY_PATH": "/late"}, pid=30, proc=tmp_path)
    assert kernel is not None and kernel.pid == 10 and kernel.spec == "lab"
    assert kernel.variables == (
        ("PATH", "/e/bin:/usr/bin"),
        (KERNEL_SPEC_VARIABLE, "lab"),
    )  # nothing else is kept
    (tmp_path / "10" / "environ").unlink()
    fallback = detect_kernel({"LD_LIBRARY_PATH": "/late"}, pid=30, proc=tmp_path)
    assert fallback is not None and fallback.get("LD_LIBRARY_PATH") == "/late"
    assert detect_kernel({}, pid=20, proc=tmp_path / "20") is None  # no such tree: not a kernel


@pytest.mark.parametrize(
    ("argv", "kernel"),
    [
        (["python", "-m", "ipykernel_launcher", "-f", "c.json"], True),
        (["python", "-m", "ipykernel", "-f", "c.json"], True),
        (["python", "-mipykernel_launcher", "-f", "c.json"], True),
        (
            [
                "/e/bin/python",
                "/e/lib/python3.11/site-packages/ipykernel_launcher.py",
                "-f",
                "c.json",
            ],
            True,
        ),
        (["python", "-m", "ipykernel_tools"], False),
        (["python", "ipykernel_launcher"], False),
        (["jupyter-lab"], False),
        ([], False),
    ],
)
def test_ipykernel_command_lines(argv: list[str], kernel: bool) -> None:
    assert is_ipykernel(argv) is kernel


def _kernel(**variables: str) -> KernelContext:
    return KernelContext(
        pid=7, evidence="test", variables=tuple(variables.items()), variables_from="/proc/7/environ"
    )


NEEDED = JobEnvironment(
    cuda_home="/opt/cuda",
    path=("/opt/cuda/bin",),
    library_path=("/l",),
    arch_list="9.0",
    needs=(("/s/ext.so", "libcudart.so.12", "/l"),),
)


def test_the_comparison_names_each_missing_value() -> None:
    [finding] = check_kernel(
        _kernel(PATH="/usr/bin", CUDA_HOME="/other"), NEEDED, "/e/lab/bin/python"
    )
    assert finding.status == "error"
    for part in (
        "CUDA_HOME=/opt/cuda (it has /other)",
        "/opt/cuda/bin on PATH",
        "/l on LD_LIBRARY_PATH (for libcudart.so.12)",
        "TORCH_CUDA_ARCH_LIST=9.0",
    ):
        assert part in finding.found
    assert (
        finding.fix is not None
        and "`cuda-resolve env --jupyter lab --python /e/lab/bin/python`" in finding.fix
    )
    [ok] = check_kernel(
        _kernel(
            PATH="/opt/cuda/bin/:/usr/bin",
            CUDA_HOME="/opt/cuda/",
            LD_LIBRARY_PATH="/x:/l",
            TORCH_CUDA_ARCH_LIST="9.0",
        ),
        NEEDED,
        "/e/lab/bin/python",
    )
    assert ok.status == "ok" and ok.fix is None


def test_without_library_needs_it_is_a_warning() -> None:
    needed = JobEnvironment(cuda_home="/opt/cuda", path=("/opt/cuda/bin",))
    [finding] = check_kernel(
        _kernel(PATH="/usr/bin", CUDA_HOME="/opt/cuda"), needed, "/work/my project/.venv/bin/python"
    )
    assert finding.status == "warn" and "too late" not in finding.found
    assert finding.fix is not None and "--jupyter my-project " in finding.fix
    [finding] = check_kernel(_kernel(PATH="/usr/bin"), needed, "/usr/bin/python3")
    assert finding.fix is not None and "--jupyter cuda-env " in finding.fix


# --- a real kernel --------------------------------------------------------------------------

DRIVER = """
import json, sys
from jupyter_client.manager import KernelManager
name, code = sys.argv[1], sys.argv[2]
manager = KernelManager(kernel_name=name)
manager.start_kernel()
try:
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=120)
    reply = client.execute_interactive(code, timeout=300)
    print(json.dumps({"status": reply["content"]["status"],
                      "pid": manager.provisioner.process.pid}))
finally:
    manager.shutdown_kernel(now=True)
"""


@pytest.mark.network
def test_doctor_in_a_real_kernel_names_the_fix_and_the_fixed_spec_imports(tmp_path: Path) -> None:
    """jupyter_client and ipykernel from PyPI; `!cuda-resolve doctor --json` in a kernel that
    started without the extension's library folder, then in one from `env --jupyter`'s spec."""
    from _torch_env import copy_venv

    (tmp_path / "ext").mkdir()
    libdir, _ = _compile(tmp_path / "ext")
    python = copy_venv(tmp_path / "lab")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "jupyter_client",
            "ipykernel",
        ],
        check=True,
        capture_output=True,
        timeout=900,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    built = next((tmp_path / "ext" / "venv").rglob("fakeext*.so"))
    (Path(site) / built.name).write_bytes(built.read_bytes())
    data = tmp_path / "jupyter-data"
    server = {**_bare(dict(os.environ)), "JUPYTER_DATA_DIR": str(data)}
    # What most people have: the spec `ipykernel install` writes, with no env.
    subprocess.run(
        [str(python), "-m", "ipykernel", "install", "--user", "--name", "plain"],
        env=server,
        check=True,
        capture_output=True,
        timeout=300,
    )

    def in_kernel(name: str, out: Path) -> tuple[dict[str, Any], int, str]:
        code = (
            f"import os\nos.environ['LD_LIBRARY_PATH'] = {str(libdir)!r}\n"
            "try:\n    import fakeext\n    print('imported', fakeext.answer)\nexcept ImportError "
            "as exc:\n    print('ImportError', exc)\n"
            f"!{CUDA_RESOLVE} doctor --json --python {python} > {out}\n"
        )
        ran = subprocess.run(
            [str(python), "-c", DRIVER, name, code],
            env=server,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert ran.returncode == 0, ran.stderr
        reply = json.loads(ran.stdout.strip().splitlines()[-1])
        assert reply["status"] == "ok", ran.stdout
        return json.loads(out.read_text()), reply["pid"], ran.stdout

    document, pid, said = in_kernel("plain", tmp_path / "plain.json")
    assert "ImportError libcudart.so.99" in said, said
    finding = _kernel_finding(document)
    assert (
        finding["status"] == "error"
        and f"{libdir} on LD_LIBRARY_PATH (for libcudart.so.99)" in finding["found"]
    )
    assert f"cuda-resolve env --jupyter lab --python {python}" in finding["fix"]
    assert document["jupyter_kernel"]["pid"] == pid
    # The fix, as the finding names it, from a terminal where the extension imports.
    terminal = {**server, "LD_LIBRARY_PATH": str(libdir)}
    subprocess.run(
        [CUDA_RESOLVE, "env", "--jupyter", "lab", "--python", str(python)],
        env=terminal,
        check=True,
        capture_output=True,
        timeout=300,
    )
    document, _, said = in_kernel("lab", tmp_path / "lab.json")
    assert "imported 42" in said, said
    finding = _kernel_finding(document)
    assert finding["status"] == "ok" and "kernel spec 'lab'" in finding["found"], finding
    assert not [
        f for f in document["findings"] if f["check"] == "extension-libs" and f["status"] == "error"
    ]
