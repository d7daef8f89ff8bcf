"""After torch was changed outside cuda-resolve, doctor's fix is the one command that works
(issue 27, item 2).

A venv with a stand-in torch 2.14.1 (CUDA 13.0) whose ``libc10.so`` lacks a symbol, and a
pointnet2_ops built for torch 2.13.1 (``+pt2131cu130``) whose library needs that symbol: import
fails with 'undefined symbol'. doctor's fix is ``cuda-pip install --repair --python VENV`` (the
venv is not the default target here), and that command, run as doctor wrote it (as a dry run:
nothing is compiled here), plans exactly pointnet2_ops again, built for the installed torch.
``cuda-resolve install --repair`` is the same command (it took no --repair without a REQ).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
from _torch_env import _cli, standin_cuda_toolkit, standin_torch_venv

from cuda_resolve.doctor.checks import _repair_command
from cuda_resolve.environment import Environment, Machine, PythonInfo

SYMBOL = "_ZNK3c106IValue9toGenericEv"  # c10::IValue::toGeneric() const
STALE = "3.0.0+pt2131cu130.sm90"


def _gcc(*args: str | Path) -> None:
    subprocess.run(["gcc", *map(str, args)], check=True, capture_output=True, timeout=120)


def _libc10(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "c10.c").write_text(source)
    _gcc("-shared", "-fPIC", "-Wl,-soname,libc10.so", "-o", folder / "libc10.so", folder / "c10.c")
    return folder / "libc10.so"


@pytest.fixture(scope="module")
def broken_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The venv's python: torch 2.14.1 and a pointnet2_ops built for 2.13.1 that no longer
    loads under it."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build shared objects")
    root = tmp_path_factory.mktemp("repair")
    python = standin_torch_venv(root)
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    old = _libc10(root / "old", f"void {SYMBOL}(void) {{}}\n")
    _libc10(site / "torch" / "lib", "void c10_other(void) {}\n")  # the installed torch's
    package = site / "pointnet2_ops"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ext.c").write_text(f"extern void {SYMBOL}(void);\nvoid f(void) {{ {SYMBOL}(); }}\n")
    library = package / f"_ext{sysconfig.get_config_var('EXT_SUFFIX')}"
    _gcc("-shared", "-fPIC", "-o", library, package / "ext.c", f"-L{old.parent}", "-lc10")
    (package / "ext.c").unlink()
    dist = site / f"pointnet2_ops-{STALE}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: pointnet2_ops\nVersion: {STALE}\n"
    )
    (dist / "INSTALLER").write_text("pip\n")
    (dist / "RECORD").write_text("")
    return python


def _environ(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ.pop("VIRTUAL_ENV", None)
    environ.update(
        CUDA_RESOLVE_DRIVER="580.65.06",
        CUDA_RESOLVE_CUDA_ARCH="9.0",
        CUDA_RESOLVE_CONFIG=str(tmp_path / "none.toml"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    return environ


def test_doctors_fix_for_a_stale_extension_is_the_repair_that_rebuilds_exactly_it(
    broken_venv: Path, tmp_path: Path
) -> None:
    environ = _environ(tmp_path)
    report = _cli("doctor", "--python", str(broken_venv), "--json", env=environ)
    findings = json.loads(report.stdout)["findings"]
    (error,) = [f for f in findings if f["check"] == "extension-symbols"]
    assert error["status"] == "error" and f"undefined symbol: {SYMBOL}" in error["found"]
    assert "built for torch 2.13.1" in error["found"]
    commands = re.findall(r"`([^`]+)`", error["fix"])
    assert commands == [f"cuda-pip install --repair --python {shlex.quote(str(broken_venv))}"]
    # The fix, pasted as doctor wrote it (a dry run: nothing is compiled here), with a stand-in
    # CUDA 13.0 toolkit for the builder's pre-flight.
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    environ.update(CUDA_HOME=str(cuda), PATH=f"{cuda / 'bin'}:{environ.get('PATH', '')}")
    words = shlex.split(commands[0])
    assert words[:2] == ["cuda-pip", "install"]
    done = _cli(*words[1:], "--dry-run", "--json", env=environ, module="pip_plugin")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)["plan"]
    items = {item["name"]: item for item in plan["install"]}
    assert set(items) == {"torch", "pointnet2_ops"}
    assert items["torch"]["kind"] == "installed"  # the installed torch is the one to fit
    assert items["pointnet2_ops"]["kind"] == "build"
    assert items["pointnet2_ops"]["torch"] == "2.14.1"
    (build,) = json.loads(done.stdout)["prepared"]["builds"]
    assert (build["package"], build["torch"]) == ("pointnet2_ops", "2.14.1+cu130")
    # cuda-resolve install --repair is the same command.
    same = _cli("install", *words[2:], "--dry-run", "--json", env=environ)
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["plan"]["install"] == plan["install"]


def test_the_repair_on_a_machine_without_a_gpu_builds_for_the_archs_of_the_stale_build(
    broken_venv: Path, tmp_path: Path
) -> None:
    """A login node or CPU box (the torch-upgrade evidence run): doctor's fix, pasted, has no
    GPU to build for; it builds for the GPUs the stale build was made for (``.sm90``) instead
    of stopping at 'pass --arch-list'. An explicit --arch-list still wins."""
    environ = _environ(tmp_path)
    environ.update(CUDA_RESOLVE_CUDA_ARCH="")  # no GPU, whatever this machine has
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    environ.update(CUDA_HOME=str(cuda), PATH=f"{cuda / 'bin'}:{environ.get('PATH', '')}")
    words = ["install", "--repair", "--python", str(broken_venv), "--dry-run"]
    done = _cli(*words, env=environ, module="pip_plugin")
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, said
    assert "no GPU here: building for 9.0, as the installed builds were" in said
    assert "TORCH_CUDA_ARCH_LIST=9.0" in said
    done = _cli(*words, "--json", env=environ, module="pip_plugin")
    (build,) = json.loads(done.stdout)["prepared"]["builds"]
    assert (build["package"], build["arch_list"]) == ("pointnet2_ops", "9.0")
    given = _cli(*words, "--json", "--arch-list", "8.0", env=environ, module="pip_plugin")
    assert given.returncode == 0, given.stderr
    assert json.loads(given.stdout)["prepared"]["builds"][0]["arch_list"] == "8.0"


def test_cuda_resolve_install_takes_repair_alone_and_still_wants_a_requirement_without_it(
    tmp_path: Path,
) -> None:
    environ = _environ(tmp_path)
    bare = _cli("install", env=environ)
    assert bare.returncode == 2
    assert "name at least one requirement" in bare.stderr and "--repair" in bare.stderr
    both = _cli("install", "--repair", "numpy", "--dry-run", env=environ)
    assert both.returncode == 2 and "--repair plans the installed extensions again" in both.stderr


def test_the_repair_command_names_the_target_only_where_it_is_not_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch(mode=0o755)
    other = tmp_path / "other env" / "bin" / "python"

    def env(python: Path, source: str = "detected") -> Environment:
        return Environment(
            machine=Machine(),
            python=PythonInfo(version="3.11", executable=str(python)),
            source=source,
        )

    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    monkeypatch.setattr("sys.prefix", "/base")  # the tool runs from no venv of its own
    monkeypatch.setattr("sys.base_prefix", "/base")
    assert _repair_command(env(venv / "bin" / "python")) == "cuda-pip install --repair"
    assert _repair_command(env(venv / "bin" / "python3")) == "cuda-pip install --repair"
    named = f"cuda-pip install --repair --python '{other}'"  # quoted: pasted into a shell
    assert _repair_command(env(other)) == named
    assert _repair_command(env(other, source="h200.toml")) == "cuda-pip install --repair"
