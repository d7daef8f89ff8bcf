"""A test's copy of a fixture package made a git checkout at its recipe's pinned revision: a
``--source`` whose builds are the pinned source's, stored under the recipe's own key (a plain
folder is keyed by its content instead: tests/test_source_identity.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

#: git with no user or system configuration, and an identity for the commit.
GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.environ.get("HOME", "/"),
    "GIT_AUTHOR_NAME": "cuda-resolve tests",
    "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "cuda-resolve tests",
    "GIT_COMMITTER_EMAIL": "tests@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
}
#: The revision the fixture indexes pin (tests/data/index/*/packages/*.toml).
FIXTURE_REVISION = "0" * 40


def git(tree: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), *args], capture_output=True, text=True, check=True, env=GIT_ENV
    ).stdout.strip()


def commit_all(folder: Path) -> str:
    """``folder`` made a git repository with one commit of all it holds; that commit."""
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "source")
    return git(folder, "rev-parse", "HEAD")


def pinned_checkout(source: Path, index: Path, into: Path) -> tuple[Path, Path]:
    """(a git checkout of ``source``, a copy of ``index`` whose recipes pin its commit), both
    under ``into``."""
    checkout = into / source.name
    shutil.copytree(source, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    head = commit_all(checkout)
    pinned = into / f"{index.name}-index"
    shutil.copytree(index, pinned)
    for recipe in (pinned / "packages").glob("*.toml"):
        recipe.write_text(
            recipe.read_text(encoding="utf-8").replace(FIXTURE_REVISION, head), encoding="utf-8"
        )
    return checkout, pinned
