"""Linear time on every input: a requirements file's hostile 3 MB line is parsed or refused in
well under half a second, and the parsers that see user input (the requirements reader, its
shell-word splitter, the regular expressions over build logs and over everything we print) stay
linear on long adversarial lines.

The timings run in one child interpreter with a deadline, so a quadratic parser fails the test
in seconds instead of hanging the suite; the budget is CPU time of the parsing alone.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_resolve.build.diagnose import diagnose, error_lines
from cuda_resolve.detect.compilers import parse_compiler_version
from cuda_resolve.detect.nvcc import script_nvcc_paths
from cuda_resolve.errors import UsageError
from cuda_resolve.install._words import split_words
from cuda_resolve.install.reqfile import _strip_comment, read_requirement_files
from cuda_resolve.redaction import redact_urls

MB3 = 3 * 1024 * 1024

#: name -> a Python expression for one hostile line (N is its length).
HOSTILE_LINES = {
    "whitespace then a word": "' ' * N + 'x'",
    "whitespace and no comment": "'a' + ' ' * N + 'b'",
    "tabs then a comment": "'\\t' * N + '#'",
    "a comment after a long requirement": "'a' + ' ' * (N - 5) + ' #c'",
    "a million variables": "'${A}' * (N // 4)",
    "variables in a URL": "'https://h/' + '${A}' * (N // 4)",
    "many hash options": "'a==1' + ' --hash=sha256:x' * (N // 16)",
    "lines joined by backslashes": "'a==1 \\\\\\n' * (N // 7)",
    "one long option value": "'--index-url ' + 'x' * N",
    "an unclosed quote": "'--index-url \\'' + 'x' * N",
    "an unclosed double quote": "'--index-url \"' + 'x' * N",
    "backslashes": "'--index-url ' + '\\\\' * N",
    "a long requirement": "'a' * N",
    "brackets": "'a[' + 'b,' * (N // 2) + ']'",
    "version clauses": "'a' + '>=1,' * (N // 4)",
    "a long marker": "'a; ' + 'python_version > \"1\" and ' * (N // 26) + 'os_name == \"x\"'",
    "dashes": "'-' * N",
}

#: The same kinds of line just under the length cuda-pip reads: parsed, and fast.
UNDER_LIMIT = 60_000

CHILD = textwrap.dedent("""
    import atexit, json, shutil, sys, time, tempfile
    from pathlib import Path
    from cuda_resolve.errors import UsageError
    from cuda_resolve.install.reqfile import read_requirement_files
    cases, size = json.loads(sys.argv[1]), int(sys.argv[2])
    folder = Path(tempfile.mkdtemp())
    atexit.register(shutil.rmtree, folder, True)
    result = {}
    for name, expression in cases.items():
        path = folder / "requirements.txt"
        path.write_text(eval(expression, {"N": size}), encoding="utf-8")
        started = time.process_time()
        try:
            read_requirement_files([(str(path), False)], environ={"A": "value"})
            outcome = "read"
        except UsageError as exc:
            outcome = exc.message
        result[name] = [time.process_time() - started, outcome]
        print(json.dumps({name: result[name]}), flush=True)
