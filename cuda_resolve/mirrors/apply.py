"""``mirror set``: plan the three file edits, show them as diffs, or write them safely.

Writing is: check every target can be written, then per changed file a timestamped backup next
to it (``pip.conf.20261202-153000.bak``), then an atomic replace (temporary file in the same
folder, fsync, ``os.replace``) that keeps the file's permission bits. A symlinked file is
edited where the link points (and backed up there); the link itself is left as it is. An unchanged file is not
touched, so a second identical ``set`` writes nothing.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from ..config import ConfigError
from ..errors import UsageError
from .condarc import edit_condarc
from .pipconf import read_pip_settings, set_index_url
from .presets import Preset
from .selfconf import edit_own_config
from .targets import Targets

__all__ = ["Applied", "FileChange", "Plan", "apply_plan", "plan_set"]

Tool = Literal["pip", "conda", "cuda-resolve"]


@dataclass(frozen=True, kw_only=True, slots=True)
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


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    preset: Preset
    targets: Targets
    changes: tuple[FileChange, ...]
    notes: tuple[str, ...] = ()

    @property
    def pending(self) -> tuple[FileChange, ...]:
        return tuple(change for change in self.changes if change.changed)


@dataclass(frozen=True, kw_only=True, slots=True)
class Applied:
    change: FileChange
    written: bool
    backup: Path | None = None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None  # not there yet (a parent that is a file is reported when writing)
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected a file", hint="move it away or pick another scope") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text", hint=f"fix {path} by hand") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror}", hint="check its permissions") from None


def _overridden(variable: str, value: str, target: Path) -> str:
    return (
        f"{variable} is set ({value}) in this shell and takes precedence over {target}: "
        "unset it (or point it at the mirror) for the mirror to apply"
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
    preset: Preset, targets: Targets, *, all_presets: Iterable[Preset], environ: Mapping[str, str] | None = None
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
                f"{targets.pip}: trusted-host {' '.join(trusted)} is kept but turns certificate checks off "
                "for those hosts; pip >= 24.2 uses the system trust store, so remove it"
            )
    if targets.condarc is not None and preset.covers("conda"):
        old = _read(targets.condarc)
        new, conda_notes = edit_condarc(old or "", preset, all_presets=presets, origin=str(targets.condarc))
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
    return Plan(preset=preset, targets=targets, changes=tuple(changes), notes=tuple(notes))


def _writable(path: Path) -> None:
    """Raise a UsageError naming ``path`` when it cannot be created or replaced."""
    folder = path.parent
    while not folder.exists():
        if folder.parent == folder:
            break
        folder = folder.parent
    if path.exists() and not os.access(path, os.R_OK):
        raise UsageError(f"{path}: cannot be read", hint="check its permissions, or choose another --scope")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(
            f"{path}: cannot be written ({folder} is not a writable folder)",
            hint="check the permissions, or choose another --scope / --python",
        )


def _through_links(path: Path) -> Path:
    """The file a symlinked dotfile points at (stow, chezmoi, a lab's shared config): it is
    edited there, so the link stays a link instead of being replaced by a copy."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _backup_path(path: Path, now: datetime) -> Path:
    stamp = now.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.{stamp}.bak")
    counter = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{stamp}-{counter}.bak")
        counter += 1
    return candidate


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def apply_plan(plan: Plan, *, now: datetime | None = None) -> tuple[Applied, ...]:
    """Back up and write every changed file; unchanged files are left alone."""
    when = now or datetime.now()
    pending = plan.pending
    for change in pending:
        _writable(_through_links(change.path))
    results: list[Applied] = []
    for change in plan.changes:
        if not change.changed:
            results.append(Applied(change=change, written=False))
            continue
        backup: Path | None = None
        target = _through_links(change.path)
        try:
            if change.old is not None:
                backup = _backup_path(target, when)
                shutil.copy2(target, backup)
            _atomic_write(target, change.new)
        except OSError as exc:
            done = ", ".join(str(item.change.path) for item in results if item.written) or "none"
            raise UsageError(
                f"{change.path}: cannot be written: {exc.strerror or exc}",
                hint=f"files already written: {done}; backups lie next to them",
            ) from None
        results.append(Applied(change=change, written=True, backup=backup))
    return tuple(results)
