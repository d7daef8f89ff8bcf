"""pip install's options, read by pip's own rules: one table, one resolver of abbreviations.

pip parses its command line and each requirements-file line with optparse, which takes any
unambiguous prefix of a long option (``--extra-index`` is ``--extra-index-url``), refuses an
ambiguous one, takes ``--opt=value`` and the next word as a value, and clusters short options
(``-qr req.txt``). :data:`OPTIONS` is the union of ``pip install``'s options over pip 22.0 - 26.3
(cuda-pip needs pip >= 22; tests/test_hardening3_pip_options.py checks it against the parser of
every pip installed on the test machine): a prefix that is unambiguous in the union means the
same option in every one of those pips, and one that is ambiguous in any is refused.

cuda-pip's own options share the namespace (``cuda-pip install --dry`` must not reach pip as
its ``--dry-run``): :func:`split_command_line` resolves prefixes of both together, an exact name
first, cuda-pip's before pip's for a name both have (``--python``, ``--dry-run``, ``--source``).
What it passes to pip is normalised: abbreviations and aliases written out in full, short
clusters taken apart, so every later reader (the torch step, PEP 668, hash mode) sees one
spelling. Requirement-file lines are read with the smaller table pip uses for them
(:func:`file_options`).

Settings that pip also reads from configuration files and ``PIP_*`` variables (hash-checking
mode, hosts without TLS verification) are gathered from every source by :func:`pip_settings`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence

from .._frozen import frozen
from ..errors import UsageError
from ._words import split_words

__all__ = [
    "OPTIONS",
    "Found",
    "PipOption",
    "PipSettings",
    "StepWords",
    "cache_turned_off",
    "file_options",
    "find_options",
    "options_for_torch_step",
    "pip_settings",
    "refuse_disabled_verification",
    "split_command_line",
    "split_requirement_line",
    "step_words",
]

#: (long names, the first canonical; takes a value; short letters; read in requirement files;
#: given on the command line). Long names are written without their dashes.
_TABLE: tuple[tuple[str, bool, str, bool, bool], ...] = (
    ("abi", True, "", False, True),
    ("all-releases", True, "", True, True),  # pip >= 26.0
    ("break-system-packages", False, "", False, True),  # pip >= 23.0.1
    ("build-constraint", True, "", False, True),  # pip >= 25.3
    ("cache-dir", True, "", False, True),
    ("cert", True, "", False, True),
    ("check-build-dependencies", False, "", False, True),  # pip >= 22.3
    ("client-cert", True, "", False, True),
    ("compile", False, "", False, True),
    ("config-settings", True, "C", True, True),  # pip >= 22.3 (-C, and in files, from 23.1/23.2)
    ("constraint", True, "c", True, True),
    ("debug", False, "", False, True),
    ("disable-pip-version-check", False, "", False, True),
    ("dry-run", False, "", False, True),  # pip >= 22.3
    ("editable", True, "e", True, True),
    ("exists-action", True, "", False, True),
    ("extra-index-url", True, "", True, True),
    ("find-links", True, "f", True, True),
    ("force-reinstall", False, "", False, True),
    ("global-option", True, "", True, True),  # pip <= 25.2
    ("group", True, "", False, True),  # pip >= 25.1
    ("hash", True, "", True, False),  # requirement files only
    ("help", False, "h", False, True),
    ("ignore-installed", False, "I", False, True),
    ("ignore-requires-python", False, "", False, True),
    ("implementation", True, "", False, True),
    ("index-url pypi-url", True, "i", True, True),
    ("install-option", True, "", True, True),  # pip <= 23.0
    ("isolated", False, "", False, True),
    ("keyring-provider", True, "", False, True),  # pip >= 23.1
    ("log log-file local-log", True, "", False, True),
    ("no-binary", True, "", True, True),
    ("no-build-isolation", False, "", False, True),
    ("no-cache-dir", False, "", False, True),
    ("no-clean", False, "", False, True),
    ("no-color", False, "", False, True),
    ("no-compile", False, "", False, True),
    ("no-deps no-dependencies", False, "", False, True),
    ("no-index", False, "", True, True),
    ("no-input", False, "", False, True),
    ("no-proxy-env", False, "", False, True),  # pip >= 26.2
    ("no-python-version-warning", False, "", False, True),
    ("no-require-hashes", False, "", True, True),  # pip >= 26.2
    ("no-use-pep517", False, "", False, True),  # pip <= 25.2
    ("no-user", False, "", False, True),
    ("no-warn-conflicts", False, "", False, True),
    ("no-warn-script-location", False, "", False, True),
    ("only-binary", True, "", True, True),
    ("only-deps only-dependencies", False, "", False, True),  # pip >= 26.2
    ("only-final", True, "", True, True),  # pip >= 26.0
    ("platform", True, "", False, True),
    ("pre", False, "", True, True),
    ("prefer-binary", False, "", True, True),
    ("prefix", True, "", False, True),
    ("progress-bar", True, "", False, True),
    ("proxy", True, "", False, True),
    ("python", True, "", False, True),  # pip >= 22.3
    ("python-version", True, "", False, True),
    ("quiet", False, "q", False, True),
    ("refresh-package", True, "", False, True),  # pip >= 26.2
    ("report", True, "", False, True),  # pip >= 22.2
    ("require-hashes", False, "", True, True),
    ("require-virtualenv require-venv", False, "", False, True),
    ("requirement", True, "r", True, True),
    ("requirements-from-script", True, "", False, True),  # pip >= 26.0
    ("resume-retries", True, "", False, True),  # pip >= 25.1
    ("retries", True, "", False, True),
    ("root", True, "", False, True),
    ("root-user-action", True, "", False, True),  # pip >= 22.1
    ("src source source-dir source-directory", True, "", False, True),
    ("target", True, "t", False, True),
    ("timeout default-timeout", True, "", False, True),
    ("trusted-host", True, "", True, True),
    ("upgrade", False, "U", False, True),
    ("upgrade-strategy", True, "", False, True),
    ("uploaded-prior-to", True, "", False, True),  # pip >= 26.0
    ("use-deprecated", True, "", False, True),
    ("use-feature", True, "", True, True),
    ("use-pep517", False, "", False, True),
    ("user", False, "", False, True),
    ("verbose", False, "v", False, True),
    ("version", False, "V", False, True),  # pip <= 26.2
)


@frozen
class PipOption:
    """One pip option cuda-pip knows: its spellings, if it takes a value, where pip reads it."""

    names: tuple[
        str, ...
    ]  # long spellings with their dashes, canonical first: ("--index-url", "--pypi-url")
    takes_value: bool
    short: tuple[str, ...] = ()  # ("-i",)
    in_files: bool = False
    on_command_line: bool = True

    @property
    def name(self) -> str:
        return self.names[0]


OPTIONS: tuple[PipOption, ...] = tuple(
    PipOption(
        names=tuple("--" + n for n in names.split()),
        takes_value=value,
        short=tuple("-" + s for s in short),
        in_files=in_files,
        on_command_line=cli,
    )
    for names, value, short, in_files, cli in _TABLE
)
_BY_NAME: dict[str, PipOption] = {n: o for o in OPTIONS for n in o.names}
_LONG_CLI = {n: o for n, o in _BY_NAME.items() if o.on_command_line}
_LONG_FILE = {n: o for n, o in _BY_NAME.items() if o.in_files}
_SHORT_CLI = {s: o for o in OPTIONS if o.on_command_line for s in o.short}
_SHORT_FILE = {s: o for o in OPTIONS if o.in_files for s in o.short}


def option(name: str) -> PipOption:
    """The option a full long name (``--index-url``) stands for."""
    return _BY_NAME[name]


@frozen
class Found:
    """One option as pip reads it: the option, its value (None for a flag), the words as given."""

    option: PipOption
    value: str | None
    words: tuple[str, ...]
    normalised: tuple[
        str, ...
    ]  # the same in full: ("--index-url", "URL"), ("-r", "F"), ("--no-deps",)


def _match(word: str, names: Mapping[str, object], where: str) -> str | None:
    """optparse's rule: an exact name, else the one name ``word`` is a prefix of; None when no
    name starts with it; an ambiguous prefix is refused."""
    if word in names:
        return word
    matches = sorted(n for n in names if n.startswith(word))
    if len(matches) > 1:
        raise UsageError(
            f"{word} ({where}) is ambiguous: it could be {', '.join(matches)}",
            hint="write the option out in full",
        )
    return matches[0] if matches else None


def _scan(
    words: Sequence[str],
    long: Mapping[str, PipOption],
    short: Mapping[str, PipOption],
    where: str,
    own: Mapping[str, bool],
    *,
    lenient: bool = False,
) -> Iterator[Found | tuple[str, tuple[str, ...]] | str]:
    """Found for pip's options, (own name, words) for cuda-pip's, a plain str for anything else
    (a requirement, an unknown option; with ``lenient`` an ambiguous one too, else it is
    refused); ``--`` and what follows come as plain words too."""
    joint: dict[str, object] = {**long, **own}
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            yield from words[i:]
            return
        if word.startswith("--"):
            typed, equals, inline = word.partition("=")
            try:
                name = _match(typed, joint, where)
            except UsageError:
                if not lenient:
                    raise
                name = None
            if name is None:
                yield word  # not an option pip or cuda-pip knows: pip says so
            elif name in own:  # an exact own name wins; a prefix of both was refused by _match
                if own[name] and not equals:
                    if i + 1 >= len(words):
                        raise UsageError(
                            f"{word} needs a value", hint="run `cuda-pip install --help`"
                        )
                    yield name, (name, words[i + 1])
                    i += 1
                else:
                    yield name, (f"{name}={inline}" if equals else name,)
            else:
                found = long[name]
                if found.takes_value and not equals:
                    if i + 1 >= len(words):
                        raise UsageError(
                            f"pip option {word} ({where}) needs a value",
                            hint="see `pip install --help`",
                        )
                    yield Found(
                        option=found,
                        value=words[i + 1],
                        words=(word, words[i + 1]),
                        normalised=(found.name, words[i + 1]),
                    )
                    i += 1
                else:
                    value = inline if equals else None
                    yield Found(
                        option=found,
                        value=value,
                        words=(word,),
                        normalised=(f"{found.name}={inline}" if equals else found.name,),
                    )
        elif word.startswith("-") and len(word) > 1:
            at = 1
            while at < len(word):
                letter = "-" + word[at]
                found_short = short.get(letter)
                if found_short is None:
                    yield (
                        word if at == 1 else "-" + word[at:]
                    )  # pip will name what it does not know
                    break
                if not found_short.takes_value:
                    yield Found(option=found_short, value=None, words=(word,), normalised=(letter,))
                    at += 1
                    continue
                rest = word[at + 1 :]
                if rest:
                    yield Found(
                        option=found_short, value=rest, words=(word,), normalised=(letter + rest,)
                    )
                else:
                    if i + 1 >= len(words):
                        raise UsageError(
                            f"pip option {letter} ({where}) needs a value",
                            hint="see `pip install --help`",
                        )
                    yield Found(
                        option=found_short,
                        value=words[i + 1],
                        words=(word, words[i + 1]),
                        normalised=(letter, words[i + 1]),
                    )
                    i += 1
                break
        else:
            yield word
        i += 1


def split_command_line(
    words: Sequence[str], own: Mapping[str, bool]
) -> tuple[list[str], list[str], list[str]]:
    """(cuda-pip's own options, pip's options, requirements) of ``cuda-pip install WORDS``.

    ``own`` maps cuda-pip's long options to whether they take a value. Both are normalised
    (see the module doc); an option that turns TLS verification off is refused here."""
    own_words: list[str] = []
    pip_words: list[str] = []
    requirements: list[str] = []
    rest = iter(_scan(words, _LONG_CLI, _SHORT_CLI, "on the command line", own))
    for item in rest:
        if isinstance(item, Found):
            _refuse_found(item, "on the command line")
            pip_words.extend(item.normalised)
        elif isinstance(item, tuple):
            own_words.extend(item[1])
        elif item == "--":
            requirements.extend(word for word in rest if isinstance(word, str))
        elif item.startswith("-"):
            _refuse_unknown(item)
        else:
            requirements.append(item)
    return own_words, pip_words, requirements


def _refuse_unknown(word: str) -> None:
    """An option neither cuda-pip nor any pip install of :data:`OPTIONS` knows: refused before
    anything runs (handed to pip, it failed only after the environment was stashed, exit 1)."""
    name = word.partition("=")[0]
    hint = "see `cuda-pip install --help` and `pip install --help`"
    if name.startswith("--"):
        variable = "PIP_" + name[2:].upper().replace("-", "_")
        hint += f"; an option only a newer pip has can be set in {variable} or pip.conf"
    raise UsageError(
        f"{name}: no such option of cuda-pip install, nor of pip install 22.0 - 26.3", hint=hint
    )


def find_options(pip_args: Sequence[str], *, lenient: bool = False) -> list[Found]:
    """pip's options among ``pip install`` arguments (any spelling), in order; an ambiguous
    prefix is refused (``lenient``: skipped, as pip would stop on it before installing)."""
    return [
        item
        for item in _scan(
            pip_args, _LONG_CLI, _SHORT_CLI, "among pip's options", {}, lenient=lenient
        )
        if isinstance(item, Found)
    ]


def names_requirements(pip_args: Sequence[str]) -> bool:
    """Whether pip's own options bring requirements of their own (``-r FILE``, ``-e PATH``), in
    any spelling pip accepts."""
    return any(
        found.option.name in ("--requirement", "--editable")
        for found in find_options(pip_args, lenient=True)
    )


def split_requirement_line(line: str) -> tuple[str, list[str]]:
    """pip's ``break_args_options``: the words before the first one starting with ``-`` are the
    requirement, the rest its options (split like a shell)."""
    tokens = line.split(" ")
    at = next((n for n, token in enumerate(tokens) if token.startswith("-")), len(tokens))
    options = " ".join(tokens[at:])
    try:
        words = split_words(options)  # shlex.split's words; shlex is quadratic in a word's length
    except ValueError:
        words = options.split()
    return " ".join(tokens[:at]), words


def file_options(words: Sequence[str], where: str) -> list[Found]:
    """The options of one requirements-file line (its words after the requirement, if any),
    read with pip's table for files; an ambiguous prefix is refused naming ``where``."""
    return [
        item for item in _scan(words, _LONG_FILE, _SHORT_FILE, where, {}) if isinstance(item, Found)
    ]


