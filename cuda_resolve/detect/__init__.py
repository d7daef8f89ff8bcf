"""Machine detection: the only package in cuda-resolve that probes the machine.

:func:`detect_environment` gathers every probe into one frozen
:class:`~cuda_resolve.environment.Environment`. Each probe returns a value or ``None``, never
raises for a machine problem and never hangs (subprocesses and stalling library calls run
under *timeout*); what a probe could not do becomes a line in ``Environment.notes``.

Where a fact comes from, highest precedence first:

1. ``--profile FILE``: the CLI reads the profile instead of calling this; nothing is probed.
2. ``CUDA_RESOLVE_DRIVER``, ``CUDA_RESOLVE_CUDA_ARCH``;
3. conda's ``CONDA_OVERRIDE_CUDA``, ``CONDA_OVERRIDE_CUDA_ARCH`` (empty value = absent);
4. the probes, cheapest first: driver from sysfs/procfs, libcuda, NVML, nvidia-smi
   (:mod:`.nvidia`); toolkits (:mod:`.toolkits`); compilers (:mod:`.compilers`); the target
   interpreter and its torch, read from files without importing torch (:mod:`.target`).

See :mod:`.overrides` and ``docs/detection.md`` for the override rules.

Every probe shares one overall budget (*budget*, default twice *timeout*): a program gets its own
*timeout* or what is left of the budget, whichever is less, so a machine with several hanging
tools still answers within the budget; which probe was slow or skipped becomes a note.

The target-interpreter probe, the compilers and the extension scan run in threads while the
driver probes run, and nvcc/compiler answers are cached on disk per binary, so a repeated
``cuda-resolve doctor`` costs little more than starting Python.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._bounded import Deadline, kill_all
from .._signals import interrupts_call
from ..environment import Environment, ExtensionBinary, TorchInfo
from ._cache import ProbeCache, default_cache_dir
from ._run import Background, sharing
from .compilers import find_compilers
from .host import machine_facts, scheduler_facts, variable_facts
from .nvidia import probe_nvidia
from .overrides import apply_overrides, read_overrides
from .target import probe_target, resolve_python
from .toolkits import find_toolkits

__all__ = ["detect_environment"]


def _find_extensions(
    site_packages: Sequence[str],
    torch: TorchInfo | None,
    environ: Mapping[str, str],
    cache: ProbeCache,
) -> tuple[ExtensionBinary, ...]:
    """Compiled CUDA extensions in the target and the libraries they cannot load (for doctor).
    The target's torch may live outside its own site-packages (a ``.pth`` file, a venv with
    system site-packages): its libraries are loaded first all the same."""
    from .extensions import find_extensions_cached

    torch_sites = (os.path.dirname(torch.location),) if torch is not None and torch.location else ()
    return find_extensions_cached(
        site_packages, environ=environ, cache=cache, torch_sites=torch_sites
    )


def detect_environment(
    *,
    python: str | None = None,
    root: Path = Path("/"),
    environ: Mapping[str, str] | None = None,
    timeout: float = 5.0,
    budget: float | None = None,
    cache_dir: Path | None = None,
) -> Environment:
    """Probe this machine (or a fake *root*, for tests) and describe it.

    *python* is the target interpreter (a path or a name on PATH); without it, the running
    interpreter is described, in process. *environ* replaces ``os.environ`` for every lookup
    (PATH, CUDA_HOME, overrides) and for the programs run. *cache_dir* holds the probe cache
    (default: the user cache directory). Raises :class:`~cuda_resolve.errors.UsageError` for
    a bad override value or a *python* that is not an interpreter, and for nothing else.
    *timeout* bounds each program and library call, *budget* all of them together.
    """
    deadline = Deadline(2 * timeout if budget is None else budget)
    # A Ctrl-C ends the probes' programs and spends the budget; it is raised here once the probes
    # are done, never inside one of them (see interrupts_call for why).
    with sharing(deadline), interrupts_call(lambda: _stop(deadline)) as interrupts:
        try:
            environment = _detect(
                python=python,
                root=root,
                environ=environ,
                timeout=timeout,
                cache_dir=cache_dir,
                deadline=deadline,
            )
        except KeyboardInterrupt:  # outside the main thread, or a host's own handler raised it
            _stop(deadline)
            raise
        except BaseException:
            if interrupts:
                raise interrupts[0] from None  # a failure of a probe that Ctrl-C killed
            raise
    if interrupts:
        raise interrupts[0]
    return environment


#: How long a Ctrl-C waits for the probe threads after killing their programs.
_INTERRUPTED_JOIN_SECONDS = 2.0


def _stop(deadline: Deadline) -> None:
    """Ctrl-C: probes in other threads start nothing more, and what runs is killed now."""
    deadline.cancel()
    kill_all()


def _detect(
    *,
    python: str | None,
    root: Path,
    environ: Mapping[str, str] | None,
    timeout: float,
    cache_dir: Path | None,
    deadline: Deadline,
) -> Environment:
    env: Mapping[str, str] = dict(os.environ if environ is None else environ)
    overrides = read_overrides(env)
    target_python = resolve_python(python, env) if python is not None else None
    cache = ProbeCache(cache_dir if cache_dir is not None else default_cache_dir())

    target_job = Background(
        lambda: probe_target(target_python, environ=env, timeout=timeout, cache=cache)
    )
    compilers_job = Background(lambda: find_compilers(environ=env, timeout=timeout, cache=cache))
    try:
        nvidia = probe_nvidia(root=root, environ=env, timeout=timeout, cache=cache)
    except KeyboardInterrupt:
        _stop(deadline)  # the threads' programs are killed: they end now, or never
        # Never joined without a bound here: a Ctrl-C that lands inside an import can leave
        # the interpreter's import lock held by this thread, and a thread that imports then
        # waits for ever (seen under load: detect hung after Ctrl-C). They are daemons.
        target_job.wait(_INTERRUPTED_JOIN_SECONDS)
        compilers_job.wait(_INTERRUPTED_JOIN_SECONDS)
        raise
    except BaseException:
        target_job.result()  # a --python that is not an interpreter raises here
        compilers_job.result()
        raise
    target = target_job.result()  # a --python that is not an interpreter raises here
    compiler = compilers_job.result()
    site_packages = target.python.site_packages
    extensions_job = Background(lambda: _find_extensions(site_packages, target.torch, env, cache))
    toolkits, toolkit_notes = find_toolkits(
        environ=env, root=root, site_packages=site_packages, timeout=timeout, cache=cache
    )
    extensions = extensions_job.result()
    cache.save()

    driver, gpus, override_notes = apply_overrides(overrides, nvidia.driver, nvidia.gpus)
    slow = tuple(f"slow probe: {what}" for what in deadline.slow)
    notes = (*nvidia.notes, *override_notes, *toolkit_notes, *target.notes, *slow)
    return Environment(
        machine=machine_facts(platform=target.platform, machine=target.machine, glibc=target.glibc),
        python=target.python,
        driver=driver,
        gpus=gpus,
        toolkits=toolkits,
        compiler=compiler,
        torch=target.torch,
        scheduler=scheduler_facts(env),
        variables=variable_facts(env),
        extensions=extensions,
        installed_extensions=target.installed_extensions,
        notes=tuple(dict.fromkeys(notes)),
        source="detected",
    )
