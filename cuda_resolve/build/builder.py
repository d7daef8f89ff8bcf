"""One source build, start to finish: wheelhouse lookup, source, overlay, ``pip wheel``, publish.

The wheelhouse key's lock is held from the lookup to the publish, so two processes asked for the
same build produce one wheel: the second waits, then finds the first one's wheel. Everything is
built in a temporary folder that is removed afterwards; only the log (its path is printed) and
the published wheel remain.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._frozen import frozen
from ..errors import BuildError
from ..install.pip import TargetPip
from ..paths import new_log_path
from ..redaction import redact_urls
from ..reporting import NullReporter, Reporter
from ..wheelhouse.key import WheelKey
from ..wheelhouse.store import StoredWheel, Wheelhouse
from .buildenv import BuildEnvironment, machine_capacity, make_build_environment
from .key import keyed_to_source, wheel_key
from .preflight import BuildSpec
from .source import PreparedSource, describe_source, prepare_source, source_identity

if TYPE_CHECKING:
    from ..net import HttpClient
    from .runner import BuildProgress, ProcessRunner

# .runner (with the process-group and diagnosis code) is imported where a build runs; a plan
# takes wheel_key from .key, without this module and the wheelhouse store (issue 28).

__all__ = ["BuildResult", "build", "wheel_key"]


@frozen
class BuildResult:
    spec: BuildSpec
    wheel: StoredWheel
    cache_hit: bool
    seconds: float
    log: Path | None
    variables: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()


#: Ctrl-C presses a removal of the build folder survives before it gives up.
_REMOVAL_ATTEMPTS = 3


def _remove(folder: Path) -> None:
    """Remove the build's folder even when Ctrl-C (or SIGTERM, SIGHUP) arrives again while it is
    being removed (a second interrupt would otherwise leave half of it in the temporary
    directory); the first interrupt is raised once the folder is gone, as it was."""
    caught: KeyboardInterrupt | None = None
    for _ in range(_REMOVAL_ATTEMPTS):  # bounded: a removal that hangs (NFS) can still be stopped
        try:
            shutil.rmtree(folder, ignore_errors=True)
            break
        except KeyboardInterrupt as exc:
            caught = caught or exc
    if caught is not None:
        raise caught


def build(
    spec: BuildSpec,
    wheelhouse: Wheelhouse,
    *,
    source_dir: Path | None = None,
    installed: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
    reporter: Reporter | None = None,
    rebuild: bool = False,
    client: HttpClient | None = None,
    archive_cache: Path | None = None,
    pip: TargetPip | None = None,
    runner: ProcessRunner | None = None,
    pip_options: Sequence[str] = (),
    key: WheelKey | None = None,
) -> BuildResult:
    """The wheel for ``spec``: from the wheelhouse when it is there, else built and published.

    ``installed`` is the target's distributions (canonical name -> version), read once by the
    caller; build requirements it does not satisfy go into the build's overlay. ``client`` and
    ``archive_cache`` fetch and keep a recipe's source archive (defaults: the configuration's
    client, ``<cache root>/sources``). ``key`` is the plan's wheel key for the build (default:
    computed from ``spec``).

    As pypa/build's builder takes its runner, this one takes how it runs programs: ``pip`` is
    the target's :class:`~cuda_resolve.install.pip.TargetPip` (its interpreter, environment,
    trust options, redaction, log), which runs every pip call of the build: the overlay's
    installs and ``pip wheel``. Without one, a TargetPip of ``spec.python`` with no trust options
    runs them through ``runner`` (a :class:`~.runner.ProcessRunner`; default: the logged runner).
    ``pip_options`` are the user's pip options for the overlay's installs
    (:func:`~.buildenv.overlay_options` drops those that choose where or what pip installs)."""
    report = reporter or NullReporter()
    base_environ = dict(os.environ if environ is None else environ)
    planned_key = key
    own_wheel = None  # said once the key's lock is held (a wait for it is said first)
    key = key or wheel_key(spec)
    if source_dir is not None:  # a tree not tied to the pin is keyed by its content, read now
        identity = source_identity(spec.recipe, source_dir, base_environ)
        key = keyed_to_source(key, spec, identity)
        if identity is not None:
            own_wheel = (
                f"{_label(spec)}: --source {source_dir} {identity.why}: built and kept as its "
                f"own wheel ({key.labelled_version}), never reused as the pinned build"
            )
        if planned_key is not None and key != planned_key:
            report.step(
                f"{_label(spec)}: --source {source_dir} is not what the plan read (it changed "
                "since, or the plan was made without it): its wheel is "
                f"{key.labelled_version}, not the plan's {planned_key.labelled_version}"
            )
    started = time.monotonic()

    def waiting(owner: str) -> None:
        report.step(
            f"{_label(spec)}: waiting for another build of the same wheel to finish"
            + (f" ({owner})" if owner else "")
        )

    with wheelhouse.lock(key, on_wait=waiting):
        if own_wheel:
            report.step(own_wheel)
        found = None if rebuild else wheelhouse.lookup(key)
        if found is not None:
            report.step(f"{_label(spec)}: wheelhouse hit ({found.path.name}), no compile")
            return BuildResult(
                spec=spec, wheel=found, cache_hit=True, seconds=time.monotonic() - started, log=None
            )
        one = _OneBuild(spec, base_environ, report, pip=pip, runner=runner)
        stored, shown, source_notes = one.run(
            wheelhouse,
            key,
            source_dir=source_dir,
            installed=installed,
            client=client,
            archive_cache=archive_cache,
            pip_options=pip_options,
        )
    seconds = time.monotonic() - started
    report.step(f"{_label(spec)}: built in {seconds:.0f} s -> {stored.path}")
    return BuildResult(
        spec=spec,
        wheel=stored,
        cache_hit=False,
        seconds=seconds,
        log=one.log_path,
        variables=shown,
        notes=(*spec.notes, *source_notes),
    )


def _label(spec: BuildSpec) -> str:
    return f"{spec.package} {spec.recipe.version}"


#: The build variables shown on the terminal (the log has them all).
_SHOWN = ("CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX")


class _OneBuild:
    """One compile under the wheelhouse key's lock: its log, its temporary folder (removed at the
    end, whatever happens), the source, the overlay and ``pip wheel``."""

    def __init__(
        self,
        spec: BuildSpec,
        base_environ: dict[str, str],
        report: Reporter,
        *,
        pip: TargetPip | None,
        runner: ProcessRunner | None,
    ) -> None:
        self.spec = spec
        self.label = _label(spec)
        self.base_environ = base_environ
        self.report = report
        self.log_path = new_log_path(f"build-{spec.package}")
        report.step(f"{self.label}: building (full log: {self.log_path})")
        self.pip = pip or TargetPip(
            spec.python, environ=base_environ, log_path=self.log_path, runner=runner
        )
        self.workdir = Path(tempfile.mkdtemp(prefix=f"cuda-resolve-build-{spec.package}-"))
        # pip's and nvcc's own temporary files go inside the build folder: a run ended by a
        # signal (pip gets no time to clean up) leaves nothing behind once the folder is removed.
        scratch = self.workdir / "tmp"
        scratch.mkdir()
        self.inside = {"TMPDIR": str(scratch), "TEMP": str(scratch), "TMP": str(scratch)}

    def run(
        self,
        wheelhouse: Wheelhouse,
        key: WheelKey,
        *,
        source_dir: Path | None,
        installed: Mapping[str, str],
        client: HttpClient | None,
        archive_cache: Path | None,
        pip_options: Sequence[str],
    ) -> tuple[StoredWheel, tuple[tuple[str, str], ...], tuple[str, ...]]:
        """The published wheel, the build variables shown, the source's notes."""
        try:
            self._log_head(source_dir)
            source = self._source(source_dir, client, archive_cache)
            if source_dir is not None:
                key = self._copied_key(key, source)
            build_env = self._environment(installed, pip_options)
            built = self._compile(source.build_dir, build_env.variables)
            return wheelhouse.publish(key, built), build_env.shown, source.notes
        except subprocess.SubprocessError as exc:
            raise BuildError(f"{self.label}: {exc}", hint=f"see the log: {self.log_path}") from None
        finally:
            _remove(self.workdir)

    def _copied_key(self, key: WheelKey, source: PreparedSource) -> WheelKey:
        """The key of what was copied: the folder changed after its key was decided (while the
        build waited for the key's lock, say) is published under its content, not that key."""
        copied = keyed_to_source(key, self.spec, source.identity)
        if copied != key:
            why = source.identity.why if source.identity else "is now its pinned commit's files"
            self._say(
                f"the --source folder changed while the build waited ({why}): built as "
                f"{copied.labelled_version}"
            )
        return copied

    def _say(self, text: str) -> None:
        self.report.step(f"{self.label}: {text}")

    def _log_head(self, source_dir: Path | None) -> None:
        spec = self.spec
        with open(self.log_path, "w", encoding="utf-8") as log:
            log.write(
                f"cuda-resolve build of {self.label} (recipe {spec.recipe.name}) against torch "
                f"{spec.torch_version}+{spec.variant}\n"
            )
            for note in spec.notes:
                log.write(redact_urls(f"note: {note}\n"))
            log.write(redact_urls(f"source: {describe_source(spec.recipe, source_dir)}\n"))

    def _source(
        self, source_dir: Path | None, client: HttpClient | None, archive_cache: Path | None
    ) -> PreparedSource:
        source = prepare_source(
            self.spec.recipe,
            self.workdir,
            torch_version=self.spec.torch_version,
            source_dir=source_dir,
            environ=self.base_environ,
            say=self._say,
            client=client,
            cache_dir=archive_cache,
        )
        for note in source.notes:
            self.report.note(note)
        if source.patches:
            self._say(
                f"applied {len(source.patches)} recipe patch(es): "
                + "; ".join(p.reason.split(": ")[0] for p in source.patches)
            )
        return source

    def _runner_note(self, text: str) -> None:
        from .runner import NOTE_PREFIX

        if self.pip.on_note is None and text.startswith(NOTE_PREFIX):  # else the pip says it
            self.report.note(f"{self.label}: {text.removeprefix(NOTE_PREFIX)}")

    def _pip_install(self, args: list[str], torch_step: bool) -> None:
        """One install into the build's overlay (what :func:`make_build_environment` asks);
        torch's asks its index alone, or the user's PyPI index alone (issue 27).

        The install can take minutes (torch and its CUDA wheels): its status line ticks from the
        start, each download is said with its size (pip's "Downloading NAME (SIZE)", "Using
        cached ...": a file pip already has is not fetched again)."""
        phase = f"{self.label}: installing {'torch' if torch_step else 'build requirements'} "
        phase += "into the build overlay"
        started = time.monotonic()
        self.report.progress(phase, None, None, 0.0)

        def on_line(text: str) -> None:
            self._runner_note(text)
            said = text.strip()
            if said.startswith(("Downloading ", "Using cached ")):
                self.report.step(f"{self.label}: {said}")
            self.report.progress(phase, None, None, time.monotonic() - started)

        status, tail = self.pip.install(
            args,
            environ={**self.base_environ, **self.inside},
            log_path=self.log_path,
            torch_index_only=torch_step,
            pypi_index=torch_step and not self.spec.torch_index,
            on_line=on_line,
        )
        if status != 0:
            detail = next(
                (line for line in reversed(tail) if "ERROR" in line), tail[-1] if tail else ""
            )
            raise BuildError(
                f"{self.label}: installing build requirements into the overlay failed: "
                f"{detail.strip()}",
                hint="check the network or mirror (cuda-resolve mirror test); "
                f"full log: {self.log_path}",
            )
        seconds = time.monotonic() - started
        self._say(
            f"installed {'torch' if torch_step else 'build requirements'} into the build "
            f"overlay in {seconds:.0f} s"
        )

    def _environment(
        self, installed: Mapping[str, str], pip_options: Sequence[str]
    ) -> BuildEnvironment:
        build_env = make_build_environment(
            self.spec,
            self.workdir,
            base_environ=self.base_environ,
            installed=installed,
            capacity=machine_capacity(),
            pip_install=self._pip_install,
            pip_options=pip_options,
            say=self._say,
        )
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write("build environment:\n")
            for name, value in build_env.shown:
                log.write(redact_urls(f"  {name}={value}\n"))
        self._say(" ".join(f"{k}={v}" for k, v in build_env.shown if k in _SHOWN))
        return build_env

    def _on_progress(self, progress: BuildProgress) -> None:
        self._runner_note(progress.line)
        if progress.linking:  # after the last unit: "linking _ext.so: 40 s", not "9/9 units"
            self.report.progress(
                f"{self.label}: linking {progress.linking}", None, None, progress.linking_for
            )
            return
        self.report.progress(
            f"{self.label} ({progress.unit})" if progress.unit else self.label,
            progress.done,
            progress.total,
            progress.elapsed,
        )

    def _compile(self, build_dir: Path, variables: Mapping[str, str]) -> Path:
        # pip's hash-checking mode (PIP_REQUIRE_HASHES, pip.conf) cannot check a source folder
        # and would refuse it: the source was checked against the recipe's pins, and the install
        # that follows checks the built wheel's hash (see install.hashmode).
        from .runner import build_wheel

        return build_wheel(
            self.pip,
            build_dir,
            self.workdir / "dist",
            environ={**variables, **self.inside, "PIP_REQUIRE_HASHES": "0"},
            log_path=self.log_path,
            label=self.label,
            on_progress=self._on_progress,
            disks=[("TMPDIR, which holds the build folder", self.workdir.parent)],
        )
