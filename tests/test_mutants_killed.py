"""Decisions that no other default test pinned down (found by breaking each on purpose, issue 14;
docs/evidence/tests-and-mutants-2026-12-03.md has the table).

Planned for the H200 profile (Python 3.12, torch 2.11.0+cu130 installed, one sm_90 GPU), so a
decision that only looks right on this cp311 machine shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_net_support import (
    BenchHandler,
    BenchServer,
    Cas,
    ClientFactory,
    ProxyFactory,
    SystemTrust,
)

from cuda_resolve.environment import Compiler, Driver, Environment, Gpu, Machine, PythonInfo
from cuda_resolve.errors import ResolutionImpossible
from cuda_resolve.index import default_index
from cuda_resolve.index.load import load_index
from cuda_resolve.install.options import InstallOptions
from cuda_resolve.install.prepare import complete_plan
from cuda_resolve.net import FetchError, build_ssl_context
from cuda_resolve.plan import Plan, make_plan
from cuda_resolve.profile import load_profile
from cuda_resolve.resolve import Options, resolve
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

pytest_plugins = ["test_net_support"]

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-detected-2026-12-02.toml"
INSTALLED = {"torch": "2.11.0+cu130"}

#: A curated package whose wheels sit on a find-links page (as kaolin's do on NVIDIA's S3).
CURATED_FIND_LINKS = """\
format = 1

[sources]
fixture = "cuda-resolve's test fixture (tests/test_mutants_killed.py)"

[package]
name = "demo-ext"
import_name = "demo_ext"
find_links = "https://wheels.example.org/torch-{torch}_cu{cuda_nodot}.html"
source = "[fixture]"

[[wheels]]
version = "1.0"
python = ["3.12"]
platforms = ["linux_x86_64"]
torch = [{ versions = ["2.11.0"], variants = ["cu130"] }]
source = "[fixture]"
"""


@pytest.fixture(scope="module")
def h200() -> Environment:
    return load_profile(PROFILE)


@pytest.fixture(scope="module")
def pointnet2_plan(h200: Environment) -> Plan:
    plan = make_plan(resolve(["pointnet2_ops"], h200, default_index(), Options()), h200)
    assert [(item.name, item.kind) for item in plan.items] == [
        ("torch", "installed"),
        ("pointnet2_ops", "build"),
    ]
    return plan


def _completed(plan: Plan, env: Environment, pip_args: tuple[str, ...]) -> Plan:
    return complete_plan(
        plan, env, default_index(), InstallOptions(pip_args=pip_args), pip=None, installed=INSTALLED
    )


def test_the_built_wheel_alone_goes_in_with_no_deps_when_nothing_else_was_asked(
    pointnet2_plan: Plan, h200: Environment
) -> None:
    [step] = _completed(pointnet2_plan, h200, ()).steps
    assert step.args == ("--no-deps",) and len(step.built) == 1


@pytest.mark.parametrize(
    "pip_args",
    [
        ("--proxy", "http://proxy.example:3128"),
        ("-c", "constraints.txt"),
        ("--index-url", "https://mirror.example/simple"),
    ],
)
def test_the_users_pip_options_are_never_dropped_for_no_deps(
    pointnet2_plan: Plan, h200: Environment, pip_args: tuple[str, ...]
) -> None:
    """``--no-deps`` skips pip's resolution: it is chosen only when the user gave pip nothing, since
    the user's options (a proxy, constraints, an index) would otherwise be silently left out."""
    [step] = _completed(pointnet2_plan, h200, pip_args).steps
    assert "--no-deps" not in step.args
    assert step.args[: len(pip_args)] == pip_args


def test_the_wheel_key_carries_the_targets_python_tag(
    pointnet2_plan: Plan, h200: Environment
) -> None:
    """The H200's Python is 3.12: a key saying cp311 (this machine's) would reuse or publish a
    wheel for the wrong interpreter."""
    assert h200.python.interpreter_tag == "cp312"
    [build] = _completed(pointnet2_plan, h200, ()).builds
    assert build.key.python_tag == "cp312" and build.spec.python_tag == "cp312"
    assert build.key.to_json()["python_tag"] == "cp312"


