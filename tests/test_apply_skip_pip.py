"""A plan that runs no pip still holds where it is applied (reviewer h13, issue 26).

``plan --json`` made where every package is already installed as planned (here: quickext reused
from the wheelhouse and installed) says so in ``skip_pip``, and its steps install nothing. Applied
where that no longer holds (another venv or node with the same facts, or the same venv after the
extension was removed), it must not report "nothing to change" and exit 0 with the extension
missing: the fact it was decided from changed, and apply says which."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _sources import pinned_checkout
from _torch_env import copy_venv, standin_cuda_toolkit, torch_venv_template  # noqa: F401

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "packages" / "quickext"
INDEX = DATA / "index" / "quickext"


def _cli(words: list[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_resolve", *words],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _site(python: Path) -> list[str]:
    [site] = (python.parent.parent / "lib").glob("python*/site-packages")
    return sorted(os.listdir(site))


def test_a_plan_that_skips_pip_is_refused_where_its_build_is_not_installed(
    tmp_path: Path, torch_venv_template: Path
) -> None:
    python = copy_venv(tmp_path / "target", torch_venv_template)
    cuda = standin_cuda_toolkit(tmp_path / "cuda")
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PIP_FIND_LINKS")
    }
    environ.update(
        {
            "CUDA_HOME": str(cuda),
            "PATH": f"{cuda / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
            "CUDA_RESOLVE_DRIVER": "580.95.05",
            "CUDA_RESOLVE_CUDA_ARCH": "9.0",
            "PIP_NO_INDEX": "1",
            "CUDA_RESOLVE_WHEELHOUSE": str(tmp_path / "wheelhouse"),
        }
    )
    # The air-gapped machine's source: a checkout at the pinned revision, so its build is the
    # pinned one the next plan finds (a plain folder is keyed by its content instead).
    source, index = pinned_checkout(SOURCE, INDEX, tmp_path)
    plan_words = ["plan", "quickext", "--index", str(index), "--python", str(python), "--json"]
    apply_words = ["--python", str(python), "--source", str(source)]
    first = _cli(plan_words, environ)
    assert first.returncode == 0, first.stderr
    (tmp_path / "first.json").write_text(first.stdout, encoding="utf-8")
    built = _cli(["apply", str(tmp_path / "first.json"), *apply_words], environ)
    assert built.returncode == 0, built.stderr

    made = _cli(plan_words, environ)  # now quickext is reused and installed: pip is not run
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout).get("skip_pip"), made.stdout
    plan = tmp_path / "plan.json"
    plan.write_text(made.stdout, encoding="utf-8")
    kept = _cli(["apply", str(plan), *apply_words], environ)
    assert kept.returncode == 0, kept.stderr  # where it holds, it applies (nothing to change)

    removed = subprocess.run(
        [str(python), "-m", "pip", "uninstall", "-y", "quickext"],
        capture_output=True,
        text=True,
        env=environ,
        check=False,
    )
    assert removed.returncode == 0, removed.stderr
    before = _site(python)
    for dry in ([], ["--dry-run"]):
        done = _cli(["apply", str(plan), *apply_words, *dry], environ)
        assert done.returncode == 1, done.stderr
        assert "installed quickext 0.1.0+" in done.stderr and "none" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        assert _site(python) == before
