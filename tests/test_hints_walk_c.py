"""Hints from user walk C (2026-12-05) that led into a wall when pasted: each now names the
command that works, with what the user asked and where (the target interpreter, this tool's
cuda-pip, the git host to test)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from cuda_resolve.build.source import _copy_source_dir, _git, _holds_commit
from cuda_resolve.cli import main
from cuda_resolve.errors import BuildError, InstallError, UsageError
from cuda_resolve.index.model import Recipe
from cuda_resolve.install.pip import PipFacts, refuse_externally_managed


def test_the_pep_668_fix_names_this_cuda_pip_the_new_venv_and_the_requests(
    tmp_path: Path,
) -> None:
    """C1: `.venv/bin/cuda-pip` does not exist in a new venv: the fix runs this tool's cuda-pip
    with --python, and names what was asked."""
    facts = PipFacts(version=Version("26.0"), truststore=True, externally_managed=True)
    with pytest.raises(InstallError) as refused:
        refuse_externally_managed("/usr/bin/python3", facts, [], {}, requests=["six", "kaolin"])
    hint = str(refused.value.hint)
    ours = os.path.join(os.path.dirname(sys.executable), "cuda-pip")
    assert os.path.isfile(ours)  # the checkout's venv has one, as an installed tool has
    command = f"{ours} install --python .venv/bin/python six kaolin"
    assert f"python3 -m venv .venv && {command}" in hint, hint
    # Pasted, the first half makes the venv and the second reaches it (--dry-run: no network).
    subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=tmp_path, check=True, timeout=300)
    done = subprocess.run(
        [*shlex.split(command.replace(" six kaolin", " six")), "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert f"target: {tmp_path / '.venv' / 'bin' / 'python'}" in " ".join(said.split()), said


def test_the_pep_668_fix_is_the_command_that_ran_with_the_new_venv_as_python() -> None:
    """The user's own words (pins, options) with --python swapped: rebuilt from the plan, a
    pin or an extra would be lost (review R5)."""
    from cuda_resolve.install.pip import _again_into

    ran = ["/t/bin/cuda-pip", "install", "torch==2.13.0", "--python", "/usr/bin/python3", "-U"]
    assert _again_into(".venv/bin/python", ran, ["torch"]) == [
        "/t/bin/cuda-pip", "install", "torch==2.13.0", "-U", "--python", ".venv/bin/python",
    ]  # fmt: skip
    ran = ["cuda-resolve", "install", "kaolin", "--python=/usr/bin/python3"]
    assert _again_into(".venv/bin/python", ran, []) == [
        "cuda-resolve", "install", "kaolin", "--python", ".venv/bin/python",
    ]  # fmt: skip


def test_an_unknown_option_names_the_subcommands_help_and_cuda_pip_for_pip_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """C13: `cuda-resolve install six --no-deps` pointed at the top level's --help."""
    assert main(["install", "six", "--no-deps", "--json"]) == 2
    said = capsys.readouterr().out
    assert "cuda-resolve install: unrecognized arguments: --no-deps" in said
    assert "`cuda-resolve install --help`" in said
    assert "`cuda-pip install six --no-deps --json`" in said
    # The user's own words, quoted for the shell: their --python and a file with a space.
    given = ["install", "-r", "my reqs.txt", "torch>=2.4", "--python", "/opt/my venv/bin/python"]
    assert main([*given, "--no-deps", "--json"]) == 2
    hint = json.loads(capsys.readouterr().out)["hint"]
    command = hint.split("`")[-2]
    assert shlex.split(command) == ["cuda-pip", *given, "--no-deps", "--json"], command
    assert main(["plan", "--bogus", "six", "--json"]) == 2
    said = capsys.readouterr().out
    assert "cuda-resolve plan: unrecognized arguments: --bogus" in said
    assert "`cuda-resolve plan --help`" in said and "cuda-pip" not in said


_AUTHOR = {
    **os.environ,
    **dict.fromkeys(("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"), "t"),
    **dict.fromkeys(("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"), "t@t"),
}


