"""The target probe's report is remembered while nothing on the import path changes."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from cuda_resolve.detect import _target_probe
from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect.target import probe_target


def _install_torch(site: Path, version: str) -> None:
    (site / "torch").mkdir(exist_ok=True)
    (site / "torch" / "version.py").write_text(f"__version__ = '{version}'\ncuda = '13.0'\n")
    dist = site / f"torch-{version.split('+')[0]}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    _settle(site / "torch", dist)


def _settle(*paths: Path) -> None:
    """Date *paths* a minute back: another interpreter's report is remembered only when nothing
    it depends on changed in the seconds before its probe started (an install still running)."""
    past = time.time() - 60
    for path in paths:
        os.utime(path, (past, past))


def test_the_probe_is_reused_until_a_package_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_torch(site, "2.11.0+cu130")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    cache = ProbeCache(tmp_path / "cache")
    first = probe_target(None, environ={}, timeout=5, cache=cache)
    assert first.torch is not None and first.torch.version == "2.11.0+cu130"

    calls: list[int] = []
    real_probe = _target_probe.probe

    def counting_probe(*names: object) -> dict[str, object]:
        calls.append(1)
        return real_probe(*names)

    monkeypatch.setattr(_target_probe, "probe", counting_probe)
    again = probe_target(None, environ={}, timeout=5, cache=cache)
    assert calls == [] and again == first  # remembered: nothing on the path changed

    # pip replacing torch removes and recreates its folders: the key changes, the probe runs again.
    import shutil

    shutil.rmtree(site / "torch")
    shutil.rmtree(site / "torch-2.11.0.dist-info")
    _install_torch(site, "2.12.0+cu130")
    changed = probe_target(None, environ={}, timeout=5, cache=cache)
    assert calls == [1]
    assert changed.torch is not None and changed.torch.version == "2.12.0+cu130"


def test_without_a_cache_the_probe_always_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    calls: list[int] = []
    real_probe = _target_probe.probe
    monkeypatch.setattr(
        _target_probe, "probe", lambda *names: calls.append(1) or real_probe(*names)
    )
    probe_target(None, environ={}, timeout=5)
    probe_target(None, environ={}, timeout=5)
    assert calls == [1, 1]


def test_unrelated_files_on_the_path_do_not_invalidate_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m` puts the working directory first on the path; its files change all the time."""
    site = tmp_path / "site"
    site.mkdir()
    _install_torch(site, "2.11.0+cu130")
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.setattr(sys, "path", [str(workdir), str(site), *sys.path])
    cache = ProbeCache(tmp_path / "cache")
    probe_target(None, environ={}, timeout=5, cache=cache)
    calls: list[int] = []
    real_probe = _target_probe.probe
    monkeypatch.setattr(
        _target_probe, "probe", lambda *names: calls.append(1) or real_probe(*names)
    )
    (workdir / "notes.txt").write_text("changed\n")
    (site / "README.txt").write_text("not a package\n")
    probe_target(None, environ={}, timeout=5, cache=cache)
    assert calls == []


