"""The product as users install it: the wheel, installed non-editable into a fresh venv, every
command run once from a folder outside the checkout (issue 25).

The checkout is not on the path of anything run here: commands are the fresh venv's
``cuda-resolve`` and ``cuda-pip``, run from a folder of their own, so a module or data file the
wheel lacks fails as it would for a user. Any exit 70 (an internal error: a traceback, a missing
module) fails. Marked ``installed`` (deselected by default): it installs the wheel's dependencies
from the package index, and in CI it also needs Slurm and pypiserver, which must start there
(under ``CI`` a service that cannot start fails the stage instead of skipping).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _slurm import Cluster, SlurmUnavailable, start_slurm
from _torch_env import copy_venv, standin_cuda_toolkit, standin_torch_venv
from test_lock_support import StaticIndex, make_wheel, serve, write_profile
from test_wheel_contents import build_wheel
from test_wheelhouse_served import ServerUnavailable, start_pypiserver, stop_server

pytestmark = pytest.mark.installed

DATA = Path(__file__).parent / "data"
CHECKOUT = Path(__file__).resolve().parent.parent
QUICKEXT_SOURCE = DATA / "packages" / "quickext"
QUICKEXT_INDEX = DATA / "index" / "quickext"
SLURM_PROFILES = [DATA / "slurm" / "node-a100.toml", DATA / "slurm" / "node-h100.toml"]
INTERNAL_ERROR = 70


def _unavailable(reason: str) -> None:
    """A service this stage needs cannot start: a failure in CI, a skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must provide it: .ci/run installs it)")
    pytest.skip(reason)


