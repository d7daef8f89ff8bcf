"""The requirements inside pip requirement files (``-r requirements.txt``), as cuda-pip needs them.

pip still reads the files itself (cuda-pip passes ``-r FILE`` through untouched); cuda-pip only
needs the names in them, so that a ``pointnet2_ops`` or ``kaolin`` line is resolved and built like
one on the command line, a look-alike name is caught like one on the command line, and a
constraint (``-c``) on a package cuda-resolve decides is part of that decision. Files are read
the way pip reads them: lines joined at a trailing backslash, then comments removed, ``${NAME}``
taken from the environment, options split like a shell would, a UTF-16/32 byte-order mark
honoured. What pip alone understands (editables, paths, URLs without a name, files given by URL)
is left to pip.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from .._bounded import read_bytes
from .._frozen import frozen
from ..errors import UsageError
from ..redaction import register_secret
from ._words import split_words

__all__ = [
    "FileOption",
    "FileRequests",
    "FileRequirement",
    "Reading",
    "option_value",
    "read_requirement_files",
    "requirement_file_options",
    "select_requests",
]

#: A requirements file that nests deeper than this is a loop or a mistake.
_MAX_DEPTH = 10
_FILE_OPTIONS = ("-r", "--requirement")
_CONSTRAINT_OPTIONS = ("-c", "--constraint")
_LIMIT = 4 * 1024 * 1024
#: The longest logical line read (after joining, comments and ${NAME}): a requirement pinning ~800
#: hashes. pip's own reading of a longer one is quadratic (shlex), and PEP 508 parsing is slow per
#: character, so a longer line is refused quickly instead of being read for minutes.
_MAX_LINE = 64 * 1024
#: pip's own pattern for environment variables in requirement files (POSIX names, braces required).
_VARIABLE = re.compile(r"(?P<var>\$\{(?P<name>[A-Z0-9_]+)\})")
#: Where pip's comment pattern, ``(^|\s+)#.*$``, starts a comment: a "#" at the line start or
#: after whitespace (a URL keeps its "#egg="). pip's pattern backtracks quadratically over long
#: runs of whitespace; this one jumps from "#" to "#" and looks one character back.
_COMMENT_AFTER_SPACE = re.compile(r"#(?<=\s#)")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


@frozen
class FileRequirement:
    """A requirement read from a requirements file, with the file and line it came from."""

    text: str  # the PEP 508 requirement, per-requirement options (--hash ...) removed
    origin: str  # "requirements.txt:3", for messages
    hashed: bool = False  # the line pins hashes: pip is in hash-checking mode
    constraint: bool = False  # from a -c file: limits versions, requests nothing


@frozen
class FileOption:
    """A pip option on a line of a requirements file (``--index-url``, ``--require-hashes`` ...)."""

    option: str  # its full name, however the line spelled it
    value: str | None
    origin: str  # "requirements.txt:3"
    constraint: bool = False  # in a -c file, or a file it includes


@frozen
class Reading:
    """What a requirements file held: its requirements, its option lines, what was left unread."""

    requirements: tuple[FileRequirement, ...]
    notes: tuple[str, ...] = ()  # what was left to pip unread, and why
    options: tuple[FileOption, ...] = ()  # every option line's options, in reading order


def option_value(words: Sequence[str], i: int, names: tuple[str, ...]) -> str | None:
    """The value of the pip option at ``words[i]`` if it is one of ``names``, in any of pip's
    spellings (``-r F``, ``-rF``, ``--requirement=F``), else None."""
    word = words[i]
    if word in names:
        return words[i + 1] if i + 1 < len(words) else None
    for name in names:
        if name.startswith("--") and word.startswith(name + "="):
            return word.split("=", 1)[1] or None
        if not name.startswith("--") and word.startswith(name) and len(word) > len(name):
            return word[len(name) :]
    return None


def requirement_file_options(pip_args: Sequence[str]) -> list[tuple[str, bool]]:
    """(file, is a constraint file) for each ``-r``/``-c`` option among pip's arguments, in
    any spelling pip takes (``-rF``, ``--requirement=F``, ``--requirem F``, ``-qr F``)."""
    from .pipoptions import find_options

    return [
        (found.value, found.option.name == "--constraint")
        for found in find_options(pip_args)
        if found.value and found.option.name in ("--requirement", "--constraint")
    ]


def _decode(data: bytes, path: str) -> str:
    """As pip decodes a requirements file: a byte-order mark wins, else UTF-8."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: cannot be read: not UTF-8 text (byte {exc.start})",
            hint="save the requirements file as UTF-8",
        ) from None


