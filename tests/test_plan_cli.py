"""``cuda-resolve plan``'s text output: what the user reads must be what the plan says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve.cli import main

PROFILE = """\
[python]
version = "3.10.12"

[driver]
version = "535.104.05"

[[gpu]]
name = "NVIDIA GeForce RTX 3090"
compute_capability = "8.6"
"""


@pytest.fixture
def profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    path = tmp_path / "rtx3090.toml"
    path.write_text(PROFILE, encoding="utf-8")
    return path


def _from_column(out: str, name: str) -> str:
    """The 'from' cell of the row for ``name``, with its folded continuation lines joined."""
    cell = ""
    inside = False
    for line in out.splitlines():
        if not line.startswith("│"):
            if inside:
                break
            continue
        cells = [part.strip() for part in line.split("│")[1:-1]]
        if cells[0] == name:
            inside = True
        elif cells[0] and inside:
            break
        if inside:
            cell += cells[-1]
    return cell


def test_urls_in_the_plan_table_are_never_cut_short(
    profile: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped output is 80 columns; the artifact URL is the point of the plan."""
    assert main(["plan", "kaolin", "--profile", str(profile), "--json"]) == 0
    url = next(item["url"] for item in json.loads(capsys.readouterr().out)["install"] if item["name"] == "kaolin")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["plan", "kaolin", "--profile", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert _from_column(out, "kaolin") == url


def test_requirement_extras_are_printed_as_given(profile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """'[socks]' is text, not rich markup: a plan that drops the extras misreports the request."""
    assert main(["plan", "requests[socks]>=2", "--profile", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "requests[socks]>=2: not in the index" in out
    assert "requests[socks]>=2" in out.split("Why:")[0]
