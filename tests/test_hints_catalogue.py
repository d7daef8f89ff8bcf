"""The catalogue of refusals: every hint, followed, gets further (issue 29).

Each case is a refusal the suite triggers on a stand-in machine (no GPU, no toolkit, a torch the
toolkit cannot build against, an option apply refuses ...): the command runs through the real
command line, its ``hint:`` line is read, the way out it names is followed in the same setting
(its command run as written, or its options added to the refused command), and the follow-up
must get further: succeed, or stop at a different, later error. A hint that is advice with
nothing to run (install a toolkit) is checked to say so, and doctor's fixes for the same machines
are one pasteable line each.

Stand-ins: machines by CUDA_RESOLVE_CUDA_ARCH/DRIVER overrides or profiles from tests/data, a
venv holding a stand-in torch 2.14.1+cu130, a stand-in CUDA 13.0 toolkit on PATH and CUDA_HOME,
``--dry-run`` wherever something would be built or installed. No network, no GPU.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _torch_env import standin_cuda_toolkit, standin_torch_venv

DATA = Path(__file__).parent / "data"
PROFILES = DATA / "profiles"
BIN = Path(sys.executable).parent
NO_GPU = {"CUDA_RESOLVE_CUDA_ARCH": "", "CUDA_RESOLVE_DRIVER": ""}
H200 = {"CUDA_RESOLVE_CUDA_ARCH": "9.0", "CUDA_RESOLVE_DRIVER": "580.65.06"}
A100 = {"CUDA_RESOLVE_CUDA_ARCH": "8.0", "CUDA_RESOLVE_DRIVER": "580.65.06"}
#: Commands that would build or install: followed with --dry-run, as the README test does.
_DRY = re.compile(r"^(?:cuda-pip install|cuda-resolve (?:install|build|apply))\b")
#: A command a hint names: `quoted`, or the hint itself where it starts with one.
_COMMAND = re.compile(
    r"`((?:cuda-resolve|cuda-pip) [^`]+)`|(?:^|: )((?:cuda-resolve|cuda-pip) [^;`]+?)(?:;|$)"
)
#: An option a hint asks for, with the example value it gives ("--arch-list ... (e.g. 8.6)").
_OPTION = re.compile(r"(--[a-z][a-z-]+)")
_EXAMPLE = re.compile(r"\(e\.g\. ([^)\s]+)\)")


@dataclass(frozen=True)
class Bench:
    root: Path
    python: Path  # the stand-in torch venv's interpreter
    toolkit: Path  # the stand-in CUDA 13.0 toolkit


@dataclass(frozen=True)
class Case:
    """A refused command, the machine it runs on, and what following its hint must reach."""

    argv: tuple[str, ...]  # "{python}", "{root}" and "{profiles}" are filled in
    machine: dict[str, str]
    #: What the refusal's hint must say (a claim of the class the issue is about).
    hint_says: tuple[str, ...] = ()
    #: Where following the hint is expected to get: "success" or "further" (a later error).
    reaches: str = "further"
    before: Callable[[Bench], None] | None = field(default=None, compare=False)
    #: What the follow-up's output must say (it acted on the same target, ...).
    follow_says: tuple[str, ...] = ()


def _plan_file(bench: Bench) -> None:
    """A plan for this target on the H200 stand-in, for apply to refuse options on."""
    done = _run(
        ("plan", "torch", "--python", str(bench.python), "--json"), H200, bench, capture=True
    )
    assert done.returncode == 0, done.stderr
    (bench.root / "plan.json").write_text(done.stdout)


CASES = {
    # No GPU here: the way out is --arch-list, for every command that would build.
    "plan, no GPU, installed torch": Case(
        ("plan", "kaolin", "pointnet2_ops", "--python", "{python}"),
        NO_GPU,
        hint_says=("--arch-list",),
        reaches="success",
    ),
    "cuda-pip install, no GPU": Case(
        ("install", "pointnet2_ops", "--python", "{python}", "--dry-run"),
        NO_GPU,
        hint_says=("--arch-list",),
        reaches="success",
    ),
    "build, no GPU": Case(
        ("build", "pointnet2_ops", "--python", "{python}", "--dry-run"),
        NO_GPU,
        hint_says=("--arch-list",),
        reaches="success",
    ),
    # A CPU torch, no driver, no toolkit: --allow-torch-change, and what stops it then.
    "plan, CPU torch and no toolkit": Case(
        ("plan", "kaolin", "pointnet2_ops", "--profile", "{profiles}/cpu-ci-no-driver.toml"),
        {},
        hint_says=("--allow-torch-change", "then install a CUDA toolkit"),
    ),
    # torch's CUDA major differs from the only toolkit's: switching torch is the way out.
    "plan, torch and toolkit of different CUDA majors": Case(
        ("plan", "pointnet2_ops", "--profile", "{profiles}/rtx3090-torch21cu121-nvcc118.toml"),
        {},
        hint_says=("--allow-torch-change", "torch 2.3.1+cu118"),
        reaches="success",
    ),
    # apply carries a plan out exactly: the hint decides again with the option, then applies.
    "apply PLAN --arch-list": Case(
        ("apply", "{root}/plan.json", "--python", "{python}", "--arch-list", "9.0"),
        H200,
        hint_says=("cuda-resolve plan torch --arch-list 9.0",),
        reaches="success",
        before=_plan_file,
        follow_says=("target: {python} ",),
    ),
    # cuda-pip install --plan is apply: the same options are refused, not ignored.
    "cuda-pip install --plan PLAN --arch-list": Case(
        ("install", "--plan", "{root}/plan.json", "--python", "{python}", "--arch-list", "9.0"),
        H200,
        hint_says=("cuda-resolve plan torch --arch-list 9.0",),
        reaches="success",
        before=_plan_file,
        follow_says=("target: {python} ",),
    ),
    "apply PLAN --plan OTHER": Case(
        ("apply", "{root}/plan.json", "--python", "{python}", "--plan", "{root}/other.json"),
        H200,
        hint_says=("`cuda-resolve apply {root}/plan.json --python {python}`",),
        reaches="success",
        before=_plan_file,
        follow_says=("target: {python} ",),
    ),
    # install changes this machine, a profile is another: build (or plan) for it instead.
    "cuda-pip install --profile": Case(
        ("install", "pointnet2_ops", "--profile", "{profiles}/h200-healthy-handwritten.toml"),
        NO_GPU,
        hint_says=(
            "cuda-resolve build pointnet2_ops --profile {profiles}/h200-healthy-handwritten.toml",
        ),
    ),
    # An option that does not go with another: the hint drops it.
    "env --slurm --shell zsh": Case(
        ("env", "--slurm", "--shell", "zsh", "--python", "{python}"),
        H200,
        hint_says=("drop --shell",),
        reaches="success",
    ),
    # A plan made on another machine (an H200) and applied here (an A100): decided again here.
    "apply PLAN made for other GPUs": Case(
        ("apply", "{root}/plan.json", "--python", "{python}"),
        A100,
        hint_says=(
            "cuda-resolve plan torch --python {python} --json > plan.here.json && "
            "cuda-resolve apply plan.here.json --python {python}",
        ),
        reaches="success",
        before=_plan_file,
        follow_says=("target: {python} ",),
    ),
    # A preset is the same for every environment: --python beside it is refused, not ignored.
    "mirror show PRESET --python": Case(
        ("mirror", "show", "tuna", "--python", "{python}"),
        NO_GPU,
        hint_says=("drop --python",),
        reaches="success",
        follow_says=("pypi.tuna.tsinghua.edu.cn",),
    ),
    # URLs go with the preset 'custom': the hint is the same command with it, URLs kept.
    "mirror set PRESET --pypi URL": Case(
        ("mirror", "set", "tuna", "--pypi", "https://pypi.lab.example/simple/", "--dry-run"),
        NO_GPU,
        hint_says=("cuda-resolve mirror set custom --pypi https://pypi.lab.example/simple/",),
        reaches="success",
        follow_says=("https://pypi.lab.example/simple/", "dry run: nothing written"),
    ),
    # A kernel spec holds the variables: options for printed lines are refused, not ignored.
    "env --jupyter --slurm": Case(
        ("env", "--jupyter", "lab", "--python", "{python}", "--slurm"),
        H200,
        hint_says=("drop --slurm",),
        reaches="success",
        follow_says=("wrote kernel spec lab",),
    ),
    "env --jupyter --shell fish": Case(
        ("env", "--jupyter", "lab", "--shell", "fish", "--python", "{python}"),
        H200,
        hint_says=("drop --shell",),
        reaches="success",
        follow_says=("wrote kernel spec lab",),
    ),
    "apply PLAN --ptx": Case(
        ("apply", "{root}/plan.json", "--python", "{python}", "--ptx"),
        H200,
        hint_says=("cuda-resolve install torch --ptx",),
        reaches="success",
        before=_plan_file,
        follow_says=("target: {python} ",),
    ),
}

#: Refusals whose hint is advice with nothing here to run (the machine must change): the hint
#: must say what to install, not name an option that leads into another refusal.
ADVICE = {
    "no toolkit": (
        ("plan", "pointnet2_ops", "--profile", "{profiles}/driver470-torch21cu121.toml"),
        "install a CUDA toolkit",
    ),
    "a GPU the toolkit cannot target": (
        ("plan", "pointnet2_ops", "--profile", "{profiles}/toolkit130-gtx1080.toml"),
        "install a CUDA toolkit whose nvcc can target 6.1",
    ),
}


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    root = tmp_path_factory.mktemp("catalogue")
    python = standin_torch_venv(root / "torch")
    return Bench(root=root, python=python, toolkit=standin_cuda_toolkit(root / "cuda-13.0"))


def _environ(machine: dict[str, str], bench: Bench) -> dict[str, str]:
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PIP_", "CUDA_RESOLVE_CUDA_ARCH", "CUDA_RESOLVE_DRIVER"))
        and name not in ("VIRTUAL_ENV", "CUDA_HOME", "CUDA_PATH")
    }
    environ.update(
        machine,
        CUDA_HOME=str(bench.toolkit),
        PATH=f"{BIN}:{bench.toolkit / 'bin'}:/usr/bin:/bin",
        COLUMNS="200",
        CUDA_RESOLVE_WHEELHOUSE=str(bench.root / "wheelhouse"),
        JUPYTER_DATA_DIR=str(bench.root / "jupyter"),  # kernel specs: never the user's folder
    )
    return environ


def _filled(words: tuple[str, ...], bench: Bench) -> list[str]:
    return [word.format(python=bench.python, root=bench.root, profiles=PROFILES) for word in words]


def _run(
    argv: tuple[str, ...] | list[str],
    machine: dict[str, str],
    bench: Bench,
    *,
    capture: bool = False,
) -> subprocess.CompletedProcess[str]:
    words = _filled(tuple(argv), bench)
    if words[0] == "install":  # cuda-pip install, as the user types it
        command = [sys.executable, "-m", "pip_plugin", *words]
    else:
        command = [sys.executable, "-m", "cuda_resolve", *words]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=_environ(machine, bench),
        cwd=bench.root,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _said(done: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """(the error line, the hint line) of a refusal."""
    lines = (done.stderr + done.stdout).splitlines()
    error = next((line for line in lines if line.startswith("error: ")), "")
    hint = next((line[len("hint: ") :] for line in lines if line.startswith("hint: ")), "")
    return error, hint


def follow(argv: list[str], hint: str) -> tuple[str, list[str]]:
    """The way out ``hint`` names, as something to run: ("command", [shell line]) for a command
    it names (building and installing ones as dry runs), else ("options", argv + its options)
    for the options it asks for, with the example values it gives."""
    found = _COMMAND.search(hint)
    if found:
        line = found.group(1) or found.group(2)
        parts = [
            f"{part.strip()} --dry-run" if _DRY.match(part.strip()) else part.strip()
            for part in line.split("&&")
        ]
        return "command", [" && ".join(parts)]
    if hint.startswith("drop "):  # an option that does not go with another: left out
        dropped = set(_OPTION.findall(hint.split("(")[0]))
        kept: list[str] = []
        skip = False
        for word in argv:
            if skip:
                skip = False
            elif word in dropped:
                skip = True  # and its value
            else:
                kept.append(word)
        return "options", kept
    options = list(dict.fromkeys(o for o in _OPTION.findall(hint) if o not in argv))
    assert options, f"the hint names neither a command nor an option: {hint!r}"
    added: list[str] = []
    for option in options:
        added.append(option)
        if option == "--arch-list":
            example = _EXAMPLE.search(hint)
            assert example, f"--arch-list without an example value: {hint!r}"
            added.append(example.group(1))
    dry = argv[-1:] == ["--dry-run"]
    return "options", [*(argv[:-1] if dry else argv), *added, *(["--dry-run"] if dry else [])]


def _followed(
    kind: str, words: list[str], machine: dict[str, str], bench: Bench
) -> subprocess.CompletedProcess[str]:
    if kind == "options":
        return _run(words, machine, bench)
    environ = _environ(machine, bench)
    (line,) = words
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", line],
        capture_output=True,
        text=True,
        env=environ,
        cwd=bench.root,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_hint_followed_gets_further(name: str, bench: Bench) -> None:
    case = CASES[name]
    if case.before is not None:
        case.before(bench)
    refused = _run(case.argv, case.machine, bench)
    error, hint = _said(refused)
    assert refused.returncode != 0 and error and hint, refused.stdout + refused.stderr
    for claim in _filled(case.hint_says, bench):
        assert claim in hint, f"{name}: the hint does not say {claim!r}: {hint}"
    kind, words = follow(list(case.argv), hint)
    if kind == "command":  # one line a shell reads as written (quotes balanced)
        shlex.split(words[0])
    done = _followed(kind, words, case.machine, bench)
    after, _ = _said(done)
    said = " ".join((done.stdout + done.stderr).split())
    for claim in _filled(case.follow_says, bench):
        assert claim in said, f"{name}: following {words} did not say {claim!r}:\n{said}"
    if case.reaches == "success":
        assert done.returncode == 0, f"{name}: following {words} failed:\n{done.stderr}"
    else:
        assert done.returncode == 0 or (after and after != error), (
            f"{name}: following {words} met the same refusal again: {after}"
        )


@pytest.mark.parametrize("name", sorted(ADVICE))
def test_advice_says_what_to_install(name: str, bench: Bench) -> None:
    argv, says = ADVICE[name]
    refused = _run(argv, {}, bench)
    _, hint = _said(refused)
    assert refused.returncode != 0 and says in hint, hint
    assert "--allow-torch-change" not in hint or "then" in hint, hint


def test_the_follower_reads_each_kind_of_hint() -> None:
    """The rule itself: a quoted command, a command line, options with their example values."""
    argv = ["plan", "kaolin", "--python", "/p"]
    assert follow(argv, "pass --arch-list with ... (e.g. 8.6): there is no GPU here") == (
        "options",
        [*argv, "--arch-list", "8.6"],
    )
    assert follow(["build", "x", "--dry-run"], "rerun with --allow-torch-change") == (
        "options",
        ["build", "x", "--allow-torch-change", "--dry-run"],
    )
    assert follow(argv, "cuda-resolve plan x --json > p.json && cuda-resolve apply p.json") == (
        "command",
        ["cuda-resolve plan x --json > p.json && cuda-resolve apply p.json --dry-run"],
    )
    assert follow(["env", "--slurm", "--shell", "zsh"], "drop --shell (sbatch: bash)") == (
        "options",
        ["env", "--slurm"],
    )
    assert follow(argv, "to build: cuda-resolve build x --profile a.toml; or: y") == (
        "command",
        ["cuda-resolve build x --profile a.toml --dry-run"],
    )
    assert follow(argv, "run `cuda-pip install --rebuild x` (builds here)") == (
        "command",
        ["cuda-pip install --rebuild x --dry-run"],
    )


def test_doctor_fixes_for_the_catalogue_machines_are_one_line_each(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """doctor on each stand-in profile at 40 columns: an ``export``'s value and a quoted command
    never continue on the next line."""
    from cuda_resolve.cli import main

    monkeypatch.setenv("COLUMNS", "40")
    for profile in sorted(PROFILES.glob("*.toml")):
        main(["doctor", "--profile", str(profile)])
        lines = capsys.readouterr().out.splitlines()
        for number, line in enumerate(lines):
            words = line.split()
            if words and words[-1] == "export":
                pytest.fail(f"{profile.name}: 'export' ends a line: {lines[number : number + 2]}")
            assert line.count("`") % 2 == 0, f"{profile.name}: a quoted command is split: {line}"
            for run in re.finditer(r"export((?: [A-Za-z_]\w*=\S+)+)", line):
                assert not run.group(1).endswith((",", ";", ".")), (
                    f"{profile.name}: the pasted export would take the sentence's punctuation: "
                    f"{run.group(0)}"
                )
