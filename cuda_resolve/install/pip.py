"""Driving the target's own pip through its command line (never through pip's internal modules).

pip >= 22 is required. From 24.2 pip uses the system trust store itself; 22.2 - 24.1 get
``--use-feature=truststore`` where the target can import truststore; anything older is refused
with the upgrade command.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._bounded import run
from ..errors import InstallError

if TYPE_CHECKING:
    from ..build.runner import ProcessRunner

__all__ = [
    "TORCH_INDEX_ONLY_CLEARED",
    "PipFacts",
    "TargetPip",
    "forget_prefetched",
    "installed_distributions",
    "pip_facts_and_distributions",
    "prefetch_probe",
    "refuse_externally_managed",
    "trust_options",
]

# One interpreter start answers everything cuda-pip asks of the target: each start of a big
# environment costs a few 100 ms. The distributions are read by _dist_metadata (its text comes
# first): importing importlib.metadata would cost more than the rest of the probe.
_PROBE_BODY = """
import json, sys
try:
    import truststore  # noqa: F401
    has_truststore = True
except Exception:
    has_truststore = False
import sysconfig
try:
    externally_managed = sys.prefix == sys.base_prefix and os.path.isfile(
        os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
except Exception:
    externally_managed = False
found = installed_distributions(sys.path)
pip = found.get("pip")
cert = os.environ.get("PIP_CERT") or None
print(json.dumps({"pip": pip[1] if pip else None, "truststore": has_truststore,
                  "externally_managed": externally_managed,
                  "prefix": sys.prefix, "real_prefix": os.path.realpath(sys.prefix),
                  "distributions": sorted([name, version] for name, version, _ in found.values()),
                  "cert": cert if cert and os.path.isfile(cert) else None}))
"""


def _probe_script() -> str:
    from .._dist_metadata import source_text

    return source_text() + _PROBE_BODY


MINIMUM_PIP = Version("22")


@dataclass(frozen=True, kw_only=True, slots=True)
class PipFacts:
    version: Version
    truststore: bool
    externally_managed: bool = False  # PEP 668: the interpreter's distributor manages its packages
    prefix: str | None = None
    real_prefix: str | None = (
        None  # sys.prefix with links resolved: what the target lock is keyed by
    )
    cert: str | None = None  # the CA bundle PIP_CERT names (an existing file): pip verifies with it


def _run_json(python: str, script: str, environ: Mapping[str, str], what: str) -> object:
    # From "/": "-c" puts the working directory on the path, and a source checkout's *.egg-info
    # there is not installed.
    done = run([python, "-c", script], timeout=60, env=environ, cwd="/")
    if done is not None and done.ok:
        try:
            return json.loads(done.stdout)
        except ValueError:
            pass
    raise InstallError(
        f"{python} could not report {what}",
        hint="check that the target interpreter runs (pass --python PATH)",
    )


_ProbeKey = tuple[str, tuple[tuple[str, str], ...]]
#: Probes started in the background (:func:`prefetch_probe`), each taken by one reader.
_PREFETCHED: dict[_ProbeKey, tuple[threading.Event, list[object]]] = {}
_PREFETCH_LOCK = threading.Lock()


def _probe_key(python: str, environ: Mapping[str, str]) -> _ProbeKey:
    # Interpreters of one bin/ folder (python, python3, python3.12) answer alike.
    where = os.path.dirname(os.path.abspath(python)) if os.sep in python else python
    return where, tuple(sorted(environ.items()))


def prefetch_probe(python: str, environ: Mapping[str, str]) -> None:
    """Start the target probe (:func:`pip_facts_and_distributions`) in the background: the next
    call for the same target takes its answer (or its error) instead of starting the target
    again. ``plan`` starts it first thing (issue 28). Never raises."""
    key = _probe_key(python, environ)
    with _PREFETCH_LOCK:
        if key in _PREFETCHED:
            return
        done = threading.Event()
        answer: list[object] = []
        _PREFETCHED[key] = (done, answer)
    given = dict(environ)

    def probe() -> None:
        try:
            answer.append(_probe_now(python, given))
        except BaseException as exc:  # raised by the reader, where it asked
            answer.append(exc)
        finally:
            done.set()

    threading.Thread(target=probe, name="cuda-resolve-target-probe", daemon=True).start()


def forget_prefetched() -> None:
    """Drop the probes started and not taken (a command that ended before asking): a later
    command in the same process probes afresh."""
    with _PREFETCH_LOCK:
        _PREFETCHED.clear()


def _probe(python: str, environ: Mapping[str, str]) -> dict[str, object]:
    with _PREFETCH_LOCK:
        pending = _PREFETCHED.pop(_probe_key(python, environ), None)
    if pending is None:
        return _probe_now(python, environ)
    done, answer = pending
    done.wait()
    if isinstance(answer[0], BaseException):
        raise answer[0]
    assert isinstance(answer[0], dict)
    return answer[0]


def _probe_now(python: str, environ: Mapping[str, str]) -> dict[str, object]:
    data = _run_json(python, _probe_script(), environ, "its pip version and installed packages")
    if not isinstance(data, dict):
        raise InstallError(
            f"{python} gave an unreadable answer about its packages",
            hint="check that the target interpreter runs",
        )
    return data


def pip_facts_and_distributions(
    python: str, environ: Mapping[str, str]
) -> tuple[PipFacts, dict[str, str]]:
    data = _probe(python, environ)
    return _parse_facts(python, data), _distributions(data.get("distributions"))


def _parse_facts(python: str, data: object) -> PipFacts:
    if not isinstance(data, dict):
        raise InstallError(
            f"{python} could not report its pip version",
            hint="check that the target interpreter runs",
        )
    text = data.get("pip")
    if not isinstance(text, str):
        raise InstallError(f"{python} has no pip", hint=f"{python} -m ensurepip --upgrade")
    try:
        version = Version(text)
    except InvalidVersion:
        raise InstallError(
            f"{python}: pip reports version {text!r}", hint=f"{python} -m pip install -U pip"
        ) from None
    if version < MINIMUM_PIP:
        raise InstallError(
            f"{python} has pip {version}; cuda-pip needs pip >= {MINIMUM_PIP}",
            hint=f"{python} -m pip install -U pip",
        )
    prefix = data.get("prefix")
    real_prefix = data.get("real_prefix")
    cert = data.get("cert")
    return PipFacts(
        version=version,
        truststore=bool(data.get("truststore")),
        externally_managed=bool(data.get("externally_managed")),
        prefix=prefix if isinstance(prefix, str) else None,
        real_prefix=real_prefix
        if isinstance(real_prefix, str) and real_prefix.startswith("/")
        else None,
        cert=cert if isinstance(cert, str) else None,
    )


def trust_options(facts: PipFacts) -> tuple[list[str], str | None]:
    """pip options that make it use the system trust store, and a note when it cannot."""
    if facts.version >= Version("24.2"):
        return [], None
    if facts.version >= Version("22.2") and facts.truststore:
        return ["--use-feature=truststore"], None
    if facts.cert is not None:  # pip verifies with that bundle, not its own: nothing to say
        return [], None
    return [], (
        f"pip {facts.version} verifies TLS with its own CA bundle, not the system trust store: "
        "behind a TLS-intercepting proxy upgrade it (python -m pip install -U pip) or "
        "set PIP_CERT"
    )


def installed_distributions(python: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``{canonical name: version}`` of every distribution the target sees."""
    return _distributions(_probe(python, environ).get("distributions"))


def _distributions(data: object) -> dict[str, str]:
    result: dict[str, str] = {}
    if isinstance(data, list):
        for entry in data:
            if isinstance(entry, list) and len(entry) == 2:
                result[canonicalize_name(str(entry[0]))] = str(entry[1])
    return result


def refuse_externally_managed(
    python: str, facts: PipFacts, pip_args: Sequence[str], environ: Mapping[str, str]
) -> None:
    """PEP 668: pip refuses to install into a distributor-managed interpreter (Debian's system
    Python); say so before anything is built, not after a 60-second compile."""
    if not facts.externally_managed:
        return
    from .pipoptions import pip_settings

    # pip's override in any form pip reads it: options in any spelling, PIP_* variables, its
    # configuration.
    if (
        pip_settings(pip_args, python=python, environ=environ).externally_managed_override
        is not None
    ):
        return
    raise InstallError(
        f"{python} is externally managed (PEP 668: its distributor's package manager owns it), so "
        "pip will not install into it",
        hint="create a virtual environment and install there: python3 -m venv .venv && "
        ".venv/bin/cuda-pip install ... "
        "(or pass --python PATH of one); pip's --break-system-packages overrides this at "
        "your own risk",
    )


#: Variables that would add indexes or folders to the torch step: it asks the PyTorch index
#: (or its mirror) alone, so a folder of CPU wheels in PIP_FIND_LINKS cannot replace the build.
TORCH_INDEX_ONLY_CLEARED = (
    "PIP_FIND_LINKS",
    "PIP_EXTRA_INDEX_URL",
    "PIP_INDEX_URL",
    "PIP_NO_INDEX",
)
#: Of those, what a torch step from PyPI keeps: the user's PyPI index (or mirror) is where it asks.
PYPI_INDEX_KEPT = ("PIP_INDEX_URL", "PIP_NO_INDEX")


class TargetPip:
    """The one runner of the target's pip: ``python -m pip`` with the user's environment, the
    trust-store options for every command that may reach an index (install, wheel), every line to
    the log (redacted by :func:`~cuda_resolve.build.runner.run_logged`), progress through
    ``on_line``. Every pip call cuda-resolve makes goes through one: the install steps, the build
    overlay's installs and the build's ``pip wheel``.

    ``runner`` is the :class:`~cuda_resolve.build.runner.ProcessRunner` that runs each command
    (default: :func:`~cuda_resolve.build.runner.logged_runner`); tests give a recording fake.
    ``on_note`` receives what the runner says about a run beside pip's own output (a background
    process ended because it held pip's output open)."""

    def __init__(
        self,
        python: str,
        *,
        environ: Mapping[str, str],
        trust: Sequence[str] = (),
        log_path: Path,
        runner: ProcessRunner | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.python = python
        self.environ = dict(environ)
        self.trust = tuple(trust)
        self.log_path = log_path
        self.on_note = on_note
        self._runner = runner

    def environ_for(
        self,
        *,
        torch_index_only: bool = False,
        pypi_index: bool = False,
        extra: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The environment a pip run gets: the user's, ``extra`` over it; for a torch step
        without the variables that would add indexes or folders (:data:`TORCH_INDEX_ONLY_CLEARED`),
        keeping the user's own index with ``pypi_index`` (:data:`PYPI_INDEX_KEPT`)."""
        environ = dict(self.environ)
        if extra:
            environ.update(extra)
        if torch_index_only:
            kept = PYPI_INDEX_KEPT if pypi_index else ()
            for name in TORCH_INDEX_ONLY_CLEARED:
                if name not in kept:
                    environ.pop(name, None)
            # pip's configuration files may name indexes or folders too: those are left out, the
            # rest kept.
            from .pipconfig import without_configured_indexes

            keep = frozenset({"index-url", "no-index"}) if pypi_index else frozenset()
            environ.update(without_configured_indexes(self.python, environ, keep=keep))
        return environ

    def install_command(self, args: Sequence[str]) -> list[str]:
        """The exact words of ``pip install ARGS`` as this runner runs them."""
        return [
            self.python,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            *self.trust,
            *args,
        ]

    def wheel_command(self, args: Sequence[str]) -> list[str]:
        """The exact words of ``pip wheel ARGS`` as this runner runs them."""
        return [
            self.python,
            "-m",
            "pip",
            "wheel",
            "--disable-pip-version-check",
            *self.trust,
            *args,
        ]

    def run(
        self,
        args: Sequence[str],
        *,
        torch_index_only: bool = False,
        pypi_index: bool = False,
        environ: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        """``python -m pip ARGS`` as given (the caller gives ``install ...``, ``wheel ...``);
        ``environ`` goes over the user's environment (:meth:`environ_for`)."""
        from ..build.runner import NOTE_PREFIX, logged_runner

        command = [self.python, "-m", "pip", *args]
        full_environ = self.environ_for(
            torch_index_only=torch_index_only, pypi_index=pypi_index, extra=environ
        )
        note = self.on_note

        def line(text: str) -> None:
            if note is not None and text.startswith(NOTE_PREFIX):
                note(text.removeprefix(NOTE_PREFIX))
            on_line(text)

        runner = self._runner or logged_runner
        return runner(
            command, environ=full_environ, log_path=log_path or self.log_path, cwd=cwd, on_line=line
        )

    def install(
        self,
        args: Sequence[str],
        *,
        torch_index_only: bool = False,
        pypi_index: bool = False,
        environ: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        """``pip install`` with the trust options (:meth:`install_command`) and ``args``."""
        return self.run(
            self.install_command(args)[3:],
            torch_index_only=torch_index_only,
            pypi_index=pypi_index,
            environ=environ,
            log_path=log_path,
            on_line=on_line,
        )

    def wheel(
        self,
        args: Sequence[str],
        *,
        environ: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        """``pip wheel`` with the trust options (:meth:`wheel_command`) and ``args``, run in
        ``cwd``."""
        return self.run(
            self.wheel_command(args)[3:],
            environ=environ,
            log_path=log_path,
            cwd=cwd,
            on_line=on_line,
        )
