"""A lab's wheelhouse served by a real index server: pypiserver over HTTPS with a test CA and
password auth, devpi-server with a user's index. Machine A publishes, machine B (fresh cache and
wheelhouse) plans no compile and gets the wheel from the server, machine C (a GPU the wheel does
not cover) plans a build; a truncated or tampered download, another recipe, a server that is down.

"Machines" are ``cuda-resolve`` processes with their own CUDA_RESOLVE_CACHE_DIR and
CUDA_RESOLVE_WHEELHOUSE; the profile is the H200's (one GPU, 9.0). Wheels are small fakes with
proper keys (the real nvcc build is the H200 evidence run); everything stays on loopback.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from test_wheelhouse import make_wheel

from cuda_resolve.wheelhouse.key import WheelKey
from cuda_resolve.wheelhouse.rewrite import read_wheel_key
from cuda_resolve.wheelhouse.store import Wheelhouse

pytestmark = pytest.mark.indexserver

PROFILE = Path(__file__).parent / "data" / "profiles" / "h200-detected-2026-12-02.toml"
USER, PASSWORD = "lab", "s3cret-upload-pw"

# pypiserver's WSGI app behind wsgiref with TLS (pypiserver has no TLS of its own; labs put a
# proxy in front): uploads need the password (htpasswd), reading is open.
_PYPISERVER = textwrap.dedent("""
    import ssl, sys
    from wsgiref.simple_server import WSGIRequestHandler, make_server
    import pypiserver
    root, htpasswd, cert, key = sys.argv[1:5]
    class Quiet(WSGIRequestHandler):
        def log_message(self, *args): pass
    app = pypiserver.app(roots=[root], authenticate=["update"], password_file=htpasswd)
    server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_port, flush=True)
    server.serve_forever()
