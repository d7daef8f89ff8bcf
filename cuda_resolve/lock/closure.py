"""A profile's whole closure, resolved by pip for the profile's Python and platform, downloading
no wheel: ``pip --python PY install --dry-run --ignore-installed --report - --only-binary=:all:
--python-version X.Y --platform ...`` reads each candidate's metadata (PEP 658) and reports what
it would install, with each file's URL and, where the index gives it, its sha256.

pip runs as ``--isolated`` with every index named on its command line, so a lock never depends
on the locking user's pip configuration (a ``find-links`` folder of theirs, a ``file://`` index).
It runs pip's own code under an interpreter of the profile's Python version, as ``pip --python``
does, with the environment markers of the profile's machine (:func:`pip_markers`:
``sys_platform``, ``platform_machine``, ``python_full_version``, ...): pip's ``--platform``
options choose wheel tags only, and pip evaluates every other marker with the interpreter's own
values, so without them a closure for an aarch64 or Windows profile locked here would be this
machine's closure.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._bounded import run
from .._frozen import frozen
from ..compat import marker_environment
from ..environment import Environment
from ..errors import LockError, UsageError
from ..plan import Plan

__all__ = [
    "BuiltFile",
    "PipAnswers",
    "ResolvedFile",
    "check_interpreter",
    "find_interpreter",
    "interpreter_candidates",
    "pip_closure",
    "pip_markers",
    "platform_options",
]

#: pip resolving a large closure (torch and its nvidia-* wheels) from metadata takes seconds.
PIP_SECONDS = 600


@frozen
class ResolvedFile:
    name: str  # canonical
    version: str
    url: str  # as pip fetched it (a mirror's URL where one was used)
    sha256: str | None
    requested: bool
    index: str | None  # the index that step asked (the first of them)
    size: int | None = None  # known for wheelhouse files


def _runs_as(python: str, minor: str, environ: Mapping[str, str]) -> bool:
    """Whether ``python`` starts and is Python ``minor`` (a pyenv shim for a version it does not
    have starts and fails)."""
    done = run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        timeout=30,
        env=dict(environ),
    )
    return done is not None and done.ok and done.stdout.strip() == minor


def interpreter_candidates(version: str, environ: Mapping[str, str]) -> list[str]:
    """Interpreters that may be Python ``version``'s minor, most likely first: this one, pyenv's
    (``$PYENV_ROOT/versions/X.Y.*``), ``pythonX.Y`` on PATH, ``uv python find X.Y``, uv's own
    folder. Not yet checked: :func:`_runs_as` says whether one is."""
    minor = ".".join(version.split(".")[:2])
    candidates: list[str] = []
    if "{}.{}".format(*sys.version_info[:2]) == minor:
        candidates.append(sys.executable)
    root = environ.get("PYENV_ROOT") or os.path.join(environ.get("HOME", "~"), ".pyenv")
    candidates += sorted(
        glob.glob(
            os.path.join(os.path.expanduser(root), "versions", f"{minor}.*", "bin", "python")
        ),
        reverse=True,
    )
    on_path = shutil.which(f"python{minor}", path=environ.get("PATH"))
    if on_path:
        candidates.append(on_path)
    uv = shutil.which("uv", path=environ.get("PATH"))
    if uv is not None:
        # Finds what uv installed or found (its own folder, a project's venv); downloads nothing.
        done = run([uv, "python", "find", "--no-config", minor], timeout=30, env=dict(environ))
        if done is not None and done.ok and done.stdout.strip():
            candidates.append(done.stdout.strip().splitlines()[0])
    uv_root = os.path.join(environ.get("HOME", "~"), ".local", "share", "uv", "python")
    candidates += sorted(
        glob.glob(
            os.path.join(os.path.expanduser(uv_root), f"cpython-{minor}.*", "bin", "python3")
        ),
        reverse=True,
    )
    return list(dict.fromkeys(candidates))


_ANSWER = "cuda-resolve-python "


def check_interpreter(python: str, what: str, environ: Mapping[str, str]) -> str:
    """``python`` when it is a Python interpreter that runs; a :class:`UsageError` naming it
    (``what``: where it was given, ``--python-for NAME``) when it is no file, not a program, or
    a program that is not a Python. A bare name is looked up on ``environ``'s PATH."""
    hint = (
        f"{what}=PATH: the path of a Python interpreter (such as /usr/bin/python3.11 or a "
        "venv's bin/python)"
    )
    found = python if os.sep in python else shutil.which(python, path=environ.get("PATH"))
    if found is None or not os.path.lexists(found):
        raise UsageError(f"{what}={python}: no such file", hint=hint)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise UsageError(f"{what}={python}: not an executable program", hint=hint)
    done = run(
        [python, "-c", f"import sys; print('{_ANSWER}%d.%d' % sys.version_info[:2])"],
        timeout=30,
        env=dict(environ),
        cwd="/",
    )
    if done is None:
        why = "could not be started"
    elif done.returncode is None:
        why = "did not answer within 30 s"
    elif not done.ok:
        why = f"exited with status {done.returncode}" + (
            f": {done.first_line}" if done.first_line else ""
        )
    elif not done.stdout.startswith(_ANSWER):
        why = "answered something else than a Python does"
    else:
        return python
    raise UsageError(f"{what}={python}: not a Python interpreter ({why})", hint=hint)


