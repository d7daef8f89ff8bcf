"""A plan file with a key this cuda-resolve does not know is refused naming the key, and the hint
says a newer cuda-resolve may have written it: the plan format only ever adds keys (user walk
2026-12-05 B8: the hint listed the known keys and nothing else)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve.cli import main
from cuda_resolve.errors import CudaResolveError
from cuda_resolve.install.apply import read_plan_file

PROFILE = Path(__file__).parent / "data" / "profiles" / "rtx3090-torch21cu121-nvcc118.toml"


def test_an_unknown_top_level_key_names_it_and_the_upgrade(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "six", "--profile", str(PROFILE), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**plan, "added_later": 1}))
    with pytest.raises(CudaResolveError) as refused:
        read_plan_file(path)
    assert "added_later: unknown key" in str(refused.value)
    assert "upgrade cuda-resolve" in str(refused.value.hint)
    # The command that makes the plan again, with its request (walk B12: "plan REQ...").
    assert str(refused.value.hint).endswith(
        "or make the plan with this one: cuda-resolve plan six --json > plan.here.json"
    )
    path.write_text(json.dumps({**plan, "format": 1}))
    with pytest.raises(CudaResolveError) as refused:
        read_plan_file(path)
    assert "`cuda-resolve plan six --json > plan.here.json`" in str(refused.value.hint)
    path.write_text(json.dumps(plan))
    assert read_plan_file(path).pass_through == ("six",)