""")


@dataclass
class Server:
    upload_url: str
    simple_url: str
    ca_file: Path
    process: subprocess.Popen[str]


def _needs(module: str) -> None:
    if (
        importlib.util.find_spec(module) is None
    ):  # not imported here: the server runs in its own process
        pytest.skip(f"{module} is not installed (pip install -e '.[test]' brings it)")


class ServerUnavailable(RuntimeError):
    """An index server cannot start here; the message says why."""


def start_pypiserver(base: Path, user: str = USER, password: str = PASSWORD) -> tuple[Server, Path]:
    """pypiserver of the test extra in ``base``, behind TLS with a test CA, uploads with
    ``user``'s ``password``: the server and its packages folder. Stop it with
    :func:`stop_server`; :class:`ServerUnavailable` when it cannot start."""
    packages = base / "packages"
    packages.mkdir(parents=True)
    # passlib imports crypt (deprecated: a warning, an error here): its own process.
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from passlib.apache import HtpasswdFile as H; "
            "f = H(sys.argv[1], new=True); f.set_password(sys.argv[2], sys.argv[3]); f.save()",
            str(base / "htpasswd"),
            user,
            password,
        ],
        check=True,
        timeout=60,
    )
    ca = trustme.CA(organization_name="Lab Index Test CA")
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = base / "cert.pem", base / "key.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    ca_file = base / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    log = base / "pypiserver.log"
    with open(log, "w") as errors:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _PYPISERVER,
                str(packages),
                str(base / "htpasswd"),
                str(cert),
                str(key),
            ],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    assert process.stdout is not None
    with process.stdout:
        line = process.stdout.readline().strip()
    if not line.isdigit():
        process.kill()
        process.wait(timeout=10)
        raise ServerUnavailable(f"pypiserver did not start: {log.read_text()[-500:]}")
    url = f"https://127.0.0.1:{line}/"
    server = Server(upload_url=url, simple_url=url + "simple/", ca_file=ca_file, process=process)
    return server, packages


def stop_server(server: Server) -> None:
    server.process.kill()
    server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def pypiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    _needs("pypiserver")
    _needs("passlib")
    try:
        server, _ = start_pypiserver(tmp_path_factory.mktemp("pypiserver"))
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    yield server
    stop_server(server)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _json_put(url: str, user: str, password: str, body: dict[str, object]) -> None:
    import base64
    import urllib.request

    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="PUT",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Basic {token}",
        },
    )
    with urllib.request.urlopen(
        request, timeout=30
    ) as answer:  # plain http on loopback: the test's own setup
        assert answer.status in (200, 201)


@pytest.fixture(scope="module")
def devpi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """devpi-server on loopback (plain http) with user ``lab`` and its index ``lab/dev``."""
    _needs("devpi_server")
    import shutil
    import urllib.request

    init, serve = (
        shutil.which("devpi-init", path=str(Path(sys.executable).parent)),
        shutil.which("devpi-server", path=str(Path(sys.executable).parent)),
    )
    if init is None or serve is None:
        pytest.skip("devpi-init / devpi-server are not installed beside this Python")
    base = tmp_path_factory.mktemp("devpi")
    done = subprocess.run(
        [init, "--serverdir", str(base / "server"), "--root-passwd", "root-pw-1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"devpi-init failed: {done.stderr[-500:]}")
    port = _free_port()
    with open(base / "devpi.log", "w") as log:
        process = subprocess.Popen(
            [
                serve,
                "--serverdir",
                str(base / "server"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    root = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(root, timeout=5):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait(timeout=10)
                pytest.skip(
                    f"devpi-server did not start: {(base / 'devpi.log').read_text()[-500:]}"
                )
            time.sleep(0.5)
    try:
        _json_put(
            f"{root}lab",
            "root",
            "root-pw-1",
            {"password": PASSWORD, "email": "lab@example.invalid"},
        )
        _json_put(
            f"{root}lab/dev", USER, PASSWORD, {"type": "stage", "bases": "", "volatile": False}
        )
        yield Server(
            upload_url=f"{root}lab/dev/",
            simple_url=f"{root}lab/dev/+simple/",
            ca_file=Path(),
            process=process,
        )
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _machine(
    tmp_path: Path, name: str, server: Server | None, *, url: str | None = None
) -> dict[str, str]:
    """The environment of one "machine": its own cache, wheelhouse and config; the test CA as
    its OS trust store (truststore reads SSL_CERT_FILE on Linux)."""
    home = tmp_path / name
    (home / "cache").mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        COLUMNS="200",
        HOME=str(home),
        CUDA_RESOLVE_CACHE_DIR=str(home / "cache"),
        CUDA_RESOLVE_WHEELHOUSE=str(home / "wheelhouse"),
        CUDA_RESOLVE_CONFIG=str(home / "config.toml"),
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    for variable in ("VIRTUAL_ENV", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_DIR"):
        env.pop(variable, None)
    if server is not None:
        env["SSL_CERT_FILE"] = str(server.ca_file)
        empty = home / "no-certs"
        empty.mkdir(exist_ok=True)
        env["SSL_CERT_DIR"] = str(empty)
    if url is not None:
        env["CUDA_RESOLVE_WHEELHOUSE_URL"] = url
    return env


def _cli(
    env: dict[str, str], *words: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_resolve", *words],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def _plan_key(env: dict[str, str]) -> WheelKey:
    """The key machine A's plan for pointnet2_ops on the H200 profile builds."""
    first = _cli(env, "plan", "pointnet2_ops", "--profile", str(PROFILE), "--json")
    if first.returncode != 0 and "toolkit" in first.stderr:
        pytest.skip(f"no CUDA toolkit here: {first.stderr.strip()}")
    assert first.returncode == 0, first.stderr
    [build] = json.loads(first.stdout)["builds"]
    assert build["reused"] is None
    return WheelKey.from_json(build["wheel_key"], origin="plan")


def _build_on_a(env: dict[str, str], tmp_path: Path, key: WheelKey) -> None:
    """Machine A "builds": a wheel for ``key`` published into its wheelhouse."""
    built = make_wheel(
        tmp_path / f"built-{key.digest}",
        name="pointnet2_ops",
        version=key.version,
        tag=f"{key.python_tag}-{key.python_tag}-{key.platform}",
    )
    Wheelhouse(Path(env["CUDA_RESOLVE_WHEELHOUSE"])).publish(key, built, strip_debug=False)


