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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BuildError
from ..install.pip import TargetPip
from ..paths import new_log_path
from ..redaction import redact_urls
from ..reporting import NullReporter, Reporter
from ..wheelhouse.key import WheelKey
from ..wheelhouse.store import StoredWheel, Wheelhouse
from .buildenv import machine_capacity, make_build_environment
from .preflight import BuildSpec
from .runner import NOTE_PREFIX, BuildProgress, ProcessRunner, build_wheel
from .source import describe_source, prepare_source, recipe_digest

if TYPE_CHECKING:
    from ..net import HttpClient

__all__ = ["BuildResult", "build", "wheel_key"]


@dataclass(frozen=True, kw_only=True, slots=True)
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


def wheel_key(spec: BuildSpec) -> WheelKey:
    return WheelKey(
        package=spec.package,
        version=str(spec.recipe.version),
        torch=spec.torch_version,
        variant=spec.variant,
        python_tag=spec.python_tag,
        platform=spec.platform,
        arch_list=spec.arch_list,
        recipe_digest=recipe_digest(spec.recipe, spec.torch_version),
    )


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
    key = key or wheel_key(spec)
    label = f"{spec.package} {spec.recipe.version}"
    started = time.monotonic()
    with wheelhouse.lock(key):
        found = None if rebuild else wheelhouse.lookup(key)
        if found is not None:
            report.step(f"{label}: wheelhouse hit ({found.path.name}), no compile")
            return BuildResult(
                spec=spec, wheel=found, cache_hit=True, seconds=time.monotonic() - started, log=None
            )
        log_path = new_log_path(f"build-{spec.package}")
        report.step(f"{label}: building (full log: {log_path})")
        target_pip = pip or TargetPip(
            spec.python, environ=base_environ, log_path=log_path, runner=runner
        )
        workdir = Path(tempfile.mkdtemp(prefix=f"cuda-resolve-build-{spec.package}-"))
        # pip's and nvcc's own temporary files go inside the build folder: a run ended by a signal
        # (pip gets no time to clean up) leaves nothing behind once the folder is removed.
        scratch = workdir / "tmp"
        scratch.mkdir()
        inside = {"TMPDIR": str(scratch), "TEMP": str(scratch), "TMP": str(scratch)}
        try:
            with open(log_path, "w", encoding="utf-8") as log:
                log.write(
                    f"cuda-resolve build of {label} (recipe {spec.recipe.name}) against torch {spec.torch_version}+{spec.variant}\n"
                )
                for note in spec.notes:
                    log.write(redact_urls(f"note: {note}\n"))
                log.write(redact_urls(f"source: {describe_source(spec.recipe, source_dir)}\n"))
            source = prepare_source(
                spec.recipe,
                workdir,
                torch_version=spec.torch_version,
                source_dir=source_dir,
                environ=base_environ,
                say=lambda text: report.step(f"{label}: {text}"),
                client=client,
                cache_dir=archive_cache,
            )
            for note in source.notes:
                report.note(note)
            if source.patches:
                report.step(
                    f"{label}: applied {len(source.patches)} recipe patch(es): "
                    + "; ".join(p.reason.split(": ")[0] for p in source.patches)
                )

            def runner_note(text: str) -> None:  # unless the caller's pip says it already
                if target_pip.on_note is None and text.startswith(NOTE_PREFIX):
                    report.note(f"{label}: {text.removeprefix(NOTE_PREFIX)}")

            def pip_install(args: list[str], torch_index_only: bool) -> None:
                status, tail = target_pip.install(
                    args,
                    environ={**base_environ, **inside},
                    log_path=log_path,
                    torch_index_only=torch_index_only,
                    on_line=runner_note,
                )
                if status != 0:
                    detail = next(
                        (line for line in reversed(tail) if "ERROR" in line),
                        tail[-1] if tail else "",
                    )
                    raise BuildError(
                        f"{label}: installing build requirements into the overlay failed: {detail.strip()}",
                        hint=f"check the network or mirror (cuda-resolve mirror test); full log: {log_path}",
                    )

            build_env = make_build_environment(
                spec,
                workdir,
                base_environ=base_environ,
                installed=installed,
                capacity=machine_capacity(),
                pip_install=pip_install,
                pip_options=pip_options,
                say=lambda text: report.step(f"{label}: {text}"),
            )
            with open(log_path, "a", encoding="utf-8") as log:
                log.write("build environment:\n")
                for name, value in build_env.shown:
                    log.write(redact_urls(f"  {name}={value}\n"))
            report.step(
                f"{label}: "
                + " ".join(
                    f"{k}={v}"
                    for k, v in build_env.shown
                    if k in ("CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX")
                )
            )

            def on_progress(progress: BuildProgress) -> None:
                runner_note(progress.line)
                report.progress(
                    f"{label} ({progress.unit})" if progress.unit else label,
                    progress.done,
                    progress.total,
                    progress.elapsed,
                )

            # pip's hash-checking mode (PIP_REQUIRE_HASHES, pip.conf) cannot check a source folder and
            # would refuse it: the source was checked against the recipe's pins, and the install
            # that follows checks the built wheel's hash (see install.hashmode).
            built = build_wheel(
                target_pip,
                source.build_dir,
                workdir / "dist",
                environ={**build_env.variables, **inside, "PIP_REQUIRE_HASHES": "0"},
                log_path=log_path,
                label=label,
                on_progress=on_progress,
                disks=[("TMPDIR, which holds the build folder", workdir.parent)],
            )
            stored = wheelhouse.publish(key, built)
        except subprocess.SubprocessError as exc:
            raise BuildError(f"{label}: {exc}", hint=f"see the log: {log_path}") from None
        finally:
            _remove(workdir)
    seconds = time.monotonic() - started
    report.step(f"{label}: built in {seconds:.0f} s -> {stored.path}")
    return BuildResult(
        spec=spec,
        wheel=stored,
        cache_hit=False,
        seconds=seconds,
        log=log_path,
        variables=build_env.shown,
        notes=(*spec.notes, *source.notes),
    )
