"""What ``cuda-resolve install``, ``cuda-resolve build`` and ``cuda-pip install`` share: options,
the target, the typo guard, the terminal reporter, and the run of a Plan through the executor."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._printable import printable
from ..environment import Environment
from ..errors import UsageError
from ..install.target import RULE
from . import _output
from ._common import ArchListOption

if TYPE_CHECKING:
    import weakref

    from ..install.options import InstallOptions

__all__ = ["TerminalReporter", "add_action_options", "install_options", "parse_sources"]


def add_action_options(parser: argparse.ArgumentParser, *, install: bool) -> None:
    """The options of install-like actions; ``install`` adds those that only installing has."""
    group = parser.add_argument_group("cuda-resolve")
    group.add_argument(
        "--python",
        metavar="PATH",
        help=f"the interpreter whose environment to install into; the target is: {RULE}",
    )
    group.add_argument(
        "--allow-torch-change",
        action="store_true",
        help="allow replacing the installed torch"
        if install
        else "allow building for a torch other than the installed one (put into the build's "
        "temporary overlay; the target is not changed)",
    )
    group.add_argument(
        "--strict-driver", action="store_true", help="require each CUDA toolkit's own driver"
    )
    group.add_argument(
        "--arch-list",
        metavar="LIST",
        action=ArchListOption,
        help="TORCH_CUDA_ARCH_LIST for source builds (default: the GPUs here"
        + (")" if install else ", or the --profile's)"),
    )
    group.add_argument(
        "--ptx",
        action="store_true",
        help="also embed PTX for the highest architecture (runs on newer GPUs, slower to build)",
    )
    group.add_argument(
        "--source",
        metavar="[PKG=]DIR",
        action="append",
        default=[],
        help="build from this copy of the recipe's repository instead of fetching or cloning it "
        "(air-gapped machines); repeatable",
    )
    group.add_argument(
        "--rebuild", action="store_true", help="build even when the wheelhouse has the wheel"
    )
    group.add_argument(
        "--accept-name",
        metavar="NAME",
        action="append",
        default=[],
        help=f"{'install' if install else 'build'} NAME although it is one letter away from a "
        "package cuda-resolve curates",
    )
    group.add_argument(
        "--index",
        metavar="DIR",
        type=Path,
        action="append",
        default=[],
        help="an index overlay directory (repeatable)",
    )
    group.add_argument(
        "--json", action="store_true", help="print a JSON report instead of progress"
    )
    if install:
        group.add_argument(
            "--smoke",
            action="store_true",
            help="also run each package's GPU smoke test (its kernels against plain torch)",
        )
        group.add_argument(
            "--no-verify", action="store_true", help="skip the import check after installing"
        )
        group.add_argument(
            "--repair",
            action="store_true",
            help="after torch was changed outside cuda-resolve: rebuild or re-fetch, for the "
            "installed torch, the extensions built for another one (those doctor names)",
        )
        group.add_argument(
            "--keep-stale",
            metavar="NAME",
            action="append",
            default=[],
            help="when torch is replaced, leave NAME (an extension cuda-resolve cannot rebuild) "
            "built for the old torch instead of refusing; repeatable",
        )
        group.add_argument(
            "--installer",
            choices=("auto", "pip", "uv"),
            default="auto",
            help="what installs files already here (wheelhouse wheels): auto (uv where it is "
            "installed: cuda-resolve[fast]), uv or pip; pip always installs from an index",
        )
        group.add_argument(
            "--dry-run",
            action="store_true",
            help="print the plan, the builds and the exact pip commands a run executes; "
            "change nothing",
        )
        group.add_argument(
            "--plan",
            metavar="FILE",
            type=Path,
            help="carry out a plan written earlier (cuda-resolve plan REQ... --json > FILE) after "
            "checking that the facts it was made from still hold here",
        )
    else:
        group.add_argument(
            "--dry-run",
            action="store_true",
            help="print the builds (pre-flight only); compile nothing",
        )


def parse_sources(values: Sequence[str]) -> tuple[tuple[str, Path], ...]:
    found: list[tuple[str, Path]] = []
    for value in values:
        name, sep, folder = value.partition("=")
        if not sep or os.sep in name or not name:
            name, folder = "*", value
        if not folder.strip():  # Path("") is the current folder: never build from it by accident
            raise UsageError(
                f"--source {value!r}: no folder given",
                hint="give a folder holding a copy of the recipe's repository, e.g. --source "
                "pointnet2_ops=~/src/Pointnet2_PyTorch",
            )
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise UsageError(
                f"--source {value}: {path} is not a folder",
                hint="give a folder holding a copy of the recipe's repository, e.g. --source "
                "pointnet2_ops=~/src/Pointnet2_PyTorch",
            )
        found.append((name, path.resolve()))
    return tuple(found)


def install_options(
    args: argparse.Namespace,
    *,
    pip_args: Sequence[str] = (),
    smoke: bool = False,
    verify: bool = True,
) -> InstallOptions:
    from ..config import load_config
    from ..install.options import InstallOptions

    config = load_config()
    torch_index = config.pytorch.url if config.pytorch else None
    option = config.pytorch.pip_option if config.pytorch else "--index-url"
    return InstallOptions(
        pip_args=tuple(pip_args),
        source_dirs=parse_sources(args.source),
        smoke=smoke,
        verify=verify,
        ptx=args.ptx,
        rebuild=args.rebuild,
        installer=getattr(args, "installer", "auto"),
        explicit_arch_list=bool(args.arch_list),
        torch_index=torch_index,
        torch_index_option=option,
    )


class TerminalReporter:
    """One status line for long work (compile units done / total, elapsed), a line per step.

    The status line is redrawn every second while the work is silent (a compiler can print
    nothing for minutes): the elapsed time keeps moving, so a stuck-looking screen is not."""

    TICK_SECONDS = 1.0
    #: Where stderr is not a terminal, a phase gets its first line once it has run this long.
    LOG_QUIET_SECONDS = 15.0

    def __init__(self, *, quiet: bool = False) -> None:
        import threading

        self.quiet = quiet
        self.console = _output.error_console()
        self._last_progress = 0.0
        self._live = sys.stderr.isatty()
        self._started = time.monotonic()
        self._lock = threading.Lock()
        # (label, done, total, elapsed minus the monotonic clock): elapsed now = clock + offset.
        self._status: tuple[str, int | None, int | None, float] | None = None
        self._ticker: threading.Thread | None = None

    def _clear(self) -> None:
        if self._live:
            sys.stderr.write("\r\033[K")

    def step(self, text: str) -> None:
        if self.quiet:
            return
        from rich.text import Text

        with self._lock:
            self._status = None  # a step ends the status line's work
            self._clear()
            first = f"- [{time.monotonic() - self._started:5.1f} s] "
            # A hanging indent: a long step (a log path, a URL) never wraps to column 0 or splits.
            self.console.print(
                Text(
                    _output.hanging(
                        printable(text),
                        first=first,
                        rest=" " * len(first),
                        width=self.console.width,
                    )
                ),
                soft_wrap=True,
            )

    def note(self, text: str) -> None:
        if self.quiet:
            return
        from rich.text import Text

        with self._lock:
            self._clear()
            self.console.print(
                Text(
                    _output.hanging(
                        printable(text), first="note: ", rest="      ", width=self.console.width
                    )
                ),
                style="yellow",
                soft_wrap=True,
            )
            self._last_progress = 0.0  # redraw the status line the note cleared

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        if self.quiet:
            return
        with self._lock:
            self._status = (label, done, total, elapsed - time.monotonic())
            self._draw()
        if self._ticker is None:
            import threading
            import weakref

            # The ticker holds the reporter weakly: when the command that made it is done with it,
            # the ticker ends instead of redrawing a finished status line wherever stderr points
            # by then (a test runner's capture, the next command run in the same process).
            self._ticker = threading.Thread(
                target=_tick,
                args=(weakref.ref(self), self.TICK_SECONDS),
                name="cuda-resolve-progress",
                daemon=True,
            )
            self._ticker.start()

    def _redraw(self) -> None:
        with self._lock:
            if self._status is not None:
                self._draw()

    def _draw(self) -> None:
        assert self._status is not None
        now = time.monotonic()
        if now - self._last_progress < (0.2 if self._live else 15.0):
            return
        label, done, total, offset = self._status
        if not self._live and now + offset < self.LOG_QUIET_SECONDS:
            return  # a log gets a line for a phase that lasts, not "uv: 0 s" for each one
        self._last_progress = now
        units = f"{done}/{total} compile units, " if done is not None and total else ""
        text = f"  {label}: {units}{now + offset:.0f} s"
        if self._live:
            sys.stderr.write("\r\033[K" + text[: max(20, self.console.width - 1)])
            sys.stderr.flush()
        else:
            sys.stderr.write(text + "\n")


def _tick(reporter: weakref.ref[TerminalReporter], seconds: float) -> None:
    while True:
        time.sleep(seconds)
        alive = reporter()
        if alive is None:
            return
        alive._redraw()
        del alive  # only the command keeps the reporter alive, not this loop


def describe_target(env: Environment, how: str | None) -> str:
    python = env.python.executable or sys.executable
    return f"target: {python} (Python {env.python.version}{', chosen by ' + how if how else ''})"


def base_interpreter_warning(python: str) -> str | None:
    """One line before anything else when the target is a Python installation itself."""
    from ..install.target import is_base_interpreter

    if not is_base_interpreter(python):
        return None
    return (
        f"the target {python} is a base interpreter, not a virtual environment or conda env: "
        "packages go into its own site-packages"
    )
