"""Broken index directories: each case under tests/data/index/invalid/ is a directory ``index/``
and an ``expected.toml`` saying which file, key path, value and message the error must name.

``stage = "load"`` (default) cases must fail to load with IndexDataError; ``stage = "validate"``
cases load (their cross references are only checked by ``index validate``). Both kinds must be
reported by :func:`validate_directory`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_resolve._toml import parse_toml_text
from cuda_resolve.errors import IndexDataError, UsageError
from cuda_resolve.index.load import load_index, validate_directory

CASES = Path(__file__).parent / "data" / "index" / "invalid"
CASE_DIRS = sorted(p for p in CASES.iterdir() if p.is_dir())


@pytest.fixture(autouse=True)
def _no_user_overlays(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CUDA_RESOLVE_INDEX_PATH", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def _expected(case: Path) -> dict[str, str]:
    path = case / "expected.toml"
    table = parse_toml_text(path.read_text(encoding="utf-8"), origin=str(path), error=UsageError)
    data = {str(key): str(value) for key, value in table.data.items()}
    assert data.get("why"), f"{case.name}: expected.toml needs a one-line 'why'"
    return data


def _check_message(message: str, case: Path, expected: dict[str, str]) -> None:
    assert str(case / "index" / expected["file"]) in message, message
    if "path" in expected:
        assert f": {expected['path']}" in message, message
    if "value" in expected:
        assert expected["value"] in message, message
    assert expected["message"] in message, message


def test_there_are_cases() -> None:
    assert len(CASE_DIRS) >= 20


@pytest.mark.parametrize("case", CASE_DIRS, ids=lambda p: p.name)
def test_load_reports_file_path_and_value(case: Path) -> None:
    expected = _expected(case)
    if expected.get("stage", "load") == "validate":
        index = load_index([case / "index"], include_user=False)
        assert index.package("demo") is not None  # the file itself is well-formed
        return
    with pytest.raises(IndexDataError) as info:
        load_index([case / "index"], include_user=False)
    _check_message(info.value.message, case, expected)
    assert info.value.hint  # every index error says where the format is documented
    assert info.value.exit_code == 2


@pytest.mark.parametrize("case", CASE_DIRS, ids=lambda p: p.name)
def test_validate_lists_the_problem(case: Path) -> None:
    expected = _expected(case)
    problems = validate_directory(case / "index")
    assert any(expected["message"] in problem for problem in problems), problems
    matching = next(problem for problem in problems if expected["message"] in problem)
    _check_message(matching, case, expected)


def test_validate_collects_problems_of_every_file(tmp_path: Path) -> None:
    (tmp_path / "packages").mkdir()
    (tmp_path / "cuda.toml").write_text(
        '[toolkit."12.4"]\ngcc_max = "x"\nsource = "s"\n', encoding="utf-8"
    )
    (tmp_path / "packages" / "a.toml").write_text(
        '[package]\nname = "a"\nbogus = 1\n', encoding="utf-8"
    )
    problems = validate_directory(tmp_path)
    assert len(problems) == 2
    assert any("cuda.toml: toolkit.12.4.gcc_max = 'x'" in p for p in problems)
    assert any("a.toml: package.bogus: unknown key" in p for p in problems)


def test_validate_a_missing_directory_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        validate_directory(tmp_path / "absent")


def test_explicit_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(IndexDataError, match="not a directory"):
        load_index([tmp_path / "absent"], include_user=False)


def test_two_files_in_one_directory_define_one_package(tmp_path: Path) -> None:
    (tmp_path / "packages").mkdir()
    for stem in ("a", "b"):
        (tmp_path / "packages" / f"{stem}.toml").write_text(
            '[package]\nname = "Demo_Pkg"\n', encoding="utf-8"
        )
    with pytest.raises(
        IndexDataError,
        match=r"b\.toml: package\.name = 'Demo_Pkg': .*a\.toml in the same directory",
    ):
        load_index([tmp_path], include_user=False)


def test_conflicting_source_keys_in_one_directory(tmp_path: Path) -> None:
    (tmp_path / "cuda.toml").write_text('[sources]\nk = "one text"\n', encoding="utf-8")
    (tmp_path / "torch.toml").write_text('[sources]\nk = "another text"\n', encoding="utf-8")
    with pytest.raises(
        IndexDataError, match=r"sources\.k: is also defined, differently, in .*cuda\.toml"
    ):
        load_index([tmp_path], include_shipped=False, include_user=False)
