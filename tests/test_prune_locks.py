"""``wheelhouse prune`` never removes a wheel that a lock in the configured places names: the
config file's ``lock_paths``, each ``--keep-locked``, the pylock*.toml in the current folder. A
lock that cannot be read stops the prune before anything is removed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_wheelhouse import make_key, make_wheel
from test_wheelhouse_cli import run

from cuda_resolve.wheelhouse import StoredWheel, Wheelhouse


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "house"
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(path))
    monkeypatch.chdir(tmp_path)  # the current folder is one of the places locks are read from
    return path


def _fill(root: Path, tmp_path: Path) -> tuple[StoredWheel, StoredWheel, StoredWheel]:
    house = Wheelhouse(root)
    by_hash = house.publish(make_key(arch_list="8.0"), make_wheel(tmp_path / "a"))
    by_name = house.publish(make_key(arch_list="9.0"), make_wheel(tmp_path / "a"))
    unnamed = house.publish(
        make_key(package="other_pkg"), make_wheel(tmp_path / "b", name="other_pkg")
    )
    return by_hash, by_name, unnamed


def _wheel_line(entry: StoredWheel, *, url: str, sha256: str) -> str:
    return (
        f'{{ name = "{entry.filename}", url = "{url}", size = {entry.size}, hashes = {{ sha256 = '
        f'"{sha256}" }} }}'
    )


def write_lock(
    path: Path, by_hash: StoredWheel, by_name: StoredWheel | None, *, tool: bool = False
) -> Path:
    """A PEP 751 lock (checked by packaging.pylock) naming ``by_hash`` by its sha256 (at a mirror's
    URL, under another file name) and ``by_name`` by its file name only (with another hash)."""
    import tomllib
    from packaging.pylock import Pylock

    # another name there
    mirror = (
        f"https://mirror.example/{by_hash.key.digest}/demo_ext-{by_hash.version}-py3-none-any.whl"
    )
    text = f"""lock-version = "1.0"
created-by = "test"
extras = ["a100", "h100"]

[[packages]]
name = "demo-ext"
version = "{by_hash.version}"
marker = "'a100' in extras"
wheels = [{{ url = "{mirror}", size = {by_hash.size}, hashes = {{ sha256 = "{by_hash.sha256}" }} }}]
"""
    if by_name is not None:
        served = "https://lab.example/simple/demo-ext/" + by_name.filename.replace("+", "%2B")
        text += f"""
