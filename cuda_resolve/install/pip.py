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
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._bounded import run
from .._frozen import frozen
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
    stdlib = sysconfig.get_path("stdlib")
    externally_managed = sys.prefix == sys.base_prefix and os.path.isfile(
        os.path.join(stdlib, "EXTERNALLY-MANAGED"))
except Exception:
    stdlib, externally_managed = None, False
found = installed_distributions(sys.path)
pip = found.get("pip")
cert = os.environ.get("PIP_CERT") or None
# What the answer depends on, for the answer remembered on disk (_remembered_probe): the import
# path ("" is this folder, "/"), and the site-packages folders not on it until they exist.
try:
    import site
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
except Exception:
    user_site = None
try:
    site_folders = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
except Exception:
    site_folders = []
print(json.dumps({"pip": pip[1] if pip else None, "truststore": has_truststore,
                  "externally_managed": externally_managed,
                  "prefix": sys.prefix, "real_prefix": os.path.realpath(sys.prefix),
                  "distributions": sorted([name, version] for name, version, _ in found.values()),
                  "cert": cert if cert and os.path.isfile(cert) else None,
                  "executable": sys.executable, "stdlib": stdlib,
                  "search_path": [os.path.abspath(entry) for entry in sys.path],
                  "user_site": user_site,
                  "absent_site_packages": [f for f in site_folders if f and not os.path.isdir(f)]}))
"""


def _probe_script() -> str:
    from .._dist_metadata import source_text

    return source_text() + _PROBE_BODY


MINIMUM_PIP = Version("22")


@frozen
class PipFacts:
    """The target's own pip: its version, its trust store support, its prefix and CA bundle."""

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


_ProbeKey = tuple[str, tuple[tuple[str, str], ...], bool]
#: Probes started in the background (:func:`prefetch_probe`), each taken by one reader.
_PREFETCHED: dict[_ProbeKey, tuple[threading.Event, list[object]]] = {}
_PREFETCH_LOCK = threading.Lock()


def _probe_key(python: str, environ: Mapping[str, str], remembered: bool) -> _ProbeKey:
    # Interpreters of one bin/ folder (python, python3, python3.12) answer alike. A reader that
    # wants a fresh answer never takes a remembered one.
    where = os.path.dirname(os.path.abspath(python)) if os.sep in python else python
    return where, tuple(sorted(environ.items())), remembered


def prefetch_probe(python: str, environ: Mapping[str, str], *, remembered: bool = False) -> None:
    """Start the target probe (:func:`pip_facts_and_distributions`) in the background: the next
    call for the same target (and the same ``remembered``) takes its answer (or its error)
    instead of starting the target again. ``plan`` starts it first thing, ``remembered`` (issue
    28). Never raises."""
    key = _probe_key(python, environ, remembered)
    with _PREFETCH_LOCK:
        if key in _PREFETCHED:
            return
        done = threading.Event()
        answer: list[object] = []
        _PREFETCHED[key] = (done, answer)
    given = dict(environ)

    def probe() -> None:
        try:
            answer.append((_remembered_probe if remembered else _probe_now)(python, given))
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


def _probe(
    python: str, environ: Mapping[str, str], *, remembered: bool = False
) -> dict[str, object]:
    with _PREFETCH_LOCK:
        pending = _PREFETCHED.pop(_probe_key(python, environ, remembered), None)
    if pending is None:
        return (_remembered_probe if remembered else _probe_now)(python, environ)
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


#: The probe's answers ``plan`` remembers (issue 28), in a file of their own under the cache
#: folder: ``detect``'s cache file (``probes.json``) is rewritten by another object in the same
#: command, and two writers of one file would drop each other's entries.
_REMEMBERED_FOLDER = "target-pip"
_NAMESPACE = "target-pip/1"
#: Variables in the key besides those that move the import path (:func:`~cuda_resolve.detect.
#: target.interpreter_key`): the probe reads PIP_CERT; the rest of PIP_* and PYTHON* are there so
#: that no setting of pip's or of the interpreter's is ever answered for by another's entry. Only
#: their digest is stored (PIP_INDEX_URL may hold a password).
_KEY_PREFIXES = ("PIP_", "PYTHON")


def _remembered_key(python: str, environ: Mapping[str, str]) -> str | None:
    """The interpreter (its path, the file it runs, its venv's ``pyvenv.cfg``, the variables
    that move its import path), the probe script itself (another cuda-resolve's answer may have
    another shape) and the digest of the PIP_* and PYTHON* variables; None where ``python`` is
    not a file (a name looked up on PATH: nothing is remembered)."""
    from .._digest import new_digest
    from ..detect.target import interpreter_key

    where = interpreter_key(python, environ)
    if where is None:
        return None
    digest = new_digest(_probe_script().encode())
    for name, value in sorted(environ.items()):
        if name.startswith(_KEY_PREFIXES):
            digest.update(f"\0{name}={value}".encode())
    return f"{where}|{digest.hexdigest()}"


def _stamp(path: str) -> tuple[str, int]:
    try:
        info = os.stat(path)
    except OSError:
        return "-", 0
    return f"{info.st_mtime_ns}:{info.st_size}", info.st_mtime_ns


