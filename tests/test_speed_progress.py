"""No silent minute (issue 28): a build's long phases show on the terminal while they run.

The compile progress is labelled with the package and the source file a unit compiles (read from
recorded ``pip wheel -v`` output of pointnet2_ops: torch's ninja lines carry ``-c -c FILE``, and
the label once showed the ``-c``), the link after the last unit is said as "linking NAME: N s",
and a phase that prints nothing (the build overlay's pip install of torch, the link) keeps a
status line that ticks on a terminal: the tests wait on an event, not on a tuned sleep.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from test_builder_runner import USER_ENV, _spec, _value, _write_wheel

from cuda_resolve.build.builder import build
from cuda_resolve.build.runner import compiled_source, linked_library
from cuda_resolve.cli._act import TerminalReporter
from cuda_resolve.install.pip import TargetPip
from cuda_resolve.wheelhouse.store import Wheelhouse

RECORDED = Path(__file__).parent / "data" / "recorded" / "build" / "pointnet2_ops-pip-wheel-v.txt"
UNITS = [
    "ball_query.cpp",
    "ball_query_gpu.cu",
    "bindings.cpp",
    "group_points.cpp",
    "group_points_gpu.cu",
    "interpolate.cpp",
    "interpolate_gpu.cu",
    "sampling.cpp",
    "sampling_gpu.cu",
]
LIBRARY = "_ext.cpython-311-x86_64-linux-gnu.so"
#: The longest a phase may stay silent on a terminal.
SILENCE_LIMIT = 15.0


def _recorded() -> list[str]:
    return RECORDED.read_text(encoding="utf-8").splitlines()


def test_each_recorded_ninja_line_names_the_source_it_compiles_not_an_nvcc_argument() -> None:
    ninja = [line for line in _recorded() if re.match(r"^\s*\[\d+/\d+\]", line)]
    assert [compiled_source(line) for line in ninja] == UNITS
    assert all(" -c -c " in line for line in ninja)  # the shape that gave the label "(-c)"
    assert compiled_source("[3/9] c++ -MMD -c -o x.o") == ""  # no source named: no unit
    links = [linked_library(line) for line in _recorded()]
    assert [name for name in links if name] == [LIBRARY]


class _Replay:
    """A ProcessRunner playing pip: ``install --target`` makes the folder after ``on_install``
    returns, ``wheel`` replays the recorded output, calling ``on_link`` after the link line."""

    def __init__(
        self,
        on_install: Callable[[], None] = lambda: None,
        on_link: Callable[[], None] = lambda: None,
    ) -> None:
        self.on_install = on_install
        self.on_link = on_link

    def __call__(
        self,
        command: Sequence[str],
        *,
        environ: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        if command[3] == "install":
            self.on_install()
            Path(_value(command, "--target")).mkdir(parents=True, exist_ok=True)
            return 0, []
        out = Path(_value(command, "-w"))
        out.mkdir(parents=True, exist_ok=True)
        for line in _recorded():
            on_line(line)
            if linked_library(line):
                self.on_link()
        _write_wheel(out / "fakeext-1.0-cp311-cp311-linux_x86_64.whl")
        return 0, []


class _Progress:
    def __init__(self) -> None:
        self.labels: list[tuple[str, int | None, int | None]] = []
        self.steps: list[str] = []

    def step(self, text: str) -> None:
        self.steps.append(text)

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        self.labels.append((label, done, total))

    def note(self, text: str) -> None:
        pass


def _run_build(tmp_path: Path, runner: _Replay, reporter: object) -> None:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    build(
        _spec(),
        Wheelhouse(tmp_path / "wheelhouse"),
        source_dir=source,
        installed={"setuptools": "65.5.0"},
        environ=USER_ENV,
        reporter=reporter,  # type: ignore[arg-type]
        pip=TargetPip(
            "/target/bin/python", environ=USER_ENV, log_path=tmp_path / "pip.log", runner=runner
        ),
    )


def test_compile_progress_is_labelled_with_the_package_and_its_unit_then_linking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    seen = _Progress()
    _run_build(tmp_path, _Replay(), seen)
    units = [(label, done) for label, done, total in seen.labels if total == 9]
    shown = [label.removeprefix("fakeext 1.0 (").removesuffix(")") for label, _ in units]
    assert all(label.startswith("fakeext 1.0 (") for label, _ in units), units
    assert all(name in UNITS for name in shown), shown  # never "-c" or another nvcc word
    # ninja in a pipe prints a unit's line once it finished: after the ninth, the link runs.
    assert list(dict.fromkeys(shown)) == UNITS[:-1]
    after = [label for label, done, total in seen.labels if total is None and "linking" in label]
    # The link is said from the last unit on, then with the library its command names.
    assert list(dict.fromkeys(after)) == [
        "fakeext 1.0: linking the extension",
        f"fakeext 1.0: linking {LIBRARY}",
    ], after
    overlay = [label for label, _, _ in seen.labels if "into the build overlay" in label]
    assert overlay[0] == "fakeext 1.0: installing torch into the build overlay"
    assert any(
        s.startswith("fakeext 1.0: installed torch into the build overlay in ") for s in seen.steps
    ), seen.steps


class _Terminal:
    """stderr on a terminal: every status line drawn, and an event set once a line matching
    ``wanted`` shows an elapsed time of at least 1 s (the ticker redrew it: nothing else did)."""

    def __init__(self, wanted: str) -> None:
        self.wanted = re.compile(re.escape(wanted) + r".*: (\d+) s$")
        self.ticked = threading.Event()
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            for part in re.split(r"\r\x1b\[K|\n", text):
                if not part:
                    continue
                self.lines.append(part)
                found = self.wanted.search(part)
                if found and int(found.group(1)) >= 1:
                    self.ticked.set()
        return len(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError("not a real terminal")


@pytest.mark.parametrize("phase", ["overlay", "link"])
def test_a_silent_phase_ticks_on_the_terminal_within_15_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    """The fake pip says nothing during the phase until the terminal showed the phase's status
    line redrawn with a moving elapsed time (or 15 s passed: the test fails)."""
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "400")
    wanted = "installing torch into the build overlay" if phase == "overlay" else "linking _ext"
    terminal = _Terminal(wanted)
    monkeypatch.setattr(sys, "stderr", terminal)
    waited: list[bool] = []

    def silent() -> None:  # the phase: silent until the ticker showed it moving
        waited.append(terminal.ticked.wait(SILENCE_LIMIT))

    runner = _Replay(on_install=silent) if phase == "overlay" else _Replay(on_link=silent)
    reporter = TerminalReporter()
    _run_build(tmp_path, runner, reporter)
    assert waited == [True] * len(waited) and waited, (
        f"no ticking {wanted!r} line within {SILENCE_LIMIT} s: {terminal.lines[-5:]}"
    )


def test_a_log_gets_a_line_for_a_phase_that_lasts_not_a_zero_for_each_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Where stderr is not a terminal (a log, a CI job), the status line was written once per
    phase at "uv: 0 s" and never again for a phase of seconds: noise that looked stuck (user walk
    2026-12-05 F10). A phase gets a line once it has run 15 s, then one each 15 s."""
    reporter = TerminalReporter()
    reporter.progress("uv", None, None, 0.0)
    reporter.progress("uv", None, None, 5.5)
    assert capsys.readouterr().err == ""
    reporter.progress("uv", None, None, 16.0)
    assert capsys.readouterr().err == "  uv: 16 s\n"
