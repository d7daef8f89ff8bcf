"""Issue 26: ``cuda-resolve env`` output is exact for every byte of a path, in every shell.

Each shell's output is evaluated by that real shell, once and twice, the documented way
(``eval "$(...)"``, ``... | source``, ``eval "`...`"``), with paths that hold quotes, ``$(...)``,
backquotes, ``!``, ``[``, ``*``, newlines, spaces, ``$HOME`` text and a byte that is not UTF-8;
the variables are then read back byte for byte (``env -0``). Nothing in a path may run, expand or
be added twice. A shell that is not installed is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_resolve.cli import main
from cuda_resolve.envvars import JobEnvironment, render, slurm_lines
from cuda_resolve.errors import UsageError

#: How each shell evaluates a file of our output the way its documented idiom does.
EVAL = {
    "bash": (["bash", "--noprofile", "--norc", "-c"], 'eval "$(cat out)"'),
    "zsh": (["zsh", "-f", "-c"], 'eval "$(cat out)"'),
    "fish": (["fish", "--no-config", "-c"], "cat out | source"),
    "csh": (["tcsh", "-f", "-c"], 'eval "`cat out`"'),
    "tcsh": (["tcsh", "-f", "-c"], 'eval "`cat out`"'),
}

HOSTILE = {
    "spaces": "/opt/cuda x/  two",
    "quotes": "/o/it's \"q\" ''",
    "substitution": "/o/$(touch PWNED)/`touch PWNED`/$(touch PWNED",
    "home": "/o/$HOME/~/${HOME}/~root",
    "bang": "/o/bang!x/!!/!$/!-1/x!",
    "glob": "/o/[ab]*?{a,b}/[/]/*",
    "backslash": "/o/back\\slash\\'\\!\\\\/\\$HOME/end\\",
    "operators": "/o/semi;amp&pipe|lt<gt>#hash (paren) %job ^caret =eq",
    "controls": "/o/tab\tcr\r\x1b[31mesc",
    "dash": "-n",
    "not-utf8": os.fsdecode(b"/o/\xff\xfe-bytes"),
    "newline": "/o/new\nline\n; touch PWNED",
}

#: LD_LIBRARY_PATH as the shell had it before: unset, empty (never a trailing ':'), set.
STARTS = {"unset": None, "empty": "", "set": "/x"}


def _job(value: str) -> JobEnvironment:
    return JobEnvironment(
        cuda_home=value,
        path=(f"{value}/bin",),
        library_path=(f"{value}/lib", "/l/two"),
        arch_list="8.0;9.0+PTX",
    )


def _evaluate(shell: str, text: str, times: int, start: str | None, cwd: Path) -> dict[str, str]:
    argv, idiom = EVAL[shell]
    (cwd / "out").write_bytes(os.fsencode(text))
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LANG": "C.UTF-8"}
    if start is not None:
        environ["LD_LIBRARY_PATH"] = start
    script = "\n".join([idiom] * times + ["env -0"])
    done = subprocess.run(
        [*argv, script], env=environ, cwd=cwd, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert not done.stderr, done.stderr.decode(errors="replace")
    pairs = (entry.split(b"=", 1) for entry in done.stdout.split(b"\0") if b"=" in entry)
    return {os.fsdecode(k): os.fsdecode(v) for k, v in pairs}


def _skip_without(shell: str) -> None:
    program = EVAL[shell][0][0]
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed (.ci/run installs it)")


@pytest.mark.parametrize("shell", list(EVAL))
@pytest.mark.parametrize("case", list(HOSTILE))
def test_every_shell_gets_every_byte_once_and_twice(shell: str, case: str, tmp_path: Path) -> None:
    _skip_without(shell)
    value = HOSTILE[case]
    if shell in ("csh", "tcsh") and "\n" in value:
        pytest.skip("csh refuses a newline (test_csh_refuses_a_newline)")
    text = render(_job(value), shell)  # type: ignore[arg-type]
    for start_name, start in STARTS.items():
        once = _evaluate(shell, text, 1, start, tmp_path)
        twice = _evaluate(shell, text, 2, start, tmp_path)
        assert not (tmp_path / "PWNED").exists(), f"{shell} ran a path's command"
        tail = "" if not start else f":{start}"
        assert once["CUDA_HOME"] == value, start_name
        assert once["PATH"] == f"{value}/bin:/usr/bin:/bin", start_name
        assert once["LD_LIBRARY_PATH"] == f"{value}/lib:/l/two{tail}", start_name
        assert once["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0+PTX"
        assert {k: twice[k] for k in once} == once, f"{start_name}: twice added again"


@pytest.mark.parametrize("shell", ["csh", "tcsh"])
def test_csh_refuses_a_newline(shell: str) -> None:
    with pytest.raises(UsageError) as caught:
        render(_job("/o/new\nline"), shell)  # type: ignore[arg-type]
    assert "newline" in caught.value.message and "--shell bash" in (caught.value.hint or "")


def test_a_colon_cannot_be_a_path_entry() -> None:
    with pytest.raises(UsageError, match="':' separates"):
        render(_job("/o/co:lon"), "bash")


@pytest.mark.parametrize("shell", ["bash", "fish", "csh"])
def test_the_toolkit_moves_before_another_and_stays_first(shell: str, tmp_path: Path) -> None:
    """Already on PATH but not first (another toolkit ahead): put first, once."""
    _skip_without(shell)
    value = HOSTILE["glob"]
    argv, idiom = EVAL[shell]
    (tmp_path / "out").write_text(render(_job(value), shell))  # type: ignore[arg-type]
    environ = {"PATH": f"/other/bin:{value}/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [*argv, f"{idiom}\n{idiom}\nenv -0"],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=True,
    )
    found = dict(e.split(b"=", 1) for e in done.stdout.split(b"\0") if b"=" in e)
    assert os.fsdecode(found[b"PATH"]) == f"{value}/bin:/other/bin:{value}/bin:/usr/bin:/bin"


def test_slurm_comment_never_holds_a_raw_newline(tmp_path: Path) -> None:
    """The interpreter's path is named in a comment: a newline there must not end it."""
    python = f"{tmp_path}/v\n touch {tmp_path}/PWNED\n#/bin/python"
    text = slurm_lines(_job("/opt/cuda"), python)
    header = text.splitlines()[0]
    assert header.startswith("# ") and f"\\x0a touch {tmp_path}/PWNED\\x0a#" in header
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", text + 'printf %s "$PATH"'],
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert not (tmp_path / "PWNED").exists()
    assert done.stdout == f"/opt/cuda/bin:{os.path.dirname(python)}:/usr/bin:/bin"


