"""``cuda-resolve wheelhouse list | prune | path`` through ``cli.main``, text and --json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_wheelhouse import make_key, make_wheel

from cuda_resolve.cli import main
from cuda_resolve.wheelhouse import StoredWheel, Wheelhouse


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "house"
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(path))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, _ = run(capsys, *argv, "--json")
    return code, json.loads(out)


def _age(entry: StoredWheel, created: str) -> None:
    """Backdate an entry (its metadata's creation time) for --older-than."""
    meta = entry.path.parent / "entry.json"
    document = json.loads(meta.read_text())
    document["created"] = created
    meta.write_text(json.dumps(document))


def _fill(root: Path, tmp_path: Path) -> tuple[StoredWheel, StoredWheel, StoredWheel]:
    house = Wheelhouse(root)
    old = house.publish(make_key(arch_list="7.0"), make_wheel(tmp_path / "a"))
    _age(old, "2020-01-01T00:00:00Z")
    new = house.publish(make_key(), make_wheel(tmp_path / "a"))
    other = house.publish(
        make_key(package="other_pkg"), make_wheel(tmp_path / "b", name="other_pkg")
    )
    return old, new, other


def test_path_says_where_and_why(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out, _ = run(capsys, "wheelhouse", "path")
    assert code == 0 and out == f"{root}\n"
    code, data = run_json(capsys, "wheelhouse", "path")
    assert code == 0 and data["root"] == str(root) and data["origin"] == "$CUDA_RESOLVE_WHEELHOUSE"
    assert data["index_url"] == (root / "simple").as_uri() and data["find_links"] == str(
        root / "index.html"
    )
    code, data = run_json(capsys, "wheelhouse", "path", "--wheelhouse", "/srv/wheels")
    assert data["root"] == "/srv/wheels" and data["origin"] == "--wheelhouse"


def test_list_empty_and_full(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "wheelhouse", "list")
    assert (
        code == 0
        and f"wheelhouse: {root} (from $CUDA_RESOLVE_WHEELHOUSE)" in out
        and f"{root} does not exist" in out  # issue 29: a folder that is not there is said so
    )
    root.mkdir()
    assert "no wheels yet" in run(capsys, "wheelhouse", "list")[1]
    old, new, other = _fill(root, tmp_path)
    code, out, _ = run(capsys, "wheelhouse", "list")
    assert code == 0
    assert f"demo_ext {new.version}  torch 2.14.1 cu130" in out and "archs 8.6;9.0+PTX" in out
    assert str(new.path) in out and str(old.path) in out and str(other.path) in out
    assert new.created in out and "3 wheels" in out

    code, data = run_json(capsys, "wheelhouse", "list")
    assert code == 0 and data["root"] == str(root) and data["problems"] == []
    listed = {entry["path"]: entry for entry in data["entries"]}
    assert set(listed) == {str(old.path), str(new.path), str(other.path)}
    row = listed[str(new.path)]
    assert (
        row["label"] == f"pt2141cu130.sm86.sm90ptx.{new.key.recipe_word}"
        and row["version"] == new.version
    )
    assert (row["torch"], row["variant"], row["arch_list"]) == ("2.14.1", "cu130", "8.6;9.0+PTX")
    assert row["size"] == new.size and row["created"] == new.created
    assert data["total_size"] == old.size + new.size + other.size


def test_list_notes_a_folder_that_is_not_an_entry(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path
) -> None:
    _, new, _ = _fill(root, tmp_path)
    (new.path.parent / "entry.json").write_text("[]")
    code, out, _ = run(capsys, "wheelhouse", "list")
    assert code == 0 and "note:" in out and "expected a JSON object" in out and "2 wheels" in out


def test_prune_by_package_dry_run_then_for_real(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path
) -> None:
    old, new, other = _fill(root, tmp_path)
    code, out, _ = run(capsys, "wheelhouse", "prune", "--package", "Demo-Ext", "--dry-run")
    assert code == 0 and out.count("would remove demo_ext") == 2 and "would free" in out
    assert old.path.exists() and new.path.exists()

    code, data = run_json(capsys, "wheelhouse", "prune", "--package", "demo_ext")
    assert code == 0 and data["dry_run"] is False
    assert sorted(entry["path"] for entry in data["removed"]) == sorted(
        [str(old.path), str(new.path)]
    )
    assert data["freed_bytes"] == old.size + new.size
    assert not old.path.exists() and not new.path.exists() and other.path.exists()
    assert not (root / "simple" / "demo-ext").exists()
    assert Wheelhouse(root).entries() == [other]


def test_prune_older_than(capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path) -> None:
    old, new, other = _fill(root, tmp_path)
    code, out, _ = run(capsys, "wheelhouse", "prune", "--older-than", "30")
    assert code == 0 and f"removed demo_ext {old.version}" in out and "removed 1 wheel," in out
    assert not old.path.exists() and new.path.exists() and other.path.exists()
    code, data = run_json(
        capsys, "wheelhouse", "prune", "--older-than", "30", "--package", "other_pkg"
    )
    assert code == 0 and data["removed"] == [] and data["freed_bytes"] == 0


def test_prune_all_and_unknown_package(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path
) -> None:
    _fill(root, tmp_path)
    code, out, _ = run(capsys, "wheelhouse", "prune", "--package", "kaolin")
    assert (
        code == 0
        and "note: the wheelhouse has no wheels of kaolin" in out
        and "removed 0 wheels" in out
    )
    code, out, _ = run(capsys, "wheelhouse", "prune", "--all")
    assert code == 0 and "removed 3 wheels" in out
    assert Wheelhouse(root).entries() == [] and not list((root / "wheels").iterdir())
    assert "<a " not in (root / "index.html").read_text()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["prune"], "needs a selector"),
        (["prune", "--dry-run"], "needs a selector"),
        (["prune", "--older-than", "soon"], "--older-than 'soon': expected a number of days"),
        (["prune", "--older-than", "-1"], "--older-than '-1'"),
        (["prune", "--older-than", "nan"], "--older-than 'nan'"),
        (["prune", "--all", "--package", "x"], "cannot be combined"),
        (["list", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path, argv: list[str], expected: str
) -> None:
    _, new, _ = _fill(root, tmp_path)
    code, out, err = run(capsys, "wheelhouse", *argv)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("error: ") and expected in lines[0]
    assert len(lines) == 2 and lines[1].startswith("hint: ")
    code, data = run_json(capsys, "wheelhouse", *argv)
    assert code == 2 and expected in data["error"] and data["hint"]
    assert new.path.exists()  # nothing was removed


def test_an_unusable_wheelhouse_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(blocker))
    code, out, err = run(capsys, "wheelhouse", "list")
    assert code == 1 and out == ""
    assert (
        err.splitlines()[0]
        == f"error: the wheelhouse {blocker} is not a folder (its location came from "
        "$CUDA_RESOLVE_WHEELHOUSE)"
    )


@pytest.mark.parametrize("command", [["list"], ["path"], ["prune", "--all"]])
def test_a_wheelhouse_option_naming_a_file_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    """On the command line it is the user's value: exit 2 naming the option (user walk H7)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, err = run(capsys, "wheelhouse", *command, "--wheelhouse", str(blocker))
    assert code == 2 and out == ""
    assert err.splitlines()[0] == f"error: --wheelhouse {blocker}: not a folder"


def test_wheelhouse_without_subcommand_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "wheelhouse")
    assert code == 2 and "list" in out and "prune" in out and "path" in out
