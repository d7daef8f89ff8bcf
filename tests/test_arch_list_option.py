"""``--arch-list`` given empty or twice is bad input (exit 2), on every command that takes it.

An empty value (``--arch-list "$ARCHS"`` with the variable unset) was taken as no --arch-list,
and the refusal that followed on a GPU-less machine said "pass --arch-list"; a second
--arch-list silently replaced the first (user walk H7 F6)."""

from __future__ import annotations

import pytest

from cuda_resolve.cli import main
from pip_plugin.__main__ import main as cuda_pip_main

COMMANDS = [
    pytest.param(main, ["plan", "pointnet2_ops"], id="plan"),
    pytest.param(main, ["build", "pointnet2_ops", "--dry-run"], id="build"),
    pytest.param(main, ["install", "pointnet2_ops", "--dry-run"], id="install"),
    pytest.param(cuda_pip_main, ["install", "pointnet2_ops", "--dry-run"], id="cuda-pip install"),
]


@pytest.mark.parametrize(("entry", "words"), COMMANDS)
def test_an_empty_arch_list_is_refused(
    entry: object, words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert entry([*words, "--arch-list", ""]) == 2  # type: ignore[operator]
    err = capsys.readouterr().err
    assert "--arch-list '' names no architecture (an unset shell variable?)" in err, err


@pytest.mark.parametrize(("entry", "words"), COMMANDS)
def test_a_second_arch_list_is_refused_with_the_joined_list(
    entry: object, words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert entry([*words, "--arch-list", "8.0", "--arch-list=8.9"]) == 2  # type: ignore[operator]
    err = capsys.readouterr().err
    assert "--arch-list given twice ('8.0', then '8.9')" in err, err
    assert "--arch-list '8.0;8.9'" in err, err


def test_ptx_shows_in_the_plan_the_build_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """--ptx was applied only to the build: the plan's table and reasons said archs 8.0 while
    the build ran with TORCH_CUDA_ARCH_LIST=8.0+PTX (user walk H7 F19)."""
    import json

    words = ["install", "pointnet2_ops", "--arch-list", "8.0", "--ptx", "--dry-run", "--json"]
    assert cuda_pip_main(words) == 0
    document = json.loads(capsys.readouterr().out)
    [item] = [i for i in document["plan"]["install"] if i["name"] == "pointnet2_ops"]
    assert item["arch_list"] == "8.0+PTX", item
    [build] = document["prepared"]["builds"]
    assert build["arch_list"] == "8.0+PTX", build
    assert any("--ptx: TORCH_CUDA_ARCH_LIST=8.0+PTX" in r for r in document["plan"]["reasons"])