def _plan_on(env: dict[str, str]) -> dict[str, object]:
    done = _cli(env, "plan", "pointnet2_ops", "--profile", str(PROFILE), "--json")
    assert done.returncode == 0, done.stderr
    [build] = json.loads(done.stdout)["builds"]
    assert isinstance(build, dict)
    return {**build, "notes": json.loads(done.stdout).get("notes", []), "stderr": done.stderr}


def test_a_publishes_b_gets_it_with_no_compile_c_builds_over_https_with_a_password(
    pypiserver: Server, tmp_path: Path
) -> None:
    a = _machine(tmp_path, "a", pypiserver)
    key = _plan_key(a)
    not_covering = dataclasses.replace(key, arch_list="8.0;8.9")  # no kernels for the H200's 9.0
    covering = dataclasses.replace(key, arch_list="8.0;9.0")  # the lab's A100 and H200 nodes
    _build_on_a(a, tmp_path, not_covering)

    # No credentials: the server refuses the upload, and the message says so.
    refused = _cli(a, "wheelhouse", "publish", "--to", pypiserver.upload_url)
    assert (
        refused.returncode != 0
        and "HTTP 401" in refused.stderr
        and "no credentials" in refused.stderr
    )

    # Credentials from ~/.pypirc (the section named by --to): uploaded, the password never shown.
    (Path(a["HOME"]) / ".pypirc").write_text(
        textwrap.dedent(f"""
        [distutils]
        index-servers = lab
        [lab]
        repository = {pypiserver.upload_url}
        username = {USER}
        password = {PASSWORD}
    """)
    )
    published = _cli(a, "wheelhouse", "publish", "--to", "lab")
    assert published.returncode == 0, published.stderr
    assert f"uploaded: pointnet2_ops-{not_covering.labelled_version}" in published.stdout
    assert (
        ".pypirc [lab]" in published.stdout and PASSWORD not in published.stdout + published.stderr
    )

    # Machine C (fresh, the lab's index configured): the only served wheel misses its 9.0, so
    # it is never taken: C plans a local build, and nothing was downloaded.
    c = _machine(tmp_path, "c", pypiserver, url=pypiserver.simple_url)
    c_build = _plan_on(c)
    assert c_build["reused"] is None and c_build["wheel_key"] == key.to_json()
    assert Wheelhouse(Path(c["CUDA_RESOLVE_WHEELHOUSE"])).entries() == []

    # A builds for more GPUs and publishes again (the server found in ~/.pypirc by its URL):
    # the new wheel goes up, the one already there is no error.
    _build_on_a(a, tmp_path, covering)
    again = _cli(a, "wheelhouse", "publish", "--to", pypiserver.upload_url, "--json")
    assert again.returncode == 0, again.stderr
    statuses = {w["file"].split("-")[1]: w["status"] for w in json.loads(again.stdout)["wheels"]}
    assert statuses == {
        covering.labelled_version: "uploaded",
        not_covering.labelled_version: "already there",
    }
    assert PASSWORD not in again.stdout + again.stderr

    # Machine B: fresh cache and wheelhouse: the covering wheel comes from the server, no compile.
    b = _machine(tmp_path, "b", pypiserver, url=pypiserver.simple_url)
    build = _plan_on(b)
    assert build["wheel_key"] == covering.to_json()
    reused = str(build["reused"])
    assert f"from the lab's wheelhouse {pypiserver.simple_url}" in reused
    assert "covers every GPU here (9.0: sm_90 exact)" in reused
    stored = Wheelhouse(Path(b["CUDA_RESOLVE_WHEELHOUSE"])).lookup(covering)
    assert (
        stored is not None and read_wheel_key(stored.path) == covering
    )  # the full key travelled in the wheel
    text = _cli(b, "plan", "pointnet2_ops", "--profile", str(PROFILE))
    assert text.returncode == 0 and f"wheelhouse: {covering.labelled_version}" in text.stdout


