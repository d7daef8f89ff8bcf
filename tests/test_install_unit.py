"""cuda-pip and the executor without torch: argument splitting, the typo guard, the target rule,
build-log diagnosis, and real pip runs against a PyTorch-style index served on loopback (install,
undo after a failure, an index that does not answer)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import copy_venv

from cuda_resolve.build.buildenv import max_jobs, unsatisfied
from cuda_resolve.build.diagnose import diagnose, error_lines
from cuda_resolve.errors import UsageError
from cuda_resolve.install.names import edit_distance_at_most_one, near_miss
from cuda_resolve.install.target import choose_target
from pip_plugin.__main__ import split_arguments

# -- pure pieces ------------------------------------------------------------------------------


def test_split_arguments_separates_our_options_pips_and_requirements() -> None:
    own, pip, reqs = split_arguments(
        [
            "-i",
            "https://mirror/simple",
            "--python",
            "/env/bin/python",
            "kaolin",
            "--no-deps",
            "-rreq.txt",
            "--smoke",
            "--extra-index-url=https://x/simple",
            "numpy>=1",
            "--arch-list",
            "8.6",
        ]
    )
    assert own == ["--python", "/env/bin/python", "--smoke", "--arch-list", "8.6"]
    assert pip == [
        "-i",
        "https://mirror/simple",
        "--no-deps",
        "-rreq.txt",
        "--extra-index-url=https://x/simple",
    ]
    assert reqs == ["kaolin", "numpy>=1"]


def test_the_option_that_disables_tls_verification_is_refused() -> None:
    option = "--trusted" + "-host"
    with pytest.raises(UsageError, match="TLS verification off"):
        split_arguments([option, "mirror.example", "kaolin"])
    with pytest.raises(UsageError):
        split_arguments([f"{option}=mirror.example", "kaolin"])


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("kaolinn", "kaolin"),
        ("pointnet2_op", "pointnet2_ops"),
        ("kaoiln", "kaolin"),
        ("pointnet2-opss", "pointnet2_ops"),
    ],
)
def test_one_edit_from_a_curated_package_is_caught(typed: str, meant: str) -> None:
    assert near_miss(typed, ["kaolin", "pointnet2_ops"]) == meant


@pytest.mark.parametrize("name", ["torchx", "numpy", "kaolin", "pointnet2-ops", "kao", "requests"])
def test_ordinary_names_pass(name: str) -> None:
    assert near_miss(name, ["kaolin", "pointnet2_ops"]) is None


def test_edit_distance() -> None:
    assert edit_distance_at_most_one("abc", "acb")
    assert not edit_distance_at_most_one("abcd", "badc")
    assert not edit_distance_at_most_one("abc", "abcde")


def test_target_rule_order(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    conda = tmp_path / "conda"
    (conda / "bin").mkdir(parents=True)
    (conda / "bin" / "python").write_text("#!/bin/sh\n")
    (conda / "bin" / "python").chmod(0o755)
    assert choose_target("/x/python", {"VIRTUAL_ENV": str(venv)}).how == "--python"
    assert choose_target(os.path.join(".venv", "bin", "python")).python == os.path.abspath(
        ".venv/bin/python"
    )
    # Run from a base interpreter (the venv it runs from comes first: tests/test_first_hour.py).
    base = (sys.base_prefix, sys.base_prefix)
    assert choose_target(
        None, {"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": str(conda)}, running=base
    ).python == str(python)
    assert (
        choose_target(None, {"CONDA_PREFIX": str(conda), "PATH": ""}, running=base).how
        == "CONDA_PREFIX"
    )
    with pytest.raises(UsageError, match="no target environment"):
        choose_target(None, {"PATH": str(tmp_path / "empty")}, running=base)
    with pytest.raises(UsageError, match=r"VIRTUAL_ENV=.*no Python interpreter"):
        choose_target(None, {"VIRTUAL_ENV": str(tmp_path / "gone")}, running=base)


@pytest.mark.parametrize(
    ("log", "kind"),
    [
        ("nvcc fatal   : Unsupported gpu architecture 'compute_37'", "unsupported-arch"),
        (
            "/usr/include/ATen/cuda/CUDAContext.h:10:10: fatal error: cusparse.h: No such file "
            "or directory",
            "missing-header",
        ),
        (
            "#error -- unsupported GNU version! gcc versions later than 12 are not supported!",
            "compiler-version",
        ),
        (
            "ImportError: /x/_ext.so: undefined symbol: _ZN3c106detail19maybe_wrap_dim_slowEllb",
            "undefined-symbol",
        ),
        ("c++: fatal error: Killed signal terminated program cc1plus", "out-of-memory"),
        ("ModuleNotFoundError: No module named 'torch'", "no-torch"),
    ],
)
def test_known_failures_are_diagnosed(log: str, kind: str) -> None:
    found = diagnose(["building...", log, "error: command failed"])
    assert found is not None and found[0] == kind


def test_error_lines_keep_what_matters() -> None:
    lines = [
        "[1/2] nvcc ...",
        "In file included from x.h:1:",
        'a.cu(3): error: identifier "foo" is undefined',
        "note: see",
        "ninja: build stopped",
    ]
    assert error_lines(lines) == ['a.cu(3): error: identifier "foo" is undefined']


def test_max_jobs_is_bounded_by_memory() -> None:
    assert max_jobs(16, 64 * 1024**3) == 16
    assert max_jobs(16, 5 * 1024**3) == 2
    assert max_jobs(4, None) == 4
    assert max_jobs(8, 100) == 1


def test_unsatisfied_build_requirements() -> None:
    assert unsatisfied(
        ["setuptools>=77", "ninja", "numpy"],
        {"setuptools": "65.5.0", "ninja": None, "numpy": "2.0"},
    ) == ["setuptools>=77", "ninja"]


# -- cuda-pip through its command line ----------------------------------------------------------


def _cuda_pip(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ if env is None else env)
    environ.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [sys.executable, "-m", "pip_plugin", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_a_typo_of_a_curated_package_is_refused_unless_confirmed() -> None:
    done = _cuda_pip("install", "kaolinn", "--python", sys.executable, "--dry-run")
    assert done.returncode == 2
    assert "did you mean kaolin?" in done.stderr and "--accept-name kaolinn" in done.stderr
    accepted = _cuda_pip(
        "install", "kaolinn", "--python", sys.executable, "--dry-run", "--accept-name", "kaolinn"
    )
    assert accepted.returncode == 0, accepted.stderr
    assert "-m pip install --disable-pip-version-check kaolinn" in accepted.stdout


def test_ordinary_names_pass_through_untouched() -> None:
    done = _cuda_pip(
        "install",
        "torchx",
        "numpy>=1.20",
        "--no-deps",
        "--python",
        sys.executable,
        "--dry-run",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["plan"]["pass_through"] == ["torchx", "numpy>=1.20"]
    assert report["prepared"]["pip"][-1]["args"] == ["--no-deps", "torchx", "numpy>=1.20"]


def _wheel(folder: Path, name: str, version: str, *, files: dict[str, str]) -> Path:
    """A minimal valid wheel (py3-none-any) with a correct RECORD."""
    dist = f"{name}-{version}.dist-info"
    contents = dict(files)
    contents[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    contents[f"{dist}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for path, text in contents.items():
        digest = (
            base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        )
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    contents[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, text in contents.items():
            archive.writestr(member, text)
    path.write_bytes(buffer.getvalue())
    return path


@pytest.fixture
def empty_venv(tmp_path: Path) -> Path:
    return copy_venv(tmp_path / "venv")  # a copy of the session's template venv (pip, nothing else)


def _freeze(python: Path) -> str:
    return subprocess.run(
        [str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True
    ).stdout


def test_an_ordinary_package_is_really_installed_by_pip(tmp_path: Path, empty_venv: Path) -> None:
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "tinypkg", "1.0", files={"tinypkg/__init__.py": "VALUE = 42\n"})
    done = _cuda_pip(
        "install", "--python", str(empty_venv), "--no-index", "--find-links", str(links), "tinypkg"
    )
    assert done.returncode == 0, done.stderr
    value = subprocess.run(
        [str(empty_venv), "-c", "import tinypkg; print(tinypkg.VALUE)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert value.stdout.strip() == "42"


class _TorchIndex(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def torch_index(tmp_path: Path) -> Iterator[str]:
    """A PyTorch-style index (``/whl/cu126/torch/``) on loopback with a tiny stand-in torch
    wheel."""
    root = tmp_path / "served"
    project = root / "whl" / "cu126" / "torch"
    project.mkdir(parents=True)
    wheel = _wheel(
        project,
        "torch",
        "2.6.0+cu126",
        files={
            "torch/__init__.py": "__version__ = '2.6.0+cu126'\n",
            "torch/version.py": "__version__ = '2.6.0+cu126'\ncuda = '12.6'\n",
        },
    )
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (project / "index.html").write_text(
        f'<html><body><a href="{wheel.name}#sha256={sha}">{wheel.name}</a></body></html>'
    )
    (root / "whl" / "cu126" / "index.html").write_text(
        '<html><body><a href="torch/">torch</a></body></html>'
    )

    def handler(*args: object, **kwargs: object) -> _TorchIndex:
        return _TorchIndex(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/whl/"
    finally:
        server.shutdown()
        server.server_close()


def _torch_pin(tmp_path: Path, torch_index: str) -> str:
    """What the torch step installs once the plan is pinned: the served file and its hash."""
    name = "torch-2.6.0+cu126-py3-none-any.whl"
    sha = hashlib.sha256(
        (tmp_path / "served" / "whl" / "cu126" / "torch" / name).read_bytes()
    ).hexdigest()
    return f"torch @ {torch_index}cu126/torch/{name}#sha256={sha}"


def _env_with_torch_index(tmp_path: Path, url: str) -> dict[str, str]:
    config = tmp_path / "config.toml"
    config.write_text(f'[pytorch]\nlayout = "simple"\nurl = "{url}"\n')
    # An RTX 3060-class machine on driver 560: torch 2.6.0+cu126 comes from the PyTorch index.
    return dict(
        os.environ,
        CUDA_RESOLVE_CONFIG=str(config),
        CUDA_RESOLVE_DRIVER="560.35.03",
        CUDA_RESOLVE_CUDA_ARCH="8.6",
    )


def test_torch_comes_from_the_torch_index_alone(
    tmp_path: Path, empty_venv: Path, torch_index: str
) -> None:
    env = _env_with_torch_index(tmp_path, torch_index)
    done = _cuda_pip(
        "install", "torch==2.6.0+cu126", "--python", str(empty_venv), "--json", env=env
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [step] = report["prepared"]["pip"]
    # Only the torch family is asked of that index: no other name can be taken from it; the plan
    # was pinned to the file that index lists, with its hash, before pip ran.
    assert step["args"] == [
        "--index-url",
        f"{torch_index}cu126/",
        _torch_pin(tmp_path, torch_index),
    ]
    [torch_item] = report["plan"]["install"]
    assert torch_item["sha256"] == _torch_pin(tmp_path, torch_index).rsplit("=", 1)[1]
    assert {"name": "torch", "before": None, "after": "2.6.0+cu126"} in report["result"]["changed"]
    assert report["result"]["verified_imports"] == ["torch"]


def test_a_failed_install_is_undone(tmp_path: Path, empty_venv: Path, torch_index: str) -> None:
    env = _env_with_torch_index(tmp_path, torch_index)
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    before = _freeze(empty_venv)
    # The torch step succeeds; the second step cannot find its package: pip fails after torch is in.
    done = _cuda_pip(
        "install",
        "torch==2.6.0+cu126",
        "cuda-resolve-test-no-such-package",
        "--no-index",
        "--find-links",
        str(empty),
        "--python",
        str(empty_venv),
        env=env,
    )
    assert done.returncode == 1
    assert "pip install (extensions and the rest) failed" in done.stderr
    assert "restored: torch 2.6.0+cu126 removed" in done.stderr or "restored:" in done.stderr
    assert _freeze(empty_venv) == before


def test_a_file_whose_hash_differs_from_its_index_page_is_refused_and_nothing_changes(
    tmp_path: Path, empty_venv: Path, torch_index: str
) -> None:
    page = tmp_path / "served" / "whl" / "cu126" / "torch" / "index.html"
    page.write_text(re.sub(r"sha256=[0-9a-f]{64}", "sha256=" + "0" * 64, page.read_text()))
    env = _env_with_torch_index(tmp_path, torch_index)
    before = _freeze(empty_venv)
    done = _cuda_pip("install", "torch==2.6.0+cu126", "--python", str(empty_venv), env=env)
    assert done.returncode == 1
    assert "0" * 64 in done.stderr or "hash" in done.stderr.lower(), done.stderr
    assert _freeze(empty_venv) == before


@pytest.mark.slow  # waits out shipped timeouts and retries: 8 to 12 s
def test_an_index_that_does_not_answer_fails_fast_and_installs_nothing(
    tmp_path: Path, empty_venv: Path
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = _env_with_torch_index(tmp_path, f"http://127.0.0.1:{port}/whl/")
    before = _freeze(empty_venv)
    started = time.monotonic()
    done = _cuda_pip("install", "torch==2.6.0+cu126", "--python", str(empty_venv), env=env)
    assert time.monotonic() - started < 30
    assert done.returncode == 1
    assert f"127.0.0.1:{port}/whl/cu126/ did not answer" in done.stderr
    assert "mirror set" in done.stderr and "mirror test" in done.stderr
    # The URL came from the config's [pytorch] url, not from "the plan" (user walk C15).
    said = " ".join(done.stderr.split())
    assert "(set by the [pytorch] url of cuda-resolve's config, for" in said, said
    assert "the configured mirror does not answer" in said
    assert _freeze(empty_venv) == before


def test_an_index_from_pips_own_configuration_is_checked_before_anything_is_installed(
    tmp_path: Path, empty_venv: Path, torch_index: str
) -> None:
    """pip reads a configuration file's extra index in every step but the torch one (which asks the
    PyTorch index alone, issue 15): it must answer first."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nextra-index-url = http://127.0.0.1:{port}/simple\n")
    env = _env_with_torch_index(tmp_path, torch_index)
    env["PIP_CONFIG_FILE"] = str(config)
    before = _freeze(empty_venv)
    done = _cuda_pip("install", "torch==2.6.0+cu126", "six", "--python", str(empty_venv), env=env)
    assert done.returncode == 1
    assert f"127.0.0.1:{port}/simple did not answer" in done.stderr
    assert str(config) in done.stderr  # names the setting that brought it in
    assert "for extensions and the rest" in done.stderr and "for torch family" not in done.stderr
    assert _freeze(empty_venv) == before


