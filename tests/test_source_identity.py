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
import threading
from collections.abc import Callable
from pathlib import Path

import _sources
import pytest
from _torch_env import torch_venv_template  # noqa: F401  (a fixture)
from test_builder_runner import USER_ENV, FakePip, _pip, _spec, scratch  # noqa: F401
from test_hash_mode import SOURCE, _cuda_pip, machine  # noqa: F401  (machine: a fixture)

from cuda_resolve.build.builder import BuildResult, build, wheel_key
from cuda_resolve.build.key import keyed_to_source
from cuda_resolve.build.source import _copy_tree, _TreeDigest, source_identity
from cuda_resolve.build.spec import BuildSpec
from cuda_resolve.errors import BuildError, UsageError
from cuda_resolve.index.model import Recipe
from cuda_resolve.wheelhouse.key import WheelKey
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
    index = (tree / ".git" / "index").stat()
    assert source_identity(_recipe(head), tree, GIT_ENV) is None
    assert source_identity(_recipe(head), None, GIT_ENV) is None  # no --source: fetched, checked
    # a checkout whose files are touched (cp -a, rsync) but the same: still the pinned source
    os.utime(tree / "setup.py", (1, 1))
    assert source_identity(_recipe(head), tree, GIT_ENV) is None
    # git only read objects: the user's repository was not written (no index refresh)
    after = (tree / ".git" / "index").stat()
    assert (after.st_mtime_ns, after.st_size) == (index.st_mtime_ns, index.st_size)
    assert not (tree / ".git" / "index.lock").exists()


def _changed(tree: Path, how: str) -> None:
    """``tree`` (a checkout) changed in a way ``git status`` may not list."""
    if how == "edited":
        (tree / "setup.py").write_text("print('edited')\n")
    elif how == "untracked":
        (tree / "pkg" / "extra.cu").write_text("// new: the build globs *.cu\n")
    elif how == "ignored":  # git status hides it; the build's copy takes it
        (tree / ".gitignore").write_text("*.so\n")
        _sources.git(tree, "add", ".gitignore")
        _sources.git(tree, "commit", "-q", "-m", "ignore")
        (tree / "pkg" / "_ext.so").write_bytes(b"\x7fELF stale in-place build")
    elif how == "skip-worktree":  # git status is told not to look
        _sources.git(tree, "update-index", "--skip-worktree", "setup.py")
        (tree / "setup.py").write_text("print('edited')\n")
    elif how == "mode with core.fileMode=false":
        _sources.git(tree, "config", "core.fileMode", "false")
        (tree / "pkg" / "run.sh").chmod(0o644)
    elif how == "link":
        (tree / "pkg" / "alias.cu").unlink()
        (tree / "pkg" / "alias.cu").symlink_to("run.sh")


@pytest.mark.parametrize(
    "how",
    ["edited", "untracked", "ignored", "skip-worktree", "mode with core.fileMode=false", "link"],
)
def test_a_checkout_at_the_pinned_commit_with_other_files_is_not_the_pinned_source(
    tmp_path: Path, how: str
) -> None:
    """Compared file by file with the pinned commit's tree, not through ``git status`` (review
    F1: an ignored file, a skip-worktree edit or a mode git ignores passed as clean)."""
    tree = _tree(tmp_path)
    head = _sources.commit_all(tree)
    before = _digest(tree)
    _changed(tree, how)
    head = _sources.git(tree, "rev-parse", "HEAD")  # "ignored" made a commit
    found = source_identity(_recipe(head), tree, GIT_ENV)
    assert found is not None and "files other than its pinned commit's" in found.why, found
    if how != "ignored":
        assert found.digest != before


def test_git_is_asked_about_the_folder_itself_whatever_its_variables_say(
    tmp_path: Path,
) -> None:
    """``GIT_DIR``/``GIT_WORK_TREE`` naming a clone at the pinned commit must not vouch for a
    folder whose own checkout is at another commit: that folder is refused, as the build
    refuses it."""
    pinned = _tree(tmp_path / "a")
    head = _sources.commit_all(pinned)
    other = tmp_path / "other"
    shutil.copytree(pinned, other, symlinks=True)
    (other / "setup.py").write_text("print('two')\n")
    _sources.git(other, "commit", "-q", "-am", "two")
    elsewhere = {**GIT_ENV, "GIT_DIR": str(pinned / ".git"), "GIT_WORK_TREE": str(pinned)}
    with pytest.raises(BuildError, match=rf"but recipe .* pins {head[:12]}"):
        source_identity(_recipe(head), other, elsewhere)


