"""An installed build of a curated extension is kept when it fits (issue 14, reuse by coverage).

A wheel cuda-resolve built carries its ABI in its local label (``3.0.0+pt2110cu130.sm80.sm86``).
The resolver keeps such an installed build, first, when the label names the installed torch's
release and variant and its arch list covers every GPU here (or, with no GPU and no --arch-list,
whatever it was built for); --arch-list and --rebuild ask for a new build. Environments are built
in code; the last test installs a stand-in torch and pointnet2_ops into a venv and asks cuda-pip.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from _torch_env import _cli, _venv
from packaging.version import Version

from cuda_resolve.detect import _target_probe
from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect.target import curated_extension_names, probe_target
from cuda_resolve.environment import (
    Compiler,
    Driver,
    Environment,
    Gpu,
    InstalledExtension,
    Machine,
    PythonInfo,
    Toolkit,
    TorchInfo,
)
from cuda_resolve.errors import ResolutionImpossible
from cuda_resolve.index import default_index, parse_arch_entry
from cuda_resolve.install.options import InstallOptions
from cuda_resolve.install.prepare import complete_plan
from cuda_resolve.plan import Plan, make_plan
from cuda_resolve.profile import dump_profile, parse_profile
from cuda_resolve.resolve import Options, resolve
from cuda_resolve.resolve.installed import parse_build_label, torch_label
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion
from cuda_resolve.wheelhouse.key import WheelKey

LABEL = "3.0.0+pt2110cu130.sm80.sm86"


def _env(
    *,
    gpus: tuple[str, ...] = ("8.0",),
    installed: tuple[str, ...] = (LABEL,),
    torch: str | None = "2.11.0+cu130",
) -> Environment:
    """A machine with torch 2.11.0+cu130, nvcc 13.0 and gcc 12 (pointnet2_ops builds there),
    the GPUs given (none: a login node, no driver either) and pointnet2_ops installed as given."""
    return Environment(
        machine=Machine(glibc="2.36"),
        python=PythonInfo(version="3.11.7"),
        driver=Driver(version=DriverVersion.parse("580.65.06"), cuda=CudaVersion.parse("13.0"))
        if gpus
        else None,
        gpus=tuple(
            Gpu(index=i, name=f"GPU{i}", compute_capability=ComputeCapability.parse(c))
            for i, c in enumerate(gpus)
        ),
        toolkits=(
            Toolkit(
                version=CudaVersion.parse("13.0"),
                root="/usr/local/cuda",
                nvcc="/usr/local/cuda/bin/nvcc",
                gpu_archs=tuple(
                    ComputeCapability.parse(c)
                    for c in ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0")
                ),
            ),
        ),
        compiler=Compiler(gcc="12", gxx="12", nvcc_host_version="12"),
        torch=TorchInfo(
            version=torch, cuda=CudaVersion.parse(torch.split("+cu")[1][:-1] + "." + torch[-1])
        )
        if torch
        else None,
        installed_extensions=tuple(
            InstalledExtension(name="pointnet2_ops", version=v) for v in installed
        ),
    )


def _plan(env: Environment, options: Options | None = None, request: str = "pointnet2_ops") -> Plan:
    return make_plan(resolve([request], env, default_index(), options), env)


def _item(plan: Plan, name: str = "pointnet2_ops") -> dict[str, object]:
    return next(i for i in plan.to_json()["install"] if i["name"] == name)


def _rejections(plan: Plan) -> dict[str, str]:
    return {
        r.kind: r.reason
        for r in plan.rejected
        if r.name == "pointnet2-ops" and r.kind.startswith("installed-build")
    }


# -- the label, read back --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("torch", "variant", "arch_list"),
    [
        ("2.14.1", "cu130", "8.0;8.6+PTX"),
        ("2.11.0", "cu130", "9.0a;10.0f;12.0"),
        ("2.5.1", "cu124", "7.5"),
        ("2.8.0rc1", "cu129", "10.0;12.1"),
        ("2.12.0.dev20260101", "cu132", "8.9+PTX"),
    ],
)
def test_a_build_label_reads_back_what_the_wheel_key_wrote(
    torch: str, variant: str, arch_list: str
) -> None:
    key = WheelKey(
        package="pointnet2_ops",
        version="3.0.0",
        torch=torch,
        variant=variant,
        python_tag="cp311",
        platform="linux_x86_64",
        arch_list=arch_list,
        recipe_digest="ab" * 32,
    )
    label = parse_build_label(key.labelled_version)
    assert label is not None
    assert label.torch == torch_label(Version(torch), variant)
    assert ";".join(str(entry) for entry in label.arch_list) == key.arch_list


@pytest.mark.parametrize(
    "version", ["3.0.0", "3.0.0+cu130", "3.0.0+pt2110cu130.sm8x", "not a version"]
)
def test_a_version_without_our_label_says_nothing(version: str) -> None:
    assert parse_build_label(version) is None


# -- the resolver's rules --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "covered"),
    [
        (("8.0",), "covers 8.0: sm_80 exact"),
        (("8.6", "8.0"), "covers 8.0: sm_80 exact; 8.6: sm_86 exact"),
        (("8.9",), "covers 8.9: sm_86 (same major, lower minor)"),
    ],
)
def test_an_installed_build_that_covers_every_gpu_is_kept_first(
    gpus: tuple[str, ...], covered: str
) -> None:
    plan = _plan(_env(gpus=gpus))
    item = _item(plan)
    assert item["kind"] == "installed" and item["version"] == LABEL
    assert item["torch"] == "2.11.0+cu130" and item["arch_list"] == "8.0;8.6"
    assert (
        f"installed pointnet2_ops {LABEL}: built for torch 2.11.0+cu130, {covered}: kept"
        in plan.reasons
    )
    assert not plan.builds and [i["kind"] for i in plan.to_json()["install"]] == [
        "installed",
        "installed",
    ]
    # The source build is still there, ranked after it (plan --explain says why it lost).
    assert any(
        "pointnet2-ops 3.0.0 (source build" in a.label and "keeping it comes first" in a.reason
        for a in plan.alternatives
    )


def test_an_installed_build_for_another_torch_is_rejected_and_built_anew() -> None:
    for label, built_for in (
        ("3.0.0+pt2100cu130.sm80", "torch 2.10.0+cu130"),
        ("3.0.0+pt2110cu128.sm80", "torch 2.11.0+cu128"),
    ):
        plan = _plan(_env(installed=(label,)))
        assert _item(plan)["kind"] == "build"
        assert _rejections(plan) == {
            "installed-build-torch": (
                f"installed pointnet2_ops {label}: built for {built_for}, not the installed torch "
                "2.11.0+cu130"
            ),
        }


def test_an_installed_build_that_misses_a_gpu_is_rejected_and_built_for_every_gpu() -> None:
    plan = _plan(_env(gpus=("8.0", "9.0")))
    item = _item(plan)
    assert item["kind"] == "build" and item["arch_list"] == "8.0;9.0"
    assert _rejections(plan) == {
        "installed-build-gpu": (
            f"installed pointnet2_ops {LABEL}: built for 8.0;8.6, which has no kernels "
            "for GPU1 (9.0)"
        ),
    }


def test_a_login_node_keeps_the_build_made_for_other_machines() -> None:
    """No GPU and no --arch-list: before, this asked for --arch-list again; now the build stays."""
    plan = _plan(_env(gpus=()))
    assert _item(plan)["kind"] == "installed"
    assert (
        f"installed pointnet2_ops {LABEL}: built for torch 2.11.0+cu130, no GPU here, and it was "
        "built for 8.0;8.6 on purpose: kept" in plan.reasons
    )
    with pytest.raises(ResolutionImpossible, match="--arch-list"):
        _plan(_env(gpus=(), installed=()))


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (
            Options(arch_list=(parse_arch_entry("8.0"),)),
            "not kept: --arch-list names the GPUs to build for",
        ),
        (Options(rebuild=True), "not kept: --rebuild asks for a new build"),
    ],
)
def test_arch_list_and_rebuild_ask_for_a_new_build(options: Options, why: str) -> None:
    plan = _plan(_env(), options)
    assert _item(plan)["kind"] == "build"
    assert _rejections(plan) == {
        "installed-build-ignored": f"installed pointnet2_ops {LABEL}: {why}"
    }


def test_an_installed_build_without_a_label_is_not_kept() -> None:
    plan = _plan(_env(installed=("3.0.0",)))
    assert _item(plan)["kind"] == "build"
    assert list(_rejections(plan)) == ["installed-build-unknown"]


def test_with_no_torch_installed_the_build_is_not_kept() -> None:
    plan = _plan(_env(torch=None), Options(allow_torch_change=True))
    assert _item(plan)["kind"] == "build"
    assert _rejections(plan)["installed-build-torch"].endswith(
        "built for torch 2.11.0+cu130, and no torch is installed"
    )


# -- the plan: held as it is, pip not run ----------------------------------------------------


def test_a_plan_of_installed_builds_runs_no_pip() -> None:
    env = _env()
    plan = _plan(env)
    installed = {"torch": "2.11.0", "pointnet2-ops": LABEL}
    done = complete_plan(
        plan, env, default_index(), InstallOptions(), pip=None, installed=installed
    )
    assert done.skip_pip is not None and done.steps == () and done.builds == ()
    # With pip options of the user's, pip runs, and the kept build is not pinned (not needed).
    with_options = complete_plan(
        plan,
        env,
        default_index(),
        InstallOptions(pip_args=("--no-cache-dir",)),
        pip=None,
        installed=installed,
    )
    assert with_options.skip_pip is None
    assert [list(step.args) for step in with_options.steps] == [["--no-cache-dir", "torch==2.11.0"]]
    # A target where it is no longer installed as planned runs pip.
    for here in (
        {"torch": "2.11.0"},
        {"torch": "2.11.0", "pointnet2-ops": "3.0.0+pt2110cu130.sm90"},
    ):
        moved = complete_plan(
            plan, env, default_index(), InstallOptions(), pip=None, installed=here
        )
        assert moved.skip_pip is None, here


def test_the_plan_document_round_trips_the_kept_build() -> None:
    env = _env()
    done = complete_plan(
        _plan(env),
        env,
        default_index(),
        InstallOptions(),
        pip=None,
        installed={"torch": "2.11.0", "pointnet2-ops": LABEL},
    )
    again = Plan.from_json(json.loads(json.dumps(done.to_json())))
    assert again.items == done.items and again.skip_pip == done.skip_pip
    assert again.environment.installed_extensions == env.installed_extensions


def test_applying_a_plan_that_keeps_a_build_checks_it_is_still_installed_and_covers() -> None:
    from dataclasses import replace

    from cuda_resolve.install.apply import PlanFactChanged, check_plan_facts

    env = _env()
    done = complete_plan(
        _plan(env),
        env,
        default_index(),
        InstallOptions(),
        pip=None,
        installed={"torch": "2.11.0", "pointnet2-ops": LABEL},
    )
    assert check_plan_facts(done, env).items == done.items
    with pytest.raises(
        PlanFactChanged,
        match=re.escape(f"the installed pointnet2_ops {LABEL}; the target environment has none"),
    ):
        check_plan_facts(done, replace(env, installed_extensions=()))
    with pytest.raises(
        PlanFactChanged,
        match=r"pointnet2_ops's arch list 8\.0;8\.6; this machine has GPU 1 \(GPU1, compute "
        r"capability 9\.0\)",
    ):
        check_plan_facts(done, _env(gpus=("8.0", "9.0")))


def test_a_lock_plans_the_build_an_installed_build_is_no_file_to_lock() -> None:
    from cuda_resolve.config import load_config
    from cuda_resolve.lock.make import profile_plan
    from cuda_resolve.lock.profiles import LockProfile

    env = _env()
    plan, _ = profile_plan(
        LockProfile(name="a100", environment=env, source="a100.toml", digest="0" * 64),
        ["pointnet2_ops"],
        default_index(),
        Options(),
        load_config(),
    )
    assert _item(plan)["kind"] == "build" and [b.key.arch_list for b in plan.builds] == ["8.0"]


# -- the facts: profile and probe ------------------------------------------------------------


def test_a_profile_round_trips_the_installed_extensions() -> None:
    env = _env(installed=(LABEL, "0.18.0"))
    back = parse_profile(dump_profile(env))
    assert back.installed_extensions == env.installed_extensions
    assert "installed_extension" in dump_profile(env)
    old = parse_profile('[python]\nversion = "3.11.7"\n')  # written before the key existed
    assert old.installed_extensions == ()
    with pytest.raises(Exception, match=r"installed_extension\[0\]\.version"):
        parse_profile(
            '[python]\nversion = "3.11.7"\n[[installed_extension]]\nname = '
            '"kaolin"\nversion = "x y"\n'
        )


def _site_with(tmp_path: Path, *dists: tuple[str, str]) -> Path:
    site = tmp_path / "site"
    for name, version in dists:
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"
        )
    return site


def test_the_probe_reports_only_the_curated_names_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _site_with(tmp_path, ("pointnet2_ops", LABEL), ("other_ext", "1.0+pt2110cu130.sm80"))
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    report = _target_probe.probe(["pointnet2-ops", "kaolin"])
    assert report["installed_extensions"] == [{"name": "pointnet2_ops", "version": LABEL}]
    assert _target_probe.probe()["installed_extensions"] == []
    # Another interpreter gets the names on its command line.
    facts = probe_target(
        sys.executable,
        environ=dict(os.environ, PYTHONPATH=str(site)),
        timeout=30,
        extension_names=["pointnet2_ops"],
    )
    assert facts.installed_extensions == (InstalledExtension(name="pointnet2_ops", version=LABEL),)


def test_a_cached_report_is_not_reused_for_other_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _site_with(tmp_path, ("pointnet2_ops", LABEL))
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    cache = ProbeCache(tmp_path / "cache")
    assert (
        probe_target(
            None, environ={}, timeout=5, cache=cache, extension_names=()
        ).installed_extensions
        == ()
    )
    asked = probe_target(
        None, environ={}, timeout=5, cache=cache, extension_names=["pointnet2_ops"]
    )
    assert asked.installed_extensions == (InstalledExtension(name="pointnet2_ops", version=LABEL),)


def test_the_curated_names_come_from_the_index_package_files(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    (overlay / "packages").mkdir(parents=True)
    (overlay / "packages" / "scatter.toml").write_text(
        '[sources]\nname = "not this"\n\n[package]\nname = "Torch_Scatter"\n'
    )
    environ = {
        "CUDA_RESOLVE_INDEX_PATH": str(overlay),
        "CUDA_RESOLVE_CONFIG": str(tmp_path / "none.toml"),
        "HOME": str(tmp_path),
    }
    assert curated_extension_names(environ) == ("kaolin", "pointnet2-ops", "torch-scatter")


# -- for real: a venv, cuda-pip ---------------------------------------------------------------


def _wheel(folder: Path, name: str, version: str, *, files: dict[str, str]) -> Path:
    """A minimal valid wheel (py3-none-any) with a correct RECORD."""
    dist = f"{name}-{version}.dist-info"
    contents = dict(files)
    contents[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    contents[f"{dist}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},{len(text.encode())}"
        for path, text in contents.items()
    ]
    contents[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in contents.items():
            archive.writestr(member, text)
    return path


def test_cuda_pip_keeps_an_installed_build_in_a_real_venv(tmp_path: Path) -> None:
    """A stand-in torch 2.6.0+cu126 and a pointnet2_ops wheel labelled for it (sm_86) installed
    by pip; a fake RTX 3060 (8.6), then a login node (no GPU): cuda-pip keeps it, builds nothing
    and runs no pip."""
    python = _venv(tmp_path / "venv")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    torch = _wheel(
        wheels,
        "torch",
        "2.6.0+cu126",
        files={
            "torch/__init__.py": "__version__ = '2.6.0+cu126'\n",
            "torch/version.py": "__version__ = '2.6.0+cu126'\ncuda = '12.6'\n",
        },
    )
    built = _wheel(
        wheels, "pointnet2_ops", "3.0.0+pt260cu126.sm86", files={"pointnet2_ops/__init__.py": ""}
    )
    clean = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            str(torch),
            str(built),
        ],
        check=True,
        env=clean,
        timeout=300,
    )
    base = dict(
        os.environ,
        CUDA_RESOLVE_CONFIG=str(tmp_path / "none.toml"),
        CUDA_RESOLVE_CACHE_DIR=str(tmp_path / "cache"),
        CUDA_RESOLVE_WHEELHOUSE=str(tmp_path / "wheelhouse"),
        CUDA_RESOLVE_DRIVER="560.35.03",
    )
    for overrides in (
        {"CUDA_RESOLVE_CUDA_ARCH": "8.6"},
        {"CUDA_RESOLVE_CUDA_ARCH": "", "CUDA_RESOLVE_DRIVER": ""},
    ):
        done = _cli(
            "install",
            "pointnet2_ops",
            "--python",
            str(python),
            "--dry-run",
            "--json",
            module="pip_plugin",
            env={**base, **overrides},
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        kept = next(i for i in report["plan"]["install"] if i["name"] == "pointnet2_ops")
        assert kept["kind"] == "installed" and kept["version"] == "3.0.0+pt260cu126.sm86", report[
            "plan"
        ]["install"]
        assert report["plan"]["builds"] == [] and report["commands"] == []
        assert (
            report["plan"]["skip_pip"]
            == "every planned package is installed at the planned version: pip is not run"
        )
        assert any(
            reason.startswith(
                "installed pointnet2_ops 3.0.0+pt260cu126.sm86: built for torch 2.6.0+cu126"
            )
            for reason in report["plan"]["reasons"]
        )
    # --rebuild asks for a build: nvcc 13.0 cannot build for driver 560, so nothing fits, and the
    # reasons say why it was not kept.
    rebuilt = _cli(
        "install",
        "pointnet2_ops",
        "--rebuild",
        "--python",
        str(python),
        "--dry-run",
        "--json",
        module="pip_plugin",
        env={**base, "CUDA_RESOLVE_CUDA_ARCH": "8.6"},
    )
    assert rebuilt.returncode == 1, rebuilt.stdout
    refused = json.loads(rebuilt.stdout)
    assert (
        "installed pointnet2_ops 3.0.0+pt260cu126.sm86: not kept: --rebuild asks for a new build"
        in refused["reasons"]
    )


def test_a_plan_made_without_torch_says_so_when_the_target_has_one() -> None:
    """Not "the plan was made for the installed torch none" (walk B12)."""
    from dataclasses import replace

    from cuda_resolve.install.apply import PlanFactChanged, check_plan_facts

    env = _env()
    done = complete_plan(_plan(env), env, default_index(), InstallOptions(), pip=None, installed={})
    made_without = replace(done, environment=replace(env, torch=None))
    assert env.torch is not None
    with pytest.raises(PlanFactChanged) as refused:
        check_plan_facts(made_without, env)
    assert str(refused.value) == (
        "the plan was made for an environment without torch; the target environment has torch "
        f"{env.torch.version}"
    )
    with pytest.raises(PlanFactChanged) as refused:
        check_plan_facts(done, replace(env, torch=None))
    assert str(refused.value) == (
        f"the plan was made for the installed torch {env.torch.version}; "
        "the target environment has no torch"
    )
