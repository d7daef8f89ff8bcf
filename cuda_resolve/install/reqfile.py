"""The requirements inside pip requirement files (``-r requirements.txt``), as cuda-pip needs them.

pip still reads the files itself (cuda-pip passes ``-r FILE`` through untouched); cuda-pip only
needs the names in them, so that a ``pointnet2_ops`` or ``kaolin`` line is resolved and built like
one on the command line, and a look-alike name is caught like one on the command line. What pip
alone understands (options, editables, paths, URLs without a name) is left to pip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from .._bounded import read_user_text
from ..errors import UsageError

__all__ = ["FileRequirement", "read_requirement_files", "requirement_file_options"]

#: A requirements file that nests deeper than this is a loop or a mistake.
_MAX_DEPTH = 10
_FILE_OPTIONS = ("-r", "--requirement")


@dataclass(frozen=True, kw_only=True, slots=True)
class FileRequirement:
    text: str  # the PEP 508 requirement, per-requirement options (--hash ...) removed
    origin: str  # "requirements.txt:3", for messages


def _file_option(option: str, value: str) -> str | None:
    """The file a ``-r FILE`` / ``-rFILE`` / ``--requirement[=]FILE`` option names, else None."""
    if option in _FILE_OPTIONS:
        return value or None
    if option.startswith("--requirement="):
        return option.split("=", 1)[1] or None
    if option.startswith("-r") and len(option) > 2:
        return option[2:]
    return None


def requirement_file_options(pip_args: Sequence[str]) -> list[Path]:
    """The files named by ``-r`` options among pip's arguments."""
    words = list(pip_args)
    files: list[Path] = []
    for i, word in enumerate(words):
        if word.startswith("-") and not word.startswith("---"):
            named = _file_option(word, words[i + 1] if i + 1 < len(words) else "")
            if named is not None:
                files.append(Path(named))
    return files


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) with comments removed and backslash continuations joined."""
    lines: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        # As pip reads it: "#" starts a comment at the line start or after whitespace only, so a
        # URL's "#egg=" fragment is kept.
        cut = next((i for i, ch in enumerate(raw) if ch == "#" and (i == 0 or raw[i - 1].isspace())), len(raw))
        line = raw[:cut]
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append((start, (pending + line).strip()))
        pending = ""
    if pending.strip():
        lines.append((start, pending.strip()))
    return [(n, line) for n, line in lines if line]


def _requirement_part(line: str) -> str:
    """The requirement of a line, without the per-requirement options pip allows after it."""
    for marker in (" --hash", " --config-settings", " -C ", " --global-option", " --install-option"):
        if marker in line:
            line = line.split(marker, 1)[0]
    return line.strip()


def read_requirement_files(paths: Sequence[Path]) -> list[FileRequirement]:
    """Every named requirement in ``paths`` and the files they include (``-r`` inside a file is
    relative to that file, as pip reads it). Constraint files (``-c``) are not requests."""
    found: list[FileRequirement] = []
    seen: set[Path] = set()

    def visit(path: Path, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise UsageError(f"requirements file {path} nests -r more than {_MAX_DEPTH} deep",
                             hint="check the -r lines of the files for a loop")
        resolved = path.resolve()
        if resolved in seen:
            return
        seen.add(resolved)
        text = read_user_text(path, what="a pip requirements file", hint="check the path given to -r")
        for number, line in _logical_lines(text):
            if line.startswith("-"):
                option, _, value = line.partition(" ")
                named = _file_option(option, value.strip())
                if named is not None:
                    visit(path.parent / named, depth + 1)  # an absolute path stays absolute
                continue  # -c, -e, --index-url ...: pip's alone
            requirement = _requirement_part(line)
            try:
                Requirement(requirement)
            except InvalidRequirement:
                continue  # a path, a bare URL, an archive: pip's to read
            found.append(FileRequirement(text=requirement, origin=f"{path}:{number}"))

    for path in paths:
        visit(path, 0)
    return found
