"""A ``--source`` tree that is not the recipe's pinned source is kept in the wheelhouse under its
content, never under the pinned source's key (user walk C15).

Before, a plain copy (no ``.git``: its revision cannot be checked) or a checkout at the pinned
commit with edits was built and published under the pinned recipe's key: every later install of
the pinned source (a lab's shared wheelhouse too) reused that wheel as the pinned build, and an
edited tree was never built again. Now such a tree's content digest goes into the key's recipe
digest, at plan time and again when the build runs (a tree edited after the plan is built under
its new content, not the plan's key).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import _sources
import pytest
from _torch_env import torch_venv_template  # noqa: F401  (a fixture)
from test_builder_runner import USER_ENV, FakePip, _pip, _spec, scratch  # noqa: F401
from test_hash_mode import SOURCE, _cuda_pip, machine  # noqa: F401  (machine: a fixture)

from cuda_resolve.build.builder import build, wheel_key
from cuda_resolve.build.source import _copy_tree, source_identity
from cuda_resolve.errors import UsageError
from cuda_resolve.index.model import Recipe
from cuda_resolve.wheelhouse.store import Wheelhouse

INDEX = Path(__file__).parent / "data" / "index" / "quickext"
GIT_ENV = {**USER_ENV, **_sources.GIT_ENV}


def _recipe(revision: str | None) -> Recipe:
    return dataclasses.replace(_spec().recipe, revision=revision)


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "setup.py").write_text("print('setup')\n")
    (tree / "pkg" / "kernel.cu").write_text("// kernel\n")
    (tree / "pkg" / "run.sh").write_text("#!/bin/sh\n")
    (tree / "pkg" / "run.sh").chmod(0o755)
    (tree / "pkg" / "alias.cu").symlink_to("kernel.cu")
    return tree


# -- which trees are the pinned source ------------------------------------------------------------


def test_a_clean_checkout_at_the_pinned_commit_is_the_pinned_source(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    head = _sources.commit_all(tree)
    assert source_identity(_recipe(head), tree, GIT_ENV) is None
    assert source_identity(_recipe(head), None, GIT_ENV) is None  # no --source: fetched, checked

    (tree / "setup.py").write_text("print('edited')\n")  # a tracked file changed
    edited = source_identity(_recipe(head), tree, GIT_ENV)
    assert edited is not None and "changes not committed" in edited.why
    _sources.git(tree, "checkout", "--", "setup.py")
    (tree / "pkg" / "extra.cu").write_text("// new\n")  # an untracked file the build would glob
    added = source_identity(_recipe(head), tree, GIT_ENV)
    assert added is not None and "changes not committed" in added.why
    assert added.digest != edited.digest
    # git status ran without writing the user's repository (no index refresh, no lock left)
    assert not (tree / ".git" / "index.lock").exists()


def test_a_plain_copy_or_a_folder_for_an_archive_recipe_is_named_by_its_content(
    tmp_path: Path,
) -> None:
    tree = _tree(tmp_path)
    plain = source_identity(_recipe("0" * 40), tree, GIT_ENV)
    assert plain is not None and "not a git checkout" in plain.why
    for_archive = source_identity(_recipe(None), tree, GIT_ENV)
    assert for_archive is not None and "pins an archive by sha256" in for_archive.why
    assert for_archive.digest == plain.digest  # the tree's content, whatever the reason


# -- the digest covers what a copy takes, and nothing else ----------------------------------------


def _digest(tree: Path) -> str:
    found = source_identity(_recipe("0" * 40), tree, GIT_ENV)
    assert found is not None
    return found.digest


def test_the_digest_is_the_same_for_a_tree_and_the_copy_a_build_makes_of_it(
    tmp_path: Path,
) -> None:
    tree = _tree(tmp_path)
    outside = tmp_path / "outside.h"
    outside.write_text("// outside\n")
    (tree / "pkg" / "outside.h").symlink_to(outside)  # copied as the file it points at
    _sources.commit_all(tree)  # .git is not content
    (tree / "build").mkdir()  # a previous build's output, left out of a copy
    (tree / "build" / "old.o").write_text("object")
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "x.pyc").write_text("cache")
    copy = tmp_path / "copy"
    _copy_tree(tree, copy)
    assert _digest(copy) == _digest(tree)


@pytest.mark.parametrize(
    "change",
    ["content", "executable bit", "new file", "renamed file", "link target", "outside target"],
)
def test_any_change_a_build_could_see_changes_the_digest(tmp_path: Path, change: str) -> None:
    tree = _tree(tmp_path)
    outside = tmp_path / "outside.h"
    outside.write_text("// outside\n")
    (tree / "pkg" / "outside.h").symlink_to(outside)
    before = _digest(tree)
    if change == "content":
        (tree / "pkg" / "kernel.cu").write_text("// kernel, edited\n")
    elif change == "executable bit":
        (tree / "pkg" / "run.sh").chmod(0o644)
    elif change == "new file":
        (tree / "pkg" / "more.cu").write_text("")
    elif change == "renamed file":
        (tree / "pkg" / "kernel.cu").rename(tree / "pkg" / "kernel2.cu")
    elif change == "link target":
        (tree / "pkg" / "alias.cu").unlink()
        (tree / "pkg" / "alias.cu").symlink_to("run.sh")
    else:
        outside.write_text("// outside, edited\n")
    assert _digest(tree) != before


def test_what_a_copy_leaves_out_does_not_change_the_digest(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    before = _digest(tree)
    (tree / "dist").mkdir()
    (tree / "dist" / "old.whl").write_text("old")
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "kernel.pyc").write_text("cache")
    (tree / "pkg.egg-info").mkdir()
    assert _digest(tree) == before
    (tree / "pkg" / "build").mkdir()  # a package named build, deeper: source
    assert _digest(tree) != before


def test_a_fifo_is_refused_by_name_and_never_opened(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    os.mkfifo(tree / "pkg" / "pipe")  # opening it to read would wait for a writer for ever
    with pytest.raises(UsageError, match=r"pkg/pipe is a FIFO"):
        _digest(tree)


# -- the builder keys what it reads, whatever the plan said -------------------------------------


def test_the_builder_keys_a_plain_copy_by_content_and_builds_an_edited_one_again(
    tmp_path: Path,
    scratch: Path,
) -> None:
    house = Wheelhouse(tmp_path / "wheelhouse")
    tree = _tree(tmp_path)
    spec = _spec()

    def built(planned_key: object = None) -> tuple[bool, str]:
        result = build(
            spec,
            house,
            source_dir=tree,
            installed={"setuptools": "80.0", "ninja": "1.11"},
            environ=USER_ENV,
            pip=_pip(FakePip(), tmp_path),
            key=planned_key,  # type: ignore[arg-type]
        )
        return result.cache_hit, result.wheel.key.recipe_digest

    hit, first = built()
    assert not hit
    assert first != wheel_key(spec).recipe_digest
    assert house.lookup(wheel_key(spec)) is None  # never under the pinned source's key
    assert built() == (True, first)  # the same content: the wheelhouse's wheel

    # The plan was made before this edit: its key names the old content. The build reads the
    # edited tree and publishes it under the edited content, and the old wheel stays as it was.
    planned = wheel_key(spec, source_identity(spec.recipe, tree, USER_ENV))
    (tree / "pkg" / "kernel.cu").write_text("// kernel, edited\n")
    hit, second = built(planned)
    assert not hit and second not in (first, wheel_key(spec).recipe_digest)
    assert sorted(w.key.recipe_digest for w in house.entries()) == sorted([first, second])


# -- end to end: cuda-pip install with a real build, then the plans that follow ----------------


def _planned_build(
    python: Path, index: Path, source: Path, env: dict[str, str], cwd: Path
) -> dict[str, object]:
    done = _cuda_pip(
        "quickext",
        "--index",
        str(index),
        "--source",
        str(source),
        "--python",
        str(python),
        "--dry-run",
        "--json",
        env=env,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    builds = json.loads(done.stdout)["plan"]["builds"]
    assert len(builds) == 1, builds
    return builds[0]  # type: ignore[no-any-return]


def test_cuda_pip_never_reuses_a_pinned_build_for_a_copy_or_an_edited_checkout(
    tmp_path: Path, machine: tuple[Path, dict[str, str]]
) -> None:
    python, env = machine
    env = {k: v for k, v in env.items() if k != "PIP_REQUIRE_HASHES"}
    checkout, index = _sources.pinned_checkout(SOURCE, INDEX, tmp_path)
    installed = _cuda_pip(
        "quickext",
        "--index",
        str(index),
        "--source",
        str(checkout),
        "--python",
        str(python),
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    pinned = json.loads(installed.stdout)["plan"]["builds"][0]
    assert not any("content" in note for note in pinned["notes"]), pinned["notes"]

    # The same clean checkout: the pinned build, reused.
    again = _planned_build(python, index, checkout, env, tmp_path)
    assert again["wheel_digest"] == pinned["wheel_digest"] and again["reused"], again

    # A plain copy of the same files: its revision cannot be checked, so it is not that build.
    plain = tmp_path / "plain"
    shutil.copytree(checkout, plain, ignore=shutil.ignore_patterns(".git"))
    copied = _planned_build(python, index, plain, env, tmp_path)
    assert copied["wheel_digest"] != pinned["wheel_digest"] and not copied["reused"], copied
    assert any("is not a git checkout" in note for note in copied["notes"]), copied["notes"]

    # The checkout with an edit: not the pinned build either; installed, then reused as itself.
    module = checkout / "quickext" / "__init__.py"
    module.write_text(module.read_text() + "EDITED = True\n")
    edited = _planned_build(python, index, checkout, env, tmp_path)
    assert edited["wheel_digest"] != pinned["wheel_digest"] and not edited["reused"], edited
    assert any("changes not committed" in note for note in edited["notes"]), edited["notes"]
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "-y", "-q", "quickext"], check=True, env=env
    )
    done = _cuda_pip(
        "quickext",
        "--index",
        str(index),
        "--source",
        str(checkout),
        "--python",
        str(python),
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = json.loads(done.stdout)["result"]["builds"]
    assert not result["cache_hit"], result  # the edited tree was built, not found
    assert Path(result["wheel"]).name.startswith(f"quickext-{edited['wheel_version']}-"), result
    wheels = sorted(p.name for p in Path(env["CUDA_RESOLVE_WHEELHOUSE"]).rglob("*.whl"))
    assert len(wheels) == 2, wheels  # the pinned build is still there, as it was
