"""``plan``'s target pip probe remembered on disk (issue 28): a warm ``plan`` starts no
interpreter of the target's, and every change that moves the probe's answer is seen: pip
upgraded in the target, a module (truststore) dropped on its path, the variables it reads
(PIP_CERT) or that may move it (PIP_INDEX_URL, any PIP_* or PYTHON*), a launcher that picks an
interpreter of its own, a change made while the probe ran. ``pip.conf`` is read in process by
``plan`` (:mod:`cuda_resolve.install.pipconfig`), never by the probe: a changed one changes the
plan with the probe's answer remembered.

Installing never takes a remembered answer (``remembered`` is ``plan``'s alone).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _torch_env import copy_venv, unshare

from cuda_resolve import _bounded
from cuda_resolve.install import pip


def _site_packages(python: Path) -> Path:
    (found,) = (python.parent.parent / "lib").glob("python3*/site-packages")
    return found


def _settle(python: Path) -> None:
    """Date the venv's files a minute back: an answer is only remembered where nothing it
    depends on changed within two seconds of the probe's start (a copy made just now did)."""
    then = time.time() - 60
    site = _site_packages(python)
    entries = [unshare(path) for path in site.iterdir()]  # before: a replace dates site now
    for path in [*entries, site]:
        os.utime(path, (then, then), follow_symlinks=False)


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    python = copy_venv(tmp_path / "venv")
    _settle(python)
    return python


def _environ(**extra: str) -> dict[str, str]:
    # The suite's own private cache folder is in os.environ (conftest); pip's variables of this
    # machine are not (PIP_CERT is one of the probe's inputs).
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PIP_") and name != "VIRTUAL_ENV"
    }
    environ.update(extra)
    return environ


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every interpreter the pip module starts, by its argv."""
    started: list[list[str]] = []
    real = _bounded.run

    def run(argv: list[str], **kwargs: Any) -> Any:
        started.append(list(argv))
        return real(argv, **kwargs)

    monkeypatch.setattr(pip, "run", run)
    yield started
    pip.forget_prefetched()


def _ask(python: Path, environ: dict[str, str]) -> tuple[pip.PipFacts, dict[str, str]]:
    return pip.pip_facts_and_distributions(str(python), environ, remembered=True)


def test_the_answer_is_remembered_and_installing_still_asks_afresh(
    venv: Path, probes: list[list[str]]
) -> None:
    environ = _environ()
    first = _ask(venv, environ)
    assert len(probes) == 1 and "pip" in first[1]
    assert _ask(venv, environ) == first
    assert len(probes) == 1  # remembered: the target was not started again
    assert pip.pip_facts_and_distributions(str(venv), environ) == first
    assert len(probes) == 2  # not remembered: what installing asks
    # plan's prefetch takes the remembered answer too, in the background; an installer's
    # reader never takes what it found
    pip.prefetch_probe(str(venv), environ, remembered=True)
    assert pip.pip_facts_and_distributions(str(venv), environ) == first
    assert len(probes) == 3
    pip.prefetch_probe(str(venv), environ, remembered=True)
    assert _ask(venv, environ) == first
    assert len(probes) == 3


def _upgrade_pip(python: Path, version: str) -> None:
    """What a pip upgrade does to what the probe reads: the old ``pip-*.dist-info`` is replaced
    by the new version's (its folder name and METADATA's Version)."""
    site = _site_packages(python)
    (old,) = site.glob("pip-*.dist-info")
    new = site / f"pip-{version}.dist-info"
    old.rename(new)
    metadata = unshare(new / "METADATA")
    lines = metadata.read_text(encoding="utf-8").splitlines()
    lines = [f"Version: {version}" if line.startswith("Version:") else line for line in lines]
    metadata.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_pip_upgraded_in_the_target_is_seen(venv: Path, probes: list[list[str]]) -> None:
    environ = _environ()
    before = _ask(venv, environ)[0].version
    _ask(venv, environ)
    assert len(probes) == 1
    _upgrade_pip(venv, "99.1")
    facts, installed = _ask(venv, environ)
    assert str(facts.version) == "99.1" and installed["pip"] == "99.1", before
    assert len(probes) == 2


def test_a_module_dropped_on_the_path_is_seen(venv: Path, probes: list[list[str]]) -> None:
    """truststore importable without a distribution of its own (a bare module): pip 22.2 - 24.1
    then gets ``--use-feature=truststore``."""
    environ = _environ()
    assert _ask(venv, environ)[0].truststore is False
    (_site_packages(venv) / "truststore.py").write_text("", encoding="utf-8")
    assert _ask(venv, environ)[0].truststore is True
    assert len(probes) == 2


def test_the_variables_are_part_of_the_key(
    venv: Path, probes: list[list[str]], tmp_path: Path
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("", encoding="utf-8")
    assert _ask(venv, _environ())[0].cert is None
    # PIP_CERT: read by the probe (pip then verifies with that bundle)
    assert _ask(venv, _environ(PIP_CERT=str(bundle)))[0].cert == str(bundle)
    assert len(probes) == 2
    assert _ask(venv, _environ(PIP_CERT=str(bundle)))[0].cert == str(bundle)
    assert len(probes) == 2
    bundle.unlink()  # the same variable, its file gone: pip's own bundle again
    assert _ask(venv, _environ(PIP_CERT=str(bundle)))[0].cert is None
    assert len(probes) == 3
    # PIP_INDEX_URL (and every PIP_* and PYTHON*): never answered for by another's entry
    _ask(venv, _environ(PIP_INDEX_URL="https://mirror.example/simple"))
    assert len(probes) == 4
    assert probes[-1][0] == str(venv)
    _ask(venv, _environ(PIP_INDEX_URL="https://mirror.example/simple"))
    _ask(venv, _environ())
    assert len(probes) == 4
    _ask(venv, _environ(PYTHONSAFEPATH="1"))
    assert len(probes) == 5
    # Only a digest of the variables is stored: an index URL may hold a password.
    _ask(venv, _environ(PIP_INDEX_URL="https://user:s3cret@mirror.example/simple"))
    stored = (Path(os.environ["CUDA_RESOLVE_CACHE_DIR"]) / "target-pip" / "probes.json").read_text()
    assert "s3cret" not in stored and "mirror.example" not in stored


def test_the_file_is_the_owners_only_and_a_damaged_one_is_ignored(
    venv: Path, probes: list[list[str]]
) -> None:
    environ = _environ()
    first = _ask(venv, environ)
    folder = Path(os.environ["CUDA_RESOLVE_CACHE_DIR"]) / "target-pip"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "probes.json").stat().st_mode) == 0o600
    (folder / "probes.json").write_text("{not json", encoding="utf-8")
    assert _ask(venv, environ) == first
    assert _ask(venv, environ) == first
    assert len(probes) == 2  # probed once more, then remembered again
    assert json.loads((folder / "probes.json").read_text())["format"] == 1


def test_a_change_while_the_probe_runs_is_not_remembered(
    venv: Path, probes: list[list[str]]
) -> None:
    environ = _environ()
    (_site_packages(venv) / "fresh.pth").write_text("", encoding="utf-8")  # just now
    _ask(venv, environ)
    _ask(venv, environ)
    assert len(probes) == 2


def test_a_launcher_is_never_remembered(
    venv: Path, probes: list[list[str]], tmp_path: Path
) -> None:
    """A shim (pyenv's) may start another interpreter next time, by rules of its own."""
    shim = tmp_path / "shim" / "python"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{venv}" "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    environ = _environ()
    _ask(shim, environ)
    _ask(shim, environ)
    assert len(probes) == 2


def test_two_first_uses_at_once_leave_one_good_file(venv: Path, probes: list[list[str]]) -> None:
    """Two ``plan`` processes probing the same target for the first time: each writes the file
    whole (atomically); the next one takes the answer."""
    code = (
        "import os, sys\n"
        "from cuda_resolve.install.pip import pip_facts_and_distributions as ask\n"
        "print(ask(sys.argv[1], dict(os.environ), remembered=True)[0].version)\n"
    )
    environ = _environ()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(venv)],
            env=environ,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    answers = [child.communicate(timeout=120)[0].strip() for child in children]
    assert all(child.returncode == 0 for child in children) and answers[0] == answers[1]
    assert str(_ask(venv, environ)[0].version) == answers[0]
    assert probes == []


