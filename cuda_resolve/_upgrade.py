"""The command that upgrades this cuda-resolve, for where it was installed from.

A file from a newer cuda-resolve (a plan, a lock, a profile, an index layer) is refused with
"upgrade cuda-resolve", and the way to do that depends on how this one came: from a checkout
(``pip install .``), a checkout installed editable, a Git URL, a wheel or archive file, or an
index. ``pip install -U cuda-resolve`` is right for the last only: elsewhere it finds nothing
or another project of that name. pip records the others in the distribution's
``direct_url.json`` (PEP 610), which is read here, only when such a refusal is made.
"""

from __future__ import annotations

import json
import shlex
import sys
from urllib.parse import unquote, urlsplit

__all__ = ["command_to_install", "install_words", "upgrade_hint", "upgrade_way"]

_NAME = "cuda-resolve"


def upgrade_hint() -> str:
    """``upgrade cuda-resolve (HOW)``, for the start of a hint."""
    return f"upgrade cuda-resolve ({upgrade_way(_direct_url(), install_words())})"


def install_words(python: str | None = None) -> list[str]:
    """The words that install into this interpreter's environment (``python``: another name for
    it): its pip; where it has none (an environment uv made, a ``uv tool``), uv's pip."""
    import importlib.util
    import shutil

    python = python or sys.executable
    if importlib.util.find_spec("pip") is None:
        uv = shutil.which("uv")
        if uv is not None:
            return [uv, "pip", "install", "--python", python]
    return [python, "-m", "pip", "install"]


def command_to_install(requirement: str) -> str:
    """The shell command that installs ``requirement`` next to cuda-resolve (a bare ``pip`` may
    be another environment's)."""
    return shlex.join([*install_words(), requirement])


def upgrade_way(direct_url: str | None, install: list[str]) -> str:
    """How to upgrade, from ``direct_url.json``'s text (None: installed from an index) and the
    words that install into cuda-resolve's environment (:func:`install_words`)."""
    pip = [*install, "-U"]
    if direct_url is None:
        return shlex.join([*pip, _NAME])
    try:
        data = json.loads(direct_url)
        url = data["url"]
        assert isinstance(url, str) and url
    except (ValueError, KeyError, TypeError, AssertionError):
        return shlex.join([*pip, _NAME])  # pip wrote it, so this is a damaged file: the usual way
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        # pip keeps a Git URL's version when it is unchanged (a static 0.1.0): it must be told
        # to install the new commit.
        requirement = f"{vcs['vcs']}+{_without_password(url)}"
        revision = vcs.get("requested_revision")
        if isinstance(revision, str) and revision:
            requirement += f"@{revision}"
        subdirectory = data.get("subdirectory")
        if isinstance(subdirectory, str) and subdirectory:
            requirement += f"#subdirectory={subdirectory}"
        return shlex.join([*pip, "--force-reinstall", requirement])
    where = _local_path(url)
    directory = data.get("dir_info")
    if isinstance(directory, dict) and where is not None:
        if directory.get("editable"):
            return f"it runs from the checkout {shlex.quote(where)}: update that checkout"
        return f"update the checkout {shlex.quote(where)}, then {shlex.join([*pip, where])}"
    source = where if where is not None else _without_password(url)
    return f"it was installed from {shlex.quote(source)}: {shlex.join([*pip, 'NEWER-FILE'])}"


def _direct_url() -> str | None:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        return distribution(_NAME).read_text("direct_url.json")
    except PackageNotFoundError:  # run from a source tree on sys.path: no distribution at all
        return None


def _local_path(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return unquote(parts.path)


def _without_password(url: str) -> str:
    """The URL without a password written into it. pip keeps none there itself (PEP 610), but
    it keeps what a clone needs: a user name (``git@`` of an SSH URL) and ``${VARIABLE}``s."""
    parts = urlsplit(url)
    login, at, host = parts.netloc.rpartition("@")
    user, colon, password = login.partition(":")
    if not at or not colon or password.startswith("${"):
        return url
    return parts._replace(netloc=f"{user}@{host}").geturl()