def test_build_for_a_profiles_gpus_on_a_machine_without_one() -> None:
    """A login node builds for its compute nodes: the arch list comes from the profile's GPUs."""
    profile = Path(__file__).parent / "data" / "profiles" / "h200-detected-2026-12-02.toml"
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "build",
            "pointnet2_ops",
            "--profile",
            str(profile),
            "--python",
            sys.executable,
            "--dry-run",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 and "toolkit" in done.stderr:
        pytest.skip(f"no CUDA toolkit here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    [build] = json.loads(done.stdout)["prepared"]["builds"]
    assert build["arch_list"] == "9.0" and build["variables"]["TORCH_CUDA_ARCH_LIST"] == "9.0"


def test_build_with_an_arch_list_is_for_other_machines_but_install_needs_this_gpu_covered() -> None:
    """On an H200 a lab builds for its A100 and A6000 nodes: `build --arch-list 8.0;8.6` makes that
    wheel; a plan to install it here would have no kernel for the H200, so it is still refused."""
    profile = Path(__file__).parent / "data" / "profiles" / "h200-detected-2026-12-02.toml"
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "build",
            "pointnet2_ops",
            "--profile",
            str(profile),
            "--arch-list",
            "8.0;8.6",
            "--python",
            sys.executable,
            "--dry-run",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if built.returncode != 0 and "toolkit" in built.stderr:
        pytest.skip(f"no CUDA toolkit here: {built.stderr.strip()}")
    assert built.returncode == 0, built.stderr
    [build] = json.loads(built.stdout)["prepared"]["builds"]
    assert build["arch_list"] == "8.0;8.6"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "plan",
            "pointnet2_ops",
            "--profile",
            str(profile),
            "--arch-list",
            "8.0;8.6",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert installed.returncode == 1, installed.stdout
    assert "has no kernels for 9.0" in installed.stdout + installed.stderr


def test_other_pip_commands_pass_straight_through(empty_venv: Path) -> None:
    done = _cuda_pip("list", "--python", str(empty_venv), "--format=json")
    assert done.returncode == 0, done.stderr
    assert "pip" in {entry["name"] for entry in json.loads(done.stdout)}


def _fake_python(folder: Path, pip_version: str, truststore: bool) -> str:
    """An "interpreter" that answers cuda-pip's pip probe with a given version."""
    script = folder / "python"
    answer = json.dumps(
        {"pip": pip_version, "truststore": truststore, "distributions": [["pip", pip_version]]}
    )
    script.write_text(f"#!/bin/sh\necho '{answer}'\n")
    script.chmod(0o755)
    return str(script)


def test_old_pip_is_refused_with_the_upgrade_command(tmp_path: Path) -> None:
    from cuda_resolve.errors import InstallError
    from cuda_resolve.install.pip import pip_facts_and_distributions, trust_options

    with pytest.raises(InstallError, match=r"pip 21.3; cuda-pip needs pip >= 22") as info:
        pip_facts_and_distributions(_fake_python(tmp_path, "21.3", False), {})
    assert "-m pip install -U pip" in (info.value.hint or "")
    facts, _ = pip_facts_and_distributions(_fake_python(tmp_path, "23.2.1", True), {})
    assert trust_options(facts) == (["--use-feature=truststore"], None)
    facts, _ = pip_facts_and_distributions(_fake_python(tmp_path, "23.2.1", False), {})
    options, note = trust_options(facts)
    assert options == [] and note is not None and "upgrade" in note
    facts, _ = pip_facts_and_distributions(_fake_python(tmp_path, "24.2", False), {})
    assert trust_options(facts) == ([], None)


def test_a_source_checkout_at_another_revision_is_refused(tmp_path: Path) -> None:
    """--source that is a git checkout must be at the recipe's revision (read through git)."""
    from cuda_resolve.build.source import prepare_source
    from cuda_resolve.errors import BuildError
    from cuda_resolve.index.load import load_index

    recipe = (
        load_index([Path(__file__).parent / "data" / "index" / "cuext"]).package("cuext").recipes[0]
    )  # type: ignore[union-attr]
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "setup.py").write_text("print('x')\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    with pytest.raises(  # the pin is not in its history: another repository (user walk C7)
        BuildError, match="does not hold recipe cuext-fixture's revision 000000000000"
    ):
        prepare_source(recipe, tmp_path / "work", torch_version="2.14.1", source_dir=checkout)