def test_a_torch_rewritten_in_place_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python setup.py develop` rewrites torch/version.py and the egg-info in place."""
    import os

    site = tmp_path / "site"
    site.mkdir()
    _install_torch(site, "2.11.0+cu130")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    cache = ProbeCache(tmp_path / "cache")
    probe_target(None, environ={}, timeout=5, cache=cache)
    version_py = site / "torch" / "version.py"
    folder_times = os.stat(site / "torch").st_mtime_ns
    version_py.write_text("__version__ = '2.12.0a0+git1234'\ncuda = '13.0'\n")
    os.utime(site / "torch", ns=(folder_times, folder_times))  # the folder itself looks unchanged
    changed = probe_target(None, environ={}, timeout=5, cache=cache)
    assert changed.torch is not None and changed.torch.version == "2.12.0a0+git1234"


# -- another interpreter (cuda-resolve in an environment of its own, describing the user's) ------


def _venv(tmp_path: Path) -> tuple[Path, Path]:
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True
    )
    python = tmp_path / "venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return python, Path(site)


def _counting_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from cuda_resolve.detect._run import run as real_run

    started: list[str] = []

    def counting_run(argv, **kwargs):  # type: ignore[no-untyped-def]
        started.append(argv[0])
        return real_run(argv, **kwargs)

    monkeypatch.setattr("cuda_resolve.detect.target.run", counting_run)
    return started


def test_another_interpreter_is_probed_once_until_a_package_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python, site = _venv(tmp_path)
    _install_torch(site, "2.11.0+cu130")
    cache = ProbeCache(tmp_path / "cache")
    started = _counting_runs(monkeypatch)
    environ = {"PATH": "/usr/bin:/bin"}

    first = probe_target(str(python), environ=environ, timeout=10, cache=cache)
    assert started == [str(python)]
    assert first.torch is not None and first.torch.version == "2.11.0+cu130"
    assert str(site) in first.python.site_packages

    again = probe_target(str(python), environ=environ, timeout=10, cache=cache)
    assert started == [str(python)] and again == first  # no process: nothing on its path changed

    import shutil

    shutil.rmtree(site / "torch")
    shutil.rmtree(site / "torch-2.11.0.dist-info")
    _install_torch(site, "2.12.0+cu130")
    changed = probe_target(str(python), environ=environ, timeout=10, cache=cache)
    assert started == [str(python)] * 2
    assert changed.torch is not None and changed.torch.version == "2.12.0+cu130"


def test_a_variable_that_moves_the_import_path_is_part_of_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python, _ = _venv(tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    _install_torch(extra, "2.9.0+cu128")
    cache = ProbeCache(tmp_path / "cache")
    started = _counting_runs(monkeypatch)

    plain = probe_target(str(python), environ={"PATH": "/usr/bin:/bin"}, timeout=10, cache=cache)
    assert plain.torch is None
    with_path = probe_target(
        str(python),
        environ={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(extra)},
        timeout=10,
        cache=cache,
    )
    assert with_path.torch is not None and with_path.torch.version == "2.9.0+cu128"
    assert len(started) == 2  # PYTHONPATH changed what `import torch` finds: probed again
    probe_target(
        str(python),
        environ={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(extra)},
        timeout=10,
        cache=cache,
    )
    assert len(started) == 2


def test_two_venvs_of_one_base_interpreter_are_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_python, first_site = _venv(tmp_path / "a")
    second_python, _ = _venv(tmp_path / "b")
    _install_torch(first_site, "2.11.0+cu130")
    cache = ProbeCache(tmp_path / "cache")
    with_torch = probe_target(
        str(first_python), environ={"PATH": "/usr/bin:/bin"}, timeout=10, cache=cache
    )
    without = probe_target(
        str(second_python), environ={"PATH": "/usr/bin:/bin"}, timeout=10, cache=cache
    )
    assert with_torch.torch is not None and without.torch is None


def _base_interpreter() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def test_the_first_pip_install_user_is_seen(tmp_path: Path) -> None:
    """The user site folder is not on the path until it exists: the report watches it anyway."""
    base = _base_interpreter()
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "PYTHONUSERBASE": str(tmp_path / "userbase"),
    }
    cache = ProbeCache(tmp_path / "cache")
    before = probe_target(base, environ=environ, timeout=20, cache=cache)
    if before.torch is not None:
        pytest.skip("the base interpreter has a torch of its own")
    user_site = tmp_path / "userbase" / "lib" / version / "site-packages"
    user_site.mkdir(parents=True)
    _install_torch(user_site, "2.11.0+cu130")
    after = probe_target(base, environ=environ, timeout=20, cache=cache)
    assert after.torch is not None and after.torch.version == "2.11.0+cu130"


def test_a_launcher_script_is_not_remembered(tmp_path: Path) -> None:
    """pyenv's shims pick the interpreter by rules of their own (PYENV_VERSION, .python-version)."""
    _venv(tmp_path / "v1")
    _, second_site = _venv(tmp_path / "v2")
    _install_torch(second_site, "2.12.0+cu130")
    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{tmp_path}/$PYENV_VERSION/venv/bin/python" "$@"\n')
    shim.chmod(0o755)
    _settle(shim)
    cache = ProbeCache(tmp_path / "cache")
    one = probe_target(
        str(shim), environ={"PATH": "/usr/bin:/bin", "PYENV_VERSION": "v1"}, timeout=20, cache=cache
    )
    two = probe_target(
        str(shim), environ={"PATH": "/usr/bin:/bin", "PYENV_VERSION": "v2"}, timeout=20, cache=cache
    )
    assert one.torch is None
    assert two.torch is not None and two.torch.version == "2.12.0+cu130"


def test_a_package_installed_while_the_probe_runs_is_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_resolve.detect import target

    python, site = _venv(tmp_path)
    real_run_probe = target._run_probe

    def install_during_the_probe(*args, **kwargs):  # type: ignore[no-untyped-def]
        report = real_run_probe(*args, **kwargs)
        (site / "torch").mkdir()
        (site / "torch" / "version.py").write_text("__version__ = '2.11.0+cu130'\ncuda = '13.0'\n")
        (site / "torch-2.11.0.dist-info").mkdir()
        (site / "torch-2.11.0.dist-info" / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n"
        )
        return report

    cache = ProbeCache(tmp_path / "cache")
    monkeypatch.setattr(target, "_run_probe", install_during_the_probe)
    during = probe_target(str(python), environ={"PATH": "/usr/bin:/bin"}, timeout=20, cache=cache)
    assert during.torch is None  # what the probe saw
    monkeypatch.setattr(target, "_run_probe", real_run_probe)
    after = probe_target(str(python), environ={"PATH": "/usr/bin:/bin"}, timeout=20, cache=cache)
    assert after.torch is not None and after.torch.version == "2.11.0+cu130"


def test_a_path_file_that_adds_a_torch_is_seen(tmp_path: Path) -> None:
    """`conda develop` and a lab's own `.pth`: no distribution changes, the import path does."""
    python, site = _venv(tmp_path)
    source = tmp_path / "pytorch-checkout"
    source.mkdir()
    _install_torch(source, "2.13.0a0+gitabc")
    cache = ProbeCache(tmp_path / "cache")
    before = probe_target(str(python), environ={"PATH": "/usr/bin:/bin"}, timeout=20, cache=cache)
    assert before.torch is None
    (site / "lab.pth").write_text(f"{source}\n")
    _settle(site / "lab.pth")
    after = probe_target(str(python), environ={"PATH": "/usr/bin:/bin"}, timeout=20, cache=cache)
    assert after.torch is not None and after.torch.version == "2.13.0a0+gitabc"


def test_a_site_packages_folder_made_after_the_first_probe_is_seen(tmp_path: Path) -> None:
    """A fresh prefix may have no site-packages yet (a conda environment before its python's
    packages are linked); the folder and the torch installed into it must not hide behind the
    report remembered before it existed."""
    python, site = _venv(tmp_path)
    site.rmdir()
    _settle(site.parent, tmp_path / "venv")
    cache = ProbeCache(tmp_path / "cache")
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    assert probe_target(str(python), environ=environ, timeout=20, cache=cache).torch is None
    site.mkdir()
    _install_torch(site, "2.11.0+cu130")
    after = probe_target(str(python), environ=environ, timeout=20, cache=cache)
    assert after.torch is not None and after.torch.version == "2.11.0+cu130"
