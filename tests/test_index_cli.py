"""``cuda-resolve index validate`` and ``cuda-resolve index show`` through ``cli.main``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cuda_resolve.cli import main
from cuda_resolve.index.load import INDEX_PATH_ENV, clear_cache

DATA = Path(__file__).parent / "data" / "index"
LAB = DATA / "overlay-lab"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv(INDEX_PATH_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "200")
    clear_cache()
    yield
    clear_cache()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, _ = run(capsys, *argv, "--json")
    return code, json.loads(out)


def test_validate_shipped(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "index", "validate")
    assert code == 0
    assert out.startswith("ok: the shipped index") and "4 files" in out


def test_validate_shipped_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "validate")
    assert code == 0 and data["ok"] is True and data["problems"] == []


def test_validate_overlay(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "index", "validate", str(LAB))
    assert code == 0 and "ok:" in out


def test_validate_broken_directory_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    broken = DATA / "invalid" / "bad-arch-entry" / "index"
    code, out, _ = run(capsys, "index", "validate", str(broken))
    assert code == 1
    assert "problem:" in out and "torch[0].variants.cu124.arch_list" in out
    code, data = run_json(capsys, "index", "validate", str(broken))
    assert code == 1 and data["ok"] is False
    assert len(data["problems"]) == 1 and "'5.0;sm_60;7.0'" in data["problems"][0]


def test_validate_cross_reference_problem_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(
        capsys, "index", "validate", str(DATA / "invalid" / "wheel-unknown-torch" / "index")
    )
    assert code == 1 and any("has no cu126 build" in p for p in data["problems"])


def test_validate_missing_directory_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "index", "validate", str(tmp_path / "absent"))
    assert code == 2 and "not a directory" in err
    code, data = run_json(capsys, "index", "validate", str(tmp_path / "absent"))
    assert code == 2 and "not a directory" in data["error"] and data["hint"]


def test_index_without_subcommand_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "index")
    assert code == 2 and "validate" in out and "show" in out


def test_show_kaolin(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "index", "show", "kaolin")
    assert code == 0
    assert "placeholders: 0.1 (never installed)" in out
    assert "2.8.0: cu126 cu128 cu129" in out
    assert "kaolin-master-d52da9f" in out and "IGNORE_TORCH_VER=1" in out
    assert "shipped:packages/kaolin.toml" in out


def test_show_kaolin_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "show", "kaolin")
    assert code == 0 and data["kind"] == "package" and data["name"] == "kaolin"
    assert data["placeholder_versions"] == ["0.1"]
    latest = next(w for w in data["wheels"] if w["version"] == "0.18.0")
    assert latest["torch"]["2.8.0"] == ["cu126", "cu128", "cu129"]
    assert latest["python"] == ["3.9", "3.10", "3.11", "3.12"]
    assert latest["origin"].endswith("packages/kaolin.toml")
    master = next(r for r in data["recipes"] if r["name"] == "kaolin-master-d52da9f")
    assert master["env"] == {"FORCE_CUDA": "1", "IGNORE_TORCH_VER": "1"}
    assert master["patches"][0]["torch"] == ">=2.13"


def test_show_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "show", "kaolin", "0.18.0")
    assert code == 0
    assert [w["version"] for w in data["wheels"]] == ["0.18.0"]
    assert {r["name"] for r in data["recipes"]} == {"kaolin-v0.18.0", "kaolin-master-d52da9f"}
    code, _, err = run(capsys, "index", "show", "kaolin", "0.11.0")
    assert code == 2 and "no wheels or recipe" in err


def test_show_with_overlay_says_where_entries_came_from(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "show", "kaolin", "--index", str(LAB))
    assert code == 0
    origins = {w["version"]: w["origin"] for w in data["wheels"]}
    assert origins["0.18.0"] == str(LAB / "packages" / "kaolin.toml")
    assert origins["0.17.0"].endswith("packages/kaolin.toml") and not origins["0.17.0"].startswith(
        str(LAB)
    )
    code, out, _ = run(capsys, "index", "show", "kaolin", "--index", str(LAB))
    assert code == 0 and str(LAB / "packages" / "kaolin.toml") in out
    code, data = run_json(capsys, "index", "show", "pytorch3d", "--index", str(LAB))
    assert code == 0 and data["wheels"][0]["torch"]["2.1.0"] == ["cu118", "cu121"]


def test_show_overlay_from_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INDEX_PATH_ENV, str(LAB))
    code, data = run_json(capsys, "index", "show", "cuda", "12.4")
    assert code == 0
    (toolkit,) = data["toolkits"]
    assert toolkit["gcc_max"] == 14 and toolkit["origin"] == str(LAB / "cuda.toml")


def test_show_pointnet2_ops(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "show", "pointnet2-ops")
    assert code == 0 and data["wheels"] == []
    (recipe,) = data["recipes"]
    assert recipe["revision"] == "b5ceb6d9ca0467ea34beb81023f96ee82228f626"
    assert recipe["subdirectory"] == "pointnet2_ops_lib"
    assert [p["file"] for p in recipe["patches"]] == [
        "pointnet2_ops_lib/setup.py",
        "pointnet2_ops_lib/pointnet2_ops/pointnet2_utils.py",
    ]
    code, out, _ = run(capsys, "index", "show", "pointnet2_ops")
    assert code == 0 and "patch pointnet2_ops_lib/setup.py" in out


def test_show_torch_release(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "show", "torch", "2.11.0")
    assert code == 0
    (release,) = data["releases"]
    assert release["pypi_default"] == "cu130" and release["torchvision"] == "0.26.0"
    cu130 = next(v for v in release["variants"] if v["name"] == "cu130")
    assert cu130["arch_list"] == "7.5;8.0;8.6;9.0;10.0;12.0" and cu130["pypi_default"]
    code, out, _ = run(capsys, "index", "show", "torch", "2.11.0")
    assert code == 0 and "cu130 (PyPI)" in out and "7.5;8.0;8.6;9.0;10.0;12.0" in out


def test_show_torch_series_and_all(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "show", "torch", "2.12")
    assert code == 0 and [r["version"] for r in data["releases"]] == ["2.12.0", "2.12.1"]
    code, data = run_json(capsys, "index", "show", "torch")
    assert code == 0 and len(data["releases"]) == 40
    code, out, _ = run(capsys, "index", "show", "torch")
    assert code == 0 and "2.15.0" in out and "cu132*" in out
    code, _, err = run(capsys, "index", "show", "torch", "3.0.0")
    assert code == 2 and "no such torch release" in err


def test_show_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "show", "toolkit", "13.0")
    assert code == 0
    (toolkit,) = data["toolkits"]
    assert toolkit["archs"][0] == "sm_75" and "sm_110" in toolkit["archs"]
    assert [f["major"] for f in data["families"]] == [13]
    code, data = run_json(capsys, "index", "show", "cuda")
    assert code == 0 and len(data["toolkits"]) == 26 and len(data["families"]) == 3
    code, out, _ = run(capsys, "index", "show", "cuda", "12.0")
    assert code == 0 and "drops sm_35/sm_37" in out
    code, _, err = run(capsys, "index", "show", "cuda", "12.7")
    assert code == 2 and "no facts for CUDA 12.7" in err


def test_show_sources(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "index", "show", "sources")
    keys = {item["key"] for item in data["sources"]}
    assert code == 0 and {"nvidia-release-notes", "kaolin-repo", "pointnet2-repo"} <= keys
    code, out, _ = run(capsys, "index", "show", "sources")
    assert code == 0 and "nvidia-release-notes" in out and "shipped:cuda.toml" in out


def test_show_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "index", "show", "pytorch3d")
    assert code == 2 and "knows nothing called 'pytorch3d'" in err and "kaolin" in err
    code, data = run_json(capsys, "index", "show", "pytorch3d")
    assert code == 2 and data["hint"].startswith("known names:")


def test_index_subcommand_extensions(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.machinery
    import sys
    import types

    from cuda_resolve.cli import index as index_cli

    seen: list[Any] = []
    fake = types.ModuleType("cuda_resolve.cli._test_index_extension")
    fake.__spec__ = importlib.machinery.ModuleSpec(fake.__name__, loader=None)

    def register_extra(subparsers: Any) -> None:
        seen.append(subparsers)
        subparsers.add_parser("extra-check").set_defaults(handler=lambda args: 7)

    fake.register_extra = register_extra  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setattr(
        index_cli,
        "_EXTENSIONS",
        (("_no_such_module", "register"), ("_test_index_extension", "register_extra")),
    )
    assert main(["index", "extra-check"]) == 7
    assert len(seen) == 1


def test_show_keeps_urls_whole_in_a_narrow_or_piped_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped output is 80 columns wide; a URL split over two lines cannot be copied."""
    monkeypatch.setenv("COLUMNS", "60")
    code, out, _ = run(capsys, "index", "show", "kaolin")
    assert code == 0
    lines = out.splitlines()
    assert (
        "  find-links: https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-{torch}_cu{cuda_nodot}.html"
        in lines
    )
    assert any(
        line.startswith(
            "recipe kaolin-v0.18.0: kaolin 0.18.0 from https://github.com/NVIDIAGameWorks/kaolin @"
        )
        for line in lines
    )


