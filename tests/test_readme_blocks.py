"""Every shell block of README.md is run here, or skipped with its reason (issue 19).

A shell block is a fenced block whose info string is ``sh``, ``bash``, ``shell``, ``console`` or
empty, or an indented (four-space) block. Its text, dedented and stripped, must be a key of
:data:`RUN` or of :data:`SKIP`; a block in neither fails :func:`test_every_block_is_run_or_skipped`
(so a new or changed block cannot go untested unnoticed).

How a :data:`RUN` block runs (the rule the README points to):

- with ``bash -e -o pipefail -c BLOCK`` (every line must succeed), from a fresh temporary folder,
  with ``cuda-pip`` and ``cuda-resolve`` of the interpreter running the tests first on PATH;
- on a target of its own: a fresh venv, active (``VIRTUAL_ENV``), with the tool's venv marked a
  tool environment (``UV_TOOL_DIR``), so what the tool's venv holds changes no result;
- ``HOME``, ``XDG_CACHE_HOME`` and ``XDG_CONFIG_HOME`` in that folder (nothing the user owns is
  read or written), the machine set by the block's :class:`Run` ``environ`` (no GPU, or a GPU
  machine described by ``CUDA_RESOLVE_CUDA_ARCH``/``CUDA_RESOLVE_DRIVER``);
- the profiles a block names (``a100.toml``, ``rtx4090.toml``) are saved beforehand in that folder
  as the README says they are made, ``cuda-resolve detect --save-profile``, on a machine described
  by the overrides (A100 = 8.0, RTX 4090 = 8.9, driver 580.65.06);
- placeholders: ``/nfs/lab/`` becomes a folder in the temporary folder, and
  ``https://wheels.lab.example/`` the loopback server that serves it;
- a block about a lab (:attr:`Run.lab`) runs beside the lab's servers on loopback, set up as a lab
  sets them up (tests/_lab_stand_ins.py): its PyPI and PyTorch index mirror configured with
  ``cuda-resolve mirror set custom``, its wheelhouse served over HTTPS, its CA the trust store, no
  other host reachable;
- a ``cuda-pip install`` or ``cuda-resolve build`` line without ``--dry-run`` gets ``--dry-run``
  (it would compile for minutes or install torch): the plan, pre-flight and pip commands are
  still checked, nothing is built or installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _lab_stand_ins import WHEELHOUSE_PLACEHOLDER, Lab, lab_servers
from _torch_env import copy_venv

README = Path(__file__).resolve().parent.parent / "README.md"
BIN = Path(sys.executable).parent

#: The machine a GPU-machine block runs on: an H200-like GPU and a driver for CUDA 13.
GPU_MACHINE = {"CUDA_RESOLVE_CUDA_ARCH": "9.0", "CUDA_RESOLVE_DRIVER": "580.65.06"}
#: A machine without a GPU or a driver, whatever this one has (an empty value means absent).
NO_GPU = {"CUDA_RESOLVE_CUDA_ARCH": "", "CUDA_RESOLVE_DRIVER": ""}
#: The profiles the README names, and the machine each is saved on.
PROFILES = {
    "a100.toml": {"CUDA_RESOLVE_CUDA_ARCH": "8.0", "CUDA_RESOLVE_DRIVER": "580.65.06"},
    "rtx4090.toml": {"CUDA_RESOLVE_CUDA_ARCH": "8.9", "CUDA_RESOLVE_DRIVER": "580.65.06"},
}
_SHELL_INFO = {"", "sh", "bash", "shell", "console"}
_DRY_RUN_COMMANDS = re.compile(r"^(?:[A-Z_]+=\S*\s+)*(?:cuda-pip install|cuda-resolve build)\b")


@dataclass(frozen=True)
class Run:
    environ: dict[str, str]
    #: Text the output must contain (a claim the README makes about it).
    expect: tuple[str, ...] = ()
    profiles: tuple[str, ...] = field(default=())
    #: Shell run before the block (what it acts on) and after it (a check that it did), not README
    #: text.
    before: str = ""
    after: str = ""
    #: Runs beside the lab's servers; the wheels the profiles' plans need are there first.
    lab: bool = False


#: README blocks run for real (after the rule above), by their exact text.
# A README line longer than 100 columns goes on after a backslash-newline, which the string drops:
# each key is still the block's exact text.
RUN: dict[str, Run] = {
    # On a machine without a GPU: each of the three ways works, and a cross-build names the driver.
    """# the compute capabilities of the machines that will run it (A100 = 8.0, RTX 4090 = 8.9)
