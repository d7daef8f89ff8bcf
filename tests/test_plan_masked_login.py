"""A plan printed with a URL's password shows it as ``***`` (never the password): such a plan
file, applied, sent ``***`` to the index as the password, and the pasted "Carry it out with"
command did too (user walk 2026-12-05 F3). Now the plan's reader refuses it, naming the key and
how a login reaches pip instead; the printed command carries a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve.cli import main

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-healthy-handwritten.toml"
URL = "https://user:s3cret@example.com/wheels/foo-1.0-py3-none-any.whl"


def test_a_plan_whose_url_password_was_masked_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", f"foo @ {URL}", "--profile", str(PROFILE), "--json"]) == 0
    printed = capsys.readouterr().out
    assert "s3cret" not in printed and "user:***@example.com" in printed
    plan = tmp_path / "plan.json"
    plan.write_text(printed, encoding="utf-8")
    assert main(["apply", str(plan), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "names a URL whose password was left out (***) when the plan was printed" in err
    assert "steps[" in err and "~/.netrc" in err


def test_the_printed_command_says_its_password_is_masked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", f"foo @ {URL}", "--profile", str(PROFILE)]) == 0
    captured = capsys.readouterr()
    assert "s3cret" not in captured.out + captured.err
    assert "note: a password in the command is shown as ***" in captured.err


def test_a_url_without_a_login_is_applied_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = URL.replace("user:s3cret@", "")
    assert main(["plan", f"foo @ {bare}", "--profile", str(PROFILE), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(document), encoding="utf-8")
    main(["apply", str(plan), "--dry-run"])
    assert "password was left out" not in capsys.readouterr().err
