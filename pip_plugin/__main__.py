"""``cuda-pip``: pip, with CUDA extensions that just work.

``cuda-pip install [cuda-pip options] [pip options] REQ...`` resolves what cuda-resolve's index
knows (torch, kaolin, pointnet2_ops ...), builds what must be built, then runs the target's real
``python -m pip install`` with exact pins, the user's other requirements and pip options passed
through untouched. Every other pip command (``cuda-pip list``, ``cuda-pip show torch``) is the
target's pip, unchanged. pip is driven through its command line only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["main", "run", "split_arguments"]

#: cuda-pip's own options for install: those add_action_options(install=True) defines (a test
#: keeps the two in step). They share one namespace with pip's (cuda_resolve.install.pipoptions).
OWN_VALUE_OPTIONS = frozenset(
    {
        "--python",
        "--arch-list",
        "--source",
        "--accept-name",
        "--index",
        "--plan",
        "--keep-stale",
        "--installer",
    }
)
OWN_FLAGS = frozenset(
    {
        "--allow-torch-change",
        "--strict-driver",
        "--ptx",
        "--rebuild",
        "--json",
        "--smoke",
        "--no-verify",
        "--dry-run",
        "--repair",
    }
)


def _names_profile(word: str) -> bool:
    """``--profile``, ``--profile=FILE`` or an abbreviation pip's options leave unambiguous."""
    name = word.partition("=")[0]
    return len(name) >= 6 and "--profile".startswith(name)


def split_arguments(words: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(cuda-pip's own options, pip's options, requirements) from ``install``'s arguments.

    Abbreviations are resolved against cuda-pip's options and pip's together (``--dry`` is
    cuda-pip's ``--dry-run``; ``--inde`` could be cuda-pip's ``--index`` or pip's ``--index-url``
    and is refused) and written out in full; pip's options in any spelling that turns TLS
    verification off are refused."""
    from cuda_resolve.errors import UsageError
    from cuda_resolve.install.pipoptions import split_command_line

    own_options = {**dict.fromkeys(OWN_VALUE_OPTIONS, True), **dict.fromkeys(OWN_FLAGS, False)}
    # pip has no --profile: refused with the commands that do take one, not as an unknown option.
    profile_at = next((i for i, w in enumerate(words) if _names_profile(w)), None)
    if profile_at is not None:
        import shlex

        profile = words[profile_at]
        after = profile_at + 1
        given = profile.partition("=")[2] or (words[after] if after < len(words) else "FILE")
        rest = [*words[:profile_at], *words[after + (0 if "=" in profile else 1) :]]
        asked = split_command_line(rest, own_options)[2]
        words_for = " ".join(shlex.quote(r) for r in asked) or "REQ..."
        target = f"{words_for} --profile {shlex.quote(given)}"
        raise UsageError(
            f"cuda-pip install {profile}: a profile describes another machine, and install "
            "changes this one",
            hint=f"to build wheels for that machine: cuda-resolve build {target}; to see its "
            f"plan: cuda-resolve plan {target}",
        )
    own, pip, requirements = split_command_line(words, own_options)
    for at, word in enumerate(own):
        value = (
            own[at + 1]
            if word == "--index" and at + 1 < len(own)
            else word.partition("=")[2]
            if word.startswith("--index=")
            else ""
        )
        if "://" in value:
            raise UsageError(
                f"--index {value}: cuda-pip's --index is an index overlay folder, not a "
                "package index",
                hint=f"for pip's package index write --index-url {value}",
            )
    return own, pip, requirements


def _install(words: Sequence[str]) -> int:
    from cuda_resolve.cli import ArgumentParser
    from cuda_resolve.cli.install import add_action_options, run_action
    from cuda_resolve.errors import UsageError
    from cuda_resolve.install.reqfile import read_requirement_files, requirement_file_options

    if any(w in ("-h", "--help") for w in words):
        import re

        # The docstring is reStructuredText; a terminal shows ``x`` as `x`, as the last line does.
        parser = ArgumentParser(
            prog="cuda-pip install", description=re.sub(r"``([^`]+)``", r"`\1`", __doc__ or "")
        )
        add_action_options(parser, install=True)
        parser.print_help()
        print(
            "\nEvery other option is pip's own and is passed to `python -m pip install` unchanged."
        )
        return 0
    from cuda_resolve.install.pipoptions import names_requirements

    own, pip_args, requirements = split_arguments(words)
    parser = ArgumentParser(prog="cuda-pip install", add_help=False)
    add_action_options(parser, install=True)
    args = parser.parse_args(own)
    # pip reads -r files itself; cuda-pip reads them too, for the names it must plan or check.
    reading = read_requirement_files(requirement_file_options(pip_args))
    nothing = not requirements and not names_requirements(pip_args)
    if nothing and args.plan is None and not args.repair:
        raise UsageError(
            "cuda-pip install: name at least one requirement",
            hint="e.g. cuda-pip install pointnet2_ops",
        )
    # Even with nothing cuda-resolve decides (an editable, a file of paths), the install runs as
    # one: --dry-run and --json hold, the environment is restored on failure.
    return run_action(
        args,
        requirements,
        pip_args=pip_args,
        mode="install",
        file_requirements=reading.requirements,
        file_notes=reading.notes,
    )


def _pass_through(words: Sequence[str], python: str | None) -> int:
    from cuda_resolve.install.target import choose_target

    target = choose_target(python)
    print(
        f"cuda-pip: {target.python} -m pip (target chosen by {target.how})",
        file=sys.stderr,
        flush=True,
    )
    return subprocess.call([target.python, "-m", "pip", *words])


def main(argv: Sequence[str] | None = None) -> int:
    """0 done, 1 failed, 2 bad input, 70 a bug (``--debug`` shows its traceback), 130 interrupted,
    143 terminated (SIGTERM), 129 hung up (SIGHUP); other pip commands exit with pip's own status.
    """
    from cuda_resolve.cli import guarded, split_debug

    words = list(sys.argv[1:] if argv is None else argv)
    # --js, --jso: prefixes of --json are cuda-pip's too (no pip option starts so).
    wants_json = any(len(w) >= 4 and "--json".startswith(w) for w in words)
    if not words or words[0] in ("-h", "--help"):
        print(
            "usage: cuda-pip install [cuda-pip options] [pip options] REQ...\n"
            "       cuda-pip COMMAND ...   (any other pip command, run by the target's pip)\n\n"
            "cuda-pip install --help lists cuda-pip's own options."
        )
        return 0 if words else 2
    if words[0] == "install":
        # --debug is cuda-pip's here (pip's own --debug has no meaning for the install it drives).
        install_words, debug = split_debug(words[1:])
        return guarded(lambda: _install(install_words), wants_json=wants_json, debug=debug)

    def pass_through() -> int:
        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("--python")
        known, rest = parser.parse_known_args(words)
        return _pass_through(rest, known.python)

    return guarded(pass_through, wants_json=False, debug=False)


def run() -> None:
    from cuda_resolve._signals import exit_with
    from cuda_resolve.cli import interrupted

    try:
        code = main()
    except KeyboardInterrupt:  # before main's boundary was entered
        code = interrupted()
    exit_with(code)


if __name__ == "__main__":
    run()
