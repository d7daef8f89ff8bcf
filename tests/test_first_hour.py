"""A new user's first hour (issue 19, "The tool"): the right target, output that can be copied,
progress that moves, messages that name the real obstacle, one name policy, notes that are true.

Through the real command line where the user would meet it (``python -m cuda_resolve``,
``python -m pip_plugin``), at COLUMNS=40 and 200; no network, no GPU.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _torch_env import torch_venv_template  # noqa: F401  (a fixture: a venv with a stand-in torch 2.14.1+cu130)

from cuda_resolve.install.target import (
    RULE,
    choose_target,
    is_base_interpreter,
    is_tool_environment,
)

DATA = Path(__file__).parent / "data"
PROFILES = DATA / "profiles"


def _run(
    *args: str,
    module: str = "cuda_resolve",
    columns: int = 200,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ if env is None else env)
    environ["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _venv_layout(prefix: Path, *, marker: str | None = None) -> Path:
    (prefix / "bin").mkdir(parents=True)
    python = prefix / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if marker:
        (prefix / marker).write_text("{}\n")
    return python


# -- 1. the target: the venv the command runs from, unless it is a tool's own ------------------


def test_the_venv_a_command_runs_from_is_the_target_before_virtual_env(tmp_path: Path) -> None:
    running = _venv_layout(tmp_path / "project" / ".venv")
    other = _venv_layout(tmp_path / "other")
    base = "/usr"
    environ = {"VIRTUAL_ENV": str(other.parent.parent), "HOME": str(tmp_path / "home")}
    choice = choose_target(None, environ, running=(str(running.parent.parent), base))
    assert (choice.python, choice.how) == (str(running), "the venv it runs from")
    # Not a venv (the tool runs from a base interpreter): VIRTUAL_ENV, as before.
    assert choose_target(None, environ, running=(base, base)).python == str(other)
    # --python wins over everything.
    assert (
        choose_target("/x/python", environ, running=(str(running.parent.parent), base)).how
        == "--python"
    )


@pytest.mark.parametrize(
    "where", ["pipx-home", "pipx-default", "pipx-marker", "uv-tool-dir", "uv-default", "uv-receipt"]
)
def test_a_tool_only_environment_is_never_the_target(tmp_path: Path, where: str) -> None:
    home = tmp_path / "home"
    environ = {"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share")}
    folder = {
        "pipx-home": tmp_path / "pipx" / "venvs" / "cuda-resolve",
        "pipx-default": home / ".local" / "pipx" / "venvs" / "cuda-resolve",
        "pipx-marker": tmp_path / "moved" / "cuda-resolve",
        "uv-tool-dir": tmp_path / "uvtools" / "cuda-resolve",
        "uv-default": home / ".local" / "share" / "uv" / "tools" / "cuda-resolve",
        "uv-receipt": tmp_path / "moved-uv" / "cuda-resolve",
    }[where]
    if where == "pipx-home":
        environ["PIPX_HOME"] = str(tmp_path / "pipx")
    if where == "uv-tool-dir":
        environ["UV_TOOL_DIR"] = str(tmp_path / "uvtools")
    marker = {"pipx-marker": "pipx_metadata.json", "uv-receipt": "uv-receipt.toml"}.get(where)
    _venv_layout(folder, marker=marker)
    user = _venv_layout(tmp_path / "user-venv")
    assert is_tool_environment(str(folder), environ)
    choice = choose_target(
        None, {**environ, "VIRTUAL_ENV": str(user.parent.parent)}, running=(str(folder), "/usr")
    )
    assert (choice.python, choice.how) == (str(user), "VIRTUAL_ENV")
    assert not is_tool_environment(str(user.parent.parent), environ)


def test_the_real_command_line_targets_its_own_venv_and_says_so(tmp_path: Path) -> None:
    assert sys.prefix != sys.base_prefix, "the tests run from the project's venv"
    other = _venv_layout(tmp_path / "other")
    env = dict(os.environ, VIRTUAL_ENV=str(other.parent.parent))
    done = _run("detect", env=env)
    assert done.returncode == 0, done.stderr
    own = os.path.join(sys.prefix, "bin", "python")
    assert f"target interpreter: {own} (from the venv it runs from)" in done.stdout
    # The same program reached through a pipx home is a tool's: the user's VIRTUAL_ENV is the
    # target.
    pipx = tmp_path / "pipx"
    (pipx / "venvs").mkdir(parents=True)
    (pipx / "venvs" / "cuda-resolve").symlink_to(sys.prefix)
    tool_python = pipx / "venvs" / "cuda-resolve" / "bin" / "python"
    tool_env = {k: v for k, v in env.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    tool_env.update(PIPX_HOME=str(pipx), PATH="/usr/bin:/bin", COLUMNS="200")
    done = subprocess.run(
        [str(tool_python), "-m", "cuda_resolve", "detect"],
        capture_output=True,
        text=True,
        env=tool_env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "target interpreter: /usr/bin/python3 (from python3 on PATH)" in done.stdout, done.stdout


def test_other_cuda_pip_commands_say_which_rule_chose_the_target() -> None:
    done = _run("--version", module="pip_plugin")  # pip's own --version, run by the target's pip
    assert done.returncode == 0, done.stderr
    own = os.path.join(sys.prefix, "bin", "python")
    assert (
        done.stderr.splitlines()[0]
        == f"cuda-pip: {own} -m pip (target chosen by the venv it runs from)"
    ), done.stderr
    assert done.stdout.startswith("pip "), done.stdout


def test_installing_into_a_base_interpreter_says_so_first(tmp_path: Path) -> None:
    base = os.path.join(sys.base_prefix, "bin", "python3")
    assert is_base_interpreter(base) and not is_base_interpreter(sys.executable)
    done = _run("install", "six", "--dry-run", "--python", base, "--no-index", module="pip_plugin")
    first = done.stderr.splitlines()[0]
    assert first.startswith(f"note: the target {base} is a base interpreter"), done.stderr
    assert "chosen by --python" in done.stderr
    venv = _run(
        "install", "six", "--dry-run", "--python", sys.executable, "--no-index", module="pip_plugin"
    )
    assert "base interpreter" not in venv.stderr and "chosen by --python" in venv.stderr


def test_the_rule_is_stated_once_the_same_way() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "install.md").read_text(encoding="utf-8")
    assert RULE in " ".join(docs.split()), "docs/install.md states the target rule in RULE's words"
    for module, args in (
        ("cuda_resolve", ("plan", "--help")),
        ("cuda_resolve", ("install", "--help")),
        ("pip_plugin", ("install", "--help")),
    ):
        shown = " ".join(_run(*args, module=module).stdout.split())
        assert RULE in shown, (module, args)


# -- 2. output that can be copied ------------------------------------------------------------------


@pytest.mark.parametrize("columns", [40, 200])
def test_plan_urls_and_the_command_to_carry_it_out_are_never_broken(columns: int) -> None:
    args = ("plan", "kaolin", "--profile", str(PROFILES / "rtx3090-torch21cu121-nvcc118.toml"))
    document = json.loads(_run(*args, "--json").stdout)
    urls = [u for item in document["install"] for u in (item.get("url"), item.get("index")) if u]
    assert any(len(u) > 80 for u in urls), urls  # a URL longer than the narrow terminal
    done = _run(*args, columns=columns)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for url in urls:
        assert any(url in line for line in lines), (url, done.stdout)
    command = shlex.join(document["command"])
    assert f"  {command}" in lines, done.stdout
    # Nothing of the plan is cut inside a word: every word of the JSON's rows is on one line.
    words = {
        w
        for item in document["install"]
        for w in (item["name"], item["version"], item.get("variant") or "")
        if w
    }
    for word in words:
        assert any(word in line.split() or f"({word})" in line.split() for line in lines), (
            word,
            done.stdout,
        )


# -- 2, 3, 5: a build through the real command line, with a stand-in compiler ----------------------

BACKEND = """\
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sleepy_backend import _write_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    print("[1/2] /usr/local/cuda/bin/nvcc -DTORCH_EXTENSION -c /src/csrc/slow_kernel.cu "
          "-o slow_kernel.o", flush=True)
    time.sleep(float(os.environ.get("SILENT_SECONDS", "5")))  # a compiler that prints nothing
    print("[2/2] c++ -shared slow_kernel.o -o sleepext.so", flush=True)
    return _write_wheel(wheel_directory)
