"""The typo guard's question, asked at a real terminal: ``cuda-pip install kaolinn`` run on a
pseudo-terminal asks whether 'kaolinn' (one letter from kaolin, which cuda-resolve curates) is
meant, and hands the name to pip only on yes.

The target is a real venv whose ``pip`` is a recorder: ``python -m pip ...`` writes its arguments
to a file and exits 0, so "proceeds" and "nothing reached pip" are both observable, nothing is
downloaded and nothing is installed. No network, no GPU.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

if not hasattr(os, "openpty"):
    pytest.skip("needs a pseudo-terminal (POSIX)", allow_module_level=True)

_RECORD_ENV = "CUDA_RESOLVE_TEST_PIP_RECORD"
_PROMPT_END = "[y/N] "
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_SECONDS = 60.0

# A pip that records what it was asked and does nothing: the argv of each run, one per line,
# then a blank line.
_FAKE_PIP_MAIN = f"""\
import os, sys
with open(os.environ[{_RECORD_ENV!r}], "a", encoding="utf-8") as record:
    record.write("\\n".join(sys.argv[1:]) + "\\n\\n")
"""


@pytest.fixture(scope="module")
def recording_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv (no real pip) whose ``pip`` reports version 25.0 and records its arguments."""
    folder = tmp_path_factory.mktemp("recording-target") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    package = Path(purelib) / "pip"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(_FAKE_PIP_MAIN)
    info = Path(purelib) / "pip-25.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pip\nVersion: 25.0\n")
    return python


@dataclass(frozen=True)
class Session:
    returncode: int
    screen: str  # everything the terminal showed, escape sequences removed
    pip_runs: list[list[str]]  # the argv of each run of the target's pip


def _environ(record: Path) -> dict[str, str]:
    environ = dict(os.environ, TERM="xterm", COLUMNS="200")
    environ[_RECORD_ENV] = str(record)
    environ.pop("VIRTUAL_ENV", None)
    return environ


def _pip_runs(record: Path) -> list[list[str]]:
    if not record.exists():
        return []
    runs = [run.split("\n") for run in record.read_text().split("\n\n") if run]
    # `pip config debug`: cuda-pip reading pip's configuration (hash mode, trusted hosts), not a run
    # that acts.
    return [run for run in runs if "config" not in run[:2]]


