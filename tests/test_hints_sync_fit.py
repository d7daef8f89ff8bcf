"""``sync --name auto`` where no profile of the lock fits: its hint is one line to paste, and
pasted on that machine it gets the machine synced (issue 29). The hint said "pick one with --name
NAME, or lock a profile of this machine (cuda-resolve detect --save-profile)": a NAME that does
not fit installs kernels for other GPUs, and the rest was no command.

In the lab of the README's lockfile block (tests/_lab_stand_ins.py: its mirror and served
wheelhouse on loopback): a lock for the A100 nodes (8.0), synced on an RTX 3090 node (8.6), whose
profile the A100's pointnet2_ops wheel covers (same major, lower minor), so relocking needs no
build. Several profiles that fit: the hint names the first with ``--name``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from _lab_stand_ins import lab_servers
from test_readme_blocks import BIN, PROFILES, _bash, _environ

from cuda_resolve.lock.read import parse_lock

RTX3090 = {"CUDA_RESOLVE_CUDA_ARCH": "8.6", "CUDA_RESOLVE_DRIVER": "580.65.06"}


def _hint(output: str) -> str:
    return next(line[len("hint: ") :] for line in output.splitlines() if line.startswith("hint: "))


def test_no_profile_fits_and_the_hint_pasted_syncs_this_machine(tmp_path: Path) -> None:
    if not (BIN / "cuda-resolve").exists():
        pytest.skip(f"cuda-resolve is not installed next to {BIN}")
    saved = _bash("cuda-resolve detect --save-profile a100.toml", tmp_path, _environ(tmp_path, {
        **PROFILES["a100.toml"]}))  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    with lab_servers(tmp_path) as lab:
        environ = lab.environ(_environ(tmp_path, RTX3090))
        lab.configure(environ)
        lab.stock([tmp_path / "a100.toml"], ["torch", "pointnet2_ops"])
        locked = _bash(
            "cuda-resolve lock torch pointnet2_ops --profile a100.toml -o pylock.toml "
            f"--wheelhouse-url {lab.served_url}wheelhouse",
            tmp_path,
            environ,
        )
        assert locked.returncode == 0, locked.stdout + locked.stderr
        refused = _bash("cuda-resolve sync pylock.toml --name auto", tmp_path, environ)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        hint = _hint(refused.stderr)
        assert ": cuda-resolve " in hint, f"the hint names no command: {hint}"
        line = hint.split(": ", 1)[1]
        shlex.split(line)  # one line a shell reads as written
        followed = _bash(line, tmp_path, environ)
        output = followed.stdout + followed.stderr
        assert followed.returncode == 0, f"following {line!r}:\n{output}"
        assert "installed pointnet2-ops 3.0.0+pt" in output, output
        assert _bash("cuda-resolve sync pylock.toml --check", tmp_path, environ).returncode == 0
        # The A100 profile is kept as it was, beside the new one.
        lock = parse_lock((tmp_path / "pylock.toml").read_text(), origin="pylock.toml")
        assert sorted(lock.profiles) == ["a100", "this-machine"]


def test_several_profiles_fit_and_the_hint_names_one(tmp_path: Path) -> None:
    from cuda_resolve.environment import Environment, Machine, PythonInfo
    from cuda_resolve.lock.read import ReadLock
    from cuda_resolve.lock.select import _way_out

    lock = ReadLock(
        pylock=None,  # type: ignore[arg-type]
        profiles={},
        requests=("torch",),
        index_url=None,
        resolver=None,
        origin="pylock.toml",
    )
    env = Environment(
        machine=Machine(), python=PythonInfo(version="3.11.7", executable="/envs/t/bin/python")
    )
    hint = _way_out(lock, env, ["a100", "a100-big"])
    assert hint.startswith(
        "pick one: cuda-resolve sync pylock.toml --name a100 --python /envs/t/bin/python"
    ), hint
    assert "--name a100-big" in hint


def test_a_lock_under_another_name_is_copied_to_a_pep751_name_first() -> None:
    """lock writes only pylock.toml or pylock.NAME.toml: the hint's relock of lab-lock.toml
    failed at its second step (user walk 2026-12-05 B10)."""
    import types

    from cuda_resolve.environment import Environment, Machine, PythonInfo
    from cuda_resolve.lock.read import ReadLock
    from cuda_resolve.lock.select import _way_out

    lock = ReadLock(
        pylock=types.SimpleNamespace(packages=[]),  # type: ignore[arg-type]
        profiles={},
        requests=("six",),
        index_url=None,
        resolver=None,
        origin="locks/lab lock.toml",
    )
    env = Environment(
        machine=Machine(), python=PythonInfo(version="3.11.7", executable="/envs/t/bin/python")
    )
    hint = _way_out(lock, env, [])
    line = hint.split(": ", 1)[1]
    assert line.startswith("cp 'locks/lab lock.toml' locks/pylock.lab-lock.toml && "), line
    assert "-o locks/pylock.lab-lock.toml" in line
    assert "cuda-resolve sync locks/pylock.lab-lock.toml --name this-machine" in line
    plain = replace_origin(lock, "pylock.toml")
    assert "cp " not in _way_out(plain, env, [])


def replace_origin(lock: object, origin: str) -> object:
    import dataclasses

    return dataclasses.replace(lock, origin=origin)  # type: ignore[type-var]