def _target_state(answer: Mapping[str, object], environ: Mapping[str, str]) -> tuple[str, int]:
    """What ``answer`` depends on in the target, as a digest, and the newest modification time in
    it; ("", 0) where the answer does not say (nothing is remembered then).

    The distributions on the import path (:func:`~cuda_resolve.detect.target.installed_state`:
    pip's and every other ``*.dist-info``, path files, start-up hooks); each folder on it itself
    (a module such as truststore, or an egg, added or replaced); where links lead from the
    prefix; the ``EXTERNALLY-MANAGED`` marker; and whether PIP_CERT's file exists."""
    from .._digest import new_digest
    from ..detect.target import installed_state, watched_folders

    watched = watched_folders(dict(answer))
    prefix, stdlib = answer.get("prefix"), answer.get("stdlib")
    if watched is None or not isinstance(prefix, str):
        return "", 0
    installed, newest = installed_state(watched)
    digest = new_digest(f"{installed}\0{os.path.realpath(prefix)}".encode())
    marker = os.path.join(stdlib, "EXTERNALLY-MANAGED") if isinstance(stdlib, str) else "-"
    for path in (*watched, marker):
        stamp, changed = _stamp(path)
        digest.update(f"\0{path}\0{stamp}".encode())
        newest = max(newest, changed)
    cert = environ.get("PIP_CERT")  # the probe looks from "/"
    digest.update(b"cert" if cert and os.path.isfile(os.path.join(os.sep, cert)) else b"-")
    return digest.hexdigest(), newest


def _remembered_probe(python: str, environ: Mapping[str, str]) -> dict[str, object]:
    """The probe's answer remembered on disk while nothing it depends on changed
    (:func:`_remembered_key`, :func:`_target_state`), else the probe run now and remembered, as
    ``detect`` remembers its own run of the target: the answer is stored only where nothing it
    depends on changed within two seconds of the probe's start (a ``pip install`` running
    meanwhile), and never for a launcher that picks an interpreter of its own (pyenv's shims).
    The file is written atomically, the owner's only; an unreadable or damaged one is ignored."""
    import time

    from ..detect._cache import ProbeCache
    from ..detect.target import SETTLED_NS
    from ..paths import cache_root

    key = _remembered_key(python, environ)
    if key is None:
        return _probe_now(python, environ)
    cache = ProbeCache(cache_root() / _REMEMBERED_FOLDER, private=True)
    entry = cache.get(_NAMESPACE, key)
    if isinstance(entry, dict) and isinstance(entry.get("answer"), dict):
        remembered: dict[str, object] = entry["answer"]
        state = _target_state(remembered, environ)[0]
        if state and entry.get("state") == state:
            return remembered
    started = time.time_ns()
    answer = _probe_now(python, environ)
    if os.path.realpath(str(answer.get("executable"))) != os.path.realpath(python):
        return answer
    state, newest = _target_state(answer, environ)
    if state and newest < started - SETTLED_NS:
        cache.put(_NAMESPACE, key, {"state": state, "answer": answer})
        cache.save()
    return answer


def pip_facts_and_distributions(
    python: str, environ: Mapping[str, str], *, remembered: bool = False
) -> tuple[PipFacts, dict[str, str]]:
    """The target's pip facts and its distributions, from one run of the target
    (:func:`prefetch_probe`'s, where it started one). ``remembered``: the answer remembered on
    disk while nothing it depends on changed (:func:`_remembered_probe`; ``plan``, issue 28);
    installing always asks afresh."""
    data = _probe(python, environ, remembered=remembered)
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
    python: str,
    facts: PipFacts,
    pip_args: Sequence[str],
    environ: Mapping[str, str],
    *,
    requests: Sequence[str] = (),
) -> None:
    """PEP 668: pip refuses to install into a distributor-managed interpreter (Debian's system
    Python); say so before anything is built, not after a 60-second compile. ``requests``: what
    was asked, for the command the hint gives."""
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
    import shlex
    import sys

    again = _again_into(".venv/bin/python", sys.argv, requests)
    raise InstallError(
        f"{python} is externally managed (PEP 668: its distributor's package manager owns it), so "
        "pip will not install into it",
        hint="create a virtual environment and install there: python3 -m venv .venv && "
        f"{shlex.join(again)} (or pass --python PATH of one you have); pip's "
        "--break-system-packages overrides this at your own risk",
    )


def _again_into(python: str, argv: Sequence[str], requests: Sequence[str]) -> list[str]:
    """The command that ran (``argv``: cuda-pip's or cuda-resolve's own words, pins, options and
    quoting kept) with ``--python python`` in place of any it had; elsewhere (a library call, the
    conda plugin) this tool's cuda-pip with ``requests``. A new venv holds no cuda-pip of its own,
    so the program is named by the path it ran from (user walk C1)."""
    import sys

    program = os.path.basename(argv[0]) if argv else ""
    if program in ("cuda-pip", "cuda-resolve") and len(argv) > 1:
        words: list[str] = []
        skip = False
        for word in argv[1:]:
            if skip:
                skip = False
            elif word == "--python":
                skip = True
            elif not word.startswith("--python="):
                words.append(word)
        return [argv[0], *words, "--python", python]
    cuda_pip = os.path.join(os.path.dirname(sys.executable), "cuda-pip")
    program = cuda_pip if os.path.isfile(cuda_pip) else "cuda-pip"
    return [program, "install", "--python", python, *(requests or ["REQ..."])]


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