"""


@pytest.fixture
def silent_build(tmp_path: Path, torch_venv_template: Path) -> tuple[list[str], dict[str, str]]:
    """(argv of `cuda-resolve build sleepext`, its environment): a build whose compiler is silent
    for SILENT_SECONDS (5), against a stand-in torch 2.14.1+cu130 and a stand-in nvcc 13.0."""
    from _torch_env import copy_venv, standin_cuda_toolkit

    python = copy_venv(
        tmp_path / "a-target-folder-with-a-long-name-so-the-path-outgrows-forty-columns" / "venv",
        torch_venv_template,
    )
    source = tmp_path / "sleepext"
    shutil.copytree(DATA / "packages" / "sleepext", source)
    (source / "silent_backend.py").write_text(BACKEND)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'build-backend = "sleepy_backend"', 'build-backend = "silent_backend"'
        )
    )
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        SLEEPY_PIDS=str(tmp_path / "pids"),
    )
    argv = [
        sys.executable,
        "-m",
        "cuda_resolve",
        "build",
        "sleepext",
        "--index",
        str(DATA / "index" / "sleepext"),
        "--python",
        str(python),
        "--arch-list",
        "9.0",
        "--source",
        str(source),
    ]
    return argv, env


@pytest.mark.parametrize("columns", [40, 200])
def test_build_prints_the_wheel_path_whole_and_the_driver_the_nodes_need(
    silent_build: tuple[list[str], dict[str, str]], columns: int
) -> None:
    argv, env = silent_build
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": str(columns), "SILENT_SECONDS": "0"},
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    wheel = done.stdout.strip()
    assert "\n" not in wheel and len(wheel) > 40 and Path(wheel).is_file(), (
        done.stdout
    )  # $(cuda-resolve build ...)
    # --arch-list: a cross-build; torch 2.14.1+cu130 needs driver >= 580 on the machines that run
    # it.
    said = " ".join(done.stderr.split())
    assert re.search(
        r"the machines that run these wheels need an NVIDIA driver >= 580\.\S* on Linux.*"
        r"torch 2\.14\.1\+cu130 uses CUDA 13\.0",
        said,
    ), done.stderr


def test_the_elapsed_time_moves_while_the_compiler_is_silent(
    silent_build: tuple[list[str], dict[str, str]],
) -> None:
    """stderr on a terminal: the status line is redrawn with a new elapsed time every second or
    two although the compiler prints nothing for 5 s, naming the unit it started last."""
    import pty

    argv, env = silent_build
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
        stdin=subprocess.DEVNULL,
        env={**env, "COLUMNS": "200"},
    )
    os.close(terminal)
    seen: list[tuple[float, str]] = []  # (when, a redrawn status line)
    buffer = ""
    started = time.monotonic()
    while True:
        try:
            chunk = os.read(controller, 65536).decode(errors="replace")
        except OSError:  # the terminal's other end closed: the command ended
            break
        if not chunk:
            break
        buffer += chunk
        *parts, buffer = re.split(r"\r\x1b\[K|\n", buffer)
        seen.extend((time.monotonic() - started, part) for part in parts if "compile units" in part)
    os.close(controller)
    assert process.wait(timeout=300) == 0
    silent = [(when, line) for when, line in seen if "1/2 compile units" in line]
    assert silent, seen
    assert all("slow_kernel.cu" in line for _, line in silent), silent
    elapsed = [int(re.search(r"(\d+) s$", line).group(1)) for _, line in silent]  # type: ignore[union-attr]
    assert len(set(elapsed)) >= 4, f"the elapsed time stood still during 5 silent seconds: {silent}"
    # No gap of more than two seconds between redraws while the compiler was silent.
    times = [when for when, _ in silent]
    assert max(b - a for a, b in itertools.pairwise(times)) <= 2.0, silent


# -- 4. a torch window, not Python, is why nothing fits
# ---------------------------------------------


def _profile_with_torch(tmp_path: Path, torch: str, *, driver: bool = True) -> Path:
    text = (PROFILES / "h200-healthy-handwritten.toml").read_text()
    text = text.replace('version = "3.12.3"', 'version = "3.11.7"').replace("2.11.0+cu130", torch)
    text = text.replace(
        'version = "580.159.04"\ncuda = "13.0"', 'version = "595.45.04"\ncuda = "13.2"'
    )
    if not driver:
        text = text.replace('[driver]\nversion = "595.45.04"\ncuda = "13.2"\n', "")
    path = tmp_path / "machine.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("extra", [(), ("--arch-list", "9.0")], ids=["gpu-here", "arch-list"])
def test_kaolin_on_a_torch_newer_than_every_recipe_names_the_window_and_the_torch_that_fits(
    tmp_path: Path, extra: tuple[str, ...]
) -> None:
    profile = _profile_with_torch(tmp_path, "2.16.0+cu132", driver=not extra)
    done = _run("plan", "kaolin", "--profile", str(profile), *extra)
    assert done.returncode == 1, done.stderr
    error, hint = done.stderr.splitlines()[-2:]
    assert "use a Python" not in hint and "not 3.11" not in error, done.stderr
    assert (
        "<2.16,>=2.5.1 (kaolin-master-d52da9f)" in error
        and "installed torch 2.16.0+cu132 is outside" in error
    ), error
    assert "cuda-pip install torch==2.15.0" in hint and "--allow-torch-change" in hint, hint


@pytest.mark.parametrize("extra", [(), ("--arch-list", "9.0")], ids=["gpu-here", "arch-list"])
def test_kaolin_on_the_torch_pip_installs_today_is_a_source_build_of_the_master_recipe(
    tmp_path: Path, extra: tuple[str, ...]
) -> None:
    # torch 2.15.0 is what a plain `pip install torch` gives (PyPI, 2026-10-28); the master
    # recipe was built against it (docs/evidence/kaolin-torch-2.15-*.md), so it is kept.
    profile = _profile_with_torch(tmp_path, "2.15.0+cu132", driver=not extra)
    done = _run("plan", "kaolin", "--profile", str(profile), *extra)
    assert done.returncode == 0, done.stderr
    assert "torch 2.15.0+cu132: already installed" in done.stdout, done.stdout
    assert (
        "source build against torch 2.15.0+cu132" in done.stdout
        and "(recipe kaolin-master-d52da9f)" in done.stdout
    ), done.stdout
    assert "torchvision 0.29.2+cu132: the release paired with torch 2.15.0+cu132" in done.stdout, (
        done.stdout
    )


# -- 6. one name policy ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "meant"), [("kaolinn", "kaolin"), ("pointnet2_ops_lib", "pointnet2_ops")]
)
def test_plan_and_cuda_pip_refuse_the_same_look_alikes(name: str, meant: str) -> None:
    for module, args in (
        ("cuda_resolve", ("plan", name)),
        ("pip_plugin", ("install", name, "--dry-run")),
    ):
        done = _run(*args, module=module)
        assert done.returncode == 2, (module, done.stdout, done.stderr)
        assert f"did you mean {meant}?" in done.stderr and f"--accept-name {name}" in done.stderr, (
            done.stderr
        )
        assert "Carry it out with" not in done.stdout
    accepted = _run("plan", name, "--accept-name", name)
    assert accepted.returncode == 0, accepted.stderr
    # The command plan prints is one cuda-pip accepts as it stands.
    assert f"  cuda-pip install {name} --accept-name {name}" in accepted.stdout.splitlines(), (
        accepted.stdout
    )


@pytest.mark.parametrize(
    "spelling",
    [["--profile", "machine.toml"], ["--profile=machine.toml"], ["--prof", "machine.toml"]],
)
def test_cuda_pip_install_with_a_profile_is_refused_by_cuda_pip_not_forwarded_to_pip(
    spelling: list[str],
) -> None:
    done = _run("install", "six", *spelling, "--dry-run", module="pip_plugin")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: cuda-pip install --prof"), done.stderr
    # issue 29: the command to paste, with the request and the profile given
    assert "cuda-resolve build six --profile machine.toml;" in done.stderr
    assert "no such option" not in done.stderr  # pip's own words: it was never asked


# -- 7. notes that are true ------------------------------------------------------------------------


def _old_pip_wheel() -> Path | None:
    """A pip older than 24.2 (its own CA bundle unless told otherwise) that ships with a Python
    here."""
    roots = {Path(sys.base_prefix).parent, Path("/usr/lib")}
    for root in roots:
        for wheel in sorted(
            root.glob("*/lib/python3*/ensurepip/_bundled/pip-2[23].*-py3-none-any.whl")
        ) + sorted(root.glob("python3*/ensurepip/_bundled/pip-2[23].*-py3-none-any.whl")):
            return wheel
    return None


def test_with_pip_cert_set_an_old_pip_gets_no_ca_bundle_note_and_no_doctor_error(
    tmp_path: Path,
) -> None:
    from packaging.version import Version

    from cuda_resolve.doctor.network import pip_trust_finding

    assert (
        pip_trust_finding(
            Version("23.2.1"), (3, 11), intercepted=True, truststore_installed=False
        ).status
        == "error"
    )
    trusted = pip_trust_finding(
        Version("23.2.1"), (3, 11), intercepted=True, truststore_installed=False, cert="/etc/ca.pem"
    )
    assert trusted.status == "ok" and "PIP_CERT=/etc/ca.pem" in trusted.found
    wheel = _old_pip_wheel()
    if wheel is None:
        pytest.skip("no pip < 24.2 wheel on this machine to make a target with")
    venv = tmp_path / "old-pip"
    subprocess.run(
        [os.path.join(sys.base_prefix, "bin", "python3"), "-m", "venv", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"}
    subprocess.run(
        [str(python), f"{wheel}/pip", "install", "-q", "--no-index", str(wheel)],
        check=True,
        timeout=120,
        env=clean,
    )
    links = tmp_path / "links"
    links.mkdir()
    from test_install_unit import _wheel

    _wheel(links, "tinypkg", "1.0", files={"tinypkg/__init__.py": "VALUE = 42\n"})
    bundle = tmp_path / "ca.pem"
    bundle.write_text(
        Path("/etc/ssl/certs/ca-certificates.crt").read_text()
        if Path("/etc/ssl/certs/ca-certificates.crt").is_file()
        else ""
    )
    install = (
        "install",
        "tinypkg",
        "--no-index",
        "--find-links",
        str(links),
        "--python",
        str(python),
    )
    with_cert = _run(*install, module="pip_plugin", env={**clean, "PIP_CERT": str(bundle)})
    assert with_cert.returncode == 0, with_cert.stderr
    assert "own CA bundle" not in with_cert.stderr, with_cert.stderr
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "-y", "-q", "tinypkg"],
        check=True,
        timeout=120,
        env=clean,
    )
    without = _run(*install, module="pip_plugin", env=clean)
    assert without.returncode == 0, without.stderr
    assert "verifies TLS with its own CA bundle" in " ".join(without.stderr.split()), (
        without.stderr
    )  # the note still comes where true


def test_a_profile_with_gpus_and_no_driver_is_valid_in_the_code_and_the_docs(
    tmp_path: Path,
) -> None:
    from cuda_resolve.profile import load_profile

    env = load_profile(_profile_with_torch(tmp_path, "2.14.1+cu130", driver=False))
    assert env.driver is None and [g.compute_capability for g in env.gpus] == [
        g.compute_capability for g in load_profile(PROFILES / "h200-healthy-handwritten.toml").gpus
    ]
    docs = (Path(__file__).parent.parent / "docs" / "profile-format.md").read_text(encoding="utf-8")
    assert "GPUs without a `[driver]` table are accepted" in docs
    errors = docs[docs.index("| problem | message") :]
    assert (
        "[driver] is missing" not in errors
    )  # the error table lists no error the code never gives


def _every_parser() -> list[tuple[str, object]]:
    import argparse

    from cuda_resolve.cli import build_parser

    found: list[tuple[str, object]] = []
    pending: list[tuple[str, argparse.ArgumentParser]] = [("cuda-resolve", build_parser())]
    while pending:
        name, parser = pending.pop()
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend((f"{name} {sub}", child) for sub, child in action.choices.items())
    return found


def test_help_texts_carry_no_rst_markup() -> None:
    rst = re.compile(r"``|:(?:mod|class|func|meth|attr):`")
    for name, parser in _every_parser():
        text = parser.format_help()  # type: ignore[attr-defined]
        assert not rst.search(text), f"{name} --help:\n{text}"
    for args in (("install", "--help"), ("--help",)):
        shown = _run(*args, module="pip_plugin").stdout
        assert shown and not rst.search(shown), shown


def test_version_names_the_index_date() -> None:
    done = _run("--version")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"cuda-resolve \S+ \(index of 20\d\d-\d\d-\d\d: the newest date its sources cite\)\n",
        done.stdout,
    ), done.stdout


@pytest.mark.parametrize("columns", [40, 200])
def test_help_is_never_broken_inside_a_word(columns: int) -> None:
    """argparse's default wraps at hyphens: `cuda-` at the end of one line, `pip` on the next."""
    for module, args in (
        ("pip_plugin", ("install", "--help")),
        ("cuda_resolve", ("build", "--help")),
        ("cuda_resolve", ("plan", "--help")),
    ):
        shown = _run(*args, module=module, columns=columns).stdout
        broken = [line for line in shown.splitlines() if re.search(r"\w-$", line)]
        assert shown and not broken, (module, args, broken)


def test_a_patch_reason_is_shown_whole_never_cut_inside_a_word(
    tmp_path: Path, silent_build: tuple[list[str], dict[str, str]]
) -> None:
    argv, env = silent_build
    index = tmp_path / "patched-index"
    shutil.copytree(DATA / "index" / "sleepext", index)
    recipe = index / "packages" / "sleepext.toml"
    reason = (
        "torch 2.14 removed the named-tensor at::zeros(size, names, dtype, layout, device, pin) "
        "overload: 'no matching function for call to zeros(...)' in mise.cpp:107"
    )
    recipe.write_text(
        recipe.read_text()
        + f'''
[[recipe.patch]]
file = "pyproject.toml"
find = "# tests/test_signals.py"
replace = "# patched: tests/test_signals.py"
reason = "{reason}"
'''
    )
    argv = [*argv[: argv.index("--index") + 1], str(index), *argv[argv.index("--index") + 2 :]]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "40", "SILENT_SECONDS": "0"},
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert (
        "applied 1 recipe patch(es): torch 2.14 removed the named-tensor at::zeros(size, names, "
        "dtype, layout, device, pin) overload"
    ) in said, done.stderr