[[packages]]
name = "demo-ext"
version = "{by_name.version}"
marker = "'h100' in extras"
wheels = [{{ url = "{served}", size = {by_name.size}, hashes = {{ sha256 = "{"0" * 64}" }} }}]
"""
    if tool:
        text += '\n[tool.cuda-resolve]\nrequests = ["demo_ext"]\n'
    Pylock.from_dict(tomllib.loads(text))  # a valid PEP 751 file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, err = run(capsys, *argv, "--json")
    return code, json.loads(out) if code == 0 else err


def test_keep_locked_keeps_by_hash_and_by_file_name_and_removes_the_rest(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path
) -> None:
    by_hash, by_name, unnamed = _fill(root, tmp_path)
    lock = write_lock(tmp_path / "repo" / "pylock.toml", by_hash, by_name)
    code, data = run_json(
        capsys, "wheelhouse", "prune", "--all", "--keep-locked", str(lock), "--dry-run"
    )
    assert code == 0 and data["dry_run"] is True
    assert [entry["path"] for entry in data["removed"]] == [str(unnamed.path)]
    kept = {entry["path"]: entry["locks"] for entry in data["kept_by_locks"]}
    assert kept == {
        str(by_hash.path): [{"lock": str(lock), "package": "demo-ext", "match": "sha256"}],
        str(by_name.path): [{"lock": str(lock), "package": "demo-ext", "match": "file name"}],
    }
    assert data["locks"] == [{"path": str(lock), "from": "--keep-locked"}]
    assert by_hash.path.exists() and by_name.path.exists() and unnamed.path.exists()

    code, out, _ = run(capsys, "wheelhouse", "prune", "--all", "--keep-locked", str(lock))
    assert code == 0
    assert f"kept demo_ext {by_hash.version}" in out and f"named by {lock} (sha256)" in out
    assert f"kept demo_ext {by_name.version}" in out and f"named by {lock} (file name)" in out
    assert f"removed other_pkg {unnamed.version}" in out and "removed 1 wheel," in out
    assert {entry.path for entry in Wheelhouse(root).entries()} == {by_hash.path, by_name.path}
    assert not unnamed.path.exists()


def test_a_folder_of_locks_keeps_what_any_of_them_names(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path
) -> None:
    by_hash, by_name, unnamed = _fill(root, tmp_path)
    folder = tmp_path / "locks"
    write_lock(folder / "pylock.a100.toml", by_hash, None)
    write_lock(folder / "pylock.toml", by_hash, by_name, tool=True)
    (folder / "notes.toml").write_text("not a lock")  # not a PEP 751 file name: not read
    code, data = run_json(
        capsys,
        "wheelhouse",
        "prune",
        "--package",
        "demo_ext",
        "--keep-locked",
        str(folder),
        "--dry-run",
    )
    assert code == 0 and data["removed"] == []
    assert [lock["path"] for lock in data["locks"]] == [
        str(folder / "pylock.a100.toml"),
        str(folder / "pylock.toml"),
    ]
    kept = {
        entry["path"]: [ref["lock"] for ref in entry["locks"]] for entry in data["kept_by_locks"]
    }
    assert kept == {
        str(by_hash.path): [str(folder / "pylock.a100.toml"), str(folder / "pylock.toml")],
        str(by_name.path): [str(folder / "pylock.toml")],
    }
    assert unnamed.path.exists()


def test_the_config_files_lock_paths_relative_to_it(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_hash, by_name, unnamed = _fill(root, tmp_path)
    write_lock(tmp_path / "lab" / "env" / "pylock.toml", by_hash, by_name)
    config = tmp_path / "lab" / "config.toml"
    config.write_text('lock_paths = ["env"]\n')
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    code, out, _ = run(capsys, "wheelhouse", "prune", "--older-than", "0")
    assert code == 0 and "removed 1 wheel," in out
    assert (
        f"lock {tmp_path / 'lab' / 'env' / 'pylock.toml'} (lock_paths in {config}): its "
        "wheels are kept" in out
    )
    assert by_hash.path.exists() and by_name.path.exists() and not unnamed.path.exists()


def test_a_lock_in_the_current_folder(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path
) -> None:
    by_hash, by_name, unnamed = _fill(root, tmp_path)
    write_lock(tmp_path / "pylock.toml", by_hash, by_name)
    code, data = run_json(capsys, "wheelhouse", "prune", "--all")
    assert code == 0 and data["locks"] == [
        {"path": str(tmp_path / "pylock.toml"), "from": "the current folder"}
    ]
    assert [entry["path"] for entry in data["removed"]] == [str(unnamed.path)]
    assert by_hash.path.exists() and by_name.path.exists()


@pytest.mark.parametrize(
    ("breaks", "expected"),
    [
        (
            lambda text: text.replace('hashes = { sha256 = "' + "0" * 64 + '" }', "hashes = {}"),
            "packages[1].wheels[0].hashes",
        ),
        (
            lambda text: text.replace('lock-version = "1.0"', 'lock-version = "2.0"'),
            "lock-version = '2.0'",
        ),
        (lambda text: text + "[[packages]\n", "pylock.toml"),
    ],
    ids=["no hash", "newer major", "not TOML"],
)
def test_a_lock_that_cannot_be_read_stops_the_prune(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path, breaks: Any, expected: str
) -> None:
    by_hash, by_name, unnamed = _fill(root, tmp_path)
    lock = write_lock(tmp_path / "repo" / "pylock.toml", by_hash, by_name)
    lock.write_text(breaks(lock.read_text()))
    code, out, err = run(capsys, "wheelhouse", "prune", "--all", "--keep-locked", str(lock))
    message = " ".join(err.split())
    assert (
        code == 2
        and f"the lock {lock} (--keep-locked) cannot be read, so nothing was removed" in message
    )
    assert expected in message and "removed" not in out
    assert by_hash.path.exists() and by_name.path.exists() and unnamed.path.exists()


def test_a_named_lock_that_is_gone_stops_the_prune(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_hash, by_name, unnamed = _fill(root, tmp_path)
    config = tmp_path / "config.toml"
    config.write_text('lock_paths = ["/nonexistent/lab/pylock.toml"]\n')
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    code, _, err = run(capsys, "wheelhouse", "prune", "--all")
    message = " ".join(err.split())
    assert (
        code == 2
        and f"the lock /nonexistent/lab/pylock.toml (lock_paths in {config}) does not exist; "
        "nothing was removed"
        in message
    )
    assert "take it off the config file" in message
    assert by_hash.path.exists() and by_name.path.exists() and unnamed.path.exists()
    config.write_text('lock_paths = "pylock.toml"\n')
    code, _, err = run(capsys, "wheelhouse", "prune", "--all")
    assert code == 2 and "lock_paths" in err and unnamed.path.exists()