cuda-pip install torch pointnet2_ops --arch-list "8.0;8.9"
# a profile saved on one of those machines (cuda-resolve detect --save-profile a100.toml); build \
only
cuda-resolve build pointnet2_ops --profile a100.toml
# or describe the machine: one compute capability per GPU, and its driver
CUDA_RESOLVE_CUDA_ARCH=9.0 CUDA_RESOLVE_DRIVER=580.65.06 cuda-pip install torch \
pointnet2_ops""": Run(
        NO_GPU,
        expect=(
            "TORCH_CUDA_ARCH_LIST=8.0;8.9",
            "TORCH_CUDA_ARCH_LIST=8.0\n",
            "TORCH_CUDA_ARCH_LIST=9.0\n",
        ),
        profiles=("a100.toml",),
    ),
    """cuda-resolve doctor                      # the machine at a glance; errors come with their \
fix
cuda-pip install torch pointnet2_ops --dry-run
cuda-pip install torch pointnet2_ops kaolin --smoke""": Run(
        GPU_MACHINE, expect=("dry run: nothing was built or installed",)
    ),
    """# one wheel with kernels for the A100 (8.0) and RTX 4090 (8.9) nodes
cuda-resolve build pointnet2_ops --arch-list "8.0;8.9"
# or a profile per node class, each saved once on one of its nodes: cuda-resolve detect \
--save-profile a100.toml
cuda-resolve build pointnet2_ops --profile a100.toml
cuda-resolve build pointnet2_ops --profile rtx4090.toml""": Run(
        NO_GPU,
        expect=(
            "TORCH_CUDA_ARCH_LIST=8.0;8.9",
            "TORCH_CUDA_ARCH_LIST=8.0\n",
            "TORCH_CUDA_ARCH_LIST=8.9\n",
            "the machines that run these wheels need an NVIDIA driver >=",
        ),
        profiles=("a100.toml", "rtx4090.toml"),
    ),
    """export CUDA_RESOLVE_WHEELHOUSE=/nfs/lab/wheelhouse    # or `wheelhouse = "..."` in the \
config file
cuda-resolve wheelhouse path
cuda-resolve wheelhouse list""": Run(NO_GPU, expect=("/nfs/lab/wheelhouse",)),
    """cuda-resolve mirror list
cuda-resolve mirror set tuna --dry-run    # the diff of each file; without --dry-run it writes them
cuda-resolve mirror show""": Run(NO_GPU, expect=("tuna",)),
    """eval "$(cuda-resolve env)"          # in a job script: CUDA_HOME, PATH, LD_LIBRARY_PATH as \
needed
cuda-resolve env --slurm            # the same lines to paste into an sbatch script""": Run(
        GPU_MACHINE, expect=("export CUDA_HOME=",)
    ),
    """cuda-resolve wheelhouse list
cuda-resolve wheelhouse prune --older-than 90 --dry-run    # then without --dry-run; or --package \
NAME, --all""": Run(NO_GPU),
    # The cache folders it names are made first; afterwards they are gone and the journal is kept.
    'cache="${CUDA_RESOLVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cuda-resolve}"\n'
    'rm -rf "$cache/logs" "$cache/sources" "$cache/http" "$cache/lock-files" "$cache/lock-pip" '
    '"$cache/lock-wheels" "$cache/downloads"': Run(
        NO_GPU,
        before="c=.cache/cuda-resolve; for d in logs sources http lock-files lock-pip lock-wheels "
        "downloads journal; do mkdir -p $c/$d; touch $c/$d/f; done",
        after="c=.cache/cuda-resolve; test -f $c/journal/f; for d in logs sources http lock-files "
        "lock-pip lock-wheels downloads; do test ! -e $c/$d; done",
    ),
    # In a lab (its mirror, its served wheelhouse holding pointnet2_ops for each profile's torch),
    # on an A100 node: the lock is written, sync installs the A100 profile, which imports and shows
    # no drift afterwards.
    """# pointnet2_ops is taken from the wheelhouse (what it lacks, lock builds: see `lock \
--help`) and
# locked where the wheelhouse is served (any static server; or the lab's index: `wheelhouse_url`)
cuda-resolve lock torch pointnet2_ops --profile a100.toml --profile rtx4090.toml -o pylock.toml \\
    --wheelhouse-url https://wheels.lab.example/wheelhouse
cuda-resolve sync pylock.toml --name auto    # on each machine""": Run(
        PROFILES["a100.toml"],
        expect=("wrote pylock.toml", "installed pointnet2-ops 3.0.0+pt", "installed torch "),
        profiles=("a100.toml", "rtx4090.toml"),
        lab=True,
        # The lock keeps the canonical index, not the mirror's (docs/mirrors.md).
        after='"$VIRTUAL_ENV/bin/python" -c "import pointnet2_ops, torch" && '
        "cuda-resolve sync pylock.toml --check && "
        "grep -q '^index = \"https://pypi.org/simple\"$' pylock.toml && "
        # the RTX 4090 node's profile, picked there, holds the same files (the 8.0 wheel runs)
        "CUDA_RESOLVE_CUDA_ARCH=8.9 cuda-resolve sync pylock.toml --check > rtx4090.txt && "
        "grep -q rtx4090 rtx4090.txt",
    ),
}