""")


def _timed(size: int, deadline: float) -> dict[str, list[object]]:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(HOSTILE_LINES), str(size)],
            capture_output=True,
            text=True,
            timeout=deadline,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(
            f"reading the hostile lines took longer than {deadline} s; finished: {partial!r}"
        )
    assert done.returncode == 0, done.stderr
    found: dict[str, list[object]] = {}
    for line in done.stdout.splitlines():
        found.update(json.loads(line))
    return found


def test_a_hostile_3_mb_line_is_parsed_or_refused_in_under_half_a_second() -> None:
    found = _timed(MB3, deadline=60)
    slow = {name: seconds for name, (seconds, _) in found.items() if float(seconds) >= 0.5}  # type: ignore[arg-type]
    assert not slow, slow
    # an over-long line is refused naming the file, the line and the limit (a crash would have
    # failed the child: every outcome is a reading or a UsageError's message)
    assert re.search(
        r"requirements\.txt:1: a line of 3145728 characters, more than the 65536 cuda-pip reads",
        str(found["a long requirement"][1]),
    ), found["a long requirement"]


def test_lines_just_under_the_limit_are_read_fast() -> None:
    found = _timed(UNDER_LIMIT, deadline=30)
    slow = {name: seconds for name, (seconds, _) in found.items() if float(seconds) >= 0.5}  # type: ignore[arg-type]
    assert not slow, slow


def test_variables_that_would_grow_a_line_past_the_limit_are_refused_before_expanding(
    tmp_path: Path,
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("--index-url https://h/" + "${BIG}" * 1000 + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"requirements\.txt:1: a line of 1000\d{3} characters"):
        read_requirement_files([(str(path), False)], environ={"BIG": "x" * 1000})
    # the ordinary use still works: a token in a URL, an index on its own line, a requirement
    path.write_text(
        "# pinned\n--extra-index-url https://u:${TOKEN}@mirror/simple  # comment\n"
        "kaolin==0.18.0 \\\n    --hash=sha256:" + "ab" * 32 + "\n",
        encoding="utf-8",
    )
    reading = read_requirement_files([(str(path), False)], environ={"TOKEN": "t0k"})
    assert [(r.text, r.origin.rsplit(":", 1)[1], r.hashed) for r in reading.requirements] == [
        ("kaolin==0.18.0", "3", True)
    ]


def test_comments_are_removed_as_pips_pattern_removes_them() -> None:
    pips = re.compile(r"(^|\s+)#.*$")
    rng = random.Random(15)
    for _ in range(20_000):
        line = "".join(rng.choice("a #\t\u3000\x0b=/") for _ in range(rng.randint(0, 12)))
        assert _strip_comment(line) == pips.sub("", line), repr(line)


def test_option_words_split_as_shlex_splits_them() -> None:
    rng = random.Random(15)
    for _ in range(20_000):
        line = "".join(
            rng.choice(["a", "b", " ", "\t", "\n", "'", '"', "\\", "#", "=", "\u3000"])
            for _ in range(rng.randint(0, 12))
        )
        try:
            expected: list[str] | None = shlex.split(line)
        except ValueError:
            expected = None
        try:
            got: list[str] | None = split_words(line)
        except ValueError:
            got = None
        assert got == expected, repr(line)


@pytest.mark.parametrize(
    ("parse", "line"),
    [
        # a build log line (a compiler or a user's setup.py wrote it): the out-of-memory pattern
        (lambda text: diagnose([text]), "Killed " * 20_000 + "!"),
        (lambda text: error_lines([text]), " " * 100_000 + "error: x"),
        # the first line of a compiler's --version (any program named gcc on PATH)
        (parse_compiler_version, "gcc " + "(" * 100_000),
        # a wrapper script named nvcc on PATH, read to find the nvcc it runs
        (script_nvcc_paths, "NVCC" + "=/" * 40_000 + "/nvccX"),
        # everything cuda-resolve prints or logs is redacted: pip's and a compiler's lines too
        (redact_urls, "x@ " + "a://" * 25_000),
        (redact_urls, "user@host " + "a-" * 50_000 + "://"),
    ],
)
def test_parsers_of_logs_and_program_output_stay_linear(
    parse: Callable[[str], object], line: str
) -> None:
    started = time.process_time()
    parse(line)
    assert time.process_time() - started < 0.5


def test_nvcc_paths_in_a_script_are_found_as_the_former_pattern_found_them() -> None:
    former = re.compile(
        r"""(?:^|[\s"'=])((?:\$\{?\w+\}?|~|\.{1,2}|/)[^\s"';|&()]*/nvcc)(?=$|[\s"';|&)])"""
    )
    pieces = [
        "/nvcc",
        "/",
        "=",
        " ",
        "'",
        '"',
        "$",
        "${",
        "}",
        "A",
        "~",
        ".",
        "..",
        "(",
        ")",
        ";",
        "x",
        "\t",
        "é",
        "|",
        "1",
    ]
    rng = random.Random(15)
    for _ in range(30_000):
        line = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
        assert script_nvcc_paths(line) == former.findall(line), repr(line)
    assert script_nvcc_paths('exec "${CUDA_HOME}/bin/nvcc" "$@"') == ["${CUDA_HOME}/bin/nvcc"]
    assert script_nvcc_paths("NVCC=/opt/cuda/bin/nvcc; exec $NVCC") == ["/opt/cuda/bin/nvcc"]