def test_cuda_pips_own_options_are_the_ones_its_parser_defines() -> None:
    import argparse

    from cuda_resolve.cli._act import add_action_options
    from pip_plugin.__main__ import OWN_FLAGS, OWN_VALUE_OPTIONS

    parser = argparse.ArgumentParser(add_help=False)
    add_action_options(parser, install=True)
    options = {
        option: action.nargs != 0 for action in parser._actions for option in action.option_strings
    }
    assert {o for o, takes_value in options.items() if takes_value} == OWN_VALUE_OPTIONS
    assert {o for o, takes_value in options.items() if not takes_value} == OWN_FLAGS


# -- requirement files (-r) -------------------------------------------------------------------


def test_requirement_files_are_read_as_pip_reads_them(tmp_path: Path) -> None:
    from cuda_resolve.install.reqfile import read_requirement_files, requirement_file_options

    (tmp_path / "sub dir").mkdir()
    (tmp_path / "constraints.txt").write_text("pointnet2_ops<4\n")
    top = tmp_path / "requirements.txt"
    top.write_text(
        "numpy>=1.20  # a comment\n"
        "# kaolin in a comment is not a request\n"
        '-r "sub dir/more.txt"\n'
        "-c constraints.txt\n"
        "kaolin==0.18.0 \\\n    --hash=sha256:" + "0" * 64 + "\n"
        "-e ./local-checkout\n"
        "./some/path\n"
        "https://example.invalid/x.whl#egg=x\n"
        "torch${TORCH_SPEC}\n"
        "-r https://example.invalid/remote.txt\n"
    )
    # UTF-16 with a byte-order mark, as PowerShell 5 writes it; a line continued without a space.
    (tmp_path / "sub dir" / "more.txt").write_text(
        'pointnet2\\\n_ops; python_version >= "3"\n-r ../requirements.txt\n', encoding="utf-16"
    )
    reading = read_requirement_files(
        requirement_file_options(["--no-deps", "-r", str(top)]), environ={"TORCH_SPEC": ">=2.1"}
    )
    assert [(r.text, r.origin, r.hashed, r.constraint) for r in reading.requirements] == [
        ("numpy>=1.20", f"{top}:1", False, False),
        (
            'pointnet2_ops; python_version >= "3"',
            f"{tmp_path / 'sub dir' / 'more.txt'}:1",
            False,
            False,
        ),
        ("pointnet2_ops<4", f"{tmp_path / 'constraints.txt'}:1", False, True),
        ("kaolin==0.18.0", f"{top}:5", True, False),
        ("torch>=2.1", f"{top}:10", False, False),
    ]
    assert reading.notes and "https://example.invalid/remote.txt" in reading.notes[0]
    assert requirement_file_options(
        ["-ra.txt", "--requirement=b.txt", "--requirement", "c.txt", "-c", "d.txt", "--cert", "x"]
    ) == [("a.txt", False), ("b.txt", False), ("c.txt", False), ("d.txt", True)]