def find_interpreter(version: str, given: str | None, environ: Mapping[str, str]) -> str | None:
    """A Python of ``version``'s minor: ``given``, this one, pyenv's, ``pythonX.Y`` on PATH,
    uv's."""
    if given:
        return given
    minor = ".".join(version.split(".")[:2])
    if "{}.{}".format(*sys.version_info[:2]) == minor:
        return sys.executable
    return next(
        (c for c in interpreter_candidates(version, environ) if _runs_as(c, minor, environ)), None
    )


def pip_markers(env: Environment) -> dict[str, str]:
    """The PEP 508 marker values pip is given for ``env``'s machine and Python: compat's
    :func:`~cuda_resolve.compat.marker_environment`, less ``extra`` (pip sets it per requirement)
    and, for PyPy, less ``implementation_version`` (PyPy's own version is in no profile: pip keeps
    the interpreter's). ``platform_release`` and ``platform_version`` (the kernel's) are in no
    profile either: they stay those of the machine running the lock."""
    values = {key: value for key, value in marker_environment(env).items() if key != "extra"}
    if env.python.implementation.lower() != "cpython":
        del values["implementation_version"]
    return values


#: The line the script below ends with when pip has no vendored ``default_environment`` to replace.
_NO_MARKERS = "cuda-resolve: no pip._vendor.packaging.markers.default_environment in "
#: What a pip older than 23.3 says when a dry run asks for another platform.
_NEEDS_TARGET = "Can not use any platform or abi specific options unless installing via '--target'"

#: Runs this process's pip under another interpreter as ``pip --python`` does (pip's
#: ``__pip-runner__.py``: only the name ``pip`` is looked up in pip's folder), with the marker
#: values given: pip evaluates markers through its vendored
#: ``packaging.markers.default_environment``.
_PIP_WITH_MARKERS = """
import json, runpy, sys
from importlib.machinery import PathFinder
root, values = sys.argv[1], json.loads(sys.argv[2])
del sys.argv[1:3]
class PipFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        return PathFinder.find_spec(fullname, [root], target) if fullname == "pip" else None
sys.meta_path.insert(0, PipFinder)
try:
    from pip._vendor.packaging import markers
except ImportError:
    markers = None
if not hasattr(markers, "default_environment"):
    import pip
    version = getattr(pip, '__version__', '(unknown version)')
    sys.exit(f"{NO_MARKERS}pip {version} at {pip.__path__[0]}")
default_environment = markers.default_environment
def profile_environment():
    found = default_environment()
    found.update(values)
    return found
markers.default_environment = profile_environment
runpy.run_module("pip", run_name="__main__", alter_sys=True)
""".replace("{NO_MARKERS}", _NO_MARKERS)


