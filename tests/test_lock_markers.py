"""A closure is resolved with each profile's own environment markers, not the locking machine's:
``platform_machine``, ``sys_platform``, ``platform_system``, ``os_name``, ``implementation_name``
and ``python_full_version`` come from the profile's facts (an aarch64 node, a Windows workstation
and an x86_64 node locked here, on x86_64 Linux). Loopback index of small wheels; no network."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pytest
from test_lock_support import StaticIndex, make_wheel, serve, write_profile

from cuda_resolve.cli import main

MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"

#: tinyutil's dependencies, each for one kind of machine.
REQUIRES = [
    'armdep; platform_machine == "aarch64"',
    'x86dep; platform_machine == "x86_64"',
    'windep; sys_platform == "win32" and platform_system == "Windows" and os_name == "nt"',
    'linuxdep; sys_platform == "linux" and platform_system == "Linux" and os_name == "posix"',
    'cpythondep; implementation_name == "cpython" and platform_python_implementation == "CPython"',
    f'newpatchdep; python_full_version >= "{MINOR}.5"',
]


def _machine_profile(path: Path, *, os: str, arch: str, python: str) -> Path:
    glibc = 'glibc = "2.35"\n' if os == "linux" else ""
    path.write_text(
        f'[machine]\nos = "{os}"\narch = "{arch}"\n{glibc}[python]\nversion = "{python}"\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.skipif(
    platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
    reason="the profiles differ from an x86_64 Linux locker",
)
def test_each_profiles_closure_follows_its_own_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib
    from packaging.pylock import Pylock

    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(tmp_path / "wheelhouse"))
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    index = StaticIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path / "built", "tinyutil", "1.0", requires=REQUIRES))
    for name in ("armdep", "x86dep", "windep", "linuxdep", "cpythondep", "newpatchdep"):
        index.add(make_wheel(tmp_path / "built", name, "1.0"))
    arm = _machine_profile(tmp_path / "arm.toml", os="linux", arch="aarch64", python=f"{MINOR}.2")
    win = _machine_profile(tmp_path / "win.toml", os="windows", arch="x86_64", python=f"{MINOR}.9")
    x86 = write_profile(tmp_path / "x86.toml", python=f"{MINOR}.9")
    lock = tmp_path / "pylock.toml"
    with serve(tmp_path / "index") as url:
        words = ["lock", "tinyutil", "--index-url", f"{url}/simple", "-o", str(lock)]
        for profile in (arm, win, x86):
            words += ["--profile", str(profile), "--python-for", f"{profile.stem}={sys.executable}"]
        assert main(words) == 0, capsys.readouterr().err
    pylock = Pylock.from_dict(tomllib.loads(lock.read_text()))
    installs: dict[str, set[str]] = {"arm": set(), "win": set(), "x86": set()}
    for package in pylock.packages:
        for name, names in installs.items():
            if package.marker is None or package.marker.evaluate(
                {"extras": {name}, "dependency_groups": set()}, context="lock_file"
            ):
                names.add(str(package.name))
    assert installs["arm"] == {"tinyutil", "armdep", "linuxdep", "cpythondep"}
    # platform.machine() is "AMD64" on 64-bit Windows: platform_machine == "x86_64" is false there.
    assert installs["win"] == {"tinyutil", "windep", "cpythondep", "newpatchdep"}
    assert installs["x86"] == {"tinyutil", "x86dep", "linuxdep", "cpythondep", "newpatchdep"}


def test_pips_markers_are_the_profiles() -> None:
    """compat's marker values (the one mapping of win32/AMD64, darwin/arm64, CPython), less
    ``extra``."""
    from cuda_resolve.compat import marker_environment
    from cuda_resolve.environment import Environment, Machine, PythonInfo
    from cuda_resolve.lock.closure import pip_markers

    def env(os: str, arch: str, implementation: str = "cpython") -> Environment:
        return Environment(
            machine=Machine(os=os, arch=arch, glibc="2.35" if os == "linux" else None),
            python=PythonInfo(version="3.12.4", implementation=implementation),
        )

    assert pip_markers(env("linux", "aarch64")) == {
        "implementation_name": "cpython",
        "implementation_version": "3.12.4",
        "os_name": "posix",
        "platform_machine": "aarch64",
        "platform_python_implementation": "CPython",
        "platform_system": "Linux",
        "python_full_version": "3.12.4",
        "python_version": "3.12",
        "sys_platform": "linux",
    }
    windows = pip_markers(env("windows", "x86_64"))
    assert (
        windows["sys_platform"],
        windows["platform_system"],
        windows["os_name"],
        windows["platform_machine"],
    ) == ("win32", "Windows", "nt", "AMD64")
    mac = pip_markers(env("darwin", "aarch64"))
    assert (mac["sys_platform"], mac["platform_system"], mac["platform_machine"]) == (
        "darwin",
        "Darwin",
        "arm64",
    )
    for machine in (env("linux", "x86_64"), env("windows", "x86_64"), env("darwin", "aarch64")):
        assert pip_markers(machine) == {
            k: v for k, v in marker_environment(machine).items() if k != "extra"
        }
    pypy = pip_markers(env("linux", "x86_64", "pypy"))
    assert pypy["platform_python_implementation"] == "PyPy" and "implementation_version" not in pypy


@pytest.mark.parametrize("markers_module", ["def something_else():\n    return {}\n", None])
def test_a_pip_without_the_marker_hook_fails_the_lock_naming_that_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, markers_module: str | None
) -> None:
    """A pip release that moved ``pip._vendor.packaging.markers.default_environment`` (or its
    vendored packaging): one clear error naming that pip, not a traceback from the child."""
    from cuda_resolve.errors import LockError
    from cuda_resolve.lock import closure

    stand_in = tmp_path / "site"
    vendored = stand_in / "pip" / "_vendor" / "packaging"
    vendored.mkdir(parents=True)
    (stand_in / "pip" / "__init__.py").write_text('__version__ = "99.1"\n', encoding="utf-8")
    (stand_in / "pip" / "__main__.py").write_text(
        'raise SystemExit("the stand-in pip must not run")\n', encoding="utf-8"
    )
    (stand_in / "pip" / "_vendor" / "__init__.py").write_text("", encoding="utf-8")
    if markers_module is not None:
        (vendored / "__init__.py").write_text("", encoding="utf-8")
        (vendored / "markers.py").write_text(markers_module, encoding="utf-8")
    monkeypatch.setattr(closure, "_pip_root", lambda: str(stand_in))
    with pytest.raises(LockError) as raised:
        closure._report(
            sys.executable,
            {"sys_platform": "win32"},
            ["tinyutil"],
            dict(os.environ),
            "profile win (tinyutil)",
            tmp_path / "report.json",
        )
    error = raised.value
    assert (
        f"pip 99.1 at {stand_in / 'pip'} has no pip._vendor.packaging.markers.default_environment"
        in str(error)
    )
    assert (
        "profiles of another platform cannot be closed with it (resolving profile win (tinyutil))"
        in str(error)
    )
    assert "Traceback" not in str(error) and "pip install pip==" in (error.hint or "")