# -- what the options mean, wherever pip reads them ---------------------------------------------

_DISABLES_VERIFICATION = "--trusted" + "-host"


def disables_verification(option_name: str) -> bool:
    """Whether pip's option ``option_name`` (its long name) turns TLS verification off for a
    host: refused on the command line, in files and in plans alike."""
    return option_name == _DISABLES_VERIFICATION


def _refuse_found(found: Found, where: str) -> None:
    if disables_verification(found.option.name):
        _refuse_host(f"{found.words[0]} {where}")


def _refuse_host(where: str) -> None:
    raise UsageError(
        f"{where} turns TLS verification off for a host; cuda-pip does not run pip with it",
        hint="remove it and put the proxy's or mirror's CA in the system trust store "
        "(cuda-resolve doctor --network "
        "says which), or use an https mirror: cuda-resolve mirror set PRESET",
    )


_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})
#: pip's variables that send an install somewhere else than the target's site-packages.
_ELSEWHERE_VARIABLES = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER")


def elsewhere_variables(environ: Mapping[str, str]) -> list[str]:
    """Those of pip's variables set in ``environ`` that send pip's install to another folder
    (``PIP_TARGET`` ...; a false word such as ``0`` or ``off`` sets nothing): what the target
    has says nothing of that folder, and uv, which does not read them, must not install."""
    return [
        name
        for name in _ELSEWHERE_VARIABLES
        if environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")
    ]


