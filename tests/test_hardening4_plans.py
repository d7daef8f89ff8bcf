"""A plan file is untrusted input: ``apply`` gives it no more power than the command line has.

One real plan (``cuda-resolve plan quickext`` for a venv with a stand-in torch and a stand-in
CUDA toolkit: it builds the fixture extension and installs it) is edited one field at a time,
the way a hostile or broken file from a colleague, a repository or another machine would be.
Each edit is refused with exit 2 and a message naming the field, before anything is stashed,
built or installed. The unedited plan applies (so "nothing happened" means something)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _torch_env import copy_venv, standin_cuda_toolkit, torch_venv_template  # noqa: F401
from test_install_unit import _wheel

from cuda_resolve.cli import main

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "packages" / "quickext"
INDEX = DATA / "index" / "quickext"
EVIL = "evil.example"

Edit = Callable[[dict[str, Any], Path], None]


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory, torch_venv_template: Path) -> dict[str, Any]:
    """The target (a venv with the stand-in torch), the machine's variables, a plan made for it,
    and a folder with a small wheel (six) for the steps that install from a folder."""
    root = tmp_path_factory.mktemp("plans")
    python = copy_venv(root / "target", torch_venv_template)
    cuda = standin_cuda_toolkit(root / "cuda")
    links = root / "links"
    links.mkdir()
    _wheel(links, "six", "1.17.0", files={"six.py": "X = 1\n"})
    variables = {
        "CUDA_HOME": str(cuda),
        "PATH": f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "CUDA_RESOLVE_DRIVER": "580.95.05",
        "CUDA_RESOLVE_CUDA_ARCH": "9.0",
        "PIP_NO_INDEX": "1",  # nothing to reach: the plan's steps install local files
    }
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    environ.pop("PIP_FIND_LINKS", None)
    words = ["plan", "quickext", "--index", str(INDEX), "--python", str(python), "--json"]
    made = subprocess.run(
        [sys.executable, "-m", "cuda_resolve", *words],
        env={**environ, **variables},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    plan = json.loads(made.stdout)
    assert [b["package"] for b in plan["builds"]] == ["quickext"], plan["builds"]
    return {"python": python, "variables": variables, "plan": plan, "links": links}


def _site(python: Path) -> list[str]:
    [site] = (python.parent.parent / "lib").glob("python*/site-packages")
    return sorted(os.listdir(site))


def _apply(
    machine: dict[str, Any],
    plan: dict[str, Any] | str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    cuda_pip: bool = False,
) -> tuple[int, str]:
    for name, value in machine["variables"].items():
        monkeypatch.setenv(name, value)
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "PIP_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(tmp_path / "wheelhouse"))
    path = tmp_path / "plan.json"
    path.write_text(plan if isinstance(plan, str) else json.dumps(plan), encoding="utf-8")
    capsys.readouterr()
    words = ["--python", str(machine["python"]), "--source", str(SOURCE)]
    if cuda_pip:  # the same reader behind `cuda-pip install --plan`
        from pip_plugin.__main__ import main as cuda_pip_main

        status = cuda_pip_main(["install", "--plan", str(path), *words])
    else:
        status = main(["apply", str(path), *words])
    return status, capsys.readouterr().err


def _refused(
    machine: dict[str, Any],
    plan: dict[str, Any] | str,
    named: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    cuda_pip: bool = False,
) -> str:
    before = _site(machine["python"])
    status, err = _apply(machine, plan, tmp_path, monkeypatch, capsys, cuda_pip=cuda_pip)
    assert status == 2, err
    assert named in err, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert not list((tmp_path / "wheelhouse").rglob("*.whl")), "something was built"
    journal = Path(os.environ["CUDA_RESOLVE_CACHE_DIR"]) / "journal"
    assert not journal.exists() or not any(journal.iterdir()), "something was stashed"
    assert _site(machine["python"]) == before, "something was installed"
    return err


def _edited(machine: dict[str, Any], edit: Edit, tmp_path: Path) -> dict[str, Any]:
    plan: dict[str, Any] = copy.deepcopy(machine["plan"])
    edit(plan, tmp_path)
    return plan


def test_the_unedited_plan_applies(
    machine: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    own = dict(machine, python=copy_venv(tmp_path / "own", machine["python"].parent.parent))
    status, err = _apply(own, machine["plan"], tmp_path, monkeypatch, capsys)
    assert status == 0, err
    assert any(name.startswith("quickext") for name in _site(own["python"]))


# -- pip options: the command line's refusals, in steps and in the trust list ----------------


def _add_args(*words: str) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        plan["steps"][0]["args"] += [w.replace("{folder}", str(folder)) for w in words]

    return edit


def _build(**fields: Any) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        plan["builds"][0].update(fields)

    return edit


def _recipe(**fields: Any) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        plan["builds"][0]["recipe"].update(fields)

    return edit


def _trust(*words: str) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        plan["trust"] = list(words)

    return edit


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (_add_args("--trusted-host", EVIL), "steps[0].args[1] = '--trusted-host'"),
        (_add_args(f"--trusted-ho={EVIL}"), f"steps[0].args[1] = '--trusted-ho={EVIL}'"),
        (_add_args("-r", "{folder}/extra.txt"), f"whose trusted-host {EVIL} turns TLS"),
        (_trust("--trusted-host", EVIL), "trust[0] = '--trusted-host'"),
        (_trust(f"--index-url=https://{EVIL}/simple"), "trust[0] = '--index-url=https://"),
        (_add_args("--us"), "steps[0].args: --us (among pip's options) is ambiguous"),
        (_build(torch_index_option="--trusted-host"), "builds[0].torch_index_option = '--tr"),
        (_build(torch_requirement="--trusted-host=x"), "builds[0].torch_requirement = '--tr"),
        (
            _build(variables={"PIP_TRUSTED_HOST": EVIL}),
            "builds[0].variables.PIP_TRUSTED_HOST: changes how pip or git verify TLS",
        ),
        (
            _recipe(env={"GIT_SSL_NO_VERIFY": "1"}),
            "builds[0].recipe.env.GIT_SSL_NO_VERIFY: changes how pip or git verify TLS",
        ),
    ],
    ids=[
        "trusted-host",
        "abbreviated",
        "in a -r file",
        "in trust",
        "index in trust",
        "ambiguous",
        "torch index option",
        "torch requirement",
        "build variable",
        "recipe variable",
    ],
)
def test_pip_options_in_a_plan_meet_the_command_lines_refusals(
    machine: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    named: str,
) -> None:
    (tmp_path / "extra.txt").write_text(f"--trusted-host {EVIL}\nsix\n", encoding="utf-8")
    plan = _edited(machine, edit, tmp_path)
    _refused(machine, plan, named, tmp_path, monkeypatch, capsys)


def test_cuda_pip_install_plan_refuses_the_same(
    machine: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = _edited(machine, _add_args(f"--trusted-host={EVIL}"), tmp_path)
    named = f"steps[0].args[1] = '--trusted-host={EVIL}'"
    _refused(machine, plan, named, tmp_path, monkeypatch, capsys, cuda_pip=True)


# -- a recipe's fields, checked as the index parser checks them ------------------------------


_PATCH = {"find": "a", "replace": "b", "reason": "why", "count": 1, "torch": ""}


RECIPE_EDITS = [
    pytest.param(*case, id=name)
    for case, name in zip(
        [
            (_recipe(subdirectory="../outside"), "builds[0].recipe.subdirectory = '../outside'"),
            (_recipe(subdirectory="/etc"), "builds[0].recipe.subdirectory = '/etc'"),
            (
                _recipe(patches=[dict(_PATCH, file="../../.bashrc")]),
                "builds[0].recipe.patches[0].file = '../../.bashrc'",
            ),
            (
                _recipe(archive={"url": "https://x.example/q.tar.gz", "sha256": "../../x"}),
                "builds[0].recipe.archive.sha256 = '../../x'",
            ),
            (
                _recipe(revision="--upload-pack=touch /tmp/pwned"),
                "builds[0].recipe.revision = '--upload-pack=touch /tmp/pwned'",
            ),
            (_recipe(env={"A B": "1"}), "builds[0].recipe.env.A B: is not an environment variable"),
        ],
        ["parent", "absolute", "patch outside", "archive hash", "revision", "env name"],
        strict=True,
    )
]


# -- hashes and wheel digests: hex of their length, the plan's own ---------------------------


def _built(digest: str) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        plan["steps"][0]["built"] = [digest]

    return edit


def _build_field(key: str, value: str) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        plan["builds"][0][key] = value

    return edit


def _key_field(key: str, value: str) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        plan["builds"][0]["wheel_key"][key] = value

    return edit


def _item(**fields: Any) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        plan["install"].append(fields)

    return edit


DIGEST_EDITS = [
    pytest.param(*case, id=name)
    for case, name in zip(
        [
            (_built("0123456789abcdef"), "steps[0].built[0] = '0123456789abcdef': not the wheel"),
            (_built("../../../etc"), "steps[0].built[0] = '../../../etc': not the wheel"),
            (_build_field("wheel_digest", "../x"), "builds[0].wheel_digest = '../x'"),
            (_build_field("wheel_digest", "0" * 16), "builds[0].wheel_digest = '0000000000000000'"),
            (_key_field("recipe_digest", "../../x"), "builds[0].wheel_key"),
            (
                _item(
                    name="six",
                    version="1.17.0",
                    kind="wheel",
                    requirement="six==1.17.0",
                    sha256="../../" + "a" * 58,
                ),
                "install[2].sha256 = '../../aaaa",
            ),
        ],
        ["unknown digest", "path as digest", "digest not hex", "digest of another", "key", "sha"],
        strict=True,
    )
]


# -- malformed structure: exit 2 naming where, never an internal error -----------------------


def _nested(depth: int) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        value: list[Any] = []
        for _ in range(depth):
            value = [value]
        plan["notes"] = value

    return edit


def _toolkit_arch(plan: dict[str, Any], folder: Path) -> None:
    plan["builds"][0]["toolkit"]["gpu_archs"] = ["9.x"]


def _kept_arch_list(plan: dict[str, Any], folder: Path) -> None:
    plan["install"].append(
        {"name": "other", "version": "1.0", "kind": "installed", "arch_list": "9.0;x"}
    )


def _requirement(plan: dict[str, Any], folder: Path) -> None:
    plan["install"].append(
        {"name": "six", "version": "1.17.0", "kind": "wheel", "requirement": "six"}
    )


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (_nested(40), "notes" + "[0]" * 31 + ": nested more than 32 levels deep"),
        (_toolkit_arch, "builds[0].toolkit.gpu_archs[0] = '9.x'"),
        (_kept_arch_list, "install[2].arch_list = '9.0;x'"),
        (_requirement, "install[2].requirement = 'six'"),
    ],
    ids=["deep", "toolkit arch", "kept arch list", "requirement"],
)
def test_malformed_structure_is_exit_2_naming_the_path(
    machine: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    named: str,
) -> None:
    plan = _edited(machine, edit, tmp_path)
    _refused(machine, plan, named, tmp_path, monkeypatch, capsys)


def test_nesting_too_deep_for_the_json_parser_names_the_path(
    machine: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = json.dumps(machine["plan"])[:-1] + ', "notes": [' + "[" * 100_000 + "]" * 100_001 + "}"
    named = "notes" + "[0]" * 31 + ": nested more than 32 levels deep"
    _refused(machine, text, named, tmp_path, monkeypatch, capsys)


# -- a hash the plan records is the one pip checks -------------------------------------------


def _recorded(word: str) -> Edit:
    def edit(plan: dict[str, Any], folder: Path) -> None:
        wheel = folder / "links" / "six-1.17.0-py3-none-any.whl"
        word_here = word.replace("{url}", wheel.as_uri())
        plan["install"].append(
            {
                "name": "six",
                "version": "1.17.0",
                "kind": "wheel",
                "requirement": "six==1.17.0",
                "url": wheel.as_uri(),
                "sha256": "a" * 64,  # not the file's
            }
        )
        plan["steps"][0]["args"] += ["--find-links", str(folder / "links"), word_here]

    return edit


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (_recorded("six==1.17.0"), "steps[0] installs it as 'six==1.17.0'"),
        (_recorded("six @ {url}#sha256=" + "b" * 64), "steps[0] installs it as 'six @ file:"),
        (_recorded("six @ {url}"), "steps[0] installs it as 'six @ file:"),
    ],
    ids=["unpinned", "another hash", "no hash"],
)
def test_a_recorded_hash_is_the_one_pip_checks(
    machine: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    named: str,
) -> None:
    import shutil

    shutil.copytree(machine["links"], tmp_path / "links")
    plan = _edited(machine, edit, tmp_path)
    err = _refused(machine, plan, named, tmp_path, monkeypatch, capsys)
    assert f"install[2].sha256 = '{'a' * 64}'" in err, err


# -- a lock file is untrusted input too -------------------------------------------------------

_LOCK = """lock-version = "1.0"
environments = ["sys_platform == 'linux' and python_version == '3.11'"]
requires-python = ">=3.11"
extras = ["cpu"]
dependency-groups = []
default-groups = []
created-by = "cuda-resolve"