def test_cli_slurm_lines_for_a_hostile_interpreter_folder(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """The real command, for an interpreter in a folder whose name holds hostile bytes (a link
    to this interpreter): the comment stays one line, the folder arrives on PATH exactly, once."""
    name = "h $(touch PWNED) `x` !x [a]* 'q\" $HOME\n; touch PWNED\n" + os.fsdecode(b"\xff")
    folder = tmp_path / name
    folder.mkdir()
    (folder / "python").symlink_to(sys.executable)
    assert main(["env", "--slurm", "--python", str(folder / "python")]) == 0
    text = capsysbinary.readouterr().out
    lines = text.split(b"\n")
    assert lines[0].startswith(b"# ") and b"\\x0a; touch PWNED\\x0a" in lines[0]
    assert lines[1].startswith((b"export ", b"case "))
    assert b"\n\xff'" in text and "\ufffd".encode() not in text  # the byte, not a stand-in
    found = _evaluate("bash", os.fsdecode(text), 2, None, tmp_path)
    assert not (tmp_path / "PWNED").exists()
    entries = found["PATH"].split(":")
    assert entries.count(str(folder)) == 1 and entries[-2:] == ["/usr/bin", "/bin"]


def test_kernel_spec_values_survive_jupyters_substitution() -> None:
    """jupyter_client fills ``${VAR}`` in a kernel spec's env (string.Template): a ``$`` of a
    path must come out as itself, while ``${PATH}`` still takes the server's PATH."""
    import string

    from cuda_resolve.envvars import kernel_spec

    value = HOSTILE["home"] + "/$$x/$PATH"
    spec = kernel_spec(_job(value), "lab", f"{value}/v/bin/python")
    server = {"HOME": "/server-home", "PATH": "/s/bin", "LD_LIBRARY_PATH": "/s/lib"}
    env = {k: string.Template(v).safe_substitute(server) for k, v in spec["env"].items()}
    assert env["CUDA_HOME"] == value
    assert env["PATH"] == f"{value}/bin:{value}/v/bin:/s/bin"
    assert env["LD_LIBRARY_PATH"] == f"{value}/lib:/l/two:/s/lib"