#: README blocks this test does not run, by their exact text, with the reason.
SKIP: dict[str, str] = {
    "python3 -m venv .venv && .venv/bin/python -m pip install -q -U pip && .venv/bin/python -m "
    "pip install -q . && .venv/bin/cuda-pip install --python .venv/bin/python torch "
    "pointnet2_ops --smoke": (
        "installs torch (GBs) and compiles pointnet2_ops, then runs its kernels: needs a GPU; the "
        "H200 runs cover it"
    ),
    "python3 -m venv .venv && .venv/bin/python -m pip install -q -U pip && .venv/bin/python -m "
    "pip install -q -e '.[test]' && "
    ".venv/bin/python -m pytest": (
        "the test command itself: .ci/run runs it as its first stage (running it here "
        "would recurse)"
    ),
    "cuda-resolve wheelhouse publish --to https://pypi.lab.example/    # pypiserver or devpi": (
        "needs a lab index server; tests/test_wheelhouse_cli.py publishes to a real pypiserver"
    ),
    """conda run -n base python -m pip install .    # from this checkout, into conda's base \
environment
conda cuda activate
conda install pointnet2_ops""": (
        "needs conda and changes its base environment; tests/test_conda_plugin.py runs the plugin "
        "in a real conda"
    ),
}


def shell_blocks(text: str) -> list[str]:
    """The README's shell blocks (fenced with a shell info string, or indented), dedented and
    stripped."""
    blocks: list[str] = []
    lines = text.splitlines()
    i = 0
    previous_blank = True
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)(```+|~~~+)\s*(\S*)", line)
        if fence:
            marker, info = fence.group(2), fence.group(3).lower()
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append(lines[i])
                i += 1
            if info in _SHELL_INFO:
                blocks.append(textwrap.dedent("\n".join(body)).strip())
            i += 1
            previous_blank = False
            continue
        if previous_blank and line.startswith("    ") and line.strip():
            body = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                body.append(lines[i])
                i += 1
            blocks.append(textwrap.dedent("\n".join(body)).strip())
            previous_blank = False
            continue
        previous_blank = not line.strip()
        i += 1
    return blocks


def _dry_run(line: str) -> str:
    if not _DRY_RUN_COMMANDS.match(line) or "--dry-run" in line:
        return line
    command, hash_sign, comment = line.partition(" #")
    return f"{command.rstrip()} --dry-run" + (f"  #{comment}" if hash_sign else "")


def as_run(block: str, folder: Path, lab: Lab | None = None) -> str:
    """The block as the test runs it: the rule of the module docstring."""
    text = block.replace("/nfs/lab/", f"{folder}/nfs/lab/")
    if lab is not None:
        text = text.replace(WHEELHOUSE_PLACEHOLDER, lab.served_url)
    return "\n".join(_dry_run(line) for line in text.splitlines())


def _target(folder: Path) -> Path:
    """The block's own target venv (pip, nothing else), made once per folder."""
    venv = folder / "target-venv"
    if not venv.exists():
        copy_venv(venv)
    return venv


def _environ(folder: Path, machine: dict[str, str]) -> dict[str, str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CUDA_RESOLVE_") and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")
    }
    environ.update(
        # The target is the block's own venv, never the tool's (.venv, which the README's main
        # command fills with torch and pointnet2_ops): the tool's venv is a tool environment
        # (as under `uv tool install`) and the block's venv is the active one.
        UV_TOOL_DIR=sys.prefix,
        VIRTUAL_ENV=str(_target(folder)),
        HOME=str(folder),
        XDG_CACHE_HOME=str(folder / ".cache"),
        XDG_CONFIG_HOME=str(folder / ".config"),
        PATH=f"{BIN}{os.pathsep}{environ.get('PATH', '')}",
        COLUMNS="200",
    )
    environ.update(machine)
    return environ


def _bash(script: str, folder: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_readme_has_shell_blocks_and_the_setup_commands_first() -> None:
    blocks = shell_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 10
    # The README's first lines are the two set-up commands (.ci/run's first stage is the second).
    assert blocks[0].endswith("torch pointnet2_ops --smoke")
    assert blocks[1].endswith(".venv/bin/python -m pytest")
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert blocks[1].removesuffix(" && .venv/bin/python -m pytest") in ci


def test_every_block_is_run_or_skipped() -> None:
    blocks = shell_blocks(README.read_text(encoding="utf-8"))
    unknown = [block for block in blocks if block not in RUN and block not in SKIP]
    assert not unknown, (
        "README shell blocks neither run nor skipped by tests/test_readme_blocks.py:\n\n"
        + "\n\n".join(unknown)
    )
    stale = [key for key in (*RUN, *SKIP) if key not in blocks]
    assert not stale, "entries for blocks no longer in README.md:\n\n" + "\n\n".join(stale)
    assert all(reason.strip() for reason in SKIP.values())


@pytest.mark.parametrize("block", list(RUN), ids=[f"block{n}" for n in range(len(RUN))])
def test_block_runs(block: str, tmp_path: Path) -> None:
    if not (BIN / "cuda-pip").exists():
        pytest.skip(f"cuda-pip is not installed next to {sys.executable}")
    run = RUN[block]
    for name in run.profiles:
        saved = _bash(
            f"cuda-resolve detect --save-profile {name}",
            tmp_path,
            _environ(tmp_path, PROFILES[name]),
        )
        assert saved.returncode == 0, saved.stderr
    with ExitStack() as stack:
        environ = _environ(tmp_path, run.environ)
        lab = None
        if run.lab:
            lab = stack.enter_context(lab_servers(tmp_path))
            environ = lab.environ(environ)
            lab.configure(environ)
            lab.stock([tmp_path / name for name in run.profiles], ["torch", "pointnet2_ops"])
        _run_block(block, run, tmp_path, environ, lab)


def _run_block(
    block: str, run: Run, tmp_path: Path, environ: dict[str, str], lab: Lab | None
) -> None:
    if run.before:
        assert _bash(run.before, tmp_path, environ).returncode == 0
    result = _bash(as_run(block, tmp_path, lab), tmp_path, environ)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"exit {result.returncode}:\n{output}"
    assert "Traceback" not in output
    for text in run.expect:
        assert text in output, f"{text!r} not in the output:\n{output}"
    if run.after:
        checked = _bash(run.after, tmp_path, environ)
        assert checked.returncode == 0, (
            f"the block did not do what the README says: {run.after}\n"
            f"{checked.stdout}{checked.stderr}"
        )


def test_without_a_gpu_the_main_command_refuses_as_the_readme_says(tmp_path: Path) -> None:
    if not (BIN / "cuda-pip").exists():
        pytest.skip(f"cuda-pip is not installed next to {sys.executable}")
    readme = README.read_text(encoding="utf-8")
    quoted = re.search(r"the main command has no GPU to build for and says so: `([^`]+)`", readme)
    assert quoted, "the README no longer quotes the refusal"
    result = _bash(
        "cuda-pip install torch pointnet2_ops --dry-run", tmp_path, _environ(tmp_path, NO_GPU)
    )
    assert result.returncode == 1
    assert " ".join(quoted.group(1).split()) in " ".join((result.stdout + result.stderr).split())


def _troubleshooting_rows() -> list[list[str]]:
    readme = README.read_text(encoding="utf-8")
    section = readme.split("\n## Troubleshooting\n", 1)[1].split("\n## ", 1)[0]
    rows = [
        line
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
    ]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[1:]]


def test_troubleshooting_names_real_checks_and_diagnoses() -> None:
    """Each doctor check the table names exists, and each build diagnosis it names recognises the
    message of its row (the table cannot drift from the code)."""
    from cuda_resolve.build.diagnose import KNOWN_FAILURES

    root = README.parent / "cuda_resolve" / "doctor"
    checks = set(
        re.findall(
            r'check="([a-z-]+)"', "".join(p.read_text(encoding="utf-8") for p in root.glob("*.py"))
        )
    )
    diagnoses = {d.kind: d for d in KNOWN_FAILURES}
    rows = _troubleshooting_rows()
    assert len(rows) >= 8
    checked_names = checked_kinds = 0
    for message, catches, _fix in rows:
        doctor_part, _, build_part = catches.partition("a failed build:")
        named = re.findall(r"`([a-z-]+)`", doctor_part)
        for name in named:
            if "doctor" in doctor_part:
                assert name in checks, f"{name!r} is not a doctor check"
                checked_names += 1
        for kind in re.findall(r"^\s*`([a-z-]+)`", build_part):
            assert kind in diagnoses, f"{kind!r} is not a build diagnosis"
            sample = re.sub(r"`", "", message.split(" at ")[0]).replace("...", "EEE")
            assert diagnoses[kind].pattern.search(sample), f"{kind} does not recognise {sample!r}"
            checked_kinds += 1
    assert checked_names >= 6 and checked_kinds >= 4