def _strip_comment(line: str) -> str:
    """``line`` with what pip's comment pattern removes cut off: the comment and the whitespace
    before it."""
    if line.startswith("#"):
        return ""
    found = _COMMENT_AFTER_SPACE.search(line) if "#" in line else None
    return line if found is None else line[: found.start()].rstrip()


def _too_long(where: str, length: int) -> UsageError:
    return UsageError(
        f"{where}: a line of {length} characters, more than the {_MAX_LINE} cuda-pip reads",
        hint="a requirements line is one requirement and its options: split the line, or check "
        "the file is a requirements file",
    )


def _expand_variables(line: str, environ: Mapping[str, str], where: str) -> str:
    """pip's ``${NAME}`` expansion: each variable that is set replaced everywhere in the line, in
    the order the names first appear. One pass per distinct name that is set (never one per
    occurrence), so a line of a million ``${A}`` is linear."""
    if "${" not in line:
        return line
    names = dict.fromkeys(match.group("name") for match in _VARIABLE.finditer(line))
    for name in names:
        value = environ.get(name)
        if value is not None:
            if "://" in line and not value.startswith("/"):
                # ${TOKEN} inside a URL is how pip's docs put credentials in these files: the
                # value is masked wherever cuda-resolve prints or logs it (not a path: ${HOME}).
                register_secret(value)
            variable = "${" + name + "}"
            grown = len(line) + line.count(variable) * (len(value) - len(variable))
            if grown > _MAX_LINE:  # refused before it is built: ${A} a million times is not 1 GB
                raise _too_long(where, grown)
            line = line.replace(variable, value)
    return line


def _logical_lines(text: str, environ: Mapping[str, str], path: str) -> list[tuple[int, str]]:
    """(first line number, line): joined at a trailing backslash, comments removed, ``${NAME}``
    expanded.

    Linear in the size of ``text``: no pattern that backtracks, no repeated concatenation; a
    line longer than ``_MAX_LINE`` is refused naming ``path`` and its number."""
    joined: list[tuple[int, str]] = []
    pending: list[str] | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if pending is None:
            if not raw or raw.isspace():
                continue
            start, pending = number, []
        comment = raw.lstrip().startswith("#")  # pip: COMMENT_RE.match(line)
        if raw.endswith("\\") and not comment:
            pending.append(raw.strip("\\"))
            continue
        pending.append(" " + raw if comment else raw)
        joined.append((start, "".join(pending)))
        pending = None
    if pending:
        joined.append((start, "".join(pending)))
    lines: list[tuple[int, str]] = []
    for number, line in joined:
        line = _strip_comment(line)
        if len(line) > _MAX_LINE:
            raise _too_long(f"{path}:{number}", len(line))
        line = _expand_variables(line, environ, f"{path}:{number}").strip()
        if line:
            lines.append((number, line))
    return lines


def _split_requirement(line: str, origin: str) -> tuple[str, bool]:
    """(the requirement, whether it pins hashes): pip's per-requirement options (any spelling)
    cut off."""
    from .pipoptions import file_options, split_requirement_line

    requirement, words = split_requirement_line(line)
    hashed = any(found.option.name == "--hash" for found in file_options(words, origin))
    return requirement.strip(), hashed


