"""The CLI's one error boundary: bad input gives one `error:` line, a `hint:` line, exit 2.

With --json the same error is a JSON object on stdout. Never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cuda_resolve.cli import main

BAD_PROFILES = {
    "malformed.toml": ("[python\nversion = '3.10'\n", "not valid TOML"),
    "unknown-top.toml": ('colour = "red"\n[python]\nversion = "3.10"\n', "colour: unknown key"),
    "unknown-nested.toml": (
        '[python]\nversion = "3.10"\n[[gpu]]\ncompute_capability = "8.6"\ncc = '
        '"8.6"\n[driver]\nversion = "535.104.05"\ncuda = "12.2"\n',
        "gpu[0].cc: unknown key",
    ),
    "bad-driver.toml": (
        '[python]\nversion = "3.10"\n[driver]\nversion = "abc"\n',
        "driver.version = 'abc'",
    ),
    "bad-cuda.toml": (
        '[python]\nversion = "3.10"\n[driver]\nversion = "535.104.05"\ncuda = "12"\n',
        "driver.cuda = '12'",
    ),
    "bad-cc.toml": (
        '[python]\nversion = "3.10"\n[driver]\nversion = "535.104.05"\ncuda = '
        '"12.2"\n[[gpu]]\ncompute_capability = "8.x"\n',
        "gpu[0].compute_capability = '8.x'",
    ),
    "wrong-type.toml": ("[python]\nversion = 3.10\n", "python.version = 3.1: expected a string"),
    "no-python.toml": ('[machine]\nos = "linux"\n', "python: is required but missing"),
    "no-python-version.toml": (
        '[python]\nimplementation = "cpython"\n',
        "python.version: is required but missing",
    ),
}

COMMANDS = ["doctor", "detect"]


def _write(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_text(BAD_PROFILES[name][0], encoding="utf-8")
    return path


def _assert_one_error(err: str, *needles: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("error: ")
    assert lines[1].startswith("hint: ")
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in err


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", sorted(BAD_PROFILES))
def test_bad_profile(
    command: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, name)
    assert main([command, "--profile", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    _assert_one_error(err, f"error: {path}: ", BAD_PROFILES[name][1])


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", sorted(BAD_PROFILES))
def test_bad_profile_json(
    command: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, name)
    assert main([command, "--profile", str(path), "--json"]) == 2
    out, err = capsys.readouterr()
    assert err == ""
    data = json.loads(out)
    assert set(data) == {"error", "hint"}
    assert data["error"].startswith(f"{path}: ")
    assert BAD_PROFILES[name][1] in data["error"]
    assert isinstance(data["hint"], str) and data["hint"]


def test_unknown_key_hint_lists_known_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "unknown-nested.toml")
    main(["doctor", "--profile", str(path)])
    hint = capsys.readouterr().err.splitlines()[1]
    assert "compute_capability" in hint and "name" in hint


def test_missing_profile_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nope.toml"
    assert main(["doctor", "--profile", str(path)]) == 2
    _assert_one_error(capsys.readouterr().err, f"{path}: no such file")


def test_profile_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--profile", str(tmp_path)]) == 2
    _assert_one_error(capsys.readouterr().err, f"{tmp_path}: is a directory")


def test_missing_profile_file_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["detect", "--profile", str(tmp_path / "nope.toml"), "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert "no such file" in data["error"]
    assert "--save-profile" in data["hint"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["doctor", "--bogus"], "unrecognized arguments: --bogus"),
        (["doctor", "--profile"], "--profile"),
        (["nonsense"], "invalid choice: 'nonsense'"),
        (["detect", "--save-profile"], "--save-profile"),
    ],
)
def test_bad_usage(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    _assert_one_error(err, needle)
    assert "--help" in err.splitlines()[1]


def test_bad_usage_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json", "--bogus"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert "--bogus" in data["error"]
    assert "--help" in data["hint"]


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    assert "usage: cuda-resolve" in out
    assert "doctor" in out


def test_help_and_version_return_zero_instead_of_exiting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cuda_resolve.cli import main

    assert main(["--version"]) == 0
    assert "cuda-resolve" in capsys.readouterr().out
    assert main(["plan", "--help"]) == 0
    assert "--explain" in capsys.readouterr().out


def test_ambiguous_two_digit_variant_is_rejected() -> None:
    from cuda_resolve.versions import CudaVersion

    with pytest.raises(ValueError, match="ambiguous"):
        CudaVersion.parse("cu12")
    assert str(CudaVersion.parse("cu92")) == "9.2"


def test_profile_and_python_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuda_resolve.cli import main

    profile = tmp_path / "p.toml"
    profile.write_text('[python]\nversion = "3.11.9"\n')
    assert main(["plan", "torch", "--profile", str(profile), "--python", sys.executable]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: --profile") and "cannot be combined" in err[0]
    assert err[1].startswith("hint: ")


def test_an_invalid_requirement_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from cuda_resolve.cli import main

    assert (
        main(
            [
                "plan",
                "torch>=",
                "--profile",
                str(Path(__file__).parent / "data/profiles/cpu-ci-no-driver.toml"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("error: requirement 'torch>=' is not valid")
