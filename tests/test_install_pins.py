"""Pinning a plan's wheels to the exact file and hash its index lists (pure: pages given in
code)."""

from __future__ import annotations

import json

import pytest

from cuda_resolve.environment import Environment, Machine, PythonInfo
from cuda_resolve.install.pins import files_on_page, pin_plan
from cuda_resolve.plan import PipStep, Plan, PlanItem


def make_env(*, python: str) -> Environment:
    return Environment(
        machine=Machine(os="linux", arch="x86_64", glibc="2.35"), python=PythonInfo(version=python)
    )


INDEX = "https://mirror.example/whl/cu126/"
SHA_312 = "a" * 64
SHA_ANY = "b" * 64


def _plan(env: Environment) -> Plan:
    item = PlanItem(
        name="torch",
        version="2.6.0+cu126",
        kind="wheel",
        variant="cu126",
        requirement="torch==2.6.0+cu126",
        index="https://download.pytorch.org/whl/cu126",
    )
    step = PipStep(
        purpose="torch family",
        args=("--index-url", INDEX, "torch==2.6.0+cu126"),
        torch_index_only=True,
    )
    return Plan(
        environment=env,
        items=(item,),
        pass_through=(),
        reasons=(),
        rejected=(),
        complete=True,
        steps=(step,),
    )


HTML = f"""<html><body>
<a
href="../../torch-2.6.0%2Bcu126-cp39-cp39-manylinux_2_28_x86_64.whl#sha256={"c" * 64}"
>old python</a>
<a href="/files/torch-2.6.0%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl#sha256={SHA_312}">312</a>
<a href="torch-2.6.0%2Bcu126-py3-none-any.whl#sha256={SHA_ANY}">any</a>
<a href="torch-2.5.1%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl#sha256={"d" * 64}">older</a>
</body></html>"""


def test_html_pages_give_absolute_urls_and_fragment_hashes() -> None:
    files = files_on_page(HTML, "text/html", f"{INDEX}torch/")
    by_name = {f.filename: f for f in files}
    best = by_name["torch-2.6.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert (
        best.url
        == "https://mirror.example/files/torch-2.6.0%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl"
    )
    assert best.sha256 == SHA_312


def test_pep691_json_pages_are_read() -> None:
    body = json.dumps(
        {
            "files": [
                {
                    "filename": "torch-2.6.0+cu126-py3-none-any.whl",
                    "url": "f/torch.whl",
                    "hashes": {"sha256": SHA_ANY},
                }
            ]
        }
    )
    [entry] = files_on_page(body, "application/vnd.pypi.simple.v1+json", f"{INDEX}torch/")
    assert entry.url == f"{INDEX}torch/f/torch.whl" and entry.sha256 == SHA_ANY


def test_the_plan_is_pinned_to_the_best_tag_for_this_interpreter() -> None:
    env = make_env(python="3.12.3")
    plan = pin_plan(_plan(env), env, lambda url: (HTML, "text/html", url))
    [item] = plan.items
    assert item.sha256 == SHA_312 and item.url is not None and "cp312" in item.url
    assert plan.steps[0].args[-1] == f"torch @ {item.url}#sha256={SHA_312}"
    assert plan.steps[0].args[:2] == (
        "--index-url",
        INDEX,
    )  # torch's own requirements still come from there


def test_a_page_that_does_not_answer_leaves_the_plan_unpinned_with_a_note() -> None:
    env = make_env(python="3.12.3")

    def down(url: str) -> tuple[str, str, str]:
        raise OSError("connection refused")

    plan = pin_plan(_plan(env), env, down)
    assert plan.steps[0].args[-1] == "torch==2.6.0+cu126" and plan.items[0].sha256 is None
    assert any("could not be read (connection refused)" in note for note in plan.notes)


@pytest.mark.parametrize(
    "body",
    ["<html></html>", HTML.replace(f"#sha256={SHA_312}", "").replace(f"#sha256={SHA_ANY}", "")],
)
def test_no_matching_file_or_no_hash_is_not_pinned(body: str) -> None:
    env = make_env(python="3.12.3")
    plan = pin_plan(_plan(env), env, lambda url: (body, "text/html", url))
    assert plan.items[0].sha256 is None and "not pinned" in plan.notes[-1]