def _pip_root() -> str:
    """The folder holding the ``pip`` package this process would run (found, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("pip")
    if spec is None or spec.origin is None:
        raise LockError(
            "pip is not installed beside cuda-resolve",
            hint=f"{sys.executable} -m pip --version; reinstall cuda-resolve",
        )
    return os.path.dirname(os.path.dirname(spec.origin))


def platform_options(env: Environment) -> list[str]:
    """pip's target options for ``env``: Python version, implementation, ABI and every platform
    tag."""
    if env.machine.os == "linux" and not env.machine.glibc:
        raise UsageError(
            f"{env.source}: machine.glibc is not given, so pip cannot tell which "
            "manylinux wheels fit",
            hint='add it (machine.glibc = "2.35"; `ldd --version` says it), or save the profile '
            "with `cuda-resolve detect --save-profile`",
        )
    major, minor = env.python.version_tuple
    words = [
        "--python-version",
        f"{major}.{minor}",
        "--implementation",
        "cp" if env.python.implementation == "cpython" else "pp",
        "--abi",
        env.python.abi_tag,
    ]
    for tag in env.platform_tags():
        words += ["--platform", tag]
    return words


def _index_of(args: Sequence[str]) -> list[str]:
    urls = []
    for i, word in enumerate(args):
        if word in ("--index-url", "-i", "--extra-index-url") and i + 1 < len(args):
            urls.append(args[i + 1].rstrip("/"))
        elif word.startswith(("--index-url=", "--extra-index-url=")):
            urls.append(word.split("=", 1)[1].rstrip("/"))
    return urls


#: What pip writes when an index did not answer (urllib3's retries, pip's page fetch).
_NO_ANSWER = re.compile(
    r"connection broken by|Max retries exceeded|Could not fetch URL|Failed to establish a new "
    r"connection|Name or service not known|Temporary failure in name resolution|Connection "
    r"refused|timed out"
)
_BROKEN_PATH = re.compile(r"connection broken by .*: (/\S*)\s*$")
_FETCH_URL = re.compile(r"Could not fetch URL (https?://[^/\s:]+(?::\d+)?)")


def _unreachable(stderr: str, indexes: Sequence[str]) -> list[str]:
    """The index hosts pip said did not answer (none when pip failed for another reason): named
    by pip's 'Could not fetch URL', or by the path of urllib3's retry line against the indexes
    pip was given."""
    from urllib.parse import urlsplit

    hosts: list[str] = []
    for line in stderr.splitlines():
        if not _NO_ANSWER.search(line):
            continue
        fetched = _FETCH_URL.search(line)
        if fetched:
            hosts.append(_host(fetched.group(1)))
            continue
        broken = _BROKEN_PATH.search(line)
        path = broken.group(1) if broken else None
        for index in indexes:
            parts = urlsplit(index)
            if parts.scheme in ("http", "https") and (
                path is None or path.startswith(parts.path.rstrip("/") + "/")
            ):
                hosts.append(_host(index))
    return list(dict.fromkeys(hosts))


def _host(url: str) -> str:
    """``host[:port]`` of ``url``, never its user or password."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def _report(
    pip_python: str,
    markers: Mapping[str, str],
    words: Sequence[str],
    environ: Mapping[str, str],
    what: str,
    report_path: Path,
) -> list[dict[str, object]]:
    # This process's pip under the profile's interpreter, with the profile's marker values.
    command = [
        pip_python,
        "-c",
        _PIP_WITH_MARKERS,
        _pip_root(),
        json.dumps(dict(markers), sort_keys=True),
        "--isolated",
        "--disable-pip-version-check",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--report",
        str(report_path),
        "--quiet",
        "--only-binary=:all:",
        *words,
    ]
    done = run(command, timeout=PIP_SECONDS, env=dict(environ))
    if done is None:
        raise LockError(
            f"{pip_python} could not be started to resolve {what}",
            hint="give a Python interpreter that runs (--python-for NAME=PATH)",
        )
    if done.returncode is None:
        raise LockError(
            f"pip did not finish resolving {what} within {PIP_SECONDS} s",
            hint="check the index answers (cuda-resolve doctor --network)",
        )
    missing = (
        next((line for line in done.stderr.splitlines() if line.startswith(_NO_MARKERS)), None)
        if not done.ok
        else None
    )
    if missing is not None:
        # pip has no public option to evaluate markers for another machine: without this hook a
        # profile of another platform would get this machine's closure.
        pip = missing[len(_NO_MARKERS) :]
        raise LockError(
            f"{pip} has no pip._vendor.packaging.markers.default_environment, so profiles of "
            f"another platform cannot be closed with it (resolving {what})",
            hint="install a pip release that has it beside cuda-resolve (pip 26.3 does: "
            f"{sys.executable} -m pip install pip==26.3), "
            "then lock again",
        )
    if not done.ok and _NEEDS_TARGET in done.stderr:
        # pip < 23.3 takes --platform/--python-version only with --target, even in a dry run
        # (pypa/pip#12215, fixed by pypa/pip#12217 in 23.3).
        raise LockError(
            f"the pip beside cuda-resolve ({sys.executable}) is older than 23.3 and refuses the "
            f"profile's platform options in a dry run (resolving {what})",
            hint=f"upgrade it, then lock again: {sys.executable} -m pip install -U pip",
        )
    if not done.ok:
        errors = [
            line.strip() for line in done.stderr.splitlines() if line.startswith("ERROR")
        ] or done.stderr.strip().splitlines()[-3:]
        unreachable = _unreachable(done.stderr, _index_of(words))
        if unreachable:
            raise LockError(
                f"pip could not reach {', '.join(unreachable)} to resolve {what}: "
                f"{' / '.join(errors)}",
                hint="check the network or the proxy (cuda-resolve doctor --network), or use a "
                "mirror that answers (cuda-resolve mirror set PRESET); then lock again",
            )
        raise LockError(
            f"pip could not resolve {what}: {' / '.join(errors)}",
            hint="pip was asked for the profile's Python and platform with wheels only: a package "
            "with no wheel for it cannot be locked",
        )
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise LockError(
            f"pip's report for {what} is not JSON", hint="pip >= 22.2 is needed (its --report)"
        ) from None
    install = report.get("install") if isinstance(report, dict) else None
    if not isinstance(install, list):
        raise LockError(
            f"pip's report for {what} has no install list",
            hint="pip >= 22.2 is needed (its --report)",
        )
    return [entry for entry in install if isinstance(entry, dict)]


