"""Secrets never leave in clear: not on the terminal, not in ``--json``, not in a log file.

Credentials reach cuda-pip in index and proxy URLs (``-i https://user:pw@host``, ``--proxy
user:pw@proxy:3128``), in token query values (``?token=...``) and through ``${NAME}`` variables
that pip expands in requirement files. The real commands are run here with such arguments (a
dry run, its JSON, and an install that fails because the loopback index does not answer); stdout,
stderr, the JSON and every file under the private cache and home folders are searched for each
secret, and the log files must be readable by their owner only. The rules themselves, the
reporter wrapper, the output helpers, the error boundary and ``run_logged`` are tested one by one.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_resolve.build.runner import run_logged
from cuda_resolve.cli import _boundary, _output
from cuda_resolve.errors import CudaResolveError, NetworkError
from cuda_resolve.paths import new_log_path
from cuda_resolve.redaction import (
    MASK,
    clear_secrets,
    is_secret_parameter,
    redact,
    redact_data,
    redact_urls,
    register_secret,
    secret_values_from_environment,
)
from cuda_resolve.reporting import RedactingReporter

INDEX_PASSWORD = "S3cretPw"
PROXY_PASSWORD = "Pr0xyPw"
QUERY_TOKEN = "T0kenVal"
ENV_SECRET = "EnvS3cret"
SECRETS = (INDEX_PASSWORD, PROXY_PASSWORD, QUERY_TOKEN, ENV_SECRET)
#: Nothing listens on the discard port: every connection is refused at once.
INDEX = f"https://alice:{INDEX_PASSWORD}@127.0.0.1:9/simple"
TOKEN_INDEX = f"https://127.0.0.1:9/simple?token={QUERY_TOKEN}"


@pytest.fixture(autouse=True)
def _no_registered_secrets() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


# -- the rules --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://h/simple?token=abc", "https://h/simple?token=***"),
        (
            "https://h/simple/?TOKEN=abc&page=2",
            "https://h/simple/?TOKEN=***&page=2",
        ),  # case-insensitive; page kept
        (
            "https://h/x?access_token=a1&api_key=a2&apikey=a3",
            "https://h/x?access_token=***&api_key=***&apikey=***",
        ),
        (
            "https://h/x?key=a&password=b&secret=c&auth=d",
            "https://h/x?key=***&password=***&secret=***&auth=***",
        ),
        ("https://h/x?sv=1&sig=abc%2Bdef", "https://h/x?sv=1&sig=***"),  # an Azure SAS link
        (
            "https://h/w.whl?X-Amz-Credential=a&X-Amz-Signature=b",
            "https://h/w.whl?X-Amz-Credential=***&X-Amz-Signature=***",
        ),
        (
            "https://h/x?private_token=a&client_secret=b",
            "https://h/x?private_token=***&client_secret=***",
        ),
        ("https://h/cb#access_token=abc", "https://h/cb#access_token=***"),  # a fragment too
        # pip appends the project to an index URL with a query: the whole value is hidden
        ("GET /simple?token=abc/somepkg/ failed", "GET /simple?token=*** failed"),
        (
            "https://h/pkg-1.0.tar.gz#sha256=abcd",
            "https://h/pkg-1.0.tar.gz#sha256=abcd",
        ),  # not a credential
        ("https://h/p.zip#egg=name&subdirectory=x", "https://h/p.zip#egg=name&subdirectory=x"),
        ("https://h/x?monkey=1&keyboard=2", "https://h/x?monkey=1&keyboard=2"),
        ("cmake -DKEY=value key=value", "cmake -DKEY=value key=value"),  # not in a query
        ("https://u:pw@h/simple?token=abc", "https://u:***@h/simple?token=***"),
        ("https://h/simple?token=***", "https://h/simple?token=***"),  # twice is once
    ],
)
def test_secret_query_values_are_hidden(text: str, shown: str) -> None:
    assert redact_urls(text) == shown


def test_which_query_parameters_are_secret() -> None:
    for name in (
        "token",
        "Access-Token",
        "API_KEY",
        "apikey",
        "key",
        "password",
        "passwd",
        "secret",
        "auth",
        "sig",
        "signature",
        "X-Goog-Signature",
        "X-Amz-Security-Token",
        "private_key",
        "credential",
    ):
        assert is_secret_parameter(name), name
    for name in ("page", "egg", "sha256", "subdirectory", "monkey", "keyboard", "format"):
        assert not is_secret_parameter(name), name


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("--proxy bob:pw@proxy:3128", "--proxy bob:***@proxy:3128"),
        ("--proxy=bob:pw@proxy:3128", "--proxy=bob:***@proxy:3128"),
        ("--proxy 'bob:p@ss@proxy:3128'", "--proxy 'bob:***@proxy:3128'"),  # an "@" in the password
        (
            "--proxy TOKEN@proxy:3128",
            "--proxy ***@proxy:3128",
        ),  # a lone user name is often the token
        ("HTTPS_PROXY=bob:pw@proxy:3128", "HTTPS_PROXY=bob:***@proxy:3128"),
        ("global.proxy='bob:pw@proxy:3128'", "global.proxy='bob:***@proxy:3128'"),
        ("--proxy http://bob:pw@proxy:3128", "--proxy http://bob:***@proxy:3128"),
        ("bob:pw@proxy:3128", "bob:***@proxy:3128"),  # a whole value
        ("bob:pw@[::1]:3128", "bob:***@[::1]:3128"),
        ("--proxy proxy:3128", "--proxy proxy:3128"),
        ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
        ("mail admin@lab.example about it", "mail admin@lab.example about it"),
    ],
)
def test_a_proxy_without_scheme_is_hidden(text: str, shown: str) -> None:
    assert redact_urls(text) == shown


def test_redact_and_redact_data_know_the_new_rules() -> None:
    assert redact("bob:pw@proxy:3128") == "bob:***@proxy:3128"
    assert redact("https://h/simple?token=abc") == "https://h/simple?token=***"
    assert redact("https://u:pw@h/?key=k") == "https://u:***@h/?key=***"
    assert redact_data(
        {
            "args": ["-i", "https://u:pw@h/", "--proxy", "TOK3N@proxy:1", "--proxy", "b:pw@p:1"],
            "https://h/?token=abc": 1,
        }
    ) == {
        "args": ["-i", "https://u:***@h/", "--proxy", "***@proxy:1", "--proxy", "b:***@p:1"],
        "https://h/?token=***": 1,
    }


def test_authorization_headers_are_hidden() -> None:
    assert redact_urls("Authorization: Bearer abc.def.ghi") == "Authorization: Bearer ***"
    assert redact_urls("proxy-authorization: Basic Ym9iOnB3") == "proxy-authorization: Basic ***"


def test_registered_secrets_are_masked_wherever_they_appear() -> None:
    text = f"Looking in indexes: https://127.0.0.1:9/{ENV_SECRET}/simple (key {ENV_SECRET}x)"
    assert redact_urls(text) == text  # nothing shaped like a credential: unknown until registered
    register_secret(ENV_SECRET)
    register_secret(ENV_SECRET)  # twice is once
    assert (
        redact_urls(text) == f"Looking in indexes: https://127.0.0.1:9/{MASK}/simple (key {MASK}x)"
    )
    assert redact(f"https://h/{ENV_SECRET}/") == f"https://h/{MASK}/"
    assert redact_data({"a": [f"x{ENV_SECRET}"]}) == {"a": [f"x{MASK}"]}
    assert ENV_SECRET not in str(NetworkError(f"fetching {text}", hint=ENV_SECRET).to_json())
    register_secret(f"{ENV_SECRET}-longer")  # a secret holding another is masked whole
    assert redact_urls(f"a {ENV_SECRET}-longer b") == f"a {MASK} b"
    clear_secrets()
    assert redact_urls(text) == text


def test_short_values_are_masked_where_they_stand_as_a_word() -> None:
    register_secret("abc")  # a short password is hidden like a long one (issue 26) ...
    register_secret("   ")
    assert redact_urls("abc abcd (abc)") == "*** abcd (***)"  # ... not inside longer words


def test_secret_values_from_environment() -> None:
    environ = {"CR_TOKEN": ENV_SECRET, "CR_SHORT": "ab", "CR_EMPTY": "", "CR_AGAIN": ENV_SECRET}
    assert secret_values_from_environment(
        ["CR_TOKEN", "CR_SHORT", "CR_EMPTY", "CR_UNSET", "CR_AGAIN"], environ
    ) == (ENV_SECRET, "ab")


# -- where the rules are applied --------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[object, ...]] = []

    def step(self, text: str) -> None:
        self.seen.append(("step", text))

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        self.seen.append(("progress", label, done, total, elapsed))

    def note(self, text: str) -> None:
        self.seen.append(("note", text))


def test_redacting_reporter() -> None:
    inner = _Recorder()
    register_secret(ENV_SECRET)
    reporter = RedactingReporter(inner)
    reporter.step(f"checking {INDEX}")
    reporter.note(f"{TOKEN_INDEX} is slow; {ENV_SECRET}")
    reporter.progress(f"pip via --proxy bob:{PROXY_PASSWORD}@proxy:3128", 1, 2, 3.0)
    assert inner.seen == [
        ("step", "checking https://alice:***@127.0.0.1:9/simple"),
        ("note", "https://127.0.0.1:9/simple?token=*** is slow; ***"),
        ("progress", "pip via --proxy bob:***@proxy:3128", 1, 2, 3.0),
    ]


def test_output_helpers_redact(capsys: pytest.CaptureFixture[str]) -> None:
    register_secret(ENV_SECRET)
    _output.print_json(
        {
            "args": ["-i", INDEX, "--proxy", f"bob:{PROXY_PASSWORD}@p:1", TOKEN_INDEX],
            "path": Path(f"/x/{ENV_SECRET}"),
        }
    )
    _output.console().print(f"python -m pip install -i {INDEX} {TOKEN_INDEX}", soft_wrap=True)
    _output.error_console().print(
        f"- step {INDEX} --proxy bob:{PROXY_PASSWORD}@p:1", soft_wrap=True
    )
    error = CudaResolveError(f"cannot reach {INDEX}", hint=f"check {TOKEN_INDEX}")
    _output.report_error(error, as_json=False)
    _output.report_error(error, as_json=True)
    out, err = capsys.readouterr()
    for secret in SECRETS:
        assert secret not in out + err, secret
    assert (
        "alice:***@127.0.0.1:9" in out
        and "token=***" in out
        and "bob:***@p:1" in out
        and "/x/***" in out
    )
    assert (
        "alice:***@127.0.0.1:9" in err
        and "bob:***@p:1" in err
        and "hint: check https://127.0.0.1:9/simple?token=***" in err
    )


def test_the_error_boundary_redacts_a_bug_and_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    register_secret(ENV_SECRET)

    def bug() -> int:
        raise ValueError(f"bad {INDEX} {TOKEN_INDEX} --proxy bob:{PROXY_PASSWORD}@p:1 {ENV_SECRET}")

    for debug in (False, True):
        for wants_json in (False, True):
            assert _boundary.guarded(bug, wants_json=wants_json, debug=debug) == _boundary.BUG_EXIT
            out, err = capsys.readouterr()
            for secret in SECRETS:
                assert secret not in out + err, (secret, debug, wants_json)
            assert "alice:***@" in out + err
            assert ("Traceback" in err) is debug


def test_run_logged_redacts_the_command_the_log_and_the_tail(tmp_path: Path) -> None:
    register_secret(ENV_SECRET)
    script = textwrap.dedent(f"""
        print("Looking in indexes: {INDEX}, {TOKEN_INDEX}")
        print("proxy bob:{PROXY_PASSWORD}@proxy:3128 token path /{ENV_SECRET}/simple")
        print("no newline at the end ?token={QUERY_TOKEN}", end="")
    """)
    command = [
        sys.executable,
        "-c",
        script,
        "-i",
        INDEX,
        "--proxy",
        f"bob:{PROXY_PASSWORD}@proxy:3128",
        TOKEN_INDEX,
    ]
    lines: list[str] = []
    log_path = tmp_path / "run.log"
    with open(log_path, "w", encoding="utf-8") as log:
        status, tail = run_logged(command, environ=os.environ, log=log, on_line=lines.append)
    assert status == 0
    written = log_path.read_text(encoding="utf-8")
    shown = written + "\n".join(tail) + "\n".join(lines)
    assert (
        "Looking in indexes: https://alice:***@127.0.0.1:9/simple, https://127.0.0.1:9/simple?token=***"
        in tail
    )
    assert (
        "-i https://alice:***@127.0.0.1:9/simple --proxy bob:***@proxy:3128 https://127.0.0.1:9/simple?token=***\n"
        in written
    )
    assert lines == tail and len(tail) == 3
    assert written.endswith("[exit status 0]\n")
    assert "no newline at the end ?token=***\n[exit status 0]" in written
    for secret in SECRETS:
        assert secret not in shown, secret


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_log_files_are_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    old_umask = os.umask(0o022)
    try:
        (tmp_path / "cache" / "logs").mkdir(parents=True, mode=0o755)  # as an older version left it
        path = new_log_path("install")
        assert path.parent == tmp_path / "cache" / "logs"
        assert path.is_file() and path.stat().st_size == 0
        assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
        for how in ("a", "w"):  # what the callers do keeps the mode
            with open(path, how, encoding="utf-8") as log:
                log.write("x\n")
            assert _mode(path) == 0o600
        path.chmod(0o644)
        assert (
            new_log_path("install") == path and _mode(path) == 0o600
        )  # the same name in the same second
        assert path.read_text(encoding="utf-8") == "x\n"  # kept, not emptied
    finally:
        os.umask(old_umask)


# -- the real commands ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv to install into (the install fails, so it stays empty). It borrows the base
    interpreter's pip when there is one (instant), else gets its own (seconds)."""
    folder = tmp_path_factory.mktemp("scratch") / "venv"
    venv.create(folder, system_site_packages=True, with_pip=False)
    python = folder / "bin" / "python"
    if (
        subprocess.run(
            [str(python), "-m", "pip", "--version"], capture_output=True, check=False
        ).returncode
        != 0
    ):
        venv.create(folder, system_site_packages=True, with_pip=True, clear=True)
    return python


