"""``--smoke`` runs the GPU test of an extension build that is kept as installed (pip not run).

Before, a kept build gave pip a no-op run and no smoke test at all, silently. The install is
real (the fixture extension built against a stand-in torch); the smoke script runs in the
target interpreter.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _torch_env import torch_venv_template  # noqa: F401  (a fixture)
from test_hash_mode import SOURCE, _cuda_pip, machine  # noqa: F401  (machine: a fixture)

INDEX = Path(__file__).parent / "data" / "index" / "quickext"


@pytest.mark.parametrize("kept", ["reused", "installed"])
def test_smoke_runs_for_a_kept_build_without_running_pip(
    tmp_path: Path,
    machine: tuple[Path, dict[str, str]],
    kept: str,
) -> None:
    """``reused``: the plan reuses the wheelhouse's wheel, which is installed already;
    ``installed``: the wheelhouse no longer has it and the plan keeps the installed build."""
    python, env = machine
    env = {k: v for k, v in env.items() if k != "PIP_REQUIRE_HASHES"}
    index = tmp_path / "index"
    shutil.copytree(INDEX, index)
    recipe = index / "packages" / "quickext.toml"
    recipe.write_text(
        recipe.read_text(encoding="utf-8")
        + '\n[recipe.smoke]\nimports = ["quickext"]\ndescription = "prints"\n'
        "gpu_script = '''\nimport quickext, sys\nprint(\"quickext smoke ok from\", "
        "sys.prefix)\n'''\n",
        encoding="utf-8",
    )
    first = _cuda_pip(
        "quickext",
        "--index",
        str(index),
        "--source",
        str(SOURCE),
        "--python",
        str(python),
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    if kept == "reused":
        again = _cuda_pip(
            "quickext",
            "--index",
            str(index),
            "--source",
            str(SOURCE),
            "--python",
            str(python),
            "--smoke",
            "--json",
            env=env,
            cwd=tmp_path,
        )
    else:
        shutil.rmtree(env["CUDA_RESOLVE_WHEELHOUSE"])
        # The index as a configured overlay, not --index: detection reports installed builds of
        # the packages the configured index curates.
        again = _cuda_pip(
            "quickext",
            "--python",
            str(python),
            "--smoke",
            "--json",
            env=dict(env, CUDA_RESOLVE_INDEX_PATH=str(index)),
            cwd=tmp_path,
        )
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(again.stdout)
    kinds = {item["name"]: item["kind"] for item in report["plan"]["install"]}
    assert kinds["quickext"] == ("build" if kept == "reused" else "installed"), kinds
    result = report["result"]
    assert result["pip_runs"] == [], result["pip_runs"]
    assert [entry["package"] for entry in result["smoke"]] == ["quickext"], result
    assert result["smoke"][0]["output"].startswith("quickext smoke ok from"), result["smoke"]
