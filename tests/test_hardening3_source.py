"""The user's source tree is never written: ``--source DIR`` builds from a real copy.

A link inside the tree, to a file or a folder outside it, or the tree itself reached through a
link, must not let a recipe patch or the build's output land in the user's files. What a source
tree never holds (FIFOs, sockets, devices, unreadable files, a tree hundreds of folders deep, a
link into its own folder) is one UsageError naming the path (exit 2), with nothing left behind.
``build``/``dist`` are left out only where a build writes them.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
from pathlib import Path

import pytest
from test_build_source_archive import archive_lines, recipe_from, write_package

from cuda_resolve.build.source import prepare_source
from cuda_resolve.cli._act import parse_sources
from cuda_resolve.errors import UsageError
from cuda_resolve.index.model import Recipe

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "packages" / "cuext"
FIXTURE_INDEX = DATA / "index" / "cuext"
TORCH = "2.14.1"
FIND = 'os.environ["TORCH_CUDA_ARCH_LIST"] = "3.7+PTX;5.0;6.0;6.1;6.2;7.0;7.5"'
PATCHED = 'os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "3.7+PTX;5.0;6.0;6.1;6.2;7.0;7.5")'


def recipe(tmp_path: Path, subdirectory: str = "") -> Recipe:
    """The fixture's recipe as an archive recipe (so a --source folder needs no git), patching
    setup.py."""
    lines = (f'subdirectory = "{subdirectory}"\n' if subdirectory else "") + archive_lines(
        "https://example.invalid/cuext.tar.gz", "ab" * 32
    )
    folder = write_package(
        tmp_path / "overlay",
        lines,
        patched_file=f"{subdirectory}/setup.py" if subdirectory else "setup.py",
    )
    return recipe_from(folder)


def user_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "user" / "cuext"
    shutil.copytree(FIXTURE, tree, ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def snapshot(*roots: Path) -> dict[str, bytes | str]:
    """Every path under ``roots`` (links not followed) with its content or link target."""
    found: dict[str, bytes | str] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                path = Path(folder) / name
                found[str(path)] = (
                    os.readlink(path)
                    if path.is_symlink()
                    else path.read_bytes()
                    if path.is_file()
                    else "dir"
                )
    return found


def test_links_to_files_and_folders_outside_the_tree_are_copied_not_followed(
    tmp_path: Path,
) -> None:
    tree = user_tree(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(tree / "setup.py", outside / "setup.py")
    (tree / "setup.py").symlink_to(outside / "setup.py")  # the file the patch changes
    shutil.move(tree / "csrc", outside / "csrc")
    (tree / "csrc").symlink_to(outside / "csrc")  # a folder the build writes next to
    (tree / "build").symlink_to(
        outside / "buildout", target_is_directory=True
    )  # a root build/ link: skipped
    (tree / "gone").symlink_to(
        outside / "missing"
    )  # a write through it would create the user's file
    before = snapshot(tree, outside)

    prepared = prepare_source(
        recipe(tmp_path), tmp_path / "work", torch_version=TORCH, source_dir=tree
    )
    copy = prepared.root
    assert PATCHED in (copy / "setup.py").read_text() and not (copy / "setup.py").is_symlink()
    assert (
        (copy / "csrc").is_dir()
        and not (copy / "csrc").is_symlink()
        and (copy / "csrc" / "add_one.cu").is_file()
    )
    assert not os.path.lexists(copy / "build") and not os.path.lexists(copy / "gone")
    assert any(
        "gone is a link to" in note and "left out of the copy" in note for note in prepared.notes
    )
    # what a build does in the copy: objects next to the sources, its build/ folder, through any
    # name
    (copy / "csrc" / "add_one.o").write_bytes(b"obj")
    (copy / "build").mkdir()
    (copy / "build" / "lib.so").write_bytes(b"so")
    (copy / "setup.py").write_text("rewritten")
    assert snapshot(tree, outside) == before
    assert not (outside / "buildout").exists() and not (outside / "missing").exists()


def test_links_inside_the_tree_stay_links_into_the_copy(tmp_path: Path) -> None:
    tree = user_tree(tmp_path)
    (tree / "alias.py").symlink_to("setup.py")
    (tree / "absolute.py").symlink_to(tree / "setup.py")
    (tree / "cuext" / "sources").symlink_to("../csrc")
    (tree / "cuext" / "loop").symlink_to(
        ".."
    )  # a link to its own ancestor inside: a link, no recursion
    before = snapshot(tree)

    copy = prepare_source(
        recipe(tmp_path), tmp_path / "work", torch_version=TORCH, source_dir=tree
    ).root
    for name in ("alias.py", "absolute.py"):
        assert (copy / name).is_symlink() and os.path.realpath(copy / name) == os.path.realpath(
            copy / "setup.py"
        )
    assert os.path.realpath(copy / "cuext" / "sources") == os.path.realpath(copy / "csrc")
    assert os.path.realpath(copy / "cuext" / "loop") == os.path.realpath(copy)
    (copy / "absolute.py").write_text("through the link")
    (copy / "cuext" / "sources" / "new.cu").write_text("x")
    assert snapshot(tree) == before


def test_the_tree_itself_reached_through_a_link_is_copied(tmp_path: Path) -> None:
    tree = user_tree(tmp_path)
    link = tmp_path / "link-to-tree"
    link.symlink_to(tree)
    before = snapshot(tree)
    prepared = prepare_source(
        recipe(tmp_path), tmp_path / "work", torch_version=TORCH, source_dir=link
    )
    assert prepared.origin == f"--source {link}"
    assert PATCHED in (prepared.root / "setup.py").read_text()
    (prepared.root / "setup.py").write_text("changed")
    assert not prepared.root.is_symlink() and snapshot(tree) == before
    # and through parse_sources, as the command line gives it
    [(name, folder)] = parse_sources([f"cuext={link}"])
    assert name == "cuext" and folder == tree.resolve()


def test_build_output_is_left_out_only_where_a_build_writes_it(tmp_path: Path) -> None:
    tree = tmp_path / "repo"
    shutil.copytree(FIXTURE, tree / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    for leftover in (
        "build",
        "dist",
        "lib/build",
        "lib/dist",
        "lib/cuext.egg-info",
        "lib/cuext/__pycache__",
    ):
        (tree / leftover).mkdir()
        (tree / leftover / "stale").write_text("old")
    for package in (
        "lib/cuext/build",
        "lib/cuext/dist",
        "lib/csrc/build",
    ):  # packages named build/dist
        (tree / package).mkdir()
        (tree / package / "__init__.py").write_text("# source")
    copy = prepare_source(
        recipe(tmp_path, subdirectory="lib"),
        tmp_path / "work",
        torch_version=TORCH,
        source_dir=tree,
    ).root
    for leftover in (
        "build",
        "dist",
        "lib/build",
        "lib/dist",
        "lib/cuext.egg-info",
        "lib/cuext/__pycache__",
    ):
        assert not os.path.lexists(copy / leftover), leftover
    for package in ("lib/cuext/build", "lib/cuext/dist", "lib/csrc/build"):
        assert (copy / package / "__init__.py").read_text() == "# source", package


def _refused(tmp_path: Path, tree: Path, naming: str, why: str) -> None:
    with pytest.raises(UsageError) as info:
        prepare_source(recipe(tmp_path), tmp_path / "work", torch_version=TORCH, source_dir=tree)
    assert info.value.exit_code == 2
    assert (
        info.value.message.startswith(f"--source {tree}: {naming} ") and why in info.value.message
    ), info.value.message
    assert info.value.hint
    assert not (tmp_path / "work" / "src").exists()


def test_a_fifo_a_socket_or_a_device_is_one_clear_error(tmp_path: Path) -> None:
    tree = user_tree(tmp_path)
    os.mkfifo(tree / "csrc" / "pipe")
    _refused(tmp_path, tree, "csrc/pipe", "is a FIFO, which a source tree never holds")
    (tree / "csrc" / "pipe").unlink()

    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tree / "cuext" / "sock"))
        _refused(tmp_path, tree, "cuext/sock", "is a socket")
    finally:
        server.close()
    (tree / "cuext" / "sock").unlink()

    (tree / "zero").symlink_to("/dev/zero")  # read through the link, it would never end
    _refused(tmp_path, tree, "zero", "is a device")


def test_an_unreadable_file_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = user_tree(tmp_path)
    secret = str(tree / "csrc" / "bindings.cpp")
    real_open = os.open

    def refusing_open(path: str, flags: int, *args: int, **kwargs: int) -> int:
        if os.fspath(path) == secret:  # root reads anything: fake what a user would get
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    _refused(tmp_path, tree, "csrc/bindings.cpp", "cannot be read (Permission denied)")


def test_an_absurdly_deep_tree_or_a_link_into_its_own_folder_is_one_clear_error(
    tmp_path: Path,
) -> None:
    tree = user_tree(tmp_path)
    deep = tree / "deep"
    os.makedirs(deep.joinpath(*["d"] * 300))
    _refused(tmp_path, tree, "deep/" + "/".join(["d"] * 256), "is more than 256 folders deep")
    shutil.rmtree(deep)
    os.makedirs(deep.joinpath(*["d"] * 250))  # deep, but a tree
    prepare_source(recipe(tmp_path), tmp_path / "ok", torch_version=TORCH, source_dir=tree)
    shutil.rmtree(deep)

    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "up").symlink_to(outside)  # leads back into a folder being copied
    (tree / "vendor").symlink_to(outside)
    _refused(tmp_path, tree, "vendor/inner/up", "is a link to a folder that holds it")


@pytest.mark.parametrize("value", ["", "   ", "cuext=", "cuext= "])
def test_an_empty_source_is_an_error_not_the_current_folder(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a folder that exists: the old reading built from it
    with pytest.raises(UsageError, match="no folder given") as info:
        parse_sources([value])
    assert info.value.exit_code == 2


def test_a_git_worktree_pointer_is_left_out_so_git_in_the_build_cannot_write_the_users_repository(
    tmp_path: Path,
) -> None:
    repository = tmp_path / "main-checkout"
    (repository / ".git" / "worktrees" / "cuext").mkdir(parents=True)
    tree = user_tree(tmp_path)
    (tree / ".git").write_text(f"gitdir: {repository / '.git' / 'worktrees' / 'cuext'}\n")
    (tree / "third_party").mkdir()
    (tree / "third_party" / ".git").write_text(
        "gitdir: ../.git-modules/third_party\n"
    )  # a pointer inside: kept
    prepared = prepare_source(
        recipe(tmp_path), tmp_path / "work", torch_version=TORCH, source_dir=tree
    )
    assert not os.path.lexists(prepared.root / ".git")
    assert (
        prepared.root / "third_party" / ".git"
    ).read_text() == "gitdir: ../.git-modules/third_party\n"
    assert any(
        ".git points git at" in note and "left out of the copy" in note for note in prepared.notes
    )
