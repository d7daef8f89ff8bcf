"""Conflicts are explained from structured rejections (a kind plus its facts), not from wording.

Each scenario below produces one rejection kind; the test checks the kind, its category and the
facts that the hint is built from. Forcing every category to "other", or dropping the ranking
that puts the most telling fact first, fails here.
"""

from __future__ import annotations

import pytest

from cuda_resolve.environment import (
    Compiler,
    Driver,
    Environment,
    Gpu,
    Machine,
    PythonInfo,
    Toolkit,
    TorchInfo,
)
from cuda_resolve.errors import ResolutionImpossible
from cuda_resolve.index import default_index
from cuda_resolve.resolve import Options, resolve
from cuda_resolve.resolve.candidates import CATEGORIES, RULES, Catalogue, Rejection
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

INDEX = default_index()


def _env(
    *,
    driver: str | None = "580.95.05",
    cuda: str = "13.0",
    gpus: tuple[str, ...] = ("8.6",),
    toolkits: tuple[str, ...] = (),
    python: str = "3.11.9",
    gcc: str = "11.4.0",
    torch: TorchInfo | None = None,
    os: str = "linux",
    arch: str = "x86_64",
) -> Environment:
    return Environment(
        machine=Machine(os=os, arch=arch, glibc="2.35" if os == "linux" else None),
        python=PythonInfo(version=python),
        driver=Driver(version=DriverVersion.parse(driver), cuda=CudaVersion.parse(cuda))
        if driver
        else None,
        gpus=tuple(
            Gpu(index=i, name=f"gpu{i}", compute_capability=ComputeCapability.parse(c))
            for i, c in enumerate(gpus)
        ),
        toolkits=tuple(
            Toolkit(version=CudaVersion.parse(v), root=f"/usr/local/cuda-{v}") for v in toolkits
        ),
        compiler=Compiler(gcc=gcc),
        torch=torch,
    )


def _rejections(env: Environment, name: str, options: Options | None = None) -> list[Rejection]:
    catalogue = Catalogue(env, INDEX, options or Options())
    catalogue.candidates(name)
    return catalogue.rejected(name)


SCENARIOS = {
    # (environment, package, options) -> (kind, category, a fact that must be recorded)
    "driver": (
        _env(driver="470.82.01", cuda="11.4"),
        "torch",
        None,
        "driver-cuda",
        "driver",
        ("driver", "470.82.01"),
    ),
    "gpu": (_env(gpus=("3.7",)), "torch", None, "gpu-kernels", "gpu", ("gpus", "3.7")),
    "cpu": (_env(), "torch", None, "cpu-build", "cpu", None),
    "python": (_env(python="3.7.17"), "torch", None, "python", "python", ("python", "3.7")),
    "platform": (
        _env(os="darwin", arch="aarch64", driver=None, gpus=()),
        "torch",
        None,
        "platform",
        "platform",
        ("os", "darwin"),
    ),
    "toolkit-missing": (_env(), "pointnet2_ops", None, "toolkit-missing", "toolkit", None),
    "toolkit-driver": (
        _env(driver="550.54.14", cuda="12.4", toolkits=("13.0",), gcc="12.3.0"),
        "pointnet2_ops",
        None,
        "toolkit-driver",
        "driver",
        ("toolkit", "13.0"),
    ),
    "compiler": (
        _env(toolkits=("12.2",), gcc="14.1.0"),
        "pointnet2_ops",
        None,
        "compiler-range",
        "compiler",
        ("gcc", "14.1.0"),
    ),
    "toolkit-target": (
        _env(gpus=("3.5",), toolkits=("13.0",), gcc="13.2.0"),
        "pointnet2_ops",
        None,
        "toolkit-target",
        "toolkit",
        ("gpus", "3.5"),
    ),
    "arch-list-needed": (
        _env(driver=None, gpus=(), toolkits=("12.4",)),
        "pointnet2_ops",
        None,
        "arch-list-needed",
        "other",
        ("toolkit", "12.4"),
    ),
    "installed": (
        _env(
            gpus=("6.1",),
            torch=TorchInfo(
                version="2.11.0+cu130", cuda=CudaVersion.parse("13.0"), arch_list=("sm_75", "sm_90")
            ),
        ),
        "torch",
        None,
        "installed-unfit",
        "installed",
        ("torch", "torch 2.11.0+cu130"),
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=list(SCENARIOS))
def test_each_rule_records_its_kind_category_and_facts(scenario: str) -> None:
    env, name, options, kind, category, fact = SCENARIOS[scenario]
    found = [r for r in _rejections(env, name, options) if r.kind == kind]
    assert found, f"no {kind} rejection in {[r.kind for r in _rejections(env, name, options)]}"
    assert all(r.category == category for r in found)
    if fact is not None:
        key, value = fact
        assert any(r.fact(key) == value for r in found), [r.facts for r in found]


def test_every_kind_has_a_known_category_and_unknown_kinds_are_refused() -> None:
    assert set(RULES.values()) <= set(CATEGORIES)
    catalogue = Catalogue(_env(), INDEX, Options())
    with pytest.raises(ValueError):
        catalogue.reject("torch", "torch 1.0", "made up", "a-kind-nobody-defined")


def test_categories_are_not_all_other() -> None:
    """Across the scenarios every category but 'other' shows up: none collapses into 'other'."""
    seen = {category for _, _, _, _, category, _ in SCENARIOS.values()}
    assert seen >= set(CATEGORIES) - {"other"}


def _conflict(
    env: Environment, request: list[str], options: Options | None = None
) -> ResolutionImpossible:
    with pytest.raises(ResolutionImpossible) as caught:
        resolve(request, env, INDEX, options)
    return caught.value


def test_the_most_telling_fact_leads_a_gpu_before_a_cpu_build() -> None:
    """A Kepler card: CPU builds are ruled out too, but the GPU fact explains the conflict."""
    error = _conflict(_env(gpus=("3.5",)), ["torch==2.5.1"])
    assert "no kernels for gpu0 (3.5)" in error.message
    assert "a CPU build" not in error.message
    first_gpu = next(i for i, r in enumerate(error.reasons) if "no kernels" in r)
    first_cpu = next(i for i, r in enumerate(error.reasons) if "a CPU build" in r)
    assert first_gpu < first_cpu
    assert "arch list covers it" in (error.hint or "")


def test_the_driver_fact_leads_before_the_cpu_build() -> None:
    error = _conflict(_env(driver="470.82.01", cuda="11.4"), ["torch==2.8.0"])
    assert "supports CUDA <= 11.4" in error.message
    assert (error.hint or "").startswith("upgrade the NVIDIA driver")


def test_a_locked_torch_leads_with_allow_torch_change() -> None:
    torch = TorchInfo(
        version="2.11.0+cu130",
        cuda=CudaVersion.parse("13.0"),
        arch_list=("sm_75", "sm_80", "sm_86", "sm_90"),
    )
    error = _conflict(_env(torch=torch), ["kaolin"])
    assert "no published wheel for the installed torch 2.11.0+cu130" in error.message
    assert "--allow-torch-change" in (error.hint or "")


def test_hints_come_from_the_kind_not_the_wording() -> None:
    """The toolkit-driver hint names a toolkit of the driver's CUDA major, read from the facts."""
    error = _conflict(
        _env(driver="550.54.14", cuda="12.4", toolkits=("13.0",), gcc="12.3.0"), ["pointnet2_ops"]
    )
    assert (
        error.hint
        == "install a CUDA 12.x toolkit (driver 550.54.14 runs CUDA <= 12.4), or upgrade the "
        "NVIDIA driver to one that runs CUDA 13.0"
    )