#: pip skips its PEP 668 check with these (pip's install command: the override, or a folder
#: other than the interpreter's own).
_PEP668_OVERRIDES = ("break-system-packages", "target", "prefix", "root")


@frozen
class PipSettings:
    """What pip install would be told, from every source, each with where it was found."""

    unverified_hosts: tuple[tuple[str, str], ...] = ()  # (host, origin)
    hash_mode: str | None = None  # where hash-checking mode comes from; None: not on
    #: what lets pip install into a PEP 668 interpreter anyway (--break-system-packages, or a
    #: --target/--prefix/--root, which pip does not check), and where it was set; None: nothing
    externally_managed_override: str | None = None


def _file_settings(
    pip_args: Sequence[str],
) -> tuple[list[tuple[str, str | None, str, bool]], list[str]]:
    """(option, value, origin, inside a constraints file) of every option in the -r/-c files
    (nested too), and the origins of requirements that pin a hash."""
    from .reqfile import read_requirement_files, requirement_file_options

    reading = read_requirement_files(requirement_file_options(pip_args))
    return (
        [(o.option, o.value, o.origin, o.constraint) for o in reading.options],
        [r.origin for r in reading.requirements if r.hashed],
    )


def _config_and_variables(
    python: str | None, environ: Mapping[str, str], isolated: bool, keys: tuple[str, ...]
) -> list[tuple[str, str, str]]:
    """(key, value, origin) for ``keys`` from pip's configuration and ``PIP_*`` variables, in
    pip's order."""
    from .pipconfig import config_values

    found = (
        list(config_values(python, environ, keys=keys, isolated=isolated))
        if python is not None
        else []
    )
    if not isolated:
        for name, value in environ.items():
            key = name[4:].lower().replace("_", "-") if name.startswith("PIP_") else ""
            if key in keys and value:
                found.append((key, value, f"the environment variable {name}"))
    return found


