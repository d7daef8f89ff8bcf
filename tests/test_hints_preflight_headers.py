"""The pre-flight refusal for headers a minimal toolkit lacks names the wheels that carry them
(issue 29: a hint true where it is read). CUDA 13's component wheels have no ``-cu13`` suffix
(``nvidia-cusparse``, ``nvidia-cublas``, ``nvidia-cusolver``: what torch 2.15.0+cu132 requires);
CUDA 12's have ``-cu12``. The hint said ``nvidia-*-cu13`` for both, which names no such wheel."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_build_preflight import INDEX, RECIPE, TOOLKIT_13, _env, _item

from cuda_resolve.build.preflight import PreflightError, check_build
from cuda_resolve.environment import TorchInfo
from cuda_resolve.versions import CudaVersion

MISSING = ("cusparse.h", "cublas_v2.h", "cusolverDn.h")


@pytest.mark.parametrize(
    ("cuda", "wheels"),
    [
        ((13, 0), "nvidia-cusparse nvidia-cublas nvidia-cusolver"),
        ((12, 4), "nvidia-cusparse-cu12 nvidia-cublas-cu12 nvidia-cusolver-cu12"),
    ],
    ids=["CUDA 13", "CUDA 12"],
)
def test_the_hint_names_the_wheels_that_carry_the_missing_headers(
    cuda: tuple[int, int], wheels: str
) -> None:
    version = CudaVersion(*cuda)
    variant = f"cu{cuda[0]}{cuda[1]}"
    toolkit = replace(
        TOOLKIT_13, version=version, root=f"/usr/local/cuda-{cuda[0]}.{cuda[1]}",
        missing_headers=MISSING,
    )  # fmt: skip
    torch = TorchInfo(version=f"2.11.0+{variant}", cuda=version)
    with pytest.raises(PreflightError) as refused:
        check_build(
            _item(variant=variant, toolkit=str(version), toolkit_root=toolkit.root,
                  torch=torch.version),
            RECIPE,
            _env(toolkits=(toolkit,), torch=torch),
            INDEX,
            exists=lambda path: False,
        )  # fmt: skip
    assert wheels in (refused.value.hint or ""), refused.value.hint
    assert "-cu13" not in (refused.value.hint or ""), refused.value.hint
