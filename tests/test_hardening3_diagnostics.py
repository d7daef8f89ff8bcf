"""Diagnostics that name the real failure: a failed import check names the module that did not
import and its exception (not the last line of stderr, which may be a warning), a crash names
the module being imported, and nothing a child prints (terminal escape sequences, carriage
returns, bidi overrides) reaches the terminal raw, in errors, hints, steps or notes.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cuda_resolve._printable import printable
from cuda_resolve.build.diagnose import error_lines
from cuda_resolve.cli import _output
from cuda_resolve.cli._act import TerminalReporter
from cuda_resolve.errors import BuildError, InstallError
from cuda_resolve.install.transaction import _verify_imports
from cuda_resolve.install.verify import verify_imports

ESCAPES = "\x1b[2J\x1b]0;owned\x07\x1b[31m\r\u202e"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")


def modules(tmp_path: Path, **sources: str) -> dict[str, str]:
    """An environment whose interpreter finds ``sources`` (module name -> code) on its path."""
    folder = tmp_path / "site"
    folder.mkdir(exist_ok=True)
    for name, code in sources.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    return {**os.environ, "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}


def test_the_failed_module_and_its_exception_are_named_not_the_last_warning(tmp_path: Path) -> None:
    environ = modules(
        tmp_path,
        fine="import sys; print('UserWarning: the driver is old', file=sys.stderr)",
        broken=f"""
            import atexit, sys
            # a warning printed after the failure: the last line of stderr
            atexit.register(lambda: print(
                "WARNING: CUDA initialization: the NVIDIA driver is too old", file=sys.stderr))
            sys.stdout.write({ESCAPES!r} + "half a line, no newline")
            raise ImportError(
                "libc10_cuda.so: cannot open shared object file: No such file or directory")
        """,
        later="raise RuntimeError('never imported')",
    )
    failure = _verify_imports(sys.executable, ["fine", "broken", "later"], environ)
    assert (
        failure
        == "broken: ImportError: libc10_cuda.so: cannot open shared object file: No such file "
        "or directory"
    )
    assert _verify_imports(sys.executable, ["fine"], environ) is None


def test_an_exception_message_full_of_escapes_is_shown_printable(tmp_path: Path) -> None:
    environ = modules(
        tmp_path,
        evil=f"raise RuntimeError({('bad' + ESCAPES + 'tail' + chr(10) + 'second line')!r})",
    )
    failure = verify_imports(sys.executable, ["evil"], environ, timeout=60)
    assert failure is not None and failure.module == "evil"
    assert str(failure).startswith("evil: RuntimeError: bad\\x1b[2J\\x1b]0;owned\\x07")
    assert "tail / second line" in str(failure) and not RAW.search(str(failure))


def test_a_crash_or_an_exit_while_importing_names_the_module(tmp_path: Path) -> None:
    environ = modules(
        tmp_path, ok="", segv="import ctypes; ctypes.string_at(0)", leaves="import os; os._exit(3)"
    )
    crashed = verify_imports(sys.executable, ["ok", "segv"], environ, timeout=60)
    assert str(crashed) == "segv: the interpreter crashed with SIGSEGV while importing it"
    left = verify_imports(sys.executable, ["ok", "leaves", "segv"], environ, timeout=60)
    assert str(left) == "leaves: the interpreter ended with exit 3 while importing it"


def test_an_interpreter_that_prints_garbage_is_never_echoed_raw(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nprintf '%s' {ESCAPES!r}\nprintf 'garbage\\033[0m' >&2\nexit 1\n")
    fake.chmod(0o755)
    failure = verify_imports(str(fake), ["kaolin"], dict(os.environ), timeout=60)
    assert str(failure) == "the interpreter ended with exit 1 before importing anything (kaolin)"
    assert str(
        verify_imports(str(tmp_path / "missing"), ["kaolin"], dict(os.environ), timeout=60)
    ).endswith("could not be started for the import check")


def test_errors_steps_and_notes_show_a_childs_output_printable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # pip's or a compiler's last lines quoted in an error, a hint naming a log
    error = InstallError(f"pip install failed: ERROR: {ESCAPES}", hint=f"see {ESCAPES}")
    assert not RAW.search(error.message) and not RAW.search(error.hint or "")
    assert "ERROR: \\x1b[2J" in str(error)
    _output.report_error(BuildError(f"nvcc said {ESCAPES}"), as_json=False)
    reporter = TerminalReporter()
    reporter.step(f"building: {ESCAPES}")
    reporter.note(f"pip: {ESCAPES}")
    shown = capsys.readouterr().err
    assert "nvcc said \\x1b[2J" in shown and "building: \\x1b[2J" in shown and "pip: \\x1b" in shown
    assert not RAW.search(shown.replace("\r\x1b[K", "")), repr(
        shown
    )  # the reporter's own line clearing aside


def test_the_status_ticker_ends_with_the_reporter_that_started_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command done with its reporter leaves no thread redrawing its last status line (in one
    process running commands one after another, that line landed in the next one's stderr)."""
    import gc
    import threading

    monkeypatch.setattr(TerminalReporter, "TICK_SECONDS", 0.05)
    reporter = TerminalReporter()
    reporter._live = False
    reporter.progress("pip", None, None, 0.0)
    ticker = reporter._ticker
    assert ticker is not None and ticker.is_alive()
    time.sleep(0.2)
    assert ticker.is_alive()  # ticking while the reporter is in use
    del reporter
    gc.collect()
    ticker.join(timeout=2)
    assert not ticker.is_alive()
    assert "cuda-resolve-progress" not in [thread.name for thread in threading.enumerate()]
    capsys.readouterr()


def test_printable_keeps_text_and_escapes_only_controls() -> None:
    text = "ümlaut 日本 tab\there\nnext line"
    assert printable(text) == text
    assert printable("a\x1b[0mb\x9bc\x7f\u2066") == "a\\x1b[0mb\\x9bc\\x7f\\u2066"
    assert printable("a\nb\tc", one_line=True) == "a\\x0ab\\x09c"


def test_reading_a_build_log_stays_linear_on_a_long_blank_line() -> None:
    started = time.process_time()
    picked = error_lines([" " * 40_000 + "error: x", "\t" * 40_000, "fatal: y"])
    assert time.process_time() - started < 0.5
    assert picked[-1] == "fatal: y"