def pip_settings(
    pip_args: Sequence[str], *, python: str | None, environ: Mapping[str, str]
) -> PipSettings:
    """Hosts without TLS verification, hash-checking mode and index options in constraint files,
    from the command line, the ``-r``/``-c`` files (nested), pip's configuration files as the
    target's pip lists them (``python`` None: not read) and the ``PIP_*`` variables. Read once
    per process for the same arguments and environment (one command asks several times)."""
    return _pip_settings(tuple(pip_args), python, tuple(sorted(environ.items())))


@functools.lru_cache(maxsize=8)
def _pip_settings(
    pip_args: tuple[str, ...], python: str | None, environ: tuple[tuple[str, str], ...]
) -> PipSettings:
    found = find_options(pip_args)
    names = {f.option.name for f in found}
    hosts: list[tuple[str, str]] = []
    hash_mode: str | None = None
    no_hash_mode = "--no-require-hashes" in names
    override: str | None = None
    for key, value, origin in _config_and_variables(
        python,
        dict(environ),
        "--isolated" in names,
        ("trusted-host", "require-hashes", "no-require-hashes", *_PEP668_OVERRIDES),
    ):
        if key in _PEP668_OVERRIDES:
            if key != "break-system-packages" or value.strip().lower() in _TRUE:
                override = f"{key} = {value} from {origin}"
        elif key == "trusted-host":
            hosts.extend((host, origin) for host in value.split())
        elif key == "require-hashes":
            hash_mode = (
                f"require-hashes = {value} from {origin}"
                if value.strip().lower() in _TRUE
                else None
            )
        elif value.strip().lower() in _TRUE:
            no_hash_mode = True
    for item in found:
        if item.option.name[2:] in _PEP668_OVERRIDES:
            override = f"{item.words[0]} on the command line"
        if item.option.name == "--require-hashes":
            hash_mode = f"{item.words[0]} on the command line"
        elif item.option.name == _DISABLES_VERIFICATION and item.value:
            hosts.append((item.value, "the command line"))
    file_options_found, hashed = _file_settings(pip_args)
    for name, file_value, origin, _ in file_options_found:
        if name == _DISABLES_VERIFICATION and file_value:
            hosts.append((file_value, origin))
        elif name == "--require-hashes":
            hash_mode = hash_mode or f"--require-hashes at {origin}"
        elif name == "--no-require-hashes":
            no_hash_mode = True
    if hash_mode is None and hashed and not no_hash_mode:
        hash_mode = f"--hash at {hashed[0]}"
    return PipSettings(
        unverified_hosts=tuple(hosts), hash_mode=hash_mode, externally_managed_override=override
    )


