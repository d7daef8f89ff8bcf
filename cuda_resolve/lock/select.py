"""Which profile of a lock fits a machine, and which locked files that profile installs there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from .._frozen import frozen
from ..compat import driver_supports_cuda, marker_environment, uncovered_gpus
from ..environment import Environment
from ..errors import LockError, UsageError
from ..index.cuda import parse_arch_list
from ..versions import CudaVersion
from .document import ProfileRecord
from .read import ReadLock

if TYPE_CHECKING:
    from ..index.cuda import CudaFactsSource

__all__ = ["Wanted", "choose_profile", "differences", "named_profile_notes", "wanted_files"]


@frozen
class Wanted:
    """One locked file the profile installs here."""

    name: str  # canonical
    version: str
    file: str
    url: str
    size: int | None
    sha256: str


def differences(record: ProfileRecord, env: Environment, facts: CudaFactsSource) -> list[str]:
    """The facts of this machine that differ from what ``record`` was locked for (empty: it
    fits)."""
    found: list[str] = []
    if env.python.short_version != record.python:
        found.append(f"Python {env.python.short_version} here, {record.python} locked")
    if (env.machine.os, env.machine.arch) != (record.os, record.arch):
        found.append(f"{env.machine.os}/{env.machine.arch} here, {record.os}/{record.arch} locked")
    here = sorted({str(c) for c in env.capabilities})
    if bool(here) != bool(record.capabilities):
        found.append(
            f"GPUs here: {', '.join(here) or 'none'}; locked for: "
            f"{', '.join(record.capabilities) or 'none'}"
        )
    elif here:
        if here != sorted(record.capabilities):
            found.append(
                f"GPU compute capability {', '.join(here)} here; locked for "
                f"{', '.join(record.capabilities)}"
            )
        if record.torch_arch_list:
            uncovered = uncovered_gpus(parse_arch_list(record.torch_arch_list), env.gpus)
            if uncovered:
                found.append(
                    f"the locked torch ({record.torch_arch_list}) has no kernels for "
                    f"{', '.join(g.name for g in uncovered)}"
                )
    if record.torch_cuda:
        verdict = driver_supports_cuda(env.driver, CudaVersion.parse(record.torch_cuda), facts)
        if not verdict.ok:
            found.append(verdict.reason)
    return found


def choose_profile(lock: ReadLock, env: Environment, facts: CudaFactsSource, name: str) -> str:
    """``name`` checked to be in the lock, or with ``auto`` the one profile that fits this
    machine."""
    if name != "auto":
        wanted = canonicalize_name(name)
        if wanted not in lock.profiles:
            raise UsageError(
                f"{lock.origin} has no profile {name!r}; it has {', '.join(sorted(lock.profiles))}",
                hint="--name NAME with one of those, or --name auto to pick the one that fits "
                "this machine",
            )
        record = lock.profiles[wanted]
        # Another platform's wheels would not run here; PEP 751's selection could still find
        # this platform's files in the entries other profiles share (user walk C3).
        if (record.os, record.arch) != (env.machine.os, env.machine.arch):
            raise LockError(
                f"profile {wanted} of {lock.origin} was locked for {record.os}/{record.arch}; "
                f"this machine is {env.machine.os}/{env.machine.arch}",
                hint="sync the profile for this platform (--name auto picks the one that fits), "
                f"or run the sync on a {record.os}/{record.arch} machine",
            )
        return wanted
    fitting = []
    lines = []
    for profile, record in sorted(lock.profiles.items()):
        diff = differences(record, env, facts)
        if not diff:
            fitting.append(profile)
        lines.append(f"{profile}: {'fits' if not diff else '; '.join(diff)}")
    if len(fitting) == 1:
        return fitting[0]
    what = "no profile" if not fitting else f"{len(fitting)} profiles ({', '.join(fitting)})"
    raise LockError(
        f"{what} of {lock.origin} fit this machine: " + " | ".join(lines),
        hint=_way_out(lock, env, fitting),
    )


def named_profile_notes(
    lock: ReadLock, env: Environment, facts: CudaFactsSource, name: str, profile: str
) -> list[str]:
    """What differs here from the profile ``--name`` chose (a login node preparing a GPU node's
    environment is one reason to name one): said, not refused; none for ``auto``, which chose a
    profile that fits."""
    if name == "auto":
        return []
    return [
        f"profile {profile} was locked for another machine: {difference} (--name auto picks a "
        "profile that fits this one)"
        for difference in differences(lock.profiles[profile], env, facts)
    ]


def _way_out(lock: ReadLock, env: Environment, fitting: list[str]) -> str:
    """One line to paste: sync one of the profiles that fit, or, where none does, lock this
    machine's profile into the lock (its requests, index and served wheelhouse) and sync that."""
    import re
    import shlex

    target = ["--python", env.python.executable] if env.python.executable else []
    if fitting:
        first = shlex.join(["cuda-resolve", "sync", lock.origin, "--name", fitting[0], *target])
        return f"pick one: {first} (or --name {' or --name '.join(fitting[1:])})"
    options = []
    if lock.index_url and lock.index_url.rstrip("/") != "https://pypi.org/simple":
        options += ["--index-url", lock.index_url]
    # A source build locked at --wheelhouse-url: its URL is that folder's wheels/NAME/DIGEST/FILE.
    served = (
        re.match(r"(https?://.+)/wheels/[^/]+/[0-9a-f]{16}/[^/]+$", wheel.url or "")
        for package in lock.pylock.packages
        for wheel in package.wheels or ()
    )
    house = next((found.group(1) for found in served if found), None)
    if house is not None:
        options += ["--wheelhouse-url", house]
    detect = shlex.join(["cuda-resolve", "detect", "--save-profile", "this-machine.toml", *target])
    # lock writes only PEP 751's names: a lock read under another name is copied to one first.
    origin, copy = lock.origin, ""
    name = origin.replace("\\", "/").rsplit("/", 1)[-1]
    if not re.fullmatch(r"pylock\.([^.]+\.)?toml", name):
        stem = re.sub(r"[^A-Za-z0-9_-]+", "-", name.removesuffix(".toml")).strip("-") or "lab"
        origin = origin[: len(origin) - len(name)] + f"pylock.{stem}.toml"
        copy = shlex.join(["cp", lock.origin, origin]) + " && "
    profile = ["--profile", "this-machine.toml", "--update", "-o", origin, *options]
    relock = shlex.join(["cuda-resolve", "lock", *lock.requests, *profile])
    sync = shlex.join(["cuda-resolve", "sync", origin, "--name", "this-machine", *target])
    return (
        f"lock this machine's profile into it, then sync that: {copy}{detect} && {relock} && {sync}"
    )


