"""The CLI's boundary: an unexpected exception is one `error:` line and a hint to report it,
`--debug` (global, anywhere on the line) shows the traceback, Ctrl-C is 130 with one line."""

from __future__ import annotations

import argparse
import json

import pytest

from cuda_resolve.cli import main

SECRET_URL = "https://lab:s3cret@mirror.example/simple/"


def _raising(exc: BaseException) -> object:
    def handler(args: argparse.Namespace) -> object:
        raise exc

    return handler


@pytest.fixture
def broken_detect(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import cuda_resolve.cli.detect as detect_cli

    monkeypatch.setattr(
        detect_cli, "environment_from_args", _raising(RuntimeError(f"boom at {SECRET_URL}"))
    )
    return monkeypatch


def test_an_unexpected_exception_is_one_error_line_with_a_report_hint(
    broken_detect: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["detect"]) == 70
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 2, err
    assert (
        lines[0] == "error: unexpected RuntimeError: boom at https://lab:***@mirror.example/simple/"
    )
    assert lines[1].startswith("hint: this is a bug in cuda-resolve") and "--debug" in lines[1]
    assert "Traceback" not in err and "s3cret" not in err


@pytest.mark.parametrize(
    "argv", [["--debug", "detect"], ["detect", "--debug"]], ids=["before", "after"]
)
def test_debug_shows_the_traceback(
    argv: list[str], broken_detect: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 70
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "RuntimeError" in err and err.splitlines()[-1].startswith(
        "error: unexpected RuntimeError: boom"
    )


def test_debug_also_shows_where_an_expected_error_came_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["detect", "--profile", "/nonexistent/profile.toml", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "error: /nonexistent/profile.toml: no such file" in err


def test_an_unexpected_exception_with_json_is_a_json_error(
    broken_detect: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["detect", "--json"]) == 70
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["error"].startswith("unexpected RuntimeError: boom") and "s3cret" not in out
    assert "bug" in data["hint"] and err == ""


@pytest.mark.parametrize(
    "exc",
    [RecursionError("maximum recursion depth exceeded"), MemoryError(), ValueError("x" * 5000)],
    ids=["recursion", "memory", "long-message"],
)
def test_every_kind_of_unexpected_exception_is_one_short_line(
    exc: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import cuda_resolve.cli.detect as detect_cli

    monkeypatch.setattr(detect_cli, "environment_from_args", _raising(exc))
    assert main(["detect"]) == 70
    lines = capsys.readouterr().err.splitlines()
    assert (
        len(lines) == 2
        and lines[0].startswith(f"error: unexpected {type(exc).__name__}")
        and len(lines[0]) < 400
    )


def test_ctrl_c_inside_a_command_is_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import cuda_resolve.cli.detect as detect_cli

    monkeypatch.setattr(detect_cli, "environment_from_args", _raising(KeyboardInterrupt()))
    assert main(["detect"]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_debug_is_listed_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "--debug" in capsys.readouterr().out
