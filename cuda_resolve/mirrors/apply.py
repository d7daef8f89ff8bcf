"""``mirror set``: plan the three file edits, show them as diffs, or write them safely.

Writing is all or nothing (:mod:`.writes`): every changed file's new text goes to a temporary
file beside it first (the real test that it can be written), then each gets a timestamped backup
next to it (``pip.conf.20261202-153000.bak``), and only then are the targets replaced
(``os.replace``, keeping the permission bits). If any target cannot be written, no file is
changed and no backup is left. A symlinked file is edited where the link points (and backed up
there); the link itself is left as it is, and a link to a device or FIFO is refused. An unchanged
file is not touched, so a second identical ``set`` writes nothing. A new file that holds a
credential (a URL with user info) is created 0600.

Concurrent runs are serialised (:mod:`.locks`): one user's runs by :func:`locked`, held around
both the reading and the writing; runs of several users on one environment's files by the lock
beside those files, held by :func:`apply_plan`, which reads the files again under it and plans
afresh if someone changed them since the plan was made, so no one's edit is lost.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Literal

from .._bounded import FileTooLargeError, NotRegularFileError, read_bytes
from .._frozen import frozen
from ..config import CONFIG_ENV, ConfigError
from ..errors import UsageError
from ..redaction import redact_urls
from .condarc import edit_condarc
from .locks import environment_locked, locked
from .pipconf import read_pip_settings, set_index_url
from .presets import Preset
from .selfconf import edit_own_config
from .targets import Targets
from .writes import PendingWrite, write_all

__all__ = ["Applied", "FileChange", "Plan", "apply_plan", "holds_credentials", "locked", "plan_set"]

Tool = Literal["pip", "conda", "cuda-resolve"]


@frozen
class FileChange:
    tool: Tool
    path: Path
    old: str | None  # None: the file does not exist yet
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        old_lines = [] if self.old is None else self.old.splitlines(keepends=True)
        new_lines = self.new.splitlines(keepends=True)
        label = str(self.path)
        return "".join(
            difflib.unified_diff(
                old_lines,
                new_lines,
                fromfile="/dev/null" if self.old is None else f"{label} (now)",
                tofile=f"{label} (after)",
            )
        )


@frozen
class Plan:
    preset: Preset
    targets: Targets
    changes: tuple[FileChange, ...]
    notes: tuple[str, ...] = ()
    #: What the plan was made with (``.condarc`` edits recognise every preset's channels), so
    #: that :func:`apply_plan` can plan afresh.
    all_presets: tuple[Preset, ...] = ()

    @property
    def pending(self) -> tuple[FileChange, ...]:
        return tuple(change for change in self.changes if change.changed)


@frozen
class Applied:
    change: FileChange
    written: bool
    backup: Path | None = None


def _read(path: Path) -> str | None:
    """The file's text through the bounded reader; ``None`` when it does not exist yet.

    A FIFO, a device or a socket (or a link to one) is refused here, before anything is
    planned: ``mirror set`` replaces regular files only."""
    try:
        return read_bytes(path).decode("utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None  # not there yet (a parent that is a file is reported when writing)
    except IsADirectoryError:
        raise UsageError(
            f"{path}: is a directory, expected a file", hint="move it away or pick another scope"
        ) from None
    except (NotRegularFileError, FileTooLargeError) as exc:
        raise UsageError(
            f"{path}: {exc.strerror}; mirror set edits regular files only",
            hint="point the link (or the file) at a regular file, or pick another scope",
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text", hint=f"fix {path} by hand") from None
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot be read: {exc.strerror}", hint="check its permissions"
        ) from None


def _overridden(variable: str, value: str, target: Path) -> str:
    return (
        f"{variable} is set ({redact_urls(value)}) in this shell and takes precedence over "
        f"{target}: unset it (or point it at the mirror) for the mirror to apply"
    )


def _override_notes(changes: Iterable[FileChange], environ: Mapping[str, str]) -> list[str]:
    """Variables that make a written file ineffective (pip and conda read them over the files)."""
    notes: list[str] = []
    for change in changes:
        if change.tool == "pip":
            for variable in ("PIP_INDEX_URL", "PIP_CONFIG_FILE"):
                value = environ.get(variable)
                if value and Path(value) != change.path:
                    notes.append(_overridden(variable, value, change.path))
        elif change.tool == "conda":
            value = environ.get("CONDARC")
            if value and Path(value).expanduser() != change.path:
                notes.append(_overridden("CONDARC", value, change.path))
    return notes


def plan_set(
    preset: Preset,
    targets: Targets,
    *,
    all_presets: Iterable[Preset],
    environ: Mapping[str, str] | None = None,
) -> Plan:
    """The edits ``mirror set`` would make; reads the files, writes nothing."""
    presets = list(all_presets)
    changes: list[FileChange] = []
    notes: list[str] = list(targets.notes)
    if preset.pypi is not None and preset.covers("pypi"):
        old = _read(targets.pip)
        new = set_index_url(old or "", preset.pypi.simple, origin=str(targets.pip))
        changes.append(FileChange(tool="pip", path=targets.pip, old=old, new=new))
        trusted = read_pip_settings(new, origin=str(targets.pip)).trusted_hosts
        if trusted:
            notes.append(
                f"{targets.pip}: trusted-host {' '.join(trusted)} is kept but turns certificate "
                "checks off for those hosts; pip >= 24.2 uses the system trust store, "
                "so remove it"
            )
    if targets.condarc is not None and preset.covers("conda"):
        old = _read(targets.condarc)
        new, conda_notes = edit_condarc(
            old or "", preset, all_presets=presets, origin=str(targets.condarc)
        )
        changes.append(FileChange(tool="conda", path=targets.condarc, old=old, new=new))
        notes.extend(conda_notes)
    old = _read(targets.config)
    new = edit_own_config(old, preset, origin=str(targets.config))
    changes.append(FileChange(tool="cuda-resolve", path=targets.config, old=old, new=new))
    notes.extend(_override_notes(changes, os.environ if environ is None else environ))
    if preset.pypi is not None and preset.pypi.note:
        notes.append(f"pypi: {preset.pypi.note}")
    if preset.pytorch is not None and preset.pytorch.note:
        notes.append(f"pytorch: {preset.pytorch.note}")
    return Plan(
        preset=preset,
        targets=targets,
        changes=tuple(changes),
        notes=tuple(notes),
        all_presets=tuple(presets),
    )


def _through_links(path: Path) -> Path:
    """The file a symlinked dotfile points at (stow, chezmoi, a lab's shared config): it is
    edited there, so the link stays a link instead of being replaced by a copy."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _hint(change: FileChange) -> str:
    if change.tool == "cuda-resolve":
        return (
            "check that its folder can be created and written (not /proc, not a read-only mount), "
            f"or point {CONFIG_ENV} at a writable file"
        )
    return "check that its folder can be created and written, or choose another --scope / --python"


def holds_credentials(text: str) -> bool:
    """A URL with user info (``https://lab:token@mirror/``) in the text: a new file is made 0600."""
    return redact_urls(text) != text


def apply_plan(plan: Plan, *, now: datetime | None = None) -> tuple[Applied, ...]:
    """Back up and write every changed file, all or nothing; unchanged files are left alone.

    Under the lock beside an environment's files, the files are read again: if one changed
    since ``plan`` was made (another user's ``mirror set`` or a hand edit), the edit is planned
    afresh on what is there now, so that change is kept rather than overwritten."""
    with environment_locked(plan.targets):
        if any(_read(change.path) != change.old for change in plan.changes):
            plan = plan_set(plan.preset, plan.targets, all_presets=plan.all_presets)
        return _write(plan, now=now)


def _write(plan: Plan, *, now: datetime | None) -> tuple[Applied, ...]:
    pending = plan.pending
    backups = iter(
        write_all(
            [
                PendingWrite(
                    path=change.path,
                    target=_through_links(change.path),
                    text=change.new,
                    hint=_hint(change),
                    private=holds_credentials(change.new),
                )
                for change in pending
            ],
            now=now,
        )
    )
    return tuple(
        Applied(change=change, written=True, backup=next(backups))
        if change.changed
        else Applied(change=change, written=False)
        for change in plan.changes
    )
