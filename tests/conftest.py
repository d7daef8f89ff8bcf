"""Test isolation: the suite never reads the developer's config, overlays, caches or overrides.

One autouse fixture gives every test a private home for cuda-resolve: ``CUDA_RESOLVE_CONFIG``
names a file that does not exist, ``CUDA_RESOLVE_CACHE_DIR`` and platformdirs' user directories
(``XDG_CONFIG_HOME``, ``XDG_CACHE_HOME``, ``XDG_DATA_HOME``) point into a temporary directory, and
the variables that override detection or add index overlays (``CUDA_RESOLVE_INDEX_PATH``,
``CUDA_RESOLVE_DRIVER``, ``CUDA_RESOLVE_CUDA_ARCH``, ``CUDA_RESOLVE_WHEELHOUSE``,
``CONDA_OVERRIDE_*``) are removed. Modules that parse the index at import time are collected
under the same isolation (``pytest_configure``), so a module-level ``default_index()`` never sees
the developer's overlays either.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import torch_python  # noqa: F401  (one torch install per session, for every slow e2e test)

#: Variables that change what cuda-resolve detects or reads; removed for every test.
CLEARED = (
    "CUDA_RESOLVE_INDEX_PATH",
    "CUDA_RESOLVE_DRIVER",
    "CUDA_RESOLVE_CUDA_ARCH",
    "CUDA_RESOLVE_WHEELHOUSE",
)


def _private_values(root: Path) -> dict[str, str]:
    return {
        "CUDA_RESOLVE_CONFIG": str(root / "no-such-config.toml"),
        "CUDA_RESOLVE_CACHE_DIR": str(root / "cache"),
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
        "XDG_CACHE_HOME": str(root / "xdg-cache"),
        "XDG_DATA_HOME": str(root / "xdg-data"),
    }


def _cleared_names() -> list[str]:
    return [*CLEARED, *(name for name in os.environ if name.startswith("CONDA_OVERRIDE_"))]


_SESSION_ROOT = tempfile.TemporaryDirectory(prefix="cuda-resolve-tests-")


def _compile_the_product() -> None:
    """Byte-compile cuda-resolve's own packages once, before any test runs: the suite starts the
    CLI in a subprocess hundreds of times, and where ``PYTHONDONTWRITEBYTECODE`` is set (this
    machine and CI set it) no import writes a ``.pyc``, so in a fresh clone each of those
    processes compiled every module it imports from source again (about 1.5 ms a module, 100 to
    200 modules a command). The installed wheel has its byte code from pip; this gives the
    checkout the same. Only what is missing or stale is compiled; an unwritable tree is left as
    it is."""
    import compileall
    import py_compile

    root = Path(__file__).resolve().parent.parent
    for package in ("cuda_resolve", "conda_plugin", "pip_plugin"):
        if (root / package).is_dir():
            # Checked against the source's hash at each import, not its mtime and size: an edit
            # made within the second of a compile (breaking code on purpose, to see a test
            # fail) is never hidden by the byte code of the code before it.
            compileall.compile_dir(
                root / package,
                quiet=2,
                workers=1,
                invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
            )


def pytest_configure(config: pytest.Config) -> None:
    """Collection-time isolation: test modules may parse the default index when imported."""
    _compile_the_product()
    os.environ.update(_private_values(Path(_SESSION_ROOT.name)))
    for name in _cleared_names():
        os.environ.pop(name, None)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test that changed a file of the template venv in place changed every copy made after
    it (they hard-link it): the session fails, naming the files."""
    from _torch_env import template_changes

    changed = template_changes()
    if changed:
        shown = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line(
            f"error: a test changed the template venv's shared files in place: {shown}", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    _SESSION_ROOT.cleanup()


@pytest.fixture(autouse=True)
def _isolated_from_the_developer(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    root = tmp_path_factory.mktemp("home")
    for name, value in _private_values(root).items():
        monkeypatch.setenv(name, value)
    for name in _cleared_names():
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the single-node Slurm fixture (``slurm``) is a ``slurm`` test: deselected by
    default (it starts daemons), run by .ci/run's services stage. Runs before ``-m`` selects."""
    for item in items:
        if "slurm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