def read_requirement_files(
    files: Sequence[tuple[str, bool]], *, environ: Mapping[str, str] | None = None
) -> Reading:
    """Every named requirement in ``files`` (from :func:`requirement_file_options`) and the files
    they include (``-r``/``-c`` inside a file are relative to that file, as pip reads them)."""
    env = os.environ if environ is None else environ
    from .pipoptions import file_options

    found: list[FileRequirement] = []
    notes: list[str] = []
    options: list[FileOption] = []
    seen: set[tuple[Path, bool]] = set()

    def visit(name: str, base: Path | None, constraint: bool, depth: int) -> None:
        if "://" in name:
            notes.append(
                f"{name}: a requirements file given by URL is read by pip alone; "
                "names in it are not planned or checked by cuda-resolve"
            )
            return
        path = Path(name) if base is None or Path(name).is_absolute() else base / name
        if depth > _MAX_DEPTH:
            raise UsageError(
                f"requirements file {path} nests -r more than {_MAX_DEPTH} deep",
                hint="check the -r lines of the files for a loop",
            )
        if (path.resolve(), constraint) in seen:
            return
        seen.add((path.resolve(), constraint))
        try:
            data = read_bytes(path, limit=_LIMIT)
        except FileNotFoundError:
            raise UsageError(
                f"{path}: no such file", hint="check the path given to -r / -c"
            ) from None
        except OSError as exc:
            raise UsageError(
                f"{path}: cannot be read as a requirements file: {exc.strerror or exc}",
                hint="give a regular text file to -r / -c",
            ) from None
        for number, line in _logical_lines(_decode(data, str(path)), env, str(path)):
            if line.startswith("-"):
                try:
                    words = split_words(line)
                except ValueError:
                    words = line.split()
                # Options in any spelling pip's file parser takes (--requirem F, -rF,
                # --constraint=F).
                for given in file_options(words, f"{path}:{number}"):
                    options.append(
                        FileOption(
                            option=given.option.name,
                            value=given.value,
                            origin=f"{path}:{number}",
                            constraint=constraint,
                        )
                    )
                    if given.value and given.option.name in ("--requirement", "--constraint"):
                        visit(
                            given.value,
                            path.parent,
                            constraint or given.option.name == "--constraint",
                            depth + 1,
                        )
                continue  # other options (-e, --index-url ...) are pip's to apply
            requirement, hashed = _split_requirement(line, f"{path}:{number}")
            try:
                Requirement(requirement)
            except InvalidRequirement:
                continue  # a path, a bare URL, an archive: pip's to read
            found.append(
                FileRequirement(
                    text=requirement,
                    origin=f"{path}:{number}",
                    hashed=hashed,
                    constraint=constraint,
                )
            )

    for name, constraint in files:
        visit(name, None, constraint, 0)
    return Reading(requirements=tuple(found), notes=tuple(notes), options=tuple(options))


@frozen
class FileRequests:
    """What the ``-r``/``-c`` files add to a cuda-pip install."""

    requests: tuple[
        str, ...
    ]  # to plan with the command line's: curated names, and constraints on them
    unchecked: tuple[str, ...]  # pip's alone: only checked for look-alike names
    said: tuple[str, ...]  # one line each, for the terminal


def select_requests(
    found: Sequence[FileRequirement],
    command_line: Sequence[str],
    *,
    curated: Callable[[str], str | None],
    applies: Callable[[Requirement], bool],
) -> FileRequests:
    """Split what the files hold. ``curated(text)`` is the canonical name cuda-resolve decides for a
    requirement (None for names it leaves to pip); ``applies`` evaluates a marker for the target."""
    requests: list[str] = []
    unchecked: list[str] = []
    said: list[str] = []
    planned = {name for name in map(curated, command_line) if name is not None}
    for item in found:
        if item.constraint:
            continue
        name = curated(item.text)
        if name is None:
            unchecked.append(item.text)
        elif applies(Requirement(item.text)):
            requests.append(item.text)
            planned.add(name)
            said.append(
                f"{item.origin}: {item.text} is planned by cuda-resolve (pip still reads the file)"
            )
    for item in found:
        # A constraint limits what cuda-resolve picks for a name it plans; other names are pip's.
        if item.constraint and curated(item.text) in planned and applies(Requirement(item.text)):
            requests.append(item.text)
            said.append(f"{item.origin}: constraint {item.text} is part of the plan")
    return FileRequests(requests=tuple(requests), unchecked=tuple(unchecked), said=tuple(said))
