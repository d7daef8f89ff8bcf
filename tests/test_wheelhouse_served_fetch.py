"""Taking a wheel from a served index: what fits, and what is refused (a truncated or tampered
body, a forged label, another recipe or torch, archs that miss a GPU); two processes fetching
one key into one shared wheelhouse make one wheel and one download.

The index is a loopback HTTP server written here (so a test can cut or change a body); the
client is cuda-resolve's own HttpClient, the wheelhouse a real one in tmp_path.
"""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_wheelhouse import RECIPE, make_key, make_wheel

from cuda_resolve.net.client import HttpClient, RetryPolicy, Timeouts
from cuda_resolve.resolve.installed import parse_build_label
from cuda_resolve.versions import ComputeCapability
from cuda_resolve.wheelhouse.key import WheelKey, parse_local_label
from cuda_resolve.wheelhouse.rewrite import rewrite_wheel
from cuda_resolve.wheelhouse.served import ServedIndex, served_candidates
from cuda_resolve.wheelhouse.store import Wheelhouse

H200 = [ComputeCapability(9, 0)]


class Index:
    """A PEP 503 index on loopback: ``files`` by name; ``body_for`` may change what is sent."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.hashes: dict[str, str] = {}  # the #sha256= a link shows (defaults to the file's)
        self.cut: set[str] = set()  # bodies sent half, with the whole length announced
        self.delay = 0.0
        self.downloads: list[str] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/simple/demo-ext/"):
                    links = "".join(
                        "<a "
                        f'href="../../files/{name}#sha256='
                        f"{index.hashes.get(name) or hashlib.sha256(data).hexdigest()}"
                        f'">{name}</a>\n'
                        for name, data in index.files.items()
                    )
                    self._send(200, links.encode())
                elif (
                    self.path.startswith("/files/")
                    and (name := self.path[len("/files/") :].replace("%2B", "+")) in index.files
                ):
                    index.downloads.append(name)
                    time.sleep(index.delay)
                    data = index.files[name]
                    if name in index.cut:
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data[: len(data) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    self._send(200, data)
                else:
                    self._send(404, b"not here")

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, wheel: Path) -> str:
        self.files[wheel.name] = wheel.read_bytes()
        return wheel.name


@pytest.fixture
def index() -> Iterator[Index]:
    served = Index()
    yield served
    served.server.shutdown()
    served.server.server_close()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[HttpClient]:
    made = HttpClient(
        use_cache=False,
        timeouts=Timeouts(connect=2.0, read=5.0, deadline=4.0),
        retry=RetryPolicy(attempts=1),
        proxies={"no_proxy": "127.0.0.1"},
    )
    yield made
    made.close()


def published(tmp_path: Path, key: WheelKey, *, name: str = "") -> Path:
    """The wheel a lab's wheelhouse would upload for ``key`` (relabelled, its key inside)."""
    out = tmp_path / f"served-{name or key.digest}"
    out.mkdir(parents=True)
    built = make_wheel(
        tmp_path / f"built-{name or key.digest}",
        tag=f"{key.python_tag}-{key.python_tag}-{key.platform}",
    )
    written = rewrite_wheel(built, key, out, strip=None)
    return out / written.filename


WANT = make_key(arch_list="9.0")  # what this machine (one H200) would build


def test_a_covering_wheel_is_downloaded_checked_and_published_into_the_wheelhouse(
    index: Index, client: HttpClient, tmp_path: Path
) -> None:
    covering = make_key(arch_list="8.0;9.0")
    index.add(published(tmp_path, covering))
    house = Wheelhouse(tmp_path / "house")
    result = ServedIndex(index.url, origin="test", client=client).fetch_into(house, WANT, H200)
    assert result.stored is not None and result.notes == ()
    assert result.stored.key == covering and house.lookup(covering) == result.stored
    assert result.reason is not None and "covers every GPU here (9.0: sm_90 exact)" in result.reason


def test_a_truncated_download_is_refused_and_nothing_is_kept(
    index: Index, client: HttpClient, tmp_path: Path
) -> None:
    name = index.add(published(tmp_path, make_key(arch_list="8.0;9.0")))
    index.cut.add(name)
    house = Wheelhouse(tmp_path / "house")
    result = ServedIndex(index.url, origin="test", client=client).fetch_into(house, WANT, H200)
    assert result.stored is None and house.entries() == []
    [note] = result.notes
    assert name in note and "truncated" in note
    assert not list((tmp_path / "house").glob("**/*.whl"))  # no partial file left anywhere


def test_a_tampered_download_is_refused(index: Index, client: HttpClient, tmp_path: Path) -> None:
    wheel = published(tmp_path, make_key(arch_list="8.0;9.0"))
    name = index.add(wheel)
    index.hashes[name] = hashlib.sha256(
        b"what the lab published"
    ).hexdigest()  # the bytes changed since
    house = Wheelhouse(tmp_path / "house")
    result = ServedIndex(index.url, origin="test", client=client).fetch_into(house, WANT, H200)
    assert result.stored is None and house.entries() == []
    [note] = result.notes
    assert "sha256 mismatch" in note