def test_a_checkout_at_another_commit_is_refused_when_the_plan_is_made(tmp_path: Path) -> None:
    """The build refuses it; the plan did not, and said it would be kept under its content
    (review F4)."""
    tree = _tree(tmp_path)
    first = _sources.commit_all(tree)
    (tree / "setup.py").write_text("print('two')\n")
    _sources.git(tree, "commit", "-q", "-am", "two")
    with pytest.raises(BuildError, match=rf"is at [0-9a-f]{{12}}, but recipe .* pins {first[:12]}"):
        source_identity(_recipe(first), tree, GIT_ENV)


def test_what_the_copy_leaves_out_of_the_pinned_commit_is_not_expected_in_it(
    tmp_path: Path,
) -> None:
    """The pinned commit's files are compared as the copy takes them, by the copy's own rule: a
    tracked ``dist`` file or ``build/`` folder at the root, which a copy leaves out, is not
    missing from it, while a tracked ``dist`` deeper down is source."""
    tree = _tree(tmp_path)
    (tree / "dist").write_text("a tracked file named dist\n")
    (tree / "build").mkdir()
    (tree / "build" / "notes.txt").write_text("tracked\n")
    (tree / "pkg" / "dist").write_text("source, deeper down\n")
    head = _sources.commit_all(tree)
    assert source_identity(_recipe(head), tree, GIT_ENV) is None
    copy = tmp_path / "copy"
    _copy_tree(tree, copy)
    assert not (copy / "dist").exists() and (copy / "pkg" / "dist").is_file()
    (tree / "pkg" / "dist").unlink()
    found = source_identity(_recipe(head), tree, GIT_ENV)
    assert found is not None and "1 missing (first: pkg/dist)" in found.why, found


def test_a_clean_submodule_is_pinned_and_an_edited_one_is_not(tmp_path: Path) -> None:
    inner = _tree(tmp_path / "inner-src")
    _sources.commit_all(inner)
    outer = _tree(tmp_path / "outer")
    _sources.git(outer, "init", "-q")
    _sources.git(outer, "-c", "protocol.file.allow=always", "submodule", "-q", "add",
                 str(inner), "third_party/inner")  # fmt: skip
    _sources.git(outer, "add", "-A")
    _sources.git(outer, "commit", "-q", "-m", "with a submodule")
    head = _sources.git(outer, "rev-parse", "HEAD")
    assert source_identity(_recipe(head), outer, GIT_ENV) is None
    (outer / "third_party" / "inner" / "setup.py").write_text("print('edited')\n")
    found = source_identity(_recipe(head), outer, GIT_ENV)
    assert found is not None and "third_party/inner/setup.py" in found.why


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
    return _TreeDigest(tree, frozenset({""})).digest()


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

    reporter = _Steps(lambda: None)
    steps = reporter.steps

    def built(planned_key: WheelKey | None = None) -> tuple[bool, str]:
        result = _build_from(tree, spec, house, tmp_path, reporter, planned_key)
        return result.cache_hit, result.wheel.key.recipe_digest

    hit, first = built()
    assert not hit
    assert any("is not a git checkout: built and kept as its own wheel" in s for s in steps), steps
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