def test_a_server_that_is_down_means_a_local_build_said_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    b = _machine(tmp_path, "b", None, url=f"http://127.0.0.1:{port}/simple/")
    started = time.monotonic()
    done = _cli(b, "plan", "pointnet2_ops", "--profile", str(PROFILE), "--json")
    if done.returncode != 0 and "toolkit" in done.stderr:
        pytest.skip(f"no CUDA toolkit here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    [build] = data["builds"]
    assert build["reused"] is None
    notes = [n for n in data["notes"] if "lab's wheelhouse" in n]
    assert len(notes) == 1 and notes[0].endswith("building locally") and "\n" not in notes[0]
    assert time.monotonic() - started < 60


def test_devpi_user_index_credentials_in_the_url_and_the_url_in_the_config_file(
    devpi: Server, tmp_path: Path
) -> None:
    a = _machine(tmp_path, "a", None)
    key = _plan_key(a)
    covering = dataclasses.replace(key, arch_list="8.0;9.0")
    _build_on_a(a, tmp_path, covering)
    with_password = devpi.upload_url.replace("http://", f"http://{USER}:{PASSWORD}@")
    published = _cli(a, "wheelhouse", "publish", "--to", with_password)
    assert published.returncode == 0, published.stderr
    assert f"uploaded: pointnet2_ops-{covering.labelled_version}" in published.stdout
    assert (
        "from the URL" in published.stdout and PASSWORD not in published.stdout + published.stderr
    )
    again = _cli(a, "wheelhouse", "publish", "--to", with_password, "--json")
    assert again.returncode == 0, again.stderr
    assert [w["status"] for w in json.loads(again.stdout)["wheels"]] in (
        ["already there"],
        ["uploaded"],
    )
    assert PASSWORD not in again.stdout + again.stderr

    b = _machine(tmp_path, "b", None)
    Path(b["CUDA_RESOLVE_CONFIG"]).write_text(f'wheelhouse_url = "{devpi.simple_url}"\n')
    build = _plan_on(b)
    assert build["wheel_key"] == covering.to_json()
    assert f"from the lab's wheelhouse {devpi.simple_url}" in str(build["reused"])
    assert Wheelhouse(Path(b["CUDA_RESOLVE_WHEELHOUSE"])).lookup(covering) is not None


@pytest.mark.slow
@pytest.mark.network
def test_a_real_nvcc_build_published_by_a_is_installed_by_b_with_no_compile(
    pypiserver: Server, tmp_path: Path, torch_python: Path
) -> None:
    """Machine A compiles the fixture extension with nvcc (tests/data/packages/cuext) and publishes
    it; machine B, a fresh venv with an empty cache and wheelhouse, installs it from the server
    (HTTPS, the test CA) with no compile, and imports it."""
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc on PATH (CI has CUDA 13.0)")
    from test_install_e2e import FIXTURE, FIXTURE_INDEX, _fresh_target

    def action(verb: str, env: dict[str, str], python: Path) -> subprocess.CompletedProcess[str]:
        return _cli(
            dict(env, CUDA_RESOLVE_DRIVER="580.65.06", CUDA_RESOLVE_CUDA_ARCH="9.0"),
            verb,
            "cuext",
            "--index",
            str(FIXTURE_INDEX),
            "--python",
            str(python),
            "--arch-list",
            "9.0",
            "--source",
            str(FIXTURE),
            "--json",
            timeout=900,
        )

    a = _machine(tmp_path, "a", pypiserver)
    built = action("build", a, _fresh_target(tmp_path / "a", torch_python))
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["builds"][0]["cache_hit"] is False  # A compiled it
    published = _cli(
        a,
        "wheelhouse",
        "publish",
        "--to",
        pypiserver.upload_url.replace("https://", f"https://{USER}:{PASSWORD}@"),
    )
    assert published.returncode == 0 and "uploaded: cuext-0.1.0+" in published.stdout, (
        published.stderr
    )

    b = _machine(tmp_path, "b", pypiserver, url=pypiserver.simple_url)
    python = _fresh_target(tmp_path / "b", torch_python)
    installed = action("install", b, python)
    assert installed.returncode == 0, installed.stderr
    result = json.loads(installed.stdout)["result"]
    [build] = result["builds"]
    assert build["cache_hit"] is True  # from the server: no compile on B
    assert Path(build["wheel"]).is_relative_to(Path(b["CUDA_RESOLVE_WHEELHOUSE"]))
    assert "cuext._ext" in result["verified_imports"]
    probe = subprocess.run(
        [str(python), "-c", "import cuext; print(cuext.add_one.__doc__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0 and "x + 1" in probe.stdout, probe.stderr