def _private_root() -> Path:
    return Path(
        os.environ["CUDA_RESOLVE_CACHE_DIR"]
    ).parent  # conftest's per-test home for cuda-resolve


def _cuda_pip(*words: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    home = _private_root() / "home"
    home.mkdir(exist_ok=True)
    env = dict(
        os.environ,
        HOME=str(home),
        CR_TEST_TOKEN=ENV_SECRET,
        PIP_DEFAULT_TIMEOUT="1",
        PIP_RETRIES="0",
    )
    for name in (
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "pip_plugin", "install", *words],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _requirements(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "requirements.txt"
    path.write_text(line + "\n", encoding="utf-8")
    return path


def _pip_args(tmp_path: Path, proxy: str) -> list[str]:
    # --extra-index-url, not --index-url: an index URL in the file would replace the command
    # line's, and pip's "Looking in indexes" line would not print the token query back.
    requirements = _requirements(
        tmp_path, "--extra-index-url https://u:${CR_TEST_TOKEN}@127.0.0.1:9/simple"
    )
    return [
        "-v",
        "--timeout",
        "1",
        "--retries",
        "0",
        "-i",
        INDEX,
        "--proxy",
        proxy,
        "--extra-index-url",
        TOKEN_INDEX,
        "-r",
        str(requirements),
        "somepkg",
    ]


@pytest.fixture
def answering_index(tmp_path: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT``: an empty simple index that answers cuda-resolve's reachability
    check (pip, sent through a dead proxy, still fails: the install fails inside pip)."""
    import http.server
    import threading

    root = tmp_path / "served"
    (root / "simple").mkdir(parents=True)
    (root / "simple" / "index.html").write_text("<html><body></body></html>")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    def handler(*args: object, **kwargs: object) -> Quiet:
        return Quiet(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _answering_pip_args(tmp_path: Path, proxy: str, host: str) -> list[str]:
    """:func:`_pip_args` with indexes that answer (plain http on loopback), so pip really runs."""
    requirements = _requirements(
        tmp_path, f"--extra-index-url http://u:${{CR_TEST_TOKEN}}@{host}/simple"
    )
    return [
        "-v",
        "--timeout",
        "1",
        "--retries",
        "0",
        "-i",
        f"http://alice:{INDEX_PASSWORD}@{host}/simple",
        "--proxy",
        proxy,
        "--extra-index-url",
        f"http://{host}/simple?token={QUERY_TOKEN}",
        "-r",
        str(requirements),
        "somepkg",
    ]


def _assert_nothing_leaked(*texts: str) -> None:
    for secret in SECRETS:
        for text in texts:
            assert secret not in text, (secret, text)
    for path in sorted(_private_root().rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            for secret in SECRETS:
                assert secret.encode() not in data, (secret, path)


def _log_files() -> list[Path]:
    folder = Path(os.environ["CUDA_RESOLVE_CACHE_DIR"]) / "logs"
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize(
    "proxy", [f"http://bob:{PROXY_PASSWORD}@127.0.0.1:9", f"bob:{PROXY_PASSWORD}@127.0.0.1:9"]
)
def test_a_dry_run_shows_no_secret(proxy: str, tmp_path: Path) -> None:
    args = _pip_args(tmp_path, proxy)
    text = _cuda_pip("--dry-run", "--python", sys.executable, *args, tmp_path=tmp_path)
    assert text.returncode == 0, text.stderr
    as_json = _cuda_pip("--dry-run", "--json", "--python", sys.executable, *args, tmp_path=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    _assert_nothing_leaked(text.stdout, text.stderr, as_json.stdout, as_json.stderr)
    # The options are there, masked: the redaction is what hid them.
    assert "-i https://alice:***@127.0.0.1:9/simple --proxy " in text.stdout
    assert "bob:***@127.0.0.1:9" in text.stdout and "?token=***" in text.stdout
    strings = _strings(json.loads(as_json.stdout))  # wherever the report puts pip's arguments
    assert (
        "https://alice:***@127.0.0.1:9/simple" in strings
        and "https://127.0.0.1:9/simple?token=***" in strings
    )
    assert any("bob:***@127.0.0.1:9" in text for text in strings)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


@pytest.mark.parametrize("as_json", [False, True])
def test_a_failed_install_shows_and_logs_no_secret(
    as_json: bool, scratch_python: Path, tmp_path: Path, answering_index: str
) -> None:
    args = _answering_pip_args(
        tmp_path, f"http://bob:{PROXY_PASSWORD}@127.0.0.1:9", answering_index
    )
    done = _cuda_pip(
        "--python",
        str(scratch_python),
        "--no-verify",
        *(["--json"] if as_json else []),
        *args,
        tmp_path=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    shown = done.stdout if as_json else done.stderr
    assert "pip install (extensions and the rest) failed" in shown
    if as_json:
        json.loads(done.stdout)
    logs = _log_files()
    assert logs, "the install wrote no log"
    _assert_nothing_leaked(done.stdout, done.stderr)
    for log in logs:
        assert _mode(log) == 0o600, log
    assert _mode(logs[0].parent) == 0o700
    written = "".join(log.read_text(encoding="utf-8") for log in logs)
    # pip's own "Looking in indexes" line printed the token query in clear; the log has it masked.
    looking = next(line for line in written.splitlines() if line.startswith("Looking in indexes:"))
    assert (
        f"http://{answering_index}/simple?token=***" in looking
        and f"alice:***@{answering_index}" in looking
    )
    assert "--proxy http://bob:***@127.0.0.1:9" in written


def test_a_variable_from_a_requirements_file_is_never_logged(
    scratch_python: Path, tmp_path: Path, answering_index: str
) -> None:
    # A token in an index URL's path (Gemfury's form) has no credential shape: only the registry
    # of the values reqfile expanded can hide it, in pip's "Looking in indexes" line.
    (tmp_path / "served" / ENV_SECRET / "simple").mkdir(parents=True)
    (tmp_path / "served" / ENV_SECRET / "simple" / "index.html").write_text("<html></html>")
    requirements = _requirements(
        tmp_path, f"--extra-index-url http://{answering_index}/${{CR_TEST_TOKEN}}/simple"
    )
    done = _cuda_pip(
        "--python",
        str(scratch_python),
        "--no-verify",
        "-v",
        "--timeout",
        "1",
        "--retries",
        "0",
        "-i",
        f"http://{answering_index}/simple",
        "--proxy",
        "http://127.0.0.1:9",
        "-r",
        str(requirements),
        "somepkg",
        tmp_path=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "pip install (extensions and the rest) failed" in done.stderr  # pip ran, and failed
    written = "".join(log.read_text(encoding="utf-8") for log in _log_files())
    looking = next(line for line in written.splitlines() if line.startswith("Looking in indexes:"))
    assert f"http://{answering_index}/***/simple" in looking
    _assert_nothing_leaked(done.stdout, done.stderr)
