"""The profiles a lock covers: each a short name (a PEP 685 extra) and an Environment."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from packaging.utils import canonicalize_name

from .._frozen import frozen
from ..environment import Environment
from ..errors import UsageError

__all__ = ["LockProfile", "load_lock_profile", "profile_name", "refuse_clashes"]

#: A normalised extra name (PEP 685): lower case, runs of ``-_.`` collapsed to one ``-``.
_EXTRA = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@frozen
class LockProfile:
    name: str  # normalised as a PEP 685 extra: what `pip install -r 'pylock.toml[NAME]'` selects
    environment: Environment
    source: str  # the profile file as given, or "this" (the machine lock runs on)
    digest: str  # sha256 of the profile's bytes (of its saved form for "this")


def profile_name(text: str, *, origin: str) -> str:
    """``text`` normalised as a PEP 685 extra; an error naming ``origin`` when it cannot be one."""
    name = canonicalize_name(text)
    if not _EXTRA.match(name):
        raise UsageError(
            f"{origin}: {text!r} cannot name a profile (a lock's extra): use letters, digits, "
            "'-', '_' or '.'",
            hint="rename the file, or give the name: --profile NAME=FILE",
        )
    return name


def load_lock_profile(spec: str, *, detect: Callable[[], Environment] | None = None) -> LockProfile:
    """``FILE``, ``NAME=FILE`` or ``this`` (``detect()``'s machine); a file's ``name = "..."``
    (top level) names it, else its stem."""
    from .._toml import parse_toml_text
    from ..profile import dump_profile, environment_from_dict

    given_name, _, path_text = spec.rpartition("=") if "=" in spec else ("", "", spec)
    if path_text == "this" and detect is not None:
        env = detect()
        text = dump_profile(env)
        name = profile_name(given_name or "this", origin="--profile this")
        return LockProfile(
            name=name,
            environment=env,
            source="this",
            digest=hashlib.sha256(text.encode()).hexdigest(),
        )
    from .._bounded import read_user_text
    from ..errors import ProfileError

    path = Path(path_text)
    text = read_user_text(
        path,
        error=ProfileError,
        hint="write one with `cuda-resolve detect --save-profile FILE`",
        what="a profile",
    )
    data = parse_toml_text(
        text,
        origin=str(path),
        error=ProfileError,
        hint="write one with `cuda-resolve detect --save-profile FILE`",
    ).data
    own = data.pop("name", None)
    if own is not None and not isinstance(own, str):
        raise ProfileError(f"{path}: name = {own!r}: expected a string", hint='name = "a100"')
    environment = environment_from_dict(data, origin=str(path))
    name = profile_name(given_name or own or path.stem, origin=str(path))
    return LockProfile(
        name=name,
        environment=environment,
        source=str(path),
        digest=hashlib.sha256(text.encode()).hexdigest(),
    )


def refuse_clashes(profiles: list[LockProfile]) -> None:
    seen: dict[str, str] = {}
    for profile in profiles:
        if profile.name in seen:
            raise UsageError(
                f"two profiles are both named {profile.name!r}: {seen[profile.name]} and "
                f"{profile.source}",
                hint='name one of them: --profile OTHER=FILE, or `name = "..."` in the file',
            )
        seen[profile.name] = profile.source