def test_a_curated_find_links_page_is_checked_before_anything_is_installed(
    tmp_path: Path, h200: Environment
) -> None:
    """Every URL the install will contact answers first (the executor probes each step's
    checked_urls): a find-links page left out would fail only inside pip, after the builds."""
    (tmp_path / "packages").mkdir()
    (tmp_path / "packages" / "demo-ext.toml").write_text(CURATED_FIND_LINKS, encoding="utf-8")
    index = load_index([tmp_path], include_user=False)
    plan = make_plan(resolve(["demo-ext"], h200, index, Options()), h200)
    page = "https://wheels.example.org/torch-2.11.0_cu130.html"
    assert [(item.name, item.kind, item.find_links) for item in plan.items] == [
        ("torch", "installed", None),
        ("demo-ext", "wheel", page),
    ]
    completed = complete_plan(plan, h200, index, InstallOptions(), pip=None, installed=INSTALLED)
    [step] = completed.steps
    assert step.args[-2:] == ("--find-links", page)
    assert page in step.checked_urls


def _kepler_without_a_toolkit() -> Environment:
    """A Tesla K40-class GPU (3.5), a current driver, no nvcc."""
    return Environment(
        machine=Machine(os="linux", arch="x86_64", glibc="2.35"),
        python=PythonInfo(version="3.11.9"),
        driver=Driver(version=DriverVersion.parse("580.95.05"), cuda=CudaVersion.parse("13.0")),
        gpus=(Gpu(index=0, name="gpu0", compute_capability=ComputeCapability.parse("3.5")),),
        compiler=Compiler(gcc="11.4.0"),
    )


def test_conflict_reasons_of_several_packages_are_ranked_together_by_relevance() -> None:
    """torch has no kernels for the GPU (and its CPU build is refused); pointnet2_ops has no nvcc.
    The reasons of both packages are ranked as one list: the GPU facts, then the missing toolkit,
    then the CPU build; not one package's reasons after the other's."""
    with pytest.raises(ResolutionImpossible) as caught:
        resolve(
            ["pointnet2_ops", "torch==2.5.1"],
            _kepler_without_a_toolkit(),
            default_index(),
            Options(),
        )
    reasons = caught.value.reasons
    gpu = [i for i, reason in enumerate(reasons) if "no kernels for gpu0 (3.5)" in reason]
    [toolkit] = [i for i, reason in enumerate(reasons) if "no CUDA toolkit (nvcc) found" in reason]
    [cpu] = [i for i, reason in enumerate(reasons) if "a CPU build" in reason]
    assert gpu and max(gpu) < toolkit < cpu, reasons
    assert "no kernels for gpu0 (3.5)" in caught.value.message


def test_https_inside_a_connect_tunnel_is_verified_with_our_context(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_proxy: ProxyFactory,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Our context trusts a CA that OpenSSL's default paths do not (a CA file the user named): a
    page behind a CONNECT proxy is fetched with it too, not with urllib3's default context."""
    system_trust(cas.unrelated)  # the OS store does not know the origin's CA
    origin_ca = tmp_path / "origin-ca.pem"
    cas.origin.cert_pem.write_to_path(str(origin_ca))

    def route(handler: BenchHandler) -> None:
        handler.reply(200, b'{"name": "demo"}', content_type="application/json")

    origin.routes["/pypi/demo/json"] = route
    proxy = make_proxy("tunnel", routes={"mirror.invalid": origin.port})
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    url = "https://mirror.invalid/pypi/demo/json"  # resolves nowhere: only the proxy knows it
    with pytest.raises(FetchError) as refused:
        make_client().get_json(url)  # the OS store alone
    assert refused.value.kind == "tls"
    ours = make_client(ssl_context_factory=lambda: build_ssl_context(extra_cafiles=[origin_ca]))
    assert ours.get_json(url) == {"name": "demo"}
    assert proxy.connects[-1].startswith("CONNECT mirror.invalid:443 ")
