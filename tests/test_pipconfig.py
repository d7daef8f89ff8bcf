"""Which indexes pip really uses: the target's own pip asked about its files, in a scratch venv.

One venv per module (``python -m venv``, with the pip it bundles). Every test builds its own
home: ``HOME``, ``XDG_CONFIG_HOME`` and ``XDG_CONFIG_DIRS`` point into the test's folder and no
``PIP_*`` variable of the machine's takes part (these machines set ``PIP_FIND_LINKS``), so the
only file outside the test's control is ``/etc/pip.conf``, which pip always reads and every test
here overrides or switches off. pip's own ``Looking in indexes`` line is the oracle for the
precedence. Nothing leaves loopback.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_net_support import (
    BenchHandler,
    BenchServer,
    Cas,
    ClientFactory,
    Route,
    ServerFactory,
    SystemTrust,
    closed_port,
)

from cuda_resolve.cli import main
from cuda_resolve.doctor.findings import Finding
from cuda_resolve.doctor.network import network_findings, targets_for_pip
from cuda_resolve.environment import Environment, Machine, PythonInfo
from cuda_resolve.install.pipconfig import (
    COMMAND_LINE,
    DEFAULT_ORIGIN,
    PYPI_SIMPLE,
    PipIndexes,
    attribute_merged,
    parse_config_debug,
    parse_config_list,
    parse_pip_args,
    pip_indexes,
    urls_to_check,
)
from cuda_resolve.mirrors.check import MirrorTarget, targets_from_pip
from cuda_resolve.net import HttpClient

pytest_plugins = ["test_net_support"]


def _without_pip_variables() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(
        copy_venv(tmp_path_factory.mktemp("pipconfig") / "venv")
    )  # the template is made without PIP_* variables


@dataclass
class Scene:
    """One test's machine: where each level's file lives, and the environment pip runs in."""

    python: str
    site: Path  # <venv>/pip.conf
    user: Path  # $XDG_CONFIG_HOME/pip/pip.conf
    legacy: Path  # ~/.pip/pip.conf
    global_: Path  # $XDG_CONFIG_DIRS/pip/pip.conf (then /etc/pip.conf, which pip always reads)
    folder: Path
    base: dict[str, str]

    def env(self, **variables: str) -> dict[str, str]:
        return {**self.base, **variables}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def scene(venv_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    home = tmp_path / "home"
    home.mkdir()
    paths = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CONFIG_DIRS": str(tmp_path / "xdg"),
    }
    for name in list(os.environ):
        if name.startswith("PIP_"):
            monkeypatch.delenv(name)
    for name, value in paths.items():
        monkeypatch.setenv(name, value)  # for the CLI cases, which read os.environ
    site = Path(venv_python).parent.parent / "pip.conf"
    yield Scene(
        python=venv_python,
        site=site,
        user=home / ".config" / "pip" / "pip.conf",
        legacy=home / ".pip" / "pip.conf",
        global_=tmp_path / "xdg" / "pip" / "pip.conf",
        folder=tmp_path,
        base={**_without_pip_variables(), **paths},
    )
    site.unlink(missing_ok=True)  # the venv is the module's


def etc_index_url() -> str | None:
    """What /etc/pip.conf (read after the XDG folders, outside the tests' reach) says."""
    parser = configparser.RawConfigParser()
    try:
        parser.read("/etc/pip.conf", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    for section in ("install", "global"):
        for key in ("index-url", "index_url"):
            if parser.has_option(section, key):
                return parser.get(section, key)
    return None


# -- precedence, against the real pip -----------------------------------------------------


def test_nothing_set_is_pypi(scene: Scene) -> None:
    indexes = pip_indexes(scene.python, scene.env(PIP_CONFIG_FILE=os.devnull))
    assert indexes.config_read and indexes.error is None and indexes.notes == ()
    assert (indexes.index_url, indexes.index_url_origin) == (PYPI_SIMPLE, DEFAULT_ORIGIN)
    assert indexes.extra_index_urls == indexes.find_links == () and not indexes.no_index
    assert urls_to_check(indexes) == (PYPI_SIMPLE,)


def test_each_level_beats_the_one_below(scene: Scene) -> None:
    """site > user (new location > legacy) > global, each named with its file and section."""
    write(scene.global_, "[global]\nindex-url = https://global.example/simple\n")
    write(scene.legacy, "[global]\nindex-url = https://legacy.example/simple\n")
    write(scene.user, "[global]\nindex_url = https://user.example/simple\n")  # pip's other spelling
    write(scene.site, "[global]\nindex-url = https://site.example/simple\n")

    def index() -> tuple[str, str]:
        found = pip_indexes(scene.python, scene.env())
        assert found.config_read, found.notes
        return found.index_url, found.index_url_origin

    assert index() == ("https://site.example/simple", f"{scene.site} [global]")
    scene.site.unlink()
    assert index() == ("https://user.example/simple", f"{scene.user} [global]")
    scene.user.unlink()
    assert index() == ("https://legacy.example/simple", f"{scene.legacy} [global]")
    scene.legacy.unlink()
    etc = etc_index_url()
    if etc is None:
        assert index() == ("https://global.example/simple", f"{scene.global_} [global]")
    else:  # /etc/pip.conf is read after the XDG folder and sets one itself
        assert index()[0] == etc


def test_install_section_beats_global_whatever_the_file(scene: Scene) -> None:
    write(scene.user, "[install]\nindex-url = https://user-install.example/simple\n")
    write(
        scene.site,
        "[global]\nindex-url = https://site-global.example/simple\n"
        "extra-index-url = https://extra.example/simple\n",
    )
    found = pip_indexes(scene.python, scene.env())
    assert (found.index_url, found.index_url_origin) == (
        "https://user-install.example/simple",
        f"{scene.user} [install]",
    )
    assert found.extra_index_urls == ("https://extra.example/simple",)
    assert found.extra_index_url_origins == (f"{scene.site} [global]",)


def test_pip_config_file_comes_last_and_hides_the_user_file(scene: Scene) -> None:
    write(scene.user, "[global]\nextra-index-url = https://user-extra.example/simple\n")
    write(scene.site, "[global]\nindex-url = https://site.example/simple\n")
    named = write(
        scene.folder / "named.conf",
        "[global]\nindex-url = https://named.example/simple\n"
        "find-links =\n    https://links.example/a.html\n    /srv/wheels\n",
    )
    found = pip_indexes(scene.python, scene.env(PIP_CONFIG_FILE=str(named)))
    origin = f"{named} [global] (PIP_CONFIG_FILE)"
    assert (found.index_url, found.index_url_origin) == ("https://named.example/simple", origin)
    assert found.extra_index_urls == ()  # pip skips the user file when PIP_CONFIG_FILE exists
    assert found.find_links == ("https://links.example/a.html", "/srv/wheels")  # a multi-line value
    assert found.find_links_origins == (origin, origin)
    assert str(named) in found.config_files and str(scene.user) not in found.config_files
    assert urls_to_check(found) == ("https://named.example/simple", "https://links.example/a.html")


def test_variables_beat_the_files_and_replace_their_lists(scene: Scene) -> None:
    write(
        scene.site,
        "[install]\nindex-url = https://site.example/simple\n"
        "extra-index-url = https://site-extra.example/simple\nno-index = true\n",
    )
    found = pip_indexes(
        scene.python,
        scene.env(
            PIP_INDEX_URL="https://env.example/simple",
            PIP_EXTRA_INDEX_URL="https://e1.example/simple https://e2.example/simple",
            PIP_FIND_LINKS="/opt/wheels",
            PIP_NO_INDEX="off",
        ),
    )
    assert (found.index_url, found.index_url_origin) == (
        "https://env.example/simple",
        "PIP_INDEX_URL",
    )
    assert found.extra_index_urls == ("https://e1.example/simple", "https://e2.example/simple")
    assert found.extra_index_url_origins == ("PIP_EXTRA_INDEX_URL", "PIP_EXTRA_INDEX_URL")
    assert (found.no_index, found.no_index_origin) == (False, "PIP_NO_INDEX")
    assert urls_to_check(found) == (
        "https://env.example/simple",
        "https://e1.example/simple",
        "https://e2.example/simple",
    )
    assert found.origin_of("https://e2.example/simple/") == "PIP_EXTRA_INDEX_URL"


def test_the_command_line_beats_everything_and_adds_to_lists(scene: Scene) -> None:
    write(
        scene.site,
        "[global]\nindex-url = https://site.example/simple\nfind-links = https://site.example/links\n",
    )
    environ = scene.env(
        PIP_INDEX_URL="https://env.example/simple",
        PIP_EXTRA_INDEX_URL="https://env-extra.example/simple",
    )
    found = pip_indexes(
        scene.python,
        environ,
        pip_args=[
            "--index=https://cli.example/simple",
            "--extra-index",
            "https://cli-extra.example/simple",
            "--find",
            "https://cli.example/links",
            "torch==2.5.1",
        ],
    )
    assert (found.index_url, found.index_url_origin) == ("https://cli.example/simple", COMMAND_LINE)
    assert found.extra_index_urls == (
        "https://env-extra.example/simple",
        "https://cli-extra.example/simple",
    )
    assert found.extra_index_url_origins == ("PIP_EXTRA_INDEX_URL", COMMAND_LINE)
    assert found.find_links == ("https://site.example/links", "https://cli.example/links")
    assert found.find_links_origins == (f"{scene.site} [global]", COMMAND_LINE)
    off = pip_indexes(scene.python, environ, pip_args=["--no-ind", "-qf", "/srv/wheels"])
    assert off.no_index and off.no_index_origin == COMMAND_LINE
    assert urls_to_check(off) == ("https://site.example/links",)  # the indexes are not read
    assert "no-index (from command line)" in off.describe()


def test_isolated_ignores_variables_and_the_user_file(scene: Scene) -> None:
    write(scene.user, "[global]\nindex-url = https://user.example/simple\n")
    write(scene.site, "[global]\nextra-index-url = https://site-extra.example/simple\n")
    found = pip_indexes(
        scene.python, scene.env(PIP_FIND_LINKS="/opt/wheels"), pip_args=["--isolated"]
    )
    assert found.find_links == ()
    assert found.extra_index_urls == ("https://site-extra.example/simple",)
    if etc_index_url() is None:
        assert found.index_url == PYPI_SIMPLE
    assert any("--isolated" in note for note in found.notes)


def _looking_in(output: str, what: str) -> list[str]:
    match = re.search(rf"^Looking in {what}: (.*)$", output, re.MULTILINE)
    return [part.strip() for part in match.group(1).split(",")] if match else []


def test_agrees_with_what_pip_itself_says(scene: Scene) -> None:
    """The oracle: pip's own ``Looking in indexes`` / ``Looking in links`` lines for the same
    files, variables and options (every URL a dead loopback port, so pip fails at once)."""
    dead = f"http://127.0.0.1:{closed_port()}"
    write(
        scene.global_,
        f"[global]\nindex-url = {dead}/global\nextra-index-url = {dead}/global-extra\n",
    )
    write(scene.user, f"[install]\nindex-url = {dead}/user-install\n")
    write(
        scene.site,
        f"[global]\nindex-url = {dead}/site\nextra-index-url = {dead}/site-a {dead}/site-b\n",
    )
    environ = scene.env(PIP_FIND_LINKS=f"{dead}/env-links")
    args = ["--extra-index-url", f"{dead}/cli-extra", f"--find-links={dead}/cli-links"]
    ran = subprocess.run(
        [
            scene.python,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-deps",
            "--retries",
            "0",
            "--timeout",
            "2",
            "--disable-pip-version-check",
            *args,
            "cuda-resolve-no-such-project",
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = ran.stdout + ran.stderr
    indexes = _looking_in(output, "indexes")
    assert indexes, output
    ours = pip_indexes(scene.python, environ, pip_args=args)
    assert [ours.index_url, *ours.extra_index_urls] == indexes
    assert list(ours.find_links) == _looking_in(output, "links")
    assert (
        ours.index_url == f"{dead}/user-install"
        and ours.index_url_origin == f"{scene.user} [install]"
    )


# -- a target that cannot answer -----------------------------------------------------------


def test_a_missing_interpreter_leaves_the_variables(scene: Scene) -> None:
    found = pip_indexes(
        str(scene.folder / "no-python"), scene.env(PIP_INDEX_URL="https://env.example/simple")
    )
    assert not found.config_read and found.index_url == "https://env.example/simple"
    assert any("could not be started" in note for note in found.notes)
    assert pip_indexes(None, scene.env()).notes == (
        "no target interpreter: pip's configuration files were not read",
    )


def test_an_interpreter_without_pip(scene: Scene) -> None:
    bare = scene.folder / "bare"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120
    )
    found = pip_indexes(str(bare / "bin" / "python"), scene.env())
    assert not found.config_read and any("has no pip" in note for note in found.notes)


def test_a_program_that_is_not_python_and_one_that_hangs(scene: Scene) -> None:
    failing = write(scene.folder / "failing", "#!/bin/sh\necho 'no such thing' >&2\nexit 3\n")
    failing.chmod(0o755)
    found = pip_indexes(str(failing), scene.env())
    assert not found.config_read and any("no such thing" in note for note in found.notes)
    hanging = write(scene.folder / "hanging", "#!/bin/sh\nsleep 30\n")
    hanging.chmod(0o755)
    slow = pip_indexes(str(hanging), scene.env(), timeout=0.5)
    assert not slow.config_read and any("did not answer within" in note for note in slow.notes)


def test_a_file_pip_cannot_read_is_an_error(scene: Scene) -> None:
    write(scene.site, "index-url = https://no-section.example/simple\n")
    found = pip_indexes(scene.python, scene.env(PIP_INDEX_URL="https://env.example/simple"))
    assert (
        found.error is not None
        and "could not be loaded" in found.error
        and str(scene.site) in found.error
    )
    assert found.index_url == "https://env.example/simple"  # what is left still counts
    bad = pip_indexes(scene.python, scene.env(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="maybe"))
    assert bad.error is not None and "PIP_NO_INDEX" in bad.error


# -- pure parts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "index", "extras", "links", "no_index"),
    [
        (["-i", "A"], "A", (), (), False),
        (["-iA"], "A", (), (), False),
        (["--index-url=A", "--index-url", "B"], "B", (), (), False),
        (["--ind", "A", "--pypi-url", "B"], "B", (), (), False),
        (["-qUi", "A", "-vfL"], "A", (), ("L",), False),
        (
            ["--extra-index-url", "E1", "--ext=E2", "--find-links=L1", "--fi", "L2"],
            None,
            ("E1", "E2"),
            ("L1", "L2"),
            False,
        ),
        (["--no-index", "--find", "L"], None, (), ("L",), True),
        (
            ["--upgrade-strategy", "-i", "--pre", "--prefix", "-f", "x"],
            None,
            (),
            (),
            False,
        ),  # values of others
        (["-r", "-i", "--upgrade", "-c", "--no-index"], None, (), (), False),
        (["torch", "--", "-i", "A"], None, (), (), False),
        (
            ["--in", "A", "--no-in", "--ex", "E"],
            None,
            (),
            (),
            False,
        ),  # ambiguous prefixes: pip refuses them
    ],
)
def test_pip_args_in_every_spelling(
    args: list[str],
    index: str | None,
    extras: tuple[str, ...],
    links: tuple[str, ...],
    no_index: bool,
) -> None:
    parsed = parse_pip_args(args)
    assert (parsed.index_url, parsed.extra_index_urls, parsed.find_links, parsed.no_index) == (
        index,
        extras,
        links,
        no_index,
    )


def test_requirement_files_are_named_in_a_note() -> None:
    found = pip_indexes(
        None, {}, pip_args=["-r", "reqs.txt", "--requirement=more.txt", "-rthird.txt"]
    )
    named = [note.split()[2] for note in found.notes if note.startswith("requirement file")]
    assert named == ["reqs.txt", "more.txt", "third.txt"]


DEBUG_OUTPUT = "\n".join(
    [
        "env_var:",
        "  PIP_FIND_LINKS='/opt/wheels'",
        "env:",
        "  /etc/named.conf, exists: True",
        "    install.no-index: yes",
        "global:",
        "  /etc/xdg/pip/pip.conf, exists: False",
        "  /etc/pip.conf, exists: True",
        "    global.index-url: https://global.example/simple",
        "    global.extra-index-url: ",  # a multi-line value: pip prints its later lines unindented
        "https://a.example/simple",
        "https://b.example/simple",
        "    global.cert: /etc/ssl/certs/ca-certificates.crt",
        "site:",
        "  /venv/pip.conf, exists: True",
        "    global.index-url: https://site.example/simple",
        "user:",
        "  /home/u/.pip/pip.conf, exists: False",
        "  /home/u/.config/pip/pip.conf, exists: True",
        "    global.index-url: https://user.example/simple",
        "",
    ]
)


def test_config_debug_output_in_override_order() -> None:
    files = parse_config_debug(DEBUG_OUTPUT)
    assert files is not None
    assert [(f.variant, f.path) for f in files] == [
        ("global", "/etc/pip.conf"),
        ("user", "/home/u/.config/pip/pip.conf"),
        ("site", "/venv/pip.conf"),
        ("env", "/etc/named.conf"),
    ]
    assert dict(files[0].values)["global.extra-index-url"].split() == [
        "https://a.example/simple",
        "https://b.example/simple",
    ]
    assert parse_config_debug("ERROR: Need an action") is None


def test_merged_values_of_an_older_pip_go_to_the_file_that_sets_them(tmp_path: Path) -> None:
    """pip < 26 prints a variant's merged values under each of its files: the value is pip's,
    the file is the one whose text names the key."""
    legacy = write(
        tmp_path / ".pip" / "pip.conf", "[global]\nindex-url = https://legacy.example/simple\n"
    )
    new = write(tmp_path / ".config" / "pip" / "pip.conf", "[install]\nfind_links = /srv/wheels\n")
    block = [
        "    global.index-url: https://legacy.example/simple",
        "    install.find-links: /srv/wheels",
    ]
    output = "\n".join(
        [
            "env_var:",
            "env:",
            "user:",
            f"  {legacy}, exists: True",
            *block,
            f"  {new}, exists: True",
            *block,
            "",
        ]
    )
    files = attribute_merged(parse_config_debug(output) or [])
    assert [dict(f.values) for f in files] == [
        {"global.index-url": "https://legacy.example/simple"},
        {"install.find-links": "/srv/wheels"},
    ]


def test_config_list_output_of_an_old_pip() -> None:
    (entry,) = parse_config_list(
        ":env:.find-links='/opt/wheels'\nglobal.index-url='https://old.example/simple'\n"
    )
    assert entry.values == (("global.index-url", "https://old.example/simple"),)
    assert parse_config_list("") == []


def test_urls_to_check_skips_local_folders() -> None:
    indexes = PipIndexes(
        index_url="file:///srv/simple",
        extra_index_urls=("https://e.example/simple", "/srv/other"),
        extra_index_url_origins=("PIP_EXTRA_INDEX_URL", "PIP_EXTRA_INDEX_URL"),
        find_links=("http://127.0.0.1:8000/links.html", "https://e.example/simple"),
        find_links_origins=("x", "y"),
    )
    assert urls_to_check(indexes) == (
        "https://e.example/simple",
        "http://127.0.0.1:8000/links.html",
    )


def test_credentials_never_shown() -> None:
    indexes = PipIndexes(
        index_url="https://lab:S3cretTok@pypi.lab.example/simple", index_url_origin="PIP_INDEX_URL"
    )
    assert "S3cretTok" not in indexes.describe() and "S3cretTok" not in json.dumps(
        indexes.to_dict()
    )
    assert urls_to_check(indexes) == (
        "https://lab:S3cretTok@pypi.lab.example/simple",
    )  # fetched with them


def test_mirror_targets_follow_pip_and_keep_a_mirror_pip_does_not_use() -> None:
    indexes = PipIndexes(
        index_url="https://tuna.example/simple",
        index_url_origin="/u/pip.conf [global]",
        extra_index_urls=("https://extra.example/simple",),
        extra_index_url_origins=("PIP_EXTRA_INDEX_URL",),
        find_links=("/opt/wheels", "https://links.example/l.html"),
        find_links_origins=("a", "b"),
    )
    same = MirrorTarget(
        ecosystem="pypi",
        url="https://tuna.example/simple/pip/",
        kind="simple",
        mirror="https://tuna.example/simple/",
    )
    other = MirrorTarget(
        ecosystem="pypi",
        url="https://bfsu.example/simple/pip/",
        kind="simple",
        mirror="https://bfsu.example/simple/",
    )
    torch = MirrorTarget(
        ecosystem="pytorch",
        url="https://w.example/cpu/torch/",
        kind="simple",
        mirror="https://w.example/",
    )
    found = targets_from_pip(indexes, (same, torch), others_origin="cuda-resolve config c.toml")
    assert [(t.ecosystem, t.url, t.kind) for t in found] == [
        ("pypi", "https://tuna.example/simple/pip/", "simple"),
        ("pypi-extra", "https://extra.example/simple/", "probe"),
        ("find-links", "https://links.example/l.html", "flat"),
        ("pytorch", "https://w.example/cpu/torch/", "simple"),
    ]
    assert found[0].origin == "pip's index-url, from /u/pip.conf [global]"
    kept = targets_from_pip(indexes, (other,), others_origin="cuda-resolve config c.toml")[-1]
    assert (
        kept.mirror == "https://bfsu.example/simple/"
        and kept.origin == "cuda-resolve config c.toml"
    )
    assert (
        "pip does not use this mirror: its index-url is https://tuna.example/simple"
        in kept.warnings[0]
    )
    assert other not in targets_from_pip(
        indexes, (other,)
    )  # the upstream guess is replaced by pip's index
    doctor = targets_for_pip(indexes)
    assert [(t.name, t.url, t.page) for t in doctor][:3] == [
        ("pypi", "https://tuna.example/simple/torch/", "project"),
        ("extra-index-1", "https://extra.example/simple/", "root"),
        ("find-links-1", "https://links.example/l.html", "links"),
    ]
    assert all(t.as_is for t in doctor[:3]) and [t.name for t in doctor[3:]] == [
        "pytorch",
        "kaolin",
    ]


# -- doctor --network and mirror test check that index ------------------------------------

SIMPLE_TORCH = (
    b'<a href="/files/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl#sha256=00">torch-2.5.1</a>\n'
)
SIMPLE_PIP = (
    b'<a href="../../files/pip-24.0-py3-none-any.whl#sha256=00">pip-24.0-py3-none-any.whl</a>\n'
)


def _page(body: bytes, content_type: str = "text/html") -> Route:
    def route(handler: BenchHandler) -> None:
        handler.reply(200, body, content_type=content_type)

    return route


def _lab_index(make_server: ServerFactory) -> BenchServer:
    server = make_server()
    server.routes["/simple/torch/"] = _page(SIMPLE_TORCH)
    server.routes["/simple/pip/"] = _page(SIMPLE_PIP)
    server.routes["/files/pip-24.0-py3-none-any.whl"] = _page(b"wheel", "application/octet-stream")
    server.routes["/whl/cpu/torch/"] = _page(SIMPLE_TORCH)
    server.routes["/files/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl"] = _page(
        b"wheel", "application/octet-stream"
    )
    return server


def by_check(findings: list[Finding]) -> dict[str, Finding]:
    return {finding.check: finding for finding in findings}


def test_doctor_network_checks_the_index_pip_uses_and_names_its_origin(
    scene: Scene,
    make_server: ServerFactory,
    cas: Cas,
    system_trust: SystemTrust,
    make_client: ClientFactory,
) -> None:
    """pip.conf names a loopback HTTPS index; cuda-resolve's own rewrite sends PyPI elsewhere,
    which pip knows nothing of: the probe goes where pip goes."""
    server = _lab_index(make_server)
    system_trust(cas.origin)
    index = server.url("/simple/")
    write(scene.site, f"[global]\nindex-url = {index}\n")
    dead = f"https://127.0.0.1:{closed_port()}/"
    env = Environment(
        machine=Machine(),
        python=PythonInfo(version="3.11.7", executable=scene.python),
        source="detected",
    )

    def client() -> HttpClient:
        return make_client(
            rewrite=lambda url: (
                url.replace("https://pypi.org/", dead)
                .replace("https://download.pytorch.org/", server.url("/"))
                .replace(
                    "https://nvidia-kaolin.s3.us-east-2.amazonaws.com/", server.url("/kaolin/")
                )
            )
        )

    findings = by_check(
        network_findings(env, client_factory=client, environ=scene.env(), condarc_files=[])
    )
    pypi = findings["index:pypi"]
    assert pypi.status == "ok", pypi.found
    assert (
        f"{index}torch/ (pip's index-url, from {scene.site} [global])" in pypi.found
        and "mirror of" not in pypi.found
    )
    summary = findings["pip-indexes"]
    assert (
        summary.status == "ok"
        and f"index-url {index} (from {scene.site} [global])" in summary.found
    )
    assert "tls-interception" in findings  # asked of pip's index


def test_doctor_network_names_a_dead_index_and_where_it_was_set(
    scene: Scene, make_client: ClientFactory
) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/simple/"
    named = write(
        scene.folder / "lab.conf", f"[global]\nindex-url = {dead}\nfind-links = /nowhere/wheels\n"
    )
    env = Environment(
        machine=Machine(),
        python=PythonInfo(version="3.11.7", executable=scene.python),
        source="detected",
    )
    indexes = pip_indexes(scene.python, scene.env(PIP_CONFIG_FILE=str(named)))
    findings = by_check(
        network_findings(
            env,
            client_factory=make_client,
            environ=scene.env(),
            condarc_files=[],
            indexes=indexes,
            targets=targets_for_pip(indexes, ()),
        )
    )
    pypi = findings["index:pypi"]
    assert pypi.status == "error" and f"{dead}torch/" in pypi.found
    assert f"pip's index-url, from {named} [global] (PIP_CONFIG_FILE)" in pypi.found
    summary = findings["pip-indexes"]
    assert (
        summary.status == "warn"
        and "/nowhere/wheels" in summary.found
        and "missing here" in summary.found
    )


def test_doctor_cli_reports_the_target_pips_index(
    scene: Scene,
    make_server: ServerFactory,
    cas: Cas,
    system_trust: SystemTrust,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = _lab_index(make_server)
    system_trust(cas.origin)
    index = server.url("/simple/")
    monkeypatch.setenv("PIP_INDEX_URL", index)
    config = write(
        scene.folder / "config.toml",
        (
            '[[rewrite]]\ncanonical = "https://download.pytorch.org/whl/"\nmirror = '
            f'"{server.url("/whl/")}"\n'
            "[[rewrite]]\ncanonical = "
            '"https://nvidia-kaolin.s3.us-east-2.amazonaws.com/"\nmirror = '
            f'"{server.url("/kaolin/")}"\n'
        ),
    )
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    main(["doctor", "--network", "--json", "--python", scene.python])
    report = json.loads(capsys.readouterr().out)
    checks = {finding["check"]: finding for finding in report["findings"]}
    assert checks["index:pypi"]["status"] == "ok", checks["index:pypi"]
    assert f"{index}torch/ (pip's index-url, from PIP_INDEX_URL)" in checks["index:pypi"]["found"]
    assert (
        f"pip in {scene.python}: index-url {index} (from PIP_INDEX_URL)"
        in checks["pip-indexes"]["found"]
    )


def test_mirror_test_checks_the_index_pip_uses(
    scene: Scene,
    make_server: ServerFactory,
    cas: Cas,
    system_trust: SystemTrust,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = _lab_index(make_server)
    system_trust(cas.origin)
    index = server.url("/simple/")
    write(scene.site, f"[global]\nindex-url = {index}\n")
    config = write(
        scene.folder / "config.toml",
        f'[pytorch]\nlayout = "simple"\nurl = "{server.url("/whl/")}"\n',
    )
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    assert main(["mirror", "test", "--json", "--python", scene.python]) == 0
    data = json.loads(capsys.readouterr().out)
    pypi = next(result for result in data["results"] if result["ecosystem"] == "pypi")
    assert pypi["ok"] and pypi["url"] == f"{index}pip/" and pypi["files"] == 1
    assert pypi["origin"] == f"pip's index-url, from {scene.site} [global]"
    assert (
        data["pip"]["index_url"] == index
        and data["pip"]["index_url_origin"] == f"{scene.site} [global]"
    )
    assert "https://pypi.org/" not in json.dumps(data["results"])

    dead = f"http://127.0.0.1:{closed_port()}/simple/"
    named = write(scene.folder / "dead.conf", f"[global]\nindex-url = {dead}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(named))
    assert main(["mirror", "test", "--python", scene.python]) == 1
    out = capsys.readouterr().out
    assert f"FAIL pypi     {dead}pip/" in out
    assert f"from: pip's index-url, from {named} [global] (PIP_CONFIG_FILE)" in out
    assert (
        f"pip in {scene.python}: index-url {dead} (from {named} [global] (PIP_CONFIG_FILE))" in out
    )