def _repository(path: Path, text: str) -> str:
    environ = _AUTHOR
    path.mkdir()
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"]):
        if args[0] == "add":
            (path / "setup.py").write_text(text)
        subprocess.run(["git", *args], cwd=path, env=environ, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_source_folder_without_the_pinned_commit_is_called_another_repository(
    tmp_path: Path,
) -> None:
    """C7: the hint to `git checkout REV` failed with 'reference is not a tree'."""
    own = _repository(tmp_path / "one", "# one\n")
    _repository(tmp_path / "two", "# two\n")
    assert _holds_commit(tmp_path / "one", own, dict(os.environ))
    assert not _holds_commit(tmp_path / "two", own, dict(os.environ))
    recipe = Recipe(
        name="one-main",
        package="one",
        version=Version("1.0"),
        repository="https://git.example/one.git",
        revision=own,
    )
    with pytest.raises(BuildError) as refused:
        _copy_source_dir(recipe, tmp_path / "two", tmp_path / "copy", dict(os.environ), print)
    assert f"does not hold recipe one-main's revision {own[:12]}" in str(refused.value)
    assert "git clone https://git.example/one.git DIR" in str(refused.value.hint)
    # A clone of the recipe's repository at another commit: still told to check the pin out.
    (tmp_path / "one" / "setup.py").write_text("# moved on\n")
    subprocess.run(["git", "commit", "-qam", "two"], cwd=tmp_path / "one", env=_AUTHOR, check=True)
    with pytest.raises(BuildError) as moved:
        _copy_source_dir(recipe, tmp_path / "one", tmp_path / "copy2", dict(os.environ), print)
    assert f"checkout {own}" in str(moved.value.hint)


def test_a_failed_fetch_names_the_host_and_how_to_test_it(tmp_path: Path) -> None:
    """C8: the hint sent the user to doctor --network, which never tries the git host."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    url = "https://127.0.0.1:9/nobody/nothing.git"
    subprocess.run(["git", "remote", "add", "origin", url], cwd=tmp_path, check=True)
    with pytest.raises(BuildError) as failed:
        _git(["fetch", "-q", "origin", "main"], cwd=tmp_path, environ=dict(os.environ), remote=url)
    assert f"`git ls-remote {url}`" in str(failed.value.hint)
    assert "doctor --network" not in str(failed.value.hint)


def test_the_uv_and_socks_hints_name_this_interpreters_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """C11, C13: a bare `pip install` may be another environment's."""
    from cuda_resolve._upgrade import command_to_install
    from cuda_resolve.install import uv

    assert command_to_install("pysocks") == shlex.join(
        [sys.executable, "-m", "pip", "install", "pysocks"]
    )
    monkeypatch.setattr(uv, "find_uv", lambda environ: None)  # uv installed nowhere
    with pytest.raises(UsageError) as missing:
        uv.uv_for("uv", {})
    assert shlex.join([sys.executable, "-m", "pip", "install", "uv"]) in str(missing.value.hint)


@pytest.mark.parametrize("how", ["--target", "PIP_TARGET"])
def test_an_install_pip_sends_to_another_folder_is_said_not_nothing_to_change(
    tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """C4: with --target DIR (or PIP_TARGET) pip wrote into DIR and the install said "nothing to
    change: everything was already installed", its --json listing no change."""
    from _torch_env import copy_venv
    from test_lock_support import make_wheel

    from pip_plugin.__main__ import main as cuda_pip_main

    make_wheel(tmp_path / "links", "tinyutil", "1.0")
    python = copy_venv(tmp_path / "venv")
    folder = tmp_path / "elsewhere"
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    words = ["install", "tinyutil", "--python", str(python), "--no-index"]
    words += ["--find-links", str(tmp_path / "links")]
    if how == "--target":
        words += ["--target", str(folder)]
    else:
        monkeypatch.setenv("PIP_TARGET", str(folder))
    assert cuda_pip_main(words) == 0
    said = capsys.readouterr()
    assert (folder / "tinyutil").is_dir()
    assert "pip installed tinyutil-1.0 outside the target environment" in said.err + said.out
    assert "nothing to change" not in said.err + said.out
    assert cuda_pip_main([*words, "--json"]) == 0  # pip installs it there again
    result = json.loads(capsys.readouterr().out)["result"]
    assert result["installed_elsewhere"] == ["tinyutil-1.0"] and result["changed"] == []


def test_a_profile_plan_takes_the_profiles_toolkit_without_its_nvcc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """C14: docs/profile-format.md's own example (a toolkit's version and root, no nvcc) gave
    "this plan cannot be carried out as it stands: ... toolkit ... was not found"."""
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    docs = (Path(__file__).parent.parent / "docs" / "profile-format.md").read_text()
    example = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    assert "[[toolkit]]" in example and "nvcc" not in example
    profile = tmp_path / "lab-a100.toml"
    profile.write_text(example)
    assert main(["plan", "torch", "pointnet2_ops", "--profile", str(profile), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert "cannot_apply" not in document, document.get("cannot_apply")
    (build,) = document["builds"]
    assert build["toolkit"]["root"] == "/usr/local/cuda-12.1"
    assert build["variables"]["CUDA_HOME"] == "/usr/local/cuda-12.1"


def test_mirror_show_says_a_config_named_by_the_variable_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """C12: a lab's CUDA_RESOLVE_CONFIG with a typo silently meant no mirror and no proxy."""
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "lab-confg.toml"))
    assert main(["mirror", "show"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{tmp_path / 'lab-confg.toml'} (named by CUDA_RESOLVE_CONFIG, and no such file" in out
    monkeypatch.delenv("CUDA_RESOLVE_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert main(["mirror", "show"]) == 0
    out = capsys.readouterr().out
    assert "(not written yet)" in out and "CUDA_RESOLVE_CONFIG" not in out


def test_the_why_line_on_a_machine_without_a_gpu_names_the_asked_architectures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """C15: "kernels for 7.5;...;12.0 cover no GPU" with --arch-list "8.0;8.9", and the
    package's canonical name (pointnet2-ops) in one place only."""
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    profile = tmp_path / "login.toml"
    profile.write_text('[python]\nversion = "3.11.7"\n[[toolkit]]\nversion = "13.0"\nroot = "/x"\n')
    words = ["plan", "torch", "pointnet2_ops", "--profile", str(profile), "--json"]
    assert main([*words, "--arch-list", "8.0;8.9"]) == 0
    (torch,) = [r for r in json.loads(capsys.readouterr().out)["reasons"] if r.startswith("torch")]
    assert (
        "cover no GPU" not in torch
        and "(no GPU here; the builds target --arch-list 8.0;8.9)" in torch
    )
    assert "that builds pointnet2_ops" in torch, torch


def test_a_dry_run_says_the_installed_torch_would_be_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """C15: `cuda-pip install torch --allow-torch-change --dry-run` over a CPU torch did not say
    that torch would be replaced."""
    import argparse

    from cuda_resolve.cli.install import _render_dry_run
    from cuda_resolve.plan import Plan

    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    profile = tmp_path / "h200.toml"
    profile.write_text(
        '[python]\nversion = "3.11.7"\n[driver]\nversion = "580.95.05"\n'
        '[[gpu]]\nname = "NVIDIA H200"\ncompute_capability = "9.0"\n'
        '[torch]\nversion = "2.13.0+cpu"\n'
    )
    words = ["plan", "torch", "--profile", str(profile), "--json"]
    assert main([*words, "--allow-torch-change"]) == 0
    plan = Plan.from_json(json.loads(capsys.readouterr().out), origin="plan.json")
    _render_dry_run(argparse.Namespace(json=False), plan, [], "/t/bin/python", "install")
    out = " ".join(capsys.readouterr().out.split())
    (torch,) = [item for item in plan.items if item.name == "torch"]
    assert (
        f"note: the installed torch 2.13.0+cpu would be replaced by {torch.version}+{torch.variant}"
        in out
    ), out
