"""Resolver scenarios as data: each tests/data/cases/*.toml is a profile, a request and the
expected install set (or the expected conflict), with one line on why that answer is right."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from cuda_resolve.errors import ResolutionImpossible, UsageError
from cuda_resolve.index import default_index, parse_arch_entry
from cuda_resolve.plan import make_plan
from cuda_resolve.profile import load_profile, parse_profile
from cuda_resolve.resolve import Options, resolve

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DATA = Path(__file__).parent / "data"
CASES = sorted((DATA / "cases").glob("*.toml"))


def _environment(case: dict[str, Any], path: Path):
    if "profile_file" in case:
        return load_profile(DATA / "profiles" / case["profile_file"])
    return parse_profile(tomli_w.dumps(case["profile"]), origin=str(path))


def _describe(item: dict[str, Any]) -> str:
    local = (
        f"+{item['variant']}"
        if item.get("variant")
        and item["name"] in ("torch", "torchvision", "torchaudio")
        and item["kind"] != "installed"
        else ""
    )
    version = (
        item["version"]
        if item["kind"] != "installed"
        else item["version"].split("+")[0] + (f"+{item['variant']}" if item.get("variant") else "")
    )
    return f"{item['name']}=={version}{local} {item['kind']}"


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case(path: Path) -> None:
    case = tomllib.loads(path.read_text(encoding="utf-8"))
    assert case.get("why"), f"{path.name}: every case says why its answer is right"
    env = _environment(case, path)
    options = Options(
        allow_torch_change=case.get("allow_torch_change", False),
        strict_driver=case.get("strict_driver", False),
        arch_list=tuple(parse_arch_entry(p) for p in case["arch_list"].split(";"))
        if "arch_list" in case
        else None,
    )
    expect = case["expect"]
    if "usage_error" in expect:  # refused before resolving: bad or unsupported input
        with pytest.raises(UsageError) as refused:
            resolve(case["request"], env, default_index(), options)
        for fragment in expect["usage_error"]:
            assert fragment in f"{refused.value.message} || {refused.value.hint}", (
                f"{path.name}: {fragment!r} not in {refused.value.message!r}"
            )
        return
    if "conflict" in expect:
        with pytest.raises(ResolutionImpossible) as caught:
            resolve(case["request"], env, default_index(), options)
        text = f"{caught.value.message} || {caught.value.hint} || " + " | ".join(
            caught.value.reasons
        )
        for fragment in expect["conflict"]:
            assert fragment in text, f"{path.name}: {fragment!r} not in {text!r}"
        for fragment in expect.get("message", []):  # what the one error line itself must say
            assert fragment in caught.value.message, (
                f"{path.name}: {fragment!r} not in {caught.value.message!r}"
            )
        for fragment in expect.get("hint", []):  # the way out of this conflict
            assert fragment in (caught.value.hint or ""), (
                f"{path.name}: {fragment!r} not in {caught.value.hint!r}"
            )
        for fragment in expect.get("hint_not", []):  # ways out of other conflicts stay out
            assert fragment not in (caught.value.hint or ""), (
                f"{path.name}: {fragment!r} in {caught.value.hint!r}"
            )
        return
    plan = make_plan(resolve(case["request"], env, default_index(), options), env).to_json()
    got = sorted(_describe(item) for item in plan["install"])
    assert got == sorted(expect["install"]), f"{path.name}: {case['why']}"
    for name, arch in expect.get("arch_list", {}).items():
        item = next(i for i in plan["install"] if i["name"] == name)
        assert item["arch_list"] == arch
    assert plan["pass_through"] == expect.get("pass_through", [])
    for fragment in expect.get("reasons", []):
        assert any(fragment in reason for reason in plan["reasons"]), (
            f"{fragment!r} not in {plan['reasons']}"
        )
    for fragment in expect.get("reasons_not", []):  # a reason that would be false here
        assert not any(fragment in reason for reason in plan["reasons"]), (
            f"{fragment!r} in {plan['reasons']}"
        )
    for name, requirement in expect.get("requirement", {}).items():
        item = next(i for i in plan["install"] if i["name"] == name)
        assert item["requirement"] == requirement
    for name, index in expect.get("index", {}).items():  # where pip reads the artifact from
        item = next(i for i in plan["install"] if i["name"] == name)
        assert item["index"] == index


def test_cases_never_see_the_developers_overlays_or_overrides() -> None:
    """conftest's isolation: no CUDA_RESOLVE_* override, no user or configured overlay."""
    import os

    from cuda_resolve.config import config_path
    from cuda_resolve.index.load import overlay_dirs

    assert not [
        name
        for name in os.environ
        if name.startswith(
            (
                "CUDA_RESOLVE_INDEX",
                "CUDA_RESOLVE_DRIVER",
                "CUDA_RESOLVE_CUDA_ARCH",
                "CONDA_OVERRIDE_",
            )
        )
    ]
    assert not config_path().exists()
    assert overlay_dirs() == []