def cache_turned_off(
    pip_args: Sequence[str], *, python: str | None, environ: Mapping[str, str]
) -> str | None:
    """Where pip is told to keep no cache (``--no-cache-dir`` in any spelling, else
    ``PIP_NO_CACHE_DIR`` or ``no-cache-dir`` in its configuration: pip takes any value of those
    as "no cache"), or None."""
    found = find_options(pip_args, lenient=True)
    if any(f.option.name == "--no-cache-dir" for f in found):
        return "--no-cache-dir on the command line"
    isolated = any(f.option.name == "--isolated" for f in found)
    for _, _, origin in _config_and_variables(python, environ, isolated, ("no-cache-dir",)):
        return f"no-cache-dir from {origin}"
    return None


def refuse_disabled_verification(settings: PipSettings) -> None:
    """Refuse an install that pip would run with TLS verification off for some host."""
    if settings.unverified_hosts:
        host, origin = settings.unverified_hosts[0]
        _refuse_host(f"trusted-host {host} (from {origin})")


_INDEX_OPTIONS = frozenset({"--index-url", "--extra-index-url", "--find-links", "--no-index"})
_DROPPED_FOR_TORCH = _INDEX_OPTIONS | {"--requirement", "--editable"}


#: What a torch step from PyPI keeps of the user's index options: their PyPI index (or mirror).
_KEPT_FOR_PYPI = frozenset({"--index-url", "--no-index"})