def _built(entry: dict[str, object], built: BuiltFile) -> ResolvedFile:
    from packaging.utils import canonicalize_name

    metadata = entry.get("metadata")
    assert isinstance(metadata, dict)
    return ResolvedFile(
        name=canonicalize_name(str(metadata.get("name"))),
        version=str(metadata.get("version")),
        url=built.url,
        sha256=built.sha256,
        requested=True,
        index=None,
        size=built.size,
    )


def _resolved(entry: dict[str, object], index: str | None, what: str) -> ResolvedFile:
    from packaging.utils import canonicalize_name

    metadata = entry.get("metadata")
    info = entry.get("download_info")
    if not isinstance(metadata, dict) or not isinstance(info, dict):
        raise LockError(
            f"pip's report for {what} has an entry without metadata", hint="pip >= 22.2 is needed"
        )
    name, version, url = (
        str(metadata.get("name")),
        str(metadata.get("version")),
        str(info.get("url")),
    )
    if "vcs_info" in info or "dir_info" in info:
        raise LockError(
            f"{name} {version} comes from {url} (a VCS checkout or a folder): a lock names files "
            "with hashes only",
            hint="build it into a wheel and serve it from an index (cuda-resolve wheelhouse), "
            "then lock again",
        )
    if not url.startswith(("https://", "http://")):
        raise LockError(
            f"{name} {version} comes from {url}: other machines cannot fetch that",
            hint="lock from an index served over HTTP(S)",
        )
    archive = info.get("archive_info")
    hashes = archive.get("hashes") if isinstance(archive, dict) else None
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    return ResolvedFile(
        name=canonicalize_name(name),
        version=version,
        url=url,
        sha256=str(sha256) if sha256 else None,
        requested=bool(entry.get("requested")),
        index=index,
    )


@frozen
class BuiltFile:
    """A source-built wheel of the plan, in the wheelhouse and served at ``url``."""

    path: Path
    url: str
    sha256: str
    size: int


