"""Property tests: whatever machine, a chosen build covers every GPU and runs on the driver."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_resolve.compat import build_covers_gpu, driver_supports_cuda, toolkit_archs
from cuda_resolve.environment import (
    Compiler,
    Driver,
    Environment,
    Gpu,
    Machine,
    PythonInfo,
    Toolkit,
)
from cuda_resolve.errors import ResolutionImpossible
from cuda_resolve.index import default_index
from cuda_resolve.resolve import Options, resolve
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

INDEX = default_index()
DRIVERS = [
    "450.80.02",
    "470.82.01",
    "515.43.04",
    "525.60.13",
    "535.104.05",
    "550.54.14",
    "560.35.03",
    "570.124.06",
    "575.51.03",
    "580.95.05",
    "595.45.04",
]
CAPABILITIES = [
    "3.7",
    "5.0",
    "6.0",
    "6.1",
    "7.0",
    "7.5",
    "8.0",
    "8.6",
    "8.9",
    "9.0",
    "10.0",
    "12.0",
]
PYTHONS = ["3.8.18", "3.9.18", "3.10.12", "3.11.9", "3.12.3", "3.13.1"]
TOOLKITS = ["11.8", "12.1", "12.4", "12.6", "12.8", "13.0"]


@st.composite
def environments(draw: st.DrawFn) -> Environment:
    driver_text = draw(st.sampled_from(DRIVERS))
    version = DriverVersion.parse(driver_text)
    from cuda_resolve.compat import cuda_for_driver

    cuda = cuda_for_driver(version, INDEX)
    assert cuda is not None
    gpus = tuple(
        Gpu(index=i, name=f"gpu{i}", compute_capability=ComputeCapability.parse(cc))
        for i, cc in enumerate(
            draw(st.lists(st.sampled_from(CAPABILITIES), min_size=1, max_size=3))
        )
    )
    toolkits = tuple(
        Toolkit(version=CudaVersion.parse(v), root=f"/usr/local/cuda-{v}")
        for v in draw(st.lists(st.sampled_from(TOOLKITS), max_size=1))
    )
    return Environment(
        machine=Machine(os="linux", arch="x86_64", glibc="2.35"),
        python=PythonInfo(version=draw(st.sampled_from(PYTHONS))),
        driver=Driver(version=version, cuda=cuda),
        gpus=gpus,
        toolkits=toolkits,
        compiler=Compiler(gcc="11.4.0"),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=environments(),
    request=st.sampled_from([["torch"], ["kaolin"], ["pointnet2_ops"], ["torchvision", "kaolin"]]),
    strict=st.booleans(),
)
def test_chosen_builds_cover_every_gpu_and_run_on_the_driver(
    env: Environment, request: list[str], strict: bool
) -> None:
    try:
        resolution = resolve(request, env, INDEX, Options(strict_driver=strict))
    except ResolutionImpossible as exc:
        assert exc.message and exc.hint  # a conflict always says why and what to do
        return
    torch = resolution.get("torch")
    assert torch is not None
    assert torch.cuda is not None, "a GPU machine never gets a CPU torch"
    assert driver_supports_cuda(env.driver, torch.cuda, INDEX, strict=strict), torch.label
    for gpu in env.gpus:
        assert build_covers_gpu(torch.arch_list, gpu.compute_capability), (torch.label, gpu)
    for candidate in resolution.chosen:
        if (
            candidate.name != "torch"
            and candidate.kind == "wheel"
            and candidate.torch_version is not None
        ):
            assert (candidate.torch_version, candidate.variant) == (
                torch.base_version,
                torch.variant,
            )
        if candidate.kind == "build":
            assert candidate.toolkit is not None
            assert candidate.toolkit.version.major == torch.cuda.major
            accepted = set(
                toolkit_archs(candidate.toolkit, INDEX.toolkit(candidate.toolkit.version))
            )
            assert all(entry.capability in accepted for entry in candidate.arch_list)
            for gpu in env.gpus:
                assert build_covers_gpu(candidate.arch_list, gpu.compute_capability)