def _at_terminal(args: list[str], record: Path, *, answer: bytes | None) -> Session:
    """Run ``cuda-pip ARGS`` with stdin, stdout and stderr on a pseudo-terminal; once the question
    is on the screen type ``answer`` (None: expect no question and type nothing)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "pip_plugin", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=_environ(record),
            start_new_session=True,
        )
    finally:
        os.close(slave)
    seen = b""
    typed = False
    deadline = time.monotonic() + _SECONDS
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal's other end is gone
                    break
                if not chunk:
                    break
                seen += chunk
            if not typed and _PROMPT_END in _clean(seen):
                if answer is None:
                    pytest.fail(f"an unexpected question; the terminal showed:\n{_clean(seen)}")
                os.write(master, answer)
                typed = True
        else:
            pytest.fail(
                f"cuda-pip still running after {_SECONDS:.0f} s; the terminal "
                f"showed:\n{_clean(seen)}"
            )
        returncode = process.wait(timeout=_SECONDS)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.wait()
        os.close(master)
    if answer is not None:
        assert typed, f"no question was asked; the terminal showed:\n{_clean(seen)}"
    return Session(returncode, _clean(seen), _pip_runs(record))


def _clean(raw: bytes) -> str:
    return (
        _ANSI.sub("", raw.decode("utf-8", errors="replace")).replace("\r\n", "\n").replace("\r", "")
    )


def _install_kaolinn(python: Path) -> list[str]:
    # --no-verify: the recording pip installs nothing, so there is nothing to import afterwards.
    return ["install", "kaolinn", "--python", str(python), "--no-verify"]


def _question(screen: str) -> str:
    lines = [line for line in screen.splitlines() if _PROMPT_END.strip() in line]
    assert len(lines) == 1, screen
    return lines[0]


@pytest.mark.parametrize("answer", [b"y\n", b"yes\n", b"Y\n"])
def test_yes_at_the_terminal_hands_the_confirmed_name_to_pip(
    tmp_path: Path, recording_target: Path, answer: bytes
) -> None:
    record = tmp_path / "pip-runs"
    session = _at_terminal(_install_kaolinn(recording_target), record, answer=answer)
    assert session.returncode == 0, session.screen
    question = _question(session.screen)
    assert "'kaolinn' is not kaolin" in question and "Install 'kaolinn'" in question
    [run] = session.pip_runs  # one pip run, the install
    assert run[0] == "install" and run[-1] == "kaolinn", run
    assert "kaolin" not in run  # the confirmed name, not the curated one it resembles
    assert "Traceback" not in session.screen


@pytest.mark.parametrize(
    "answer", [b"n\n", b"no\n", b"\n", b"yy\n", b"sure\n"], ids=["n", "no", "enter", "yy", "sure"]
)
def test_anything_but_yes_refuses_and_nothing_reaches_pip(
    tmp_path: Path, recording_target: Path, answer: bytes
) -> None:
    record = tmp_path / "pip-runs"
    session = _at_terminal(_install_kaolinn(recording_target), record, answer=answer)
    assert session.returncode == 2, session.screen
    _question(session.screen)
    assert session.pip_runs == []
    after = session.screen.split(_PROMPT_END, 1)[1]
    assert "error: 'kaolinn' is one letter away from 'kaolin': did you mean kaolin?" in after
    assert "--accept-name kaolinn" in after
    assert "Traceback" not in session.screen


def test_end_of_input_at_the_question_refuses(tmp_path: Path, recording_target: Path) -> None:
    record = tmp_path / "pip-runs"
    session = _at_terminal(_install_kaolinn(recording_target), record, answer=b"\x04")  # Ctrl-D
    assert session.returncode == 2, session.screen
    _question(session.screen)
    assert session.pip_runs == []
    assert "did you mean kaolin?" in session.screen.split(_PROMPT_END, 1)[1]
    assert "Traceback" not in session.screen


def test_without_a_terminal_there_is_no_question_and_a_piped_yes_is_not_consent(
    tmp_path: Path, recording_target: Path
) -> None:
    record = tmp_path / "pip-runs"
    done = subprocess.run(
        [sys.executable, "-m", "pip_plugin", *_install_kaolinn(recording_target)],
        input="y\n",
        capture_output=True,
        text=True,
        env=_environ(record),
        timeout=_SECONDS,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert _PROMPT_END not in done.stderr and _PROMPT_END not in done.stdout
    assert "did you mean kaolin?" in done.stderr
    assert (
        "hint: to install kaolin: cuda-pip install kaolin; to install 'kaolinn' as written: add "
        "--accept-name kaolinn" in done.stderr
    )
    assert _pip_runs(record) == []


def test_json_at_a_terminal_asks_nothing(tmp_path: Path, recording_target: Path) -> None:
    """--json is for programs: no question on their terminal, the refusal is the JSON error."""
    record = tmp_path / "pip-runs"
    session = _at_terminal([*_install_kaolinn(recording_target), "--json"], record, answer=None)
    assert session.returncode == 2, session.screen
    assert _PROMPT_END not in session.screen
    assert "did you mean kaolin?" in session.screen
    assert session.pip_runs == []


def test_the_recording_pip_records(tmp_path: Path, recording_target: Path) -> None:
    """The other tests' "nothing reached pip" means something: --accept-name gets the name to it."""
    record = tmp_path / "pip-runs"
    session = _at_terminal(
        [*_install_kaolinn(recording_target), "--accept-name", "kaolinn"], record, answer=None
    )
    assert session.returncode == 0, session.screen
    assert _PROMPT_END not in session.screen
    assert [run[-1] for run in session.pip_runs] == ["kaolinn"]