def test_an_editable_alone_still_honours_dry_run(tmp_path: Path, empty_venv: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "pyproject.toml").write_text('[project]\nname = "revpkg"\nversion = "1.0"\n')
    before = _freeze(empty_venv)
    done = _cuda_pip(
        "install", "--python", str(empty_venv), "--dry-run", "--json", "-e", str(package)
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dry_run"] is True and report["prepared"]["pip"][-1]["args"] == [
        "-e",
        str(package),
    ]
    assert _freeze(empty_venv) == before


def test_the_torch_step_keeps_the_users_pip_options_but_not_their_indexes(
    tmp_path: Path, torch_index: str, empty_venv: Path
) -> None:
    env = _env_with_torch_index(tmp_path, torch_index)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy\n")
    # Its own target: the tool's venv may hold another torch (the README's main command).
    done = _cuda_pip(
        "install",
        "torch==2.6.0+cu126",
        "--python",
        str(empty_venv),
        "--dry-run",
        "--json",
        "--proxy",
        "http://proxy.invalid:3128",
        "--no-cache-dir",
        "-i",
        "https://other.invalid/simple",
        "-r",
        str(requirements),
        env=env,
    )
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)["prepared"]["pip"][0]["args"]
    assert first == [
        "--proxy",
        "http://proxy.invalid:3128",
        "--no-cache-dir",
        "--index-url",
        f"{torch_index}cu126/",
        _torch_pin(tmp_path, torch_index),
    ]


