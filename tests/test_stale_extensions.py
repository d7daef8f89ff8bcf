"""A plan that replaces torch carries the extensions built for the old one (issue 27, item 1).

A machine (a profile: an H200, driver 580, nvcc 13.0) with torch 2.14.1+cu130, a pointnet2_ops
cuda-resolve built for it, and an extension the index does not know (``mystery``, whose library
links libc10): ``torch==2.13.0 --allow-torch-change`` plans pointnet2_ops again for the new torch
in the same plan, and refuses while ``mystery`` would be left behind, unless ``--keep-stale``."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from test_lock_support import write_profile

from cuda_resolve.environment import Environment, ExtensionBinary, InstalledExtension
from cuda_resolve.errors import UsageError
from cuda_resolve.index import default_index
from cuda_resolve.install.run import InstallRequest, decide
from cuda_resolve.install.stale import replaced_torch, stale_extensions
from cuda_resolve.plan import Plan
from cuda_resolve.profile import load_profile
from cuda_resolve.reporting import NullReporter
from cuda_resolve.resolve import Options

MYSTERY = ExtensionBinary(
    path="/site/mystery/_C.so",
    needed=("libc10.so", "libcudart.so.13"),
    missing=(),
    distribution="mystery 1.0",
)
PLAIN = ExtensionBinary(  # a CUDA library that does not link torch: not torch's to break
    path="/site/plaincuda/_k.so",
    needed=("libcudart.so.13",),
    missing=(),
    distribution="plaincuda 2",
)


def _machine(tmp_path: Path, *extensions: ExtensionBinary) -> Environment:
    profile = write_profile(
        tmp_path / "h200.toml",
        python=f"{sys.version_info[0]}.{sys.version_info[1]}.7",
        driver="580.159.04",
        gpus=[("NVIDIA H200", "9.0")],
        torch="2.14.1+cu130",
        glibc="2.39",
        toolkit="13.0",
        gcc="13.3.0",
        arch_list=["sm_80", "sm_90"],
    )
    built = InstalledExtension(name="pointnet2_ops", version="3.0.0+pt2141cu130.sm90")
    return dataclasses.replace(
        load_profile(profile), installed_extensions=(built,), extensions=extensions
    )


def _decide(
    env: Environment, *requests: str, keep: tuple[str, ...] = (), options: Options | None = None
) -> Plan:
    request = InstallRequest(
        requirements=requests,
        resolve=options or Options(allow_torch_change=True),
        keep_stale=keep,
    )
    return decide(
        request, env, default_index(), reporter=NullReporter(), install=True, confirm=None
    )


def test_a_torch_change_plans_the_curated_extension_again_for_the_new_torch(
    tmp_path: Path,
) -> None:
    env = _machine(tmp_path, PLAIN)
    plan = _decide(env, "torch==2.13.0")
    items = {item.name: item for item in plan.items}
    assert items["torch"].kind == "wheel" and items["torch"].version == "2.13.0"
    assert items["pointnet2_ops"].kind == "build"
    assert items["pointnet2_ops"].torch == "2.13.0"  # built against the new torch
    carried = [r for r in plan.reasons if "planned again" in r]
    assert carried == [
        f"pointnet2-ops 3.0.0+pt2141cu130.sm90 was built for torch 2.14.1+cu130: planned again for "
        f"torch 2.13.0+{items['torch'].variant}, in the same transaction (undone with it)"
    ]


def test_the_carried_extension_names_the_torch_the_final_plan_installs(tmp_path: Path) -> None:
    """No GPU here: ``torch==2.15.0`` alone plans PyPI's CPU-only build, the plan with the
    carried pointnet2_ops (a build with nvcc 13.0) the cu132 one; the note names the latter (the
    CPU box run of docs/evidence/torch-upgrade-2026-12-04.md said 2.15.0+cpu)."""
    from cuda_resolve.index.cuda import parse_arch_list

    profile = write_profile(
        tmp_path / "cpu-box.toml",
        python=f"{sys.version_info[0]}.{sys.version_info[1]}.7",
        torch="2.14.1+cu130",
        toolkit="13.0",
        gcc="12.2.0",
        arch_list=["sm_80", "sm_90"],
    )
    built = InstalledExtension(name="pointnet2_ops", version="3.0.0+pt2141cu130.sm80")
    env = dataclasses.replace(load_profile(profile), installed_extensions=(built,))
    options = Options(allow_torch_change=True, arch_list=parse_arch_list("8.0"))
    bare = dataclasses.replace(env, installed_extensions=())
    alone = _decide(bare, "torch==2.15.0", options=options)
    assert [(i.name, i.variant) for i in alone.items] == [("torch", "cpu")]  # the first pass
    plan = _decide(env, "torch==2.15.0", options=options)
    items = {item.name: item for item in plan.items}
    assert items["torch"].variant == "cu132" and items["pointnet2_ops"].kind == "build"
    carried = [r for r in plan.reasons if "planned again" in r]
    assert carried == [
        "pointnet2-ops 3.0.0+pt2141cu130.sm80 was built for torch 2.14.1+cu130: planned again "
        "for torch 2.15.0+cu132, in the same transaction (undone with it)"
    ]


def test_an_unknown_extension_linking_torch_refuses_the_plan_unless_kept(tmp_path: Path) -> None:
    env = _machine(tmp_path, MYSTERY, PLAIN)
    with pytest.raises(UsageError) as refused:
        _decide(env, "torch==2.13.0")
    # Not "built for torch 2.14.1+cu130": that is the installed torch, which it may not have
    # been built against (walk B12).
    assert "replacing torch 2.14.1+cu130 with 2.13.0" in str(refused.value)
    assert "leaves mystery 1.0, which links torch's C++ library" in str(refused.value)
    assert "built for torch 2.14.1" not in str(refused.value)
    assert "undefined symbol" in str(refused.value)
    assert "--keep-stale mystery" in str(refused.value.hint)
    assert "plaincuda" not in str(refused.value)
    plan = _decide(env, "torch==2.13.0", keep=("mystery",))
    kept = [r for r in plan.reasons if "--keep-stale" in r]
    assert len(kept) == 1 and kept[0].startswith(
        "mystery 1.0 stays as it is (--keep-stale): unless"
    )
    assert "mystery" not in {item.name for item in plan.items}


def test_a_keep_stale_naming_no_stale_extension_is_refused_with_the_names(
    tmp_path: Path,
) -> None:
    """A typo would otherwise be accepted and the extension meant still refused (walk B12)."""
    env = _machine(tmp_path, MYSTERY, PLAIN)
    with pytest.raises(UsageError) as refused:
        _decide(env, "torch==2.13.0", keep=("mystry",))
    assert str(refused.value) == (
        "--keep-stale mystry: no extension linking torch is installed under that name"
    )
    assert refused.value.hint == "the ones this torch change leaves behind: mystery"


def test_a_plan_that_keeps_torch_leaves_the_extensions_alone(tmp_path: Path) -> None:
    env = _machine(tmp_path, MYSTERY)
    plan = _decide(env, "torch==2.14.1")
    assert replaced_torch(plan, env) is None
    assert [item.name for item in plan.items] == ["torch"]
    assert not [r for r in plan.reasons if "--keep-stale" in r]


def test_stale_extensions_are_read_from_the_scan_and_the_curated_installs(tmp_path: Path) -> None:
    unowned = ExtensionBinary(path="/site/loose/_x.so", needed=("libtorch_cpu.so",), missing=())
    env = _machine(tmp_path, MYSTERY, PLAIN, unowned)
    found = {s.name: s for s in stale_extensions(env, default_index())}
    assert set(found) == {"pointnet2-ops", "mystery", "/site/loose/_x.so"}
    assert found["pointnet2-ops"].curated and not found["mystery"].curated
    assert found["mystery"].libraries == ("/site/mystery/_C.so",)
    assert found["/site/loose/_x.so"].matches(["/site/loose/_x.so"])
    assert stale_extensions(env, default_index(), planned=["mystery", "pointnet2_ops"]) == [
        found["/site/loose/_x.so"]
    ]


# -- cuda-pip install --repair: after torch was changed outside the tool ---------------------


def _after_pip_upgrade(tmp_path: Path, built_for: str, *extensions: ExtensionBinary) -> Environment:
    """torch 2.14.1+cu130 installed (by `pip install -U torch`, say), pointnet2_ops built for
    ``built_for`` (a pt label) still there."""
    env = _machine(tmp_path, *extensions)
    built = InstalledExtension(name="pointnet2_ops", version=f"3.0.0+{built_for}.sm90")
    return dataclasses.replace(env, installed_extensions=(built,))


def test_repair_plans_again_exactly_the_extensions_built_for_another_torch(tmp_path: Path) -> None:
    from cuda_resolve.install.stale import repair_request

    broken = dataclasses.replace(MYSTERY, missing_symbols=("_ZN3c104impl3fooEv",))
    env = _after_pip_upgrade(tmp_path, "pt2131cu130", broken, PLAIN)
    names, notes = repair_request(env, default_index())
    assert names == ["pointnet2_ops"]
    assert len(notes) == 1 and notes[0].startswith("mystery 1.0 needs torch symbols")
    plan = decide(
        InstallRequest(requirements=tuple(names)),
        env,
        default_index(),
        reporter=NullReporter(),
        install=True,
        confirm=None,
    )
    items = {item.name: item for item in plan.items}
    assert items["torch"].kind == "installed"  # the installed torch stays: it is the one to fit
    assert items["pointnet2_ops"].kind == "build" and items["pointnet2_ops"].torch == "2.14.1+cu130"
    fitting = _after_pip_upgrade(tmp_path, "pt2141cu130")
    again = decide(
        InstallRequest(requirements=tuple(repair_request(fitting, default_index())[0])),
        fitting,
        default_index(),
        reporter=NullReporter(),
        install=True,
        confirm=None,
    )
    assert {item.kind for item in again.items} == {"installed"}  # nothing to rebuild


def test_repair_takes_no_requirements_beside_it(capsys: pytest.CaptureFixture[str]) -> None:
    from pip_plugin.__main__ import main as cuda_pip

    assert cuda_pip(["install", "--repair", "numpy", "--dry-run"]) == 2
    assert "--repair plans the installed extensions again" in capsys.readouterr().err


def test_cuda_pip_repair_keeps_a_build_that_fits_the_installed_torch(tmp_path: Path) -> None:
    import json
    import os
    import subprocess

    from _torch_env import _cli, standin_torch_venv
    from test_lock_support import make_wheel

    python = standin_torch_venv(tmp_path)  # torch 2.14.1 built for CUDA 13.0
    fits = make_wheel(tmp_path / "w", "pointnet2_ops", "3.0.0+pt2141cu130.sm90")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    subprocess.run([*pip, str(fits)], check=True, env=environ)
    environ.update(CUDA_RESOLVE_DRIVER="580.65.06", CUDA_RESOLVE_CUDA_ARCH="9.0")
    words = ["install", "--repair", "--dry-run", "--json", "--python", str(python)]
    done = _cli(*words, env=environ, module="pip_plugin")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)["plan"]
    kinds = {item["name"]: item["kind"] for item in plan["install"]}
    assert kinds == {"torch": "installed", "pointnet2_ops": "installed"}


def test_sync_refuses_a_locked_torch_that_would_leave_extensions_built_for_the_old_one(
    tmp_path: Path,
) -> None:
    from cuda_resolve.errors import InstallError
    from cuda_resolve.lock.select import Wanted
    from cuda_resolve.lock.sync import _refuse_stale_extensions

    env = _machine(tmp_path, MYSTERY)

    def wanted(name: str, version: str) -> Wanted:
        return Wanted(name=name, version=version, file="f.whl", url="u", size=1, sha256="0" * 64)

    with pytest.raises(InstallError) as refused:
        _refuse_stale_extensions(env, [wanted("torch", "2.13.0")])
    assert "replaces the installed torch 2.14.1+cu130, and mystery, pointnet2-ops" in str(
        refused.value
    )
    assert "sync --exact" in str(refused.value.hint)
    with pytest.raises(InstallError, match="mystery"):  # another variant of the same release
        _refuse_stale_extensions(env, [wanted("torch", "2.14.1+cu126")])
    # the same build (PyPI's file names no variant), or the extensions locked too: nothing left
    _refuse_stale_extensions(env, [wanted("torch", "2.14.1")])
    _refuse_stale_extensions(env, [wanted("torch", "2.14.1+cu130")])
    locked_too = [wanted("mystery", "1.1"), wanted("pointnet2-ops", "3.0.0+pt2130cu130.sm90")]
    _refuse_stale_extensions(env, [*locked_too, wanted("torch", "2.13.0")])