class PipAnswers:
    """pip's answers (its report's install list) by the exact words asked: kept for the lock's run,
    and on disk for ``seconds`` (like the index pages), so relocking soon after asks pip again
    only for what changed; ``seconds=0`` (``lock --refresh``) always asks."""

    def __init__(self, folder: Path | None, *, seconds: float = 3600.0) -> None:
        self.folder = folder
        self.seconds = seconds
        self._run: dict[str, list[dict[str, object]]] = {}

    def _path(self, key: str) -> Path | None:
        return self.folder / f"{key}.json" if self.folder is not None else None

    def get(self, words: Sequence[str]) -> list[dict[str, object]] | None:
        import hashlib
        import time

        key = hashlib.sha256("\0".join(words).encode()).hexdigest()
        if key in self._run:
            return self._run[key]
        path = self._path(key)
        if path is None or self.seconds <= 0:
            return None
        try:
            if time.time() - path.stat().st_mtime > self.seconds:
                return None
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, list):
            return None
        self._run[key] = data
        return data

    def put(self, words: Sequence[str], entries: list[dict[str, object]]) -> None:
        import hashlib

        key = hashlib.sha256("\0".join(words).encode()).hexdigest()
        self._run[key] = entries
        path = self._path(key)
        if path is not None:
            from ..paths import write_atomic

            try:
                write_atomic(path, json.dumps(entries))
            except OSError:
                pass  # a cache that cannot be written is only slower


def pip_closure(
    plan: Plan,
    env: Environment,
    *,
    pip_python: str,
    index_url: str,
    environ: Mapping[str, str],
    scratch: Path,
    name: str,
    memo: PipAnswers | None = None,
    built: Mapping[str, BuiltFile] | None = None,
) -> list[ResolvedFile]:
    """Everything ``plan``'s pip steps would install for ``env``, one file each.

    Steps that ask the PyTorch index alone are resolved against it alone; later steps keep their
    results (a constraints file pins them) and may see that index too, as the torch pin they
    repeat is only there. ``memo`` keeps each pip answer for the lock's run: profiles of one
    Python, platform and plan (machine classes that differ only in GPUs or driver) ask pip once."""
    target = platform_options(env)
    markers = pip_markers(env)
    found: dict[str, ResolvedFile] = {}
    torch_indexes: list[str] = []
    constraints = scratch / f"{name}-constraints.txt"
    for number, step in enumerate(plan.steps):
        files = {digest: (built or {}).get(digest) for digest in step.built}
        missing = [digest for digest, found in files.items() if found is None]
        if missing:
            raise LockError(
                f"profile {name}: {step.purpose} installs source-built wheels the lock was not "
                f"given ({', '.join(missing)})",
                hint="build them first (cuda-resolve build REQ --profile FILE)",
            )
        local = {f.path.resolve().as_uri(): f for f in files.values() if f is not None}
        args = [*step.args, *(str(f.path) for f in files.values() if f is not None)]
        what = f"profile {name} ({step.purpose.split(' from ')[0]})"
        if step.torch_index_only and not step.pypi_index:
            indexes = _index_of(args)
            torch_indexes.extend(indexes)
            words = [*target, *args]
        else:
            words = [
                *target,
                "--index-url",
                index_url,
                *(w for u in torch_indexes for w in ("--extra-index-url", u)),
            ]
            if found:
                constraints.write_text(
                    "".join(f"{f.name}=={f.version}\n" for f in found.values()), encoding="utf-8"
                )
                words += ["-c", str(constraints)]
            words += args
            indexes = [index_url.rstrip("/")]
        # The constraints' text, not the scratch file's name, is what pip was asked.
        key = [
            pip_python,
            *(w for w in words if w != str(constraints)),
            constraints.read_text(encoding="utf-8") if "-c" in words else "",
            *(f"{f.path.name}:{f.sha256}" for f in local.values()),
            json.dumps(markers, sort_keys=True),
        ]
        entries = memo.get(key) if memo is not None else None
        if entries is None:
            entries = _report(
                pip_python, markers, words, environ, what, scratch / f"{name}-{number}.json"
            )
            if memo is not None:
                memo.put(key, entries)
        for entry in entries:
            info = entry.get("download_info")
            here = local.get(str(info.get("url"))) if isinstance(info, dict) else None
            if here is not None:
                resolved = _built(entry, here)
            else:
                resolved = _resolved(entry, indexes[0] if indexes else None, what)
            if (
                resolved.name in found
                and number > 0
                and found[resolved.name].version == resolved.version
            ):
                continue  # kept from an earlier step
            found[resolved.name] = resolved
    return sorted(found.values(), key=lambda f: f.name)
