"""``build --slurm`` where sbatch reaches no controller says so, not "check --sbatch-arg".

Found walking docs/cluster.md as a user (H7) on a machine with Slurm's client programs but no
Slurm configuration: ``cuda-resolve build pointnet2_ops --profile a100.toml --slurm`` answered
``sbatch refused the build job: sbatch: fatal: Could not establish a configuration source``
with the hint to check the partition, account and time given with --sbatch-arg, which were
not at fault (none was given)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_resolve.errors import BuildError
from cuda_resolve.slurm.scheduler import submit

#: What sbatch 24.x prints in each case (stderr, exit status 1).
NO_CONFIG = (
    "sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
    "sbatch: error: fetch_config: DNS SRV lookup failed\n"
    "sbatch: error: _establish_config_source: failed to fetch config\n"
    "sbatch: fatal: Could not establish a configuration source\n"
)
DOWN = (
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
    "(connect failure)\n"
)
BAD_PARTITION = "sbatch: error: Batch job submission failed: Invalid partition name specified\n"


def _sbatch(tmp_path: Path, says: str) -> dict[str, str]:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "said").write_text(says, encoding="utf-8")
    script = folder / "sbatch"
    script.write_text(f"#!/bin/sh\ncat '{folder / 'said'}' >&2\nexit 1\n", encoding="utf-8")
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}/usr/bin:/bin"}


@pytest.mark.parametrize("says", [NO_CONFIG, DOWN])
def test_no_controller_is_named_as_such(tmp_path: Path, says: str) -> None:
    with pytest.raises(BuildError) as caught:
        submit(tmp_path / "job.sh", [], _sbatch(tmp_path, says))
    assert caught.value.message == f"sbatch refused the build job: {says.splitlines()[-1]}"
    assert caught.value.hint is not None
    assert "reaches no Slurm controller from here" in caught.value.hint
    assert "--sbatch-arg" not in caught.value.hint


def test_a_refused_option_still_points_at_the_sbatch_args(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as caught:
        submit(tmp_path / "job.sh", ["--partition=nope"], _sbatch(tmp_path, BAD_PARTITION))
    assert caught.value.hint is not None and "--sbatch-arg values" in caught.value.hint