def _install(
    python: Path, index: Path, source: Path, env: dict[str, str], cwd: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    words = ["--index", str(index), "--source", str(source), "--python", str(python), "--json"]
    return _cuda_pip("quickext", *words, *extra, env=env, cwd=cwd)


def _planned_build(
    python: Path, index: Path, source: Path, env: dict[str, str], cwd: Path
) -> dict[str, object]:
    done = _install(python, index, source, env, cwd, "--dry-run")
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
    installed = _install(python, index, checkout, env, tmp_path)
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
    assert any("files other than its pinned" in note for note in edited["notes"]), edited["notes"]
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "-y", "-q", "quickext"], check=True, env=env
    )
    done = _install(python, index, checkout, env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = json.loads(done.stdout)["result"]["builds"]
    assert not result["cache_hit"], result  # the edited tree was built, not found
    assert Path(result["wheel"]).name.startswith(f"quickext-{edited['wheel_version']}-"), result
    wheels = sorted(p.name for p in Path(env["CUDA_RESOLVE_WHEELHOUSE"]).rglob("*.whl"))
    assert len(wheels) == 2, wheels  # the pinned build is still there, as it was


# -- what the build publishes, and what the plan's key means ---------------------------------


def _build_from(
    tree: Path,
    spec: BuildSpec,
    house: Wheelhouse,
    tmp_path: Path,
    reporter: _Steps,
    key: WheelKey | None,
) -> BuildResult:
    """The builder run over ``tree`` with the fake pip (its wheel is written, nothing compiles)."""
    return build(
        spec,
        house,
        source_dir=tree,
        installed={"setuptools": "80.0", "ninja": "1.11"},
        environ=USER_ENV,
        pip=_pip(FakePip(), tmp_path),
        reporter=reporter,  # type: ignore[arg-type]
        key=key,
    )


class _Steps:
    """A reporter that runs ``on_wait`` when the build says it waits for the key's lock."""

    def __init__(self, on_wait: Callable[[], None]) -> None:
        self.steps: list[str] = []
        self.on_wait = on_wait

    def step(self, text: str) -> None:
        self.steps.append(text)
        if "waiting for another build of the same wheel" in text:
            self.on_wait()

    def note(self, text: str) -> None:
        self.steps.append(text)

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def test_a_folder_edited_while_the_build_waits_is_published_as_what_was_copied(
    tmp_path: Path, scratch: Path
) -> None:
    """Review F2: the key was decided before the build waited for its lock, the copy made after:
    an edit in between was published under the pinned source's key."""
    house = Wheelhouse(tmp_path / "wheelhouse")
    tree = _tree(tmp_path)
    spec = dataclasses.replace(_spec(), recipe=_recipe(_sources.commit_all(tree)))
    pinned = wheel_key(spec)
    release, held = threading.Event(), threading.Event()

    def hold() -> None:  # another build of the pinned key, in its own thread
        with house.lock(pinned):
            held.set()
            release.wait(10)

    def edit_then_release() -> None:
        (tree / "pkg" / "kernel.cu").write_text("// edited while the build waited\n")
        release.set()

    other = threading.Thread(target=hold)
    other.start()
    assert held.wait(10)
    reporter = _Steps(edit_then_release)
    result = _build_from(tree, spec, house, tmp_path, reporter, pinned)
    other.join(10)
    assert result.wheel.key.recipe_digest != pinned.recipe_digest
    assert house.lookup(pinned) is None, "the edit was published as the pinned source"
    assert any("changed while the build waited" in s for s in reporter.steps), reporter.steps


def test_a_plans_key_of_a_wheel_for_more_gpus_is_kept_while_the_source_is_the_same(
    tmp_path: Path,
) -> None:
    """keyed_to_source keeps the plan's key (a covering wheel's: another arch list) where it
    names the same source, and gives the build's own key where the source differs (review R3)."""
    tree = _tree(tmp_path)
    spec = _spec()
    identity = source_identity(spec.recipe, tree, GIT_ENV)
    covering = dataclasses.replace(wheel_key(spec, identity), arch_list="8.0;9.0")
    assert keyed_to_source(covering, spec, identity) is covering
    (tree / "setup.py").write_text("print('edited')\n")
    edited = source_identity(spec.recipe, tree, GIT_ENV)
    assert keyed_to_source(covering, spec, edited) == wheel_key(spec, edited)
    assert keyed_to_source(covering, spec, None) == wheel_key(spec)


def test_git_history_is_not_content(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    _sources.commit_all(tree)
    before = _digest(tree)
    _sources.git(tree, "commit", "-q", "--amend", "-m", "another message")  # .git changes
    assert _digest(tree) == before


def test_a_plan_reusing_a_wheel_for_more_gpus_that_is_gone_is_refused_an_exact_one_is_rebuilt(
    tmp_path: Path, scratch: Path
) -> None:
    """transaction._build_one (review R2): a covering wheel the plan reuses and the wheelhouse
    lost cannot be rebuilt (its arch list is not this build's): refused, with the way out; the
    plan's exact wheel, lost, is built again under the same key."""
    from cuda_resolve.errors import InstallError
    from cuda_resolve.install.options import InstallOptions
    from cuda_resolve.install.transaction import _build_one
    from cuda_resolve.plan import PlannedBuild
    from cuda_resolve.reporting import NullReporter

    house = Wheelhouse(tmp_path / "wheelhouse")
    spec = _spec()
    exact = wheel_key(spec)
    covering = dataclasses.replace(exact, arch_list="8.0;9.0")

    def planned(key: WheelKey) -> PlannedBuild:
        return PlannedBuild(spec=spec, key=key, source="git clone", reused="the wheelhouse had it")

    args = (house, InstallOptions(), _pip(FakePip(), tmp_path), {"setuptools": "80.0",
            "ninja": "1.11"}, USER_ENV, NullReporter())  # fmt: skip
    with pytest.raises(InstallError, match="which no longer has it"):
        _build_one(planned(covering), *args)
    tree = _tree(tmp_path)
    options = InstallOptions(source_dirs=(("*", tree),))
    identity = source_identity(spec.recipe, tree, GIT_ENV)
    built = _build_one(planned(wheel_key(spec, identity)), house, options, *args[2:])
    assert not built.cache_hit and built.wheel.key == wheel_key(spec, identity)