def test_a_constraint_file_limits_what_is_planned(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("pointnet2_ops<3\n")
    done = _cuda_pip(
        "install",
        "pointnet2_ops",
        "--arch-list",
        "9.0",
        "--python",
        sys.executable,
        "--dry-run",
        "-c",
        str(constraints),
    )
    assert done.returncode == 1, done.stderr
    said = " ".join(done.stderr.split())  # the terminal lines wrap at 80 columns
    assert f"{constraints}:1: constraint pointnet2_ops<3 is part of the plan" in said
    assert "nothing fits this machine for pointnet2_ops, pointnet2_ops<3" in said


def test_hash_checking_mode_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pointnet2_ops==3.0.0 --hash=sha256:" + "0" * 64 + "\n")
    done = _cuda_pip(
        "install", "--arch-list", "9.0", "--python", sys.executable, "-r", str(requirements)
    )
    assert done.returncode == 2, done.stderr
    assert f"--hash at {requirements}:1" in done.stderr and "building" not in done.stderr


def test_a_missing_requirement_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    done = _cuda_pip(
        "install", "--python", sys.executable, "-r", str(tmp_path / "nope.txt"), "--dry-run"
    )
    assert done.returncode == 2, done.stderr
    assert (
        f"{tmp_path / 'nope.txt'}: no such file" in done.stderr and "Traceback" not in done.stderr
    )


def test_a_typo_inside_a_requirement_file_is_caught_too(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy\npointnet2_op\n")
    done = _cuda_pip("install", "--python", sys.executable, "-r", str(requirements), "--dry-run")
    assert done.returncode == 2
    assert "did you mean pointnet2_ops?" in done.stderr


def test_curated_names_in_a_requirement_file_are_planned(
    tmp_path: Path, empty_venv: Path, torch_index: str
) -> None:
    env = _env_with_torch_index(tmp_path, torch_index)
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "tinypkg", "1.0", files={"tinypkg/__init__.py": "VALUE = 42\n"})
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==2.6.0+cu126\ntinypkg\n")
    done = _cuda_pip(
        "install",
        "--python",
        str(empty_venv),
        "--no-index",
        "--find-links",
        str(links),
        "-r",
        str(requirements),
        "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    first, rest = report["prepared"]["pip"]
    # torch, named only in the file, still comes from the PyTorch index alone; pip reads the file.
    assert first["args"] == [
        "--index-url",
        f"{torch_index}cu126/",
        _torch_pin(tmp_path, torch_index),
    ]
    assert rest["args"][:5] == ["--no-index", "--find-links", str(links), "-r", str(requirements)]
    changed = {c["name"]: c["after"] for c in report["result"]["changed"]}
    assert changed["torch"] == "2.6.0+cu126" and changed["tinypkg"] == "1.0"
    assert {"detect", "plan", "pip install", "import check"} <= set(report["result"]["timings"])


def test_debug_info_is_off_unless_the_user_asks_for_it() -> None:
    from cuda_resolve.build.buildenv import no_debug_flags

    assert no_debug_flags({}) == "-g0"
    assert no_debug_flags({"CPPFLAGS": "-DFOO"}) == "-DFOO -g0"
    assert no_debug_flags({"CFLAGS": "-O2 -g"}) is None
    assert no_debug_flags({"CPPFLAGS": "-ggdb"}) is None
    assert no_debug_flags({"CPPFLAGS": "-g0"}) == "-g0"


def test_a_bug_in_cuda_pip_is_one_line_and_exit_70(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import cuda_resolve.cli.install
    from pip_plugin.__main__ import main

    def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(cuda_resolve.cli.install, "run_action", broken)
    assert main(["install", "numpy", "--python", sys.executable]) == 70
    err = capsys.readouterr().err
    assert "unexpected RuntimeError: boom" in err and "Traceback" not in err and "--debug" in err
    assert main(["install", "--debug", "numpy", "--python", sys.executable]) == 70
    assert "Traceback" in capsys.readouterr().err


def _wheel_requiring(folder: Path, requires: list[str]) -> Path:
    path = folder / "needy-1.0-py3-none-any.whl"
    metadata = "Metadata-Version: 2.1\nName: needy\nVersion: 1.0\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("needy-1.0.dist-info/METADATA", metadata)
    return path


def test_built_wheels_skip_pips_resolution_only_when_their_requirements_are_installed(
    tmp_path: Path,
) -> None:
    from cuda_resolve.environment import Environment, Machine, PythonInfo
    from cuda_resolve.install.prepare import requirements_met, requires_dist

    env = Environment(machine=Machine(), python=PythonInfo(version="3.12.3"))
    installed = {"torch": "2.11.0+cu130", "numpy": "2.1.0"}

    def met(*requires: str) -> bool:
        return requirements_met(
            requires_dist(_wheel_requiring(tmp_path, list(requires))), installed, env
        )

    assert met()
    assert met("torch>=1.4", "numpy")
    assert met('pywin32; sys_platform == "win32"', 'extra-thing; extra == "docs"')
    assert not met("torch<2")
    assert not met("scipy")
    assert not met("torch[opt]>=1.4")  # an extra's own requirements are not known here
    (tmp_path / "broken.whl").write_bytes(b"not a zip")
    assert not requirements_met(requires_dist(tmp_path / "broken.whl"), installed, env)


def test_a_second_ctrl_c_while_the_build_folder_is_removed_still_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from cuda_resolve.build import builder

    folder = tmp_path / "cuda-resolve-build-x"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "a.o").write_bytes(b"x")
    real_rmtree = shutil.rmtree
    calls: list[int] = []

    def interrupted_once(path: Path, ignore_errors: bool = False) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the second Ctrl-C lands inside the removal
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(builder.shutil, "rmtree", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        builder._remove(folder)
    assert not folder.exists() and len(calls) == 2


def test_dry_run_prints_exactly_the_commands_a_run_executes(
    tmp_path: Path, empty_venv: Path, torch_index: str
) -> None:
    env = _env_with_torch_index(tmp_path, torch_index)
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "tinypkg", "1.0", files={"tinypkg/__init__.py": "VALUE = 42\n"})
    words = (
        "install",
        "torch==2.6.0+cu126",
        "tinypkg",
        "--find-links",
        str(links),
        "--python",
        str(empty_venv),
        "--json",
    )
    dry = _cuda_pip(*words, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)["commands"]
    done = _cuda_pip(*words, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["pip_runs"] == planned
    # The torch step: a download into the download folder, an install from it (issue 28).
    assert planned[0][:4] == [str(empty_venv), "-m", "pip", "download"] and len(planned) == 3
    assert [c[3] for c in planned[1:]] == ["install", "install"] and "--no-index" in planned[1]


def test_a_plan_file_round_trips_and_is_applied_as_written(
    tmp_path: Path, empty_venv: Path, torch_index: str
) -> None:
    from cuda_resolve.plan import Plan

    env = _env_with_torch_index(tmp_path, torch_index)
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "plan",
            "torch==2.6.0+cu126",
            "--python",
            str(empty_venv),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    document = json.loads(made.stdout)
    assert document["format"] == 2 and document["steps"][0]["torch_index_only"] is True
    plan = Plan.from_json(document, origin="plan.json")
    again = plan.to_json()
    assert {key: again[key] for key in again} == {key: document[key] for key in again}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(made.stdout)
    before = _freeze(empty_venv)
    done = _cuda_pip(
        "install", "--plan", str(plan_file), "--python", str(empty_venv), "--json", env=env
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # plan is offline (no hash); applying pins the file the index lists, with its hash.
    assert document["install"][0]["url"] is None and "sha256" not in document["install"][0]
    assert report["result"]["pip_runs"][0][-3:] == [
        "--index-url",
        f"{torch_index}cu126/",
        _torch_pin(tmp_path, torch_index),
    ]
    assert _freeze(empty_venv) != before


def test_a_plan_whose_facts_changed_is_refused_naming_the_fact(
    tmp_path: Path, empty_venv: Path, torch_index: str
) -> None:
    env = _env_with_torch_index(tmp_path, torch_index)
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_resolve",
            "plan",
            "torch==2.6.0+cu126",
            "--python",
            str(empty_venv),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    document = json.loads(made.stdout)
    document["environment"]["python"]["version"] = "3.9.18"
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(document))
    done = _cuda_pip("install", "--plan", str(plan_file), "--python", str(empty_venv), env=env)
    assert done.returncode == 1, done.stderr
    assert "the plan was made for Python cp39" in done.stderr and "Traceback" not in done.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**document, "format": 99}))
    refused = _cuda_pip("install", "--plan", str(bad), "--python", str(empty_venv), env=env)
    assert refused.returncode == 2 and "format = 99" in refused.stderr