# --- plan itself, in process -------------------------------------------------------------------


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every process started in this process (any thread), by its argv."""
    seen: list[list[str]] = []
    real = subprocess.Popen.__init__

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        seen.append([str(word) for word in args] if isinstance(args, list | tuple) else [args])
        real(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", init)
    yield seen
    pip.forget_prefetched()


def _plan(python: Path, monkeypatch: pytest.MonkeyPatch, **variables: str) -> dict[str, Any]:
    from cuda_resolve.cli import main
    from cuda_resolve.install import pipoptions

    pipoptions._pip_settings.cache_clear()  # read once per process: each plan is a process
    for name in [name for name in os.environ if name.startswith("PIP_")]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "580.65.06")
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "9.0")
    out = Path(os.environ["CUDA_RESOLVE_CACHE_DIR"]).parent / "plan.json"
    with out.open("w") as stream:
        saved, sys.stdout = sys.stdout, stream
        try:
            code = main(["plan", "pointnet2_ops", "--python", str(python), "--json"])
        finally:
            sys.stdout = saved
    assert code == 0, out.read_text()
    plan: dict[str, Any] = json.loads(out.read_text())
    return plan


def _targets(started: list[list[str]], python: Path) -> list[list[str]]:
    return [argv for argv in started if argv and Path(argv[0]).parent == python.parent]


def test_a_warm_plan_starts_no_target_interpreter(
    venv: Path, started: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = _plan(venv, monkeypatch)
    assert _targets(started, venv), started  # the probes of a first plan: the count counts
    started.clear()
    warm = _plan(venv, monkeypatch)
    assert _targets(started, venv) == [] and warm == cold, started
    # pip upgraded in the target: the next plan says so
    _upgrade_pip(venv, "99.1")
    assert _plan(venv, monkeypatch)["pip_version"] == "99.1"


def test_a_changed_pip_conf_changes_a_warm_plan(
    venv: Path, started: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip's configuration is read by plan itself: with the probe's answer remembered, the
    venv's own ``pip.conf`` turning hash-checking on is seen at once."""
    monkeypatch.setenv("HOME", str(venv.parent.parent.parent / "home"))  # no user pip.conf
    cold = _plan(venv, monkeypatch)
    started.clear()
    (venv.parent.parent / "pip.conf").write_text("[install]\nrequire-hashes = true\n")
    warm = _plan(venv, monkeypatch)
    assert _targets(started, venv) == [], started
    assert "cannot_apply" not in cold
    assert "require-hashes = true from " in warm["cannot_apply"], warm
