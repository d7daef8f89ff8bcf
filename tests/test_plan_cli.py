"""``cuda-resolve plan``'s text output: what the user reads must be what the plan says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    url = next(
        item["url"]
        for item in json.loads(capsys.readouterr().out)["install"]
        if item["name"] == "kaolin"
    )
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["plan", "kaolin", "--profile", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    # The cell names the URL's number; the URL itself is whole on one line under the table.
    reference = _from_column(out, "kaolin")
    assert f"  {reference} {url}" in out.splitlines()


def test_requirement_extras_are_printed_as_given(
    profile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'[socks]' is text, not rich markup: a plan that drops the extras misreports the request."""
    assert main(["plan", "requests[socks]>=2", "--profile", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "requests[socks]>=2: not in the index" in out
    assert "requests[socks]>=2" in out.split("Why:")[0]


NVCC118 = Path(__file__).parent / "data" / "profiles" / "rtx3090-torch21cu121-nvcc118.toml"


def test_explain_on_a_failure_lists_what_was_ruled_out(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint of a conflict may point at --explain: then --explain must print more."""
    monkeypatch.setenv("COLUMNS", "80")
    assert (
        main(["plan", "torch==2.14.1+cu130", "--profile", str(NVCC118), "--allow-torch-change"])
        == 1
    )
    plain = capsys.readouterr().err
    assert (
        main(
            [
                "plan",
                "torch==2.14.1+cu130",
                "--profile",
                str(NVCC118),
                "--allow-torch-change",
                "--explain",
            ]
        )
        == 1
    )
    explained = capsys.readouterr().err
    assert "Ruled out:" not in plain
    ruled = explained.split("Ruled out:")[1].split("error:")[0]
    assert "torch 2.14.1+cu130: driver 535.104.05 supports CUDA <= 12.2" in " ".join(ruled.split())
    assert "cu126" not in ruled  # only what the request asked for: the cu130 build
    assert explained.rstrip().splitlines()[-1].startswith("hint: ")
    assert all(
        line.startswith(("  - ", "    ", "  ...")) for line in ruled.strip("\n").splitlines()
    )


def test_explain_shows_the_alternatives_that_merely_lost(
    profile: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["plan", "torch", "--profile", str(profile), "--explain"]) == 0
    lost = " ".join(
        capsys.readouterr()
        .out.split("Alternatives that also fit this machine:")[1]
        .split("Ruled out:")[0]
        .split()
    )
    assert (
        "less preferred: CUDA 12.4 is lower than 12.6" in lost
        or "less preferred: an older release" in lost
    ), lost
    assert (
        main(
            [
                "plan",
                "kaolin",
                "pointnet2_ops",
                "--profile",
                str(NVCC118),
                "--allow-torch-change",
                "--explain",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    alternatives = out.split("Alternatives that also fit this machine:")[1].split("Ruled out:")[0]
    flat = " ".join(alternatives.split())
    assert (
        "torch 2.1.0+cu121: preferred, but ruled out by the rest of the plan: kaolin 0.18.0 wheel "
        "for torch 2.7.1+cu118 needs torch==2.7.1+cu118" in flat
    )
    assert (
        main(
            [
                "plan",
                "kaolin",
                "pointnet2_ops",
                "--profile",
                str(NVCC118),
                "--allow-torch-change",
                "--explain",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert any(a["reason"].startswith("torch 2.1.0+cu121: preferred") for a in data["alternatives"])
    assert {r["kind"] for r in data["rejected"]} >= {"driver-cuda", "python", "cpu-build"}


def test_reasons_wrap_under_their_text_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert (
        main(
            [
                "plan",
                "kaolin",
                "pointnet2_ops",
                "--profile",
                str(NVCC118),
                "--allow-torch-change",
                "--explain",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    below = out.split("Why:\n")[1].splitlines()
    assert below and all(len(line) <= 80 for line in below)
    assert all(line.startswith("  ") or line.endswith(":") for line in below), [
        line for line in below if not line.startswith("  ")
    ]
    assert "/usr/local/cuda-11.8" in out  # paths are never split


def test_explain_on_a_failure_loads_no_rich() -> None:
    """plan's failure path with --explain prints without rich, as its success path does (issue
    28: importing rich was a quarter of a warm plan); its width is the terminal's."""
    script = (
        "import sys\n"
        "from cuda_resolve.cli import main\n"
        "try:\n"
        f"    main(['plan', 'torch==2.14.1+cu130', '--profile', {str(NVCC118)!r},\n"
        "          '--allow-torch-change', '--explain'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "60"},
    )  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    ruled = done.stderr.split("Ruled out:")[1].split("error:")[0]
    assert max(len(line) for line in ruled.splitlines()) <= 60


H200 = """\
[python]
version = "3.11.7"

[driver]
version = "580.95.05"

[[gpu]]
name = "NVIDIA H200"
compute_capability = "9.0"
"""


def test_explain_keeps_to_what_the_request_allows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pinned torch: its alternatives are other builds of that release, and the Why line does
    not point at a newer release the pin rules out (walk B12: it listed 2.12.1 for a 2.13.0 pin
    and said "the index cannot confirm that torch 2.15.0 ... were published; pin one")."""
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    path = tmp_path / "h200.toml"
    path.write_text(H200, encoding="utf-8")

    def explained(request: str) -> dict[str, Any]:
        assert main(["plan", request, "--profile", str(path), "--explain", "--json"]) == 0
        document: dict[str, Any] = json.loads(capsys.readouterr().out)
        return document

    free = explained("torch")
    assert any(not a["candidate"].startswith("torch 2.13.0+") for a in free["alternatives"])
    pinned = explained("torch==2.13.0")
    labels = [a["candidate"] for a in pinned["alternatives"] if a["name"] == "torch"]
    assert labels and all(label.startswith("torch 2.13.0+") for label in labels), labels
    assert not any("2.15.0" in reason for reason in pinned["reasons"]), pinned["reasons"]