def options_for_torch_step(pip_args: Sequence[str], *, keep_index: bool = False) -> list[str]:
    """The user's pip options that hold for the torch-family step too (``--proxy``, ``--target``,
    ``-c``, ``--no-cache-dir`` ...): all but those that name requirements or indexes, in any
    spelling; with ``keep_index`` (torch from PyPI) the user's ``--index-url``/``--no-index`` stay,
    never ``--extra-index-url`` or ``--find-links``. A constraints file that names an index of
    its own is refused: pip would apply it to the step that asks the PyTorch index alone."""
    dropped = _DROPPED_FOR_TORCH - _KEPT_FOR_PYPI if keep_index else _DROPPED_FOR_TORCH
    kept: list[str] = []
    constraints: list[str] = []
    for item in _scan(pip_args, _LONG_CLI, _SHORT_CLI, "among pip's options", {}):
        if not isinstance(item, Found):
            kept.extend(item[1] if isinstance(item, tuple) else (item,))
        elif item.option.name not in dropped:
            kept.extend(item.normalised)
            if item.option.name == "--constraint" and item.value:
                constraints.append(item.value)
    if constraints:
        options, _ = _file_settings([f"--constraint={name}" for name in constraints])
        inside = next(
            (
                f"{origin} ({option_name})"
                for option_name, _, origin, _ in options
                if option_name in _INDEX_OPTIONS
            ),
            None,
        )
        if inside is not None:
            raise UsageError(
                f"constraints file line {inside} names an index: pip applies it to every step, "
                "and the torch step asks the PyTorch index alone",
                hint="give index options on the command line or in a -r file; keep -c files to "
                "version limits",
            )
    return kept


#: ``pip install``'s options that ``pip download`` lacks (the same set in pip 22.0 - 26.3): they
#: choose where or how pip installs, not what it fetches.
_INSTALL_ONLY = frozenset(
    {
        "--break-system-packages",
        "--compile",
        "--config-settings",
        "--dry-run",
        "--editable",
        "--force-reinstall",
        "--ignore-installed",
        "--install-option",
        "--no-compile",
        "--no-user",
        "--no-warn-conflicts",
        "--no-warn-script-location",
        "--prefix",
        "--report",
        "--root",
        "--root-user-action",
        "--target",
        "--upgrade",
        "--upgrade-strategy",
        "--user",
    }
)


@frozen
class StepWords:
    """One ``pip install`` step's words, taken apart for a download first (:func:`step_words`)."""

    options: tuple[str, ...]  # every option but the index options, normalised: the install's
    download_options: tuple[str, ...]  # of those, the ones ``pip download`` takes too
    index: tuple[str, ...]  # --index-url/--extra-index-url/--find-links/--no-index, normalised
    index_locations: tuple[str, ...]  # the URLs and folders those name
    requirements: tuple[str, ...]  # the words that are not options


def step_words(pip_args: Sequence[str]) -> StepWords:
    """``pip install`` arguments (any spelling pip accepts) as the index options, the other
    options (those ``pip download`` takes too marked) and the requirements. A word that looks
    like an option pip does not know stays with the install's options: pip names it."""
    options: list[str] = []
    download: list[str] = []
    index: list[str] = []
    locations: list[str] = []
    requirements: list[str] = []
    rest = iter(_scan(pip_args, _LONG_CLI, _SHORT_CLI, "among pip's options", {}))
    for item in rest:
        if isinstance(item, Found):
            if item.option.name in _INDEX_OPTIONS:
                index.extend(item.normalised)
                locations.extend([item.value] if item.value is not None else [])
                continue
            options.extend(item.normalised)
            if item.option.name not in _INSTALL_ONLY:
                download.extend(item.normalised)
        elif isinstance(item, tuple):  # no own names are given to _scan: not reached
            options.extend(item[1])
        elif item == "--":
            requirements.extend(word for word in rest if isinstance(word, str))
        elif item.startswith("-"):
            options.append(item)
        else:
            requirements.append(item)
    return StepWords(
        options=tuple(options),
        download_options=tuple(download),
        index=tuple(index),
        index_locations=tuple(locations),
        requirements=tuple(requirements),
    )