@pytest.mark.parametrize(
    ("name", "words"),
    [
        (
            "kaolin",
            (
                "version",
                "Python",
                "variants",
                "platforms",
                "unverified",
                "linux_x86_64,",
                "torch[1.11.0]",
            ),
        ),
        ("torch", ("torch", "Python", "variants", "torchvision", "torchaudio", "default)")),
        ("cuda", ("family", "unverified", "targets", "specific")),
    ],
)
def test_show_at_80_columns_splits_no_word_and_wraps_under_the_text(
    name: str,
    words: tuple[str, ...],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Piped output is 80 columns: table headers and cells keep their words whole ("unverified",
    "linux_x86_64"), and a wrapped explanation continues indented, never at column 0."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "index", "show", name)
    assert code == 0
    lines = out.splitlines()
    boxed = [line for line in lines if line[:1] in "┃│"]
    tokens = {token for line in boxed for token in line.replace("┃", " ").replace("│", " ").split()}
    for word in words:
        assert word in tokens, f"{word!r} is split in:\n" + "\n".join(boxed[:12])
    assert all(len(line) <= 80 for line in boxed)
    heads = (
        "recipe ",
        "torch ",
        "kaolin ",
        "pointnet2_ops ",
        "wheels",
        "minor-version",
        "CUDA toolkits",
        "?",
        "notes:",
        "source:",
    )
    continued = [
        line for line in lines if line and line[0] not in "┃│┏┡└╇┗━ " and not line.startswith(heads)
    ]
    assert not continued, continued  # continuation lines start indented