[[packages]]
name = "six"
version = "1.17.0"

[[packages.wheels]]
name = "six-1.17.0-py3-none-any.whl"
url = "http://127.0.0.1:9/six-1.17.0-py3-none-any.whl"
size = 9
hashes = { sha256 = "SHA" }

[tool.cuda-resolve]
index-url = "https://pypi.org/simple"
requests = ["six"]

[tool.cuda-resolve.profiles.cpu]
arch = "x86_64"
capabilities = []
decision = ["six (pip)"]
digest = "0000"
gpus = []
os = "linux"
python = "3.11"
source = "cpu.toml"
TORCH_CUDA
"""


@pytest.mark.parametrize(
    ("sha256", "extra", "words", "named"),
    [
        ("../../../outside", "", ["--name", "cpu"], "packages[0].wheels[0].hashes.sha256"),
        ("A" * 64, "", ["--name", "cpu"], "packages[0].wheels[0].hashes.sha256 = 'AAAA"),
        ("a" * 64, 'torch-cuda = "12.x"', ["--name", "auto", "--check"], "cpu.torch-cuda"),
        ("a" * 64, 'torch-arch-list = "8.0;x"', ["--name", "auto"], "cpu.torch-arch-list"),
        ("a" * 64, 'capabilities = ["sm_x"]', ["--name", "auto"], "cpu.capabilities[0]"),
    ],
    ids=["hash as path", "hash upper-case", "torch cuda", "arch list", "capability"],
)
def test_a_lock_is_checked_before_anything_is_fetched(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sha256: str,
    extra: str,
    words: list[str],
    named: str,
) -> None:
    python = copy_venv(tmp_path / "venv")
    before = _site(python)
    lock = tmp_path / "pylock.toml"
    text = _LOCK.replace("SHA", sha256).replace("TORCH_CUDA", extra)
    if extra.startswith("capabilities"):
        text = text.replace("capabilities = []\n", "")
    lock.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["sync", str(lock), "--python", str(python), *words]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err, err
    cache = Path(os.environ["CUDA_RESOLVE_CACHE_DIR"])
    assert not list(cache.rglob("six-*")), "something was fetched"
    assert not (tmp_path / "outside").exists() and not (cache.parent / "outside").exists()
    assert _site(python) == before, "something was installed"


# -- the install list and the builds agree: nothing built that is not planned, nothing planned
# as a build that no build makes ------------------------------------------------------------


def _drop_build_item(plan: dict[str, Any], folder: Path) -> None:
    plan["install"] = [item for item in plan["install"] if item["kind"] != "build"]


def _drop_builds(plan: dict[str, Any], folder: Path) -> None:
    plan["builds"] = []
    for step in plan["steps"]:
        step["built"] = []


def _rename_build_item(plan: dict[str, Any], folder: Path) -> None:
    for item in plan["install"]:
        if item["kind"] == "build":
            item["name"] = "otherext"


def _second_build_of_the_same(plan: dict[str, Any], folder: Path) -> None:
    plan["builds"].append(copy.deepcopy(plan["builds"][0]))


AGREEMENT_EDITS = [
    pytest.param(*case, id=name)
    for case, name in zip(
        [
            (_drop_build_item, "builds[0].package = 'quickext': no install item of kind build"),
            (_drop_builds, "install[1] = quickext 0.1.0 (build): none of the plan's builds"),
            (_rename_build_item, "install[1] = otherext 0.1.0 (build): none of the plan's builds"),
            (_second_build_of_the_same, "builds[1].package = 'quickext': built twice"),
        ],
        ["build without item", "item without build", "item renamed", "built twice"],
        strict=True,
    )
]


@pytest.mark.parametrize(("edit", "named"), RECIPE_EDITS + DIGEST_EDITS + AGREEMENT_EDITS)
def test_an_edited_part_of_a_plan_is_refused_naming_it(
    machine: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    named: str,
) -> None:
    """A recipe is checked as the index parser checks it; hashes and digests are hex of their
    length and the plan's own; each build makes one item of the install list, and each item
    listed as a build has its build."""
    plan = _edited(machine, edit, tmp_path)
    _refused(machine, plan, named, tmp_path, monkeypatch, capsys)