def wanted_files(lock: ReadLock, profile: str, env: Environment) -> list[Wanted]:
    """The files ``profile`` installs on ``env`` (PEP 751's selection: markers with the profile as
    the one extra, the best wheel for the target's tags)."""
    try:
        from packaging.pylock import PackageWheel, PylockSelectError
    except ImportError:  # before packaging 26.1
        from packaging.pylock import PackageWheel

        PylockSelectError = LockError  # type: ignore[misc, assignment]

    markers = dict(marker_environment(env))
    try:
        if hasattr(lock.pylock, "select"):
            chosen = list(
                lock.pylock.select(
                    environment=markers,  # type: ignore[arg-type]
                    tags=env.wheel_tags(),
                    extras={profile},
                )
            )
        else:  # packaging 25.0 - 26.0 reads and validates pylock files, and selects nothing
            chosen = _select(lock, profile, env, markers)
    except PylockSelectError as exc:
        raise LockError(
            f"{lock.origin}: profile {profile} cannot be installed here: {exc}",
            hint="check the profile fits this machine (sync --name auto says which facts differ)",
        ) from None
    wanted = []
    for package, source in chosen:
        if not isinstance(source, PackageWheel) or source.url is None:
            raise LockError(
                f"{lock.origin}: {package.name} is locked as {type(source).__name__}, not a wheel "
                "with a URL: sync installs wheels only",
                hint="lock it again with cuda-resolve lock",
            )
        sha256 = (source.hashes or {}).get("sha256")
        if not sha256:
            raise LockError(
                f"{lock.origin}: {package.name}'s wheel {source.filename} has no sha256",
                hint="lock it again with cuda-resolve lock",
            )
        wanted.append(
            Wanted(
                name=str(package.name),
                version=str(package.version),
                file=source.filename,
                url=source.url,
                size=source.size,
                sha256=str(sha256),
            )
        )
    return sorted(wanted, key=lambda w: w.name)


def _select(
    lock: ReadLock, profile: str, env: Environment, markers: dict[str, str]
) -> list[tuple[Any, Any]]:
    """PEP 751's selection, for a packaging without ``Pylock.select``: markers with the profile as
    the one extra, then each package's wheel with the best tag for the target."""
    from packaging.utils import parse_wheel_filename

    priority = {tag: rank for rank, tag in enumerate(env.wheel_tags())}
    chosen: dict[str, tuple[Any, Any]] = {}
    for position, package in enumerate(lock.pylock.packages):
        if package.marker is not None and not package.marker.evaluate(
            dict(markers, extras=frozenset({profile})), context="lock_file"
        ):  # type: ignore[arg-type, call-arg, dict-item, unused-ignore]
            continue
        if package.name in chosen:
            raise LockError(
                f"{lock.origin}: packages[{position}]: a second {package.name} for "
                f"profile {profile}",
                hint="lock it again",
            )
        ranked = sorted(
            (
                (
                    min(
                        (
                            priority.get(t, len(priority))
                            for t in parse_wheel_filename(w.filename)[3]
                        ),
                        default=len(priority),
                    ),
                    i,
                )
                for i, w in enumerate(package.wheels or ())
            )
        )
        if not ranked or ranked[0][0] >= len(priority):
            raise LockError(
                f"{lock.origin}: packages[{position}]: no wheel of {package.name} fits this "
                "machine's tags",
                hint="check the profile fits this machine (sync --name auto says which "
                "facts differ)",
            )
        chosen[str(package.name)] = (package, (package.wheels or ())[ranked[0][1]])
    return list(chosen.values())