@dataclass(frozen=True)
class Installed:
    root: Path
    bin: Path
    elsewhere: Path
    environ: dict[str, str]

    def run(
        self, *argv: str, ok: tuple[int, ...] = (0,), timeout: float = 300, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        program = self.bin / argv[0]
        done = subprocess.run(
            [str(program), *argv[1:]],
            cwd=self.elsewhere,
            env={**self.environ, **extra},
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        said = (
            f"{' '.join(argv)} -> {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        assert done.returncode != INTERNAL_ERROR, said
        assert done.returncode in ok, said
        return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(root / "build")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # As the README installs it: pip upgraded first, then the wheel (not editable).
    upgraded = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-U", "pip"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    elsewhere, home = root / "elsewhere", root / "home"
    elsewhere.mkdir()
    home.mkdir()
    checkout_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(":") if p and p != checkout_bin]
    environ = {
        name: value
        for name, value in os.environ.items()
        if name not in {"VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "CUDA_RESOLVE_CONFIG"}
    }
    environ.update(
        PATH=":".join([str(venv / "bin"), *path]),
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        CUDA_RESOLVE_WHEELHOUSE=str(root / "wheelhouse"),
        CUDA_RESOLVE_CUDA_ARCH="",  # a machine without a GPU, whatever this one has
        CUDA_RESOLVE_DRIVER="",
        COLUMNS="200",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    return Installed(root=root, bin=venv / "bin", elsewhere=elsewhere, environ=environ)


@pytest.fixture(scope="module")
def target(installed: Installed) -> tuple[Path, Path]:
    """(a venv holding a stand-in torch 2.14.1 for CUDA 13.0, a stand-in CUDA 13.0 toolkit)."""
    folder = installed.root / "target"
    return standin_torch_venv(folder), standin_cuda_toolkit(folder / "cuda")


def test_every_module_of_the_installed_wheel_imports_from_the_venv(installed: Installed) -> None:
    # conda is not on the package index: conda_plugin is imported over a stand-in of the one
    # name it imports at load time (conda.plugins.hookimpl); the rest of conda is imported only
    # when a hook runs, inside conda.
    standin = installed.root / "standin-conda"
    (standin / "conda" / "plugins").mkdir(parents=True, exist_ok=True)
    (standin / "conda" / "__init__.py").write_text("")
    (standin / "conda" / "plugins" / "__init__.py").write_text("def hookimpl(f):\n    return f\n")
    script = textwrap.dedent(f"""
        import importlib, importlib.util, json, pkgutil, sys
        sys.path.append({str(standin)!r})
        loaded, outside = [], []
        for top in ("cuda_resolve", "pip_plugin", "conda_plugin"):
            package = importlib.import_module(top)
            names = [top] + [m.name for m in pkgutil.walk_packages(package.__path__, top + ".")]
            for name in names:
                if name.endswith(".__main__"):  # runs a command when imported: found, not run
                    module = importlib.util.find_spec(name)
                    loaded.append(name)
                    if not module.origin.startswith(sys.prefix):
                        outside.append((name, module.origin))
                    continue
                try:
                    module = importlib.import_module(name)
                except ModuleNotFoundError as exc:  # conda's own modules, run inside conda
                    if not (top == "conda_plugin" and exc.name.split(".")[0] == "conda"):
                        raise
                    module = importlib.util.find_spec(name)
                    module.__file__ = module.origin
                loaded.append(name)
                if not module.__file__.startswith(sys.prefix):
                    outside.append((name, module.__file__))
        print(json.dumps({{"loaded": loaded, "outside": outside}}))
    """)
    done = installed.run("python", "-c", script)
    report = json.loads(done.stdout)
    assert report["outside"] == []
    assert {"cuda_resolve.slurm", "cuda_resolve.index_data", "conda_plugin.plugin"} <= set(
        report["loaded"]
    )
    # The conda entry point names the module just imported.
    entry = installed.run(
        "python",
        "-c",
        "from importlib.metadata import entry_points; "
        "print([e.value for e in entry_points(group='conda')])",
    )
    assert "conda_plugin.plugin" in entry.stdout


def _subcommands(help_text: str) -> list[str]:
    """The subcommands an argparse --help lists under its positional arguments."""
    section = help_text.split("positional arguments:", 1)
    if len(section) < 2:
        return []
    body = section[1].split("\noptions:", 1)[0]
    return re.findall(r"^    ([a-z][a-z-]*)(?:\s|$)", body, flags=re.MULTILINE)


def test_every_command_and_subcommand_answers_help(installed: Installed) -> None:
    installed.run("cuda-resolve", "--version")
    seen = []
    pending = [["cuda-resolve"]]
    while pending:
        words = pending.pop()
        shown = installed.run(*words, "--help").stdout
        seen.append(" ".join(words))
        pending += [[*words, name] for name in _subcommands(shown) if len(words) < 3]
    assert {
        "cuda-resolve detect",
        "cuda-resolve wheelhouse publish",
        "cuda-resolve mirror set",
        "cuda-resolve index refresh",
        "cuda-resolve lock",
        "cuda-resolve sync",
        "cuda-resolve env",
        "cuda-resolve undo",
    } <= set(seen), seen
    installed.run("cuda-pip", "--help")
    installed.run("cuda-pip", "install", "--help")


def test_detect_and_doctor_answer_json(installed: Installed) -> None:
    detected = json.loads(installed.run("cuda-resolve", "detect", "--json").stdout)
    assert detected["machine"]["os"] == "linux"
    doctor = installed.run("cuda-resolve", "doctor", "--json", ok=(0, 1))
    assert isinstance(json.loads(doctor.stdout), dict)


def test_plan_from_a_profile_and_plan_json_then_apply_dry_run(installed: Installed) -> None:
    profile = write_profile(
        installed.root / "h200.toml",
        driver="580.65.06",
        gpus=[("NVIDIA H200", "9.0")],
        toolkit="13.0",
    )
    shown = installed.run("cuda-resolve", "plan", "pointnet2_ops", "--profile", str(profile))
    assert "pointnet2_ops" in shown.stdout
    empty = installed.root / "empty-venv"
    subprocess.run([sys.executable, "-m", "venv", str(empty)], check=True, timeout=300)
    python = str(empty / "bin" / "python")
    decided = installed.run(
        "cuda-resolve",
        "plan",
        "torch",
        "pointnet2_ops",
        "--arch-list",
        "9.0",
        "--python",
        python,
        "--json",
    )
    plan = installed.root / "plan.json"
    plan.write_text(decided.stdout)
    applied = installed.run("cuda-resolve", "apply", str(plan), "--dry-run", "--python", python)
    assert "dry run: nothing was built or installed" in applied.stdout + applied.stderr
    # A plan from a newer cuda-resolve: the way to upgrade is the one for a wheel file, read from
    # the direct_url.json that pip wrote (walk B12: "pip install -U cuda-resolve" went nowhere).
    newer = installed.root / "newer-plan.json"
    newer.write_text(json.dumps({**json.loads(decided.stdout), "format": 99}))
    refused = installed.run(
        "cuda-resolve", "apply", str(newer), "--dry-run", "--python", python, "--json", ok=(2,)
    )
    hint = json.loads(refused.stdout)["hint"]
    assert "it was installed from /" in hint and ".whl: " in hint, hint
    assert f"{installed.bin / 'python'} -m pip install -U NEWER-FILE" in hint, hint


@pytest.fixture(scope="module")
def lock_index(installed: Installed) -> Iterator[tuple[str, Path]]:
    root = installed.root / "lockbench"
    built = root / "built"
    index = StaticIndex(root / "index")
    index.add(make_wheel(built, "filelock", "3.20.0"))
    index.add(make_wheel(built, "tinyutil", "1.0", requires=["filelock>=3"]))
    write_profile(root / "cpu-box.toml", name="cpu")
    with serve(root / "index") as url:
        yield url, root


def test_lock_no_build_then_sync_check_sync_and_undo(
    installed: Installed, lock_index: tuple[str, Path]
) -> None:
    url, root = lock_index
    lock = installed.root / "pylock.toml"
    installed.run(
        "cuda-resolve",
        "lock",
        "tinyutil",
        "--no-build",
        "--index-url",
        f"{url}/simple",
        "--profile",
        str(root / "cpu-box.toml"),
        "-o",
        str(lock),
    )
    assert "tinyutil" in lock.read_text()
    venv = installed.root / "sync-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    drift = installed.run(
        "cuda-resolve", "sync", str(lock), "--check", "--python", python, "--json", ok=(1,)
    )
    assert "tinyutil" in drift.stdout
    installed.run("cuda-resolve", "sync", str(lock), "--python", python, PIP_FIND_LINKS="")
    installed.run("cuda-resolve", "sync", str(lock), "--check", "--python", python)
    undone = installed.run("cuda-resolve", "undo", "--last", "--python", python, "--json")
    assert isinstance(json.loads(undone.stdout), dict)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "csh"])
def test_env_prints_for_every_shell(
    installed: Installed, target: tuple[Path, Path], shell: str
) -> None:
    python, _ = target
    printed = installed.run("cuda-resolve", "env", "--shell", shell, "--python", str(python))
    program = shutil.which(shell) or shutil.which("tcsh" if shell == "csh" else shell)
    if program is None:
        _unavailable(f"{shell} is not installed")
    evaluated = subprocess.run(
        [program, "-c", printed.stdout + "\nprintenv PATH"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(installed.root / "home")},
    )
    assert evaluated.returncode == 0, (printed.stdout, evaluated.stderr)


def test_env_json_slurm_and_jupyter(installed: Installed, target: tuple[Path, Path]) -> None:
    python, _ = target
    assert json.loads(
        installed.run("cuda-resolve", "env", "--json", "--python", str(python)).stdout
    )
    assert (
        "export" in installed.run("cuda-resolve", "env", "--slurm", "--python", str(python)).stdout
    )
    installed.run(
        "cuda-resolve", "env", "--jupyter", "wheel-test", "--python", str(python), ok=(0, 1)
    )


def test_mirror_list_show_and_set_dry_run(installed: Installed) -> None:
    listed = installed.run("cuda-resolve", "mirror", "list")
    preset = listed.stdout.split()[0]
    installed.run("cuda-resolve", "mirror", "show")
    installed.run("cuda-resolve", "mirror", "set", preset, "--dry-run")
    assert not (installed.root / "home" / ".config" / "pip" / "pip.conf").exists()


def test_index_validate_and_show(installed: Installed) -> None:
    installed.run("cuda-resolve", "index", "validate")
    installed.run("cuda-resolve", "index", "show", "torch")


def test_a_hint_names_a_document_installed_with_the_tool(installed: Installed) -> None:
    """User walk C10: hints named docs/index-format.md, a path in a checkout the user of the
    installed tool does not have; the documents now ship in the wheel and the hint names that
    file."""
    broken = installed.elsewhere / "broken-index"
    (broken / "packages").mkdir(parents=True, exist_ok=True)
    (broken / "packages" / "bad.toml").write_text("format = [\n")
    done = installed.run(
        "cuda-resolve", "index", "show", "torch", "--index", str(broken), ok=(1, 2)
    )
    named = re.search(r"see (\S+index-format\.md);", done.stdout + done.stderr)
    assert named, done.stdout + done.stderr
    document = Path(named.group(1))
    assert document.is_file() and "site-packages" in document.parts, document
    assert "docs/evidence" not in (done.stdout + done.stderr)


def test_cuda_pip_builds_installs_and_checks_the_quick_extension(
    installed: Installed, target: tuple[Path, Path]
) -> None:
    python, cuda = target
    venv = copy_venv(installed.root / "install-target", python.parent.parent)
    toolkit = {
        "CUDA_HOME": str(cuda),
        "PATH": f"{cuda / 'bin'}:{installed.environ['PATH']}",
        # A wheelhouse of its own: the Slurm test builds both profiles into the shared one.
        "CUDA_RESOLVE_WHEELHOUSE": str(installed.root / "install-wheelhouse"),
    }
    argv = ["quickext", "--index", str(QUICKEXT_INDEX), "--source", str(QUICKEXT_SOURCE)]
    argv += ["--python", str(venv), "--arch-list", "8.0"]
    dry = installed.run("cuda-pip", "install", *argv, "--dry-run", **toolkit)
    assert "dry run" in dry.stdout + dry.stderr
    done = installed.run("cuda-pip", "install", *argv, "--json", **toolkit)
    assert json.loads(done.stdout)["result"]["changed"], done.stdout
    listed = subprocess.run(
        [str(venv), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True
    )
    assert "quickext" in {item["name"] for item in json.loads(listed.stdout)}


@pytest.fixture(scope="module")
def slurm(installed: Installed) -> Iterator[Cluster]:
    try:
        cluster = start_slurm(installed.root / "slurm")
    except SlurmUnavailable as exc:
        _unavailable(f"Slurm cannot start here: {exc}")
        raise
    try:
        yield cluster
    finally:
        cluster.stop()


def test_build_slurm_then_wheelhouse_list_and_publish_to_pypiserver(
    installed: Installed, target: tuple[Path, Path], slurm: Cluster
) -> None:
    python, cuda = target
    built = installed.run(
        "cuda-resolve",
        "build",
        "quickext",
        "--index",
        str(QUICKEXT_INDEX),
        "--python",
        str(python),
        "--source",
        str(QUICKEXT_SOURCE),
        "--profile",
        str(SLURM_PROFILES[0]),
        "--profile",
        str(SLURM_PROFILES[1]),
        "--slurm",
        "--json",
        timeout=600,
        SLURM_CONF=slurm.environ["SLURM_CONF"],
        CUDA_HOME=str(cuda),
        PATH=f"{cuda / 'bin'}:{installed.bin}:/usr/bin:/bin:/usr/sbin",
        CUDA_RESOLVE_SLURM_DIR=str(installed.root / "runs"),
        CUDA_RESOLVE_SLURM_POLL="2",
    )
    report = json.loads(built.stdout)
    assert [task["state"] for task in report["tasks"]] == ["built", "built"], report
    listed = installed.run("cuda-resolve", "wheelhouse", "list", "--json")
    assert len(json.loads(listed.stdout)["entries"]) == 2, listed.stdout
    installed.run("cuda-resolve", "wheelhouse", "path")

    password = "installed-wheel-pw"
    try:
        server, packages = start_pypiserver(installed.root / "pypiserver", "lab", password)
    except ServerUnavailable as exc:
        _unavailable(str(exc))
        raise
    no_certs = installed.root / "no-certs"
    no_certs.mkdir(exist_ok=True)
    upload = server.upload_url.replace("https://", f"https://lab:{password}@")
    try:
        published = installed.run(
            "cuda-resolve",
            "wheelhouse",
            "publish",
            "--to",
            upload,
            "--json",
            SSL_CERT_FILE=str(server.ca_file),
            SSL_CERT_DIR=str(no_certs),
            REQUESTS_CA_BUNDLE="",
        )
        assert password not in published.stdout + published.stderr
        on_server = sorted(p.name for p in packages.glob("quickext-*.whl"))
        assert len(on_server) == 2, (on_server, published.stdout)
    finally:
        stop_server(server)