def test_a_forged_label_is_caught_by_the_key_the_wheel_carries(
    index: Index, client: HttpClient, tmp_path: Path
) -> None:
    # Built with another recipe, then renamed to this recipe's label: the name fits, the key does
    # not.
    other = make_key(arch_list="8.0;9.0", recipe_digest=RECIPE[:8] + "f" * 56)
    wheel = published(tmp_path, other)
    assert (
        other.recipe_word == make_key().recipe_word
    )  # same 8 digits: the label cannot tell them apart
    index.add(wheel)
    house = Wheelhouse(tmp_path / "house")
    result = ServedIndex(index.url, origin="test", client=client).fetch_into(house, WANT, H200)
    assert result.stored is None and house.entries() == []
    [note] = result.notes
    assert "differs from this plan's in recipe_digest" in note


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"arch_list": "8.0;8.9"}, "no kernels for 9.0 (no PTX)"),
        ({"arch_list": "8.0;9.0", "recipe_digest": "c" * 64}, "another recipe"),
        ({"arch_list": "8.0;9.0", "torch": "2.13.0"}, "another torch"),
        ({"arch_list": "8.0;9.0", "variant": "cu128"}, "another CUDA variant"),
        ({"arch_list": "8.0;9.0", "python_tag": "cp399"}, "another Python"),
    ],
)
def test_a_wheel_that_does_not_fit_is_never_downloaded(
    index: Index, client: HttpClient, tmp_path: Path, changes: dict[str, str], why: str
) -> None:
    served = make_key(**changes)
    index.add(published(tmp_path, served))
    house = Wheelhouse(tmp_path / "house")
    result = ServedIndex(index.url, origin="test", client=client).fetch_into(house, WANT, H200)
    assert result.stored is None and result.notes == (), why
    assert index.downloads == [], why
    assert house.entries() == []


def test_the_best_covering_wheel_is_chosen_and_an_explicit_arch_list_wants_it_exactly(
    tmp_path: Path,
) -> None:
    from cuda_resolve.wheelhouse.served import _links, parse_project_page

    names = [
        published(tmp_path, make_key(arch_list=archs), name=str(i)).name
        for i, archs in enumerate(["8.0+PTX", "8.0;9.0", "8.0;8.6;9.0", "8.0"])
    ]
    page = "".join(f'<a href="/f/{n}#sha256={"0" * 64}">x</a>' for n in names)
    wheels = _links(parse_project_page(page, "text/html", "http://127.0.0.1/simple/demo-ext/"))
    ranked = [
        w.label.arch_list for w, _ in served_candidates(wheels, WANT, H200, exact_arch_list=False)
    ]
    assert ranked == [
        "8.0;9.0",
        "8.0;8.6;9.0",
        "8.0+PTX",
    ]  # exact SASS, fewer targets first; PTX last; 8.0 never
    exact = served_candidates(wheels, make_key(arch_list="8.0;9.0"), H200, exact_arch_list=True)
    assert [w.label.arch_list for w, _ in exact] == ["8.0;9.0"]


def test_labels_with_and_without_the_recipe_word_are_read_back() -> None:
    key = make_key(arch_list="8.0;9.0+PTX")
    assert key.local_label.endswith(f".sm80.sm90ptx.r{RECIPE[:8]}")
    parts = parse_local_label(key.local_label)
    assert parts is not None and (parts.arch_list, parts.recipe) == ("8.0;9.0+PTX", key.recipe_word)
    old = parse_local_label("pt2141cu130.sm80.sm90ptx")  # a wheel labelled before the recipe word
    assert old is not None and (old.arch_list, old.recipe) == ("8.0;9.0+PTX", None)
    for version in (
        key.labelled_version,
        "1.0+pt2141cu130.sm80.sm90ptx",
    ):  # what the resolver keeps
        label = parse_build_label(version)
        assert label is not None and label.torch == "pt2141cu130"
        assert [str(e) for e in label.arch_list] == ["8.0", "9.0+PTX"]
    assert parse_build_label("1.0+pt2141cu130.sm80.rnothex1") is None


def test_two_processes_fetching_one_key_into_one_folder_make_one_wheel_and_one_download(
    index: Index, tmp_path: Path
) -> None:
    covering = make_key(arch_list="8.0;9.0")
    index.add(published(tmp_path, covering))
    index.delay = 1.5  # the first download is still running when the second process asks
    shared = tmp_path / "shared-house"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_wheelhouse import make_key
        from cuda_resolve.net.client import HttpClient, RetryPolicy
        from cuda_resolve.versions import ComputeCapability
        from cuda_resolve.wheelhouse.served import ServedIndex
        from cuda_resolve.wheelhouse.store import Wheelhouse
        client = HttpClient(
            use_cache=False, retry=RetryPolicy(attempts=1), proxies={{"no_proxy": "127.0.0.1"}}
        )
        result = ServedIndex({index.url!r}, origin="test", client=client).fetch_into(
            Wheelhouse(sys.argv[1]), make_key(arch_list="9.0"), [ComputeCapability(9, 0)])
        print(result.stored.path if result.stored else "none", result.notes)
    """)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(shared)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=120) for child in children]
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    paths = {out.split()[0] for out, _ in outputs}
    house = Wheelhouse(shared)
    [entry] = house.entries()
    assert paths == {str(entry.path)} and entry.key == covering
    assert len(list(shared.glob("wheels/*/*/*.whl"))) == 1
    assert (
        len(index.downloads) == 1
    )  # the second process waited on the key's lock and took the first's


def test_the_url_and_its_password_are_not_shown(tmp_path: Path, client: HttpClient) -> None:
    served = ServedIndex("http://lab:hunter22pw@127.0.0.1:9/simple/", origin="test", client=client)
    result = served.fetch_into(Wheelhouse(tmp_path / "house"), WANT, H200)
    [note] = result.notes
    assert (
        "hunter22pw" not in note and "cannot be read" in note and note.endswith("building locally")
    )