def test_a_failed_install_puts_back_the_torch_it_replaced(
    tmp_path: Path, empty_venv: Path, torch_index: str
) -> None:
    env = _env_with_torch_index(tmp_path, torch_index)
    old = tmp_path / "old"
    old.mkdir()
    _wheel(
        old,
        "torch",
        "2.5.0",
        files={
            "torch/__init__.py": "__version__ = '2.5.0'\n",
            "torch/version.py": "__version__ = '2.5.0'\ncuda = None\n",
        },
    )
    subprocess.run(
        [
            str(empty_venv),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(old),
            "torch==2.5.0",
        ],
        check=True,
    )
    before = _freeze(empty_venv)
    init = next(empty_venv.parent.parent.glob("lib/python*/site-packages/torch/__init__.py"))
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    # torch 2.6.0 replaces 2.5.0 (from the PyTorch-style index), then the second step fails: the
    # old torch, which no index here serves, must come back from what was kept before pip ran.
    done = _cuda_pip(
        "install",
        "torch==2.6.0+cu126",
        "cuda-resolve-test-no-such-package",
        "--no-index",
        "--find-links",
        str(empty),
        "--allow-torch-change",
        "--python",
        str(empty_venv),
        "--json",
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert _freeze(empty_venv) == before
    assert init.read_text() == "__version__ = '2.5.0'\n"
    error = json.loads(done.stdout)
    assert "could not restore" not in (error.get("hint") or "")
