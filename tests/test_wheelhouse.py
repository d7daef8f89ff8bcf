"""The wheelhouse: publish relabels and strips real wheels, pip installs them, and nothing
half-written is ever visible (raised or SIGKILLed publishes, concurrent publishers).

Wheels are made here with zipfile around a small CPython extension compiled by gcc with ``-g``
(tests/data/wheelhouse/demo_ext.c), so strip has DWARF to remove and the installed module proves
the stripped object still loads. Every wheelhouse lives in tmp_path.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cuda_resolve.wheelhouse import StoredWheel, Wheelhouse, WheelhouseError, WheelKey
from cuda_resolve.wheelhouse import store as store_module

DATA = Path(__file__).parent / "data" / "wheelhouse"
PYTHON_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
PLATFORM = sysconfig.get_platform().replace("-", "_").replace(".", "_")
TAG = f"{PYTHON_TAG}-{PYTHON_TAG}-{PLATFORM}"
RECIPE = hashlib.sha256(b"demo recipe").hexdigest()
HAS_GCC = shutil.which("gcc") is not None
HAS_STRIP = shutil.which("strip") is not None
needs_gcc = pytest.mark.skipif(not HAS_GCC, reason="gcc is needed to compile the fixture extension")


def make_key(**changes: str) -> WheelKey:
    fields = {
        "package": "demo_ext",
        "version": "1.0",
        "torch": "2.14.1",
        "variant": "cu130",
        "python_tag": PYTHON_TAG,
        "platform": PLATFORM,
        "arch_list": "8.6;9.0+PTX",
        "recipe_digest": RECIPE,
    }
    fields.update(changes)
    return WheelKey(**fields)


def make_wheel(
    directory: Path,
    *,
    name: str = "demo_ext",
    version: str = "1.0",
    tag: str = TAG,
    extension: bytes | None = None,
    record: bool = True,
) -> Path:
    """A wheel as ``pip wheel`` writes one: package, optional .so, a .data script, dist-info."""
    directory.mkdir(parents=True, exist_ok=True)
    dist_info = f"{name}-{version}.dist-info"
    files: dict[str, bytes] = {
        f"{name}/__init__.py": (
            b"from ._ext import add\n"
            if extension is not None
            else b"def add(a, b):\n    return a + b\n"
        ),
        f"{name}-{version}.data/scripts/demo-tool": b"#!python\nprint('demo')\n",
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
            "Requires-Python: >=3.8\n\nDemo extension.\nVersion: 9.9 (in the description: kept)\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n"
        ).encode(),
        f"{dist_info}/top_level.txt": f"{name}\n".encode(),
    }
    if extension is not None:
        files[f"{name}/_ext.so"] = extension
    path = directory / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 2, 3, 4, 6))
            info.external_attr = (0o755 if member.endswith((".so", "demo-tool")) else 0o644) << 16
            archive.writestr(info, data)
        if record:
            archive.writestr(f"{dist_info}/RECORD", "stale,sha256=x,1\n")
    return path


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """demo_ext.c compiled with -g for this interpreter (about 20 kB, a third of it DWARF)."""
    if not HAS_GCC:
        pytest.skip("gcc is needed to compile the fixture extension")
    target = tmp_path_factory.mktemp("ext") / "_ext.so"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-g",
            "-O0",
            f"-I{include}",
            str(DATA / "demo_ext.c"),
            "-o",
            str(target),
        ],
        check=True,
        timeout=60,
    )
    return target.read_bytes()


@pytest.fixture
def house(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Wheelhouse:
    root = tmp_path / "house"
    monkeypatch.setenv("CUDA_RESOLVE_WHEELHOUSE", str(root))
    return Wheelhouse.default()


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _visible_wheels(root: Path) -> list[Path]:
    """Wheels a reader could take: in complete entry folders (not .tmp-/.old-)."""
    return [p for p in root.glob("wheels/*/*/*.whl") if not p.parent.name.startswith(".")]


# -- publish: relabel, RECORD, strip ------------------------------------------------------------


@needs_gcc
def test_publish_relabels_every_place_the_version_lives(
    house: Wheelhouse, tmp_path: Path, extension: bytes
) -> None:
    built = make_wheel(tmp_path / "built", extension=extension)
    key = make_key()
    entry = house.publish(key, built)

    assert key.local_label == f"pt2141cu130.sm86.sm90ptx.r{RECIPE[:8]}"
    label = f"1.0+{key.local_label}"
    assert entry.version == label
    assert entry.path.name == f"demo_ext-{label}-{TAG}.whl"
    assert entry.path.parent == house.root / "wheels" / "demo-ext" / key.digest
    with zipfile.ZipFile(entry.path) as archive:
        names = archive.namelist()
        metadata = archive.read(f"demo_ext-{label}.dist-info/METADATA").decode()
        record = archive.read(f"demo_ext-{label}.dist-info/RECORD").decode()
        contents = {name: archive.read(name) for name in names}
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    assert not [n for n in names if n.startswith("demo_ext-1.0.")]  # the old folders are gone
    assert f"demo_ext-{label}.data/scripts/demo-tool" in names
    assert modes[f"demo_ext-{label}.data/scripts/demo-tool"] == 0o755
    assert f"\nVersion: {label}\n" in metadata
    assert "Version: 9.9 (in the description: kept)" in metadata  # only the header changed

    rows = list(csv.reader(io.StringIO(record)))
    listed = {row[0]: row for row in rows}
    assert set(listed) == set(names)  # every file, RECORD itself included
    carried = json.loads(contents[f"demo_ext-{label}.dist-info/cuda_resolve_key.json"])
    assert carried == {"format": 1, "key": key.to_json()}  # the full key travels in the wheel
    record_name = f"demo_ext-{label}.dist-info/RECORD"
    assert listed[record_name][1:] == ["", ""]
    for name, row in listed.items():
        if name != record_name:
            assert row[1] == _record_hash(contents[name]), name
            assert row[2] == str(len(contents[name])), name

    on_disk = entry.path.read_bytes()
    assert entry.sha256 == hashlib.sha256(on_disk).hexdigest() and entry.size == len(on_disk)
    document = json.loads((entry.path.parent / "entry.json").read_text())
    assert document["key"] == key.to_json() and document["sha256"] == entry.sha256
    assert document["original"] == {"file": built.name, "size": built.stat().st_size}
    assert house.lookup(key) == entry


@needs_gcc
@pytest.mark.skipif(not HAS_STRIP, reason="binutils' strip is not installed")
def test_publish_strips_debug_info_from_shared_objects(
    house: Wheelhouse, tmp_path: Path, extension: bytes
) -> None:
    built = make_wheel(tmp_path / "built", extension=extension)
    entry = house.publish(make_key(), built)
    with zipfile.ZipFile(entry.path) as archive:
        stripped = archive.read("demo_ext/_ext.so")
    assert entry.stripped == ("demo_ext/_ext.so",)
    assert len(stripped) < len(extension) * 0.85
    assert b".debug_info" in extension and b".debug_info" not in stripped

    kept = house.publish(make_key(arch_list="8.0"), built, strip_debug=False)
    with zipfile.ZipFile(kept.path) as archive:
        assert archive.read("demo_ext/_ext.so") == extension
    assert kept.stripped == ()


@needs_gcc
def test_without_strip_on_path_the_wheel_is_kept_as_built(
    house: Wheelhouse, tmp_path: Path, extension: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = make_wheel(tmp_path / "built", extension=extension)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    entry = house.publish(make_key(), built)
    with zipfile.ZipFile(entry.path) as archive:
        assert archive.read("demo_ext/_ext.so") == extension
    assert entry.stripped == ()


def test_publish_refuses_a_wheel_that_is_not_the_keys(house: Wheelhouse, tmp_path: Path) -> None:
    cases = {
        "is a wheel of 'other-pkg'": make_wheel(tmp_path / "a", name="other_pkg"),
        "is version 2.0, but the key says 1.0": make_wheel(tmp_path / "b", version="2.0"),
        "platform tags do not include": make_wheel(
            tmp_path / "c", tag=f"{PYTHON_TAG}-{PYTHON_TAG}-win_amd64"
        ),
        "does not exist": tmp_path / "missing-1.0-py3-none-any.whl",
    }
    broken = tmp_path / "d" / f"demo_ext-1.0-{TAG}.whl"
    broken.parent.mkdir()
    broken.write_bytes(b"not a zip")
    cases["cannot be read as a zip archive"] = broken
    for expected, wheel in cases.items():
        with pytest.raises(WheelhouseError) as caught:
            house.publish(make_key(), wheel)
        assert expected in caught.value.message and caught.value.hint
        assert str(wheel) in caught.value.message
    assert house.entries() == [] and _visible_wheels(house.root) == []
    assert not list(house.root.glob("wheels/*/.tmp-*"))


# -- pip installs what the pages serve ------------------------------------------------------------


def _venv(path: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=60
    )
    return path / "bin" / "python"


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", NO_PROXY="127.0.0.1,localhost")
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "--isolated", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )


@needs_gcc
def test_pip_installs_the_labelled_wheel_from_the_index_and_the_find_links_page(
    house: Wheelhouse, tmp_path: Path, extension: bytes
) -> None:
    key = make_key()
    entry = house.publish(key, make_wheel(tmp_path / "built", extension=extension))
    house.publish(
        make_key(package="demo_ext", arch_list="7.0"),
        make_wheel(tmp_path / "built2", extension=extension),
    )

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(house.root), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), QuietHandler
    )  # python -m http.server
    threading.Thread(target=server.serve_forever, daemon=True).start()
    served = f"http://127.0.0.1:{server.server_address[1]}"
    routes = {
        "index": ("--index-url", house.simple_dir.as_uri()),
        "find-links": ("--no-index", "--find-links", str(house.find_links_page)),
        "http-index": ("--index-url", f"{served}/simple/"),
        "http-find-links": ("--no-index", "--find-links", f"{served}/"),
    }
    try:
        _install_each_route(routes, tmp_path, entry)
    finally:
        server.shutdown()
        server.server_close()


def _install_each_route(
    routes: dict[str, tuple[str, ...]], tmp_path: Path, entry: StoredWheel
) -> None:
    for route, options in routes.items():
        python = _venv(tmp_path / f"venv-{route}")
        pinned = f"demo-ext=={entry.version}"
        result = _pip(python, "install", "--no-cache-dir", *options, pinned)
        assert result.returncode == 0, result.stdout + result.stderr
        shown = _pip(python, "show", "demo-ext")
        assert f"Version: {entry.version}" in shown.stdout, route
        ran = subprocess.run(
            [str(python), "-c", "import demo_ext; print(demo_ext.add(2, 3))"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert ran.stdout.strip() == "5", ran.stderr  # the stripped .so loads and runs
        assert (python.parent / "demo-tool").exists()  # the relabelled .data folder installed


def test_pip_refuses_a_wheel_whose_bytes_changed_after_publish(
    house: Wheelhouse, tmp_path: Path
) -> None:
    entry = house.publish(make_key(), make_wheel(tmp_path / "built"))
    data = bytearray(entry.path.read_bytes())
    data[-30] ^= 0xFF  # inside the zip's central directory comment area: still a zip
    entry.path.write_bytes(bytes(data))
    python = _venv(tmp_path / "venv")
    result = _pip(
        python, "install", "--no-cache-dir", "--index-url", house.simple_dir.as_uri(), "demo-ext"
    )
    assert result.returncode != 0
    assert "do not match the hashes" in (result.stdout + result.stderr).lower(), result.stderr


# -- lookup -------------------------------------------------------------------------------------


def test_lookup_finds_only_an_intact_entry_of_the_same_key(
    house: Wheelhouse, tmp_path: Path
) -> None:
    key = make_key()
    assert house.lookup(key) is None  # the folder does not even exist yet
    entry = house.publish(key, make_wheel(tmp_path / "built"))
    assert house.lookup(key) == entry
    assert house.lookup(make_key(package="Demo.Ext")) == entry  # names compare canonicalized
    for other in (
        make_key(arch_list="8.6"),
        make_key(torch="2.14.0"),
        make_key(variant="cu129"),
        make_key(recipe_digest="0" * 64),
        make_key(python_tag="cp399"),
    ):
        assert house.lookup(other) is None

    original = entry.path.read_bytes()
    tampered = bytearray(original)
    tampered[100] ^= 0x01  # same size, different bytes
    entry.path.write_bytes(bytes(tampered))
    assert house.lookup(key) is None
    assert "sha256" in (house.verify(entry) or "")
    entry.path.write_bytes(original[:-1])
    assert house.lookup(key) is None and "bytes" in (house.verify(entry) or "")
    entry.path.unlink()
    assert house.lookup(key) is None and "missing" in (house.verify(entry) or "")
    entry.path.write_bytes(original)
    assert house.lookup(key) == entry

    meta = entry.path.parent / "entry.json"
    meta.write_text("{not json")
    assert house.lookup(key) is None
    entries, problems = house.scan()
    assert entries == [] and any("not JSON" in p and str(meta) in p for p in problems)


def test_publish_replaces_a_damaged_entry(house: Wheelhouse, tmp_path: Path) -> None:
    key = make_key()
    entry = house.publish(key, make_wheel(tmp_path / "built"))
    entry.path.write_bytes(b"garbage")
    assert house.lookup(key) is None
    again = house.publish(key, make_wheel(tmp_path / "built"))
    assert house.lookup(key) == again
    assert len(list(house.root.glob("wheels/demo-ext/*"))) == 1


# -- pages --------------------------------------------------------------------------------------


def _links(page: Path) -> list[tuple[Path, str]]:
    found = re.findall(r'href="([^"#]+)#sha256=([0-9a-f]{64})"', page.read_text())
    from urllib.parse import unquote

    return [((page.parent / unquote(href)).resolve(), sha) for href, sha in found]


def test_pages_link_every_complete_entry_with_its_hash_and_drop_removed_projects(
    house: Wheelhouse, tmp_path: Path
) -> None:
    first = house.publish(make_key(), make_wheel(tmp_path / "a"))
    second = house.publish(make_key(arch_list="7.5"), make_wheel(tmp_path / "a"))
    other = house.publish(
        make_key(package="other_pkg"), make_wheel(tmp_path / "b", name="other_pkg")
    )
    project_page = house.simple_dir / "demo-ext" / "index.html"
    assert sorted(_links(project_page)) == sorted(
        [(first.path, first.sha256), (second.path, second.sha256)]
    )
    for path, sha in _links(house.find_links_page) + _links(project_page):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert len(_links(house.find_links_page)) == 3
    root_page = (house.simple_dir / "index.html").read_text()
    assert 'href="demo-ext/"' in root_page and 'href="other-pkg/"' in root_page
    assert 'data-requires-python="&gt;=3.8"' in project_page.read_text()

    house.remove(other)
    assert not (house.simple_dir / "other-pkg").exists()
    assert not (house.root / "wheels" / "other-pkg").exists()
    assert "other-pkg" not in (house.simple_dir / "index.html").read_text()
    assert len(_links(house.find_links_page)) == 2
    house.remove(first)
    assert _links(project_page) == [(second.path, second.sha256)]
    assert house.entries() == [second]


def test_two_recipes_of_one_version_have_two_file_names_and_both_are_listed(
    house: Wheelhouse, tmp_path: Path
) -> None:
    first = house.publish(make_key(recipe_digest="2" * 64), make_wheel(tmp_path / "a"))
    second = house.publish(make_key(recipe_digest="1" * 64), make_wheel(tmp_path / "a"))
    assert first.path.name != second.path.name  # the label's recipe word: no collision on a server
    assert ".r22222222-" in first.path.name and ".r11111111-" in second.path.name
    assert sorted(_links(house.simple_dir / "demo-ext" / "index.html")) == sorted(
        [(first.path, first.sha256), (second.path, second.sha256)]
    )
    assert len(house.entries()) == 2


# -- interrupted publishes ------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["after the wheel is written", "at the final rename"])
def test_a_publish_that_raises_midway_leaves_nothing(
    house: Wheelhouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    key = make_key()
    built = make_wheel(tmp_path / "built")
    if stage == "after the wheel is written":
        real_hash = store_module._hash_and_sync

        def interrupted_hash(path: Path) -> tuple[str, int]:
            real_hash(path)
            raise KeyboardInterrupt

        monkeypatch.setattr(store_module, "_hash_and_sync", interrupted_hash)
    else:
        real_replace = os.replace

        def interrupted_replace(src: object, dst: object) -> None:
            if Path(str(dst)).name == key.digest:
                raise OSError(28, "No space left on device", str(dst))
            real_replace(src, dst)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "replace", interrupted_replace)
    with pytest.raises((KeyboardInterrupt, WheelhouseError)):
        house.publish(key, built)
    monkeypatch.undo()
    assert house.lookup(key) is None and house.entries() == []
    assert _visible_wheels(house.root) == []
    assert not list(house.root.glob("wheels/*/.tmp-*"))  # removed on the way out
    assert not house.find_links_page.exists() or "demo_ext" not in house.find_links_page.read_text()
    assert house.publish(key, built) == house.lookup(key)


_KILLED_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from cuda_resolve.wheelhouse import Wheelhouse, WheelKey
    from cuda_resolve.wheelhouse import store

    real = store._hash_and_sync
    def hash_then_hang(path):
        result = real(path)
        Path(sys.argv[3]).write_text("staged")
        time.sleep(120)
        return result
    store._hash_and_sync = hash_then_hang
    key = WheelKey(**__import__("json").loads(sys.argv[2]))
    Wheelhouse(Path(sys.argv[1])).publish(key, Path(sys.argv[4]))
    """
)


def test_a_sigkilled_publish_leaves_no_entry_and_the_next_publish_cleans_up(
    house: Wheelhouse, tmp_path: Path
) -> None:
    key = make_key()
    built = make_wheel(tmp_path / "built")
    marker = tmp_path / "staged"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _KILLED_CHILD,
            str(house.root),
            json.dumps(key.to_json()),
            str(marker),
            str(built),
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "the publishing child exited early"
            assert time.monotonic() < deadline, "the child never staged its wheel"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    leftovers = list(house.root.glob("wheels/demo-ext/.tmp-*"))
    assert len(leftovers) == 1 and list(leftovers[0].glob("*.whl"))  # it really was midway
    assert house.lookup(key) is None and house.entries() == [] and _visible_wheels(house.root) == []
    assert not house.find_links_page.exists()

    # the killed process's lock died with it: this does not wait
    with house.lock(key, timeout=10):
        entry = house.publish(make_key(arch_list="7.0"), built)  # another key's publish cleans up
    assert not list(house.root.glob("wheels/demo-ext/.tmp-*"))
    assert house.lookup(entry.key) == entry


def test_cleanup_spares_a_publish_in_progress(house: Wheelhouse, tmp_path: Path) -> None:
    """A .tmp- folder whose key's lock is held (a live publish) is left alone."""
    key = make_key()
    staging = (
        house.root / "wheels" / "demo-ext" / f".tmp-{key.digest}-{store_module._host_token()}-live"
    )
    staging.mkdir(parents=True)
    held = threading.Event()
    done = threading.Event()

    def holder() -> None:  # filelock is per thread: another thread's hold is a live publish
        with house.lock(key, timeout=10):
            held.set()
            done.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        house.publish(make_key(arch_list="7.0"), make_wheel(tmp_path / "built"))
        assert staging.exists()
    finally:
        done.set()
        thread.join()
    house.publish(make_key(arch_list="7.5"), make_wheel(tmp_path / "built"))
    assert not staging.exists()


def test_another_hosts_leftover_waits_until_it_is_old(house: Wheelhouse, tmp_path: Path) -> None:
    """On NFS whose locks stay on each client, a fresh folder from another host may be live."""
    key = make_key()
    foreign = house.root / "wheels" / "demo-ext" / f".tmp-{key.digest}-feedbeef-xyz"
    foreign.mkdir(parents=True)
    (foreign / "half.whl").write_bytes(b"half")
    house.publish(key, make_wheel(tmp_path / "built"))  # even the same key: not yet
    assert foreign.exists()
    old = time.time() - store_module.LEFTOVER_MIN_AGE_S - 60
    os.utime(foreign, (old, old))
    house.publish(make_key(arch_list="7.0"), make_wheel(tmp_path / "built"))
    assert not foreign.exists()


def test_losing_a_rename_race_to_another_host_keeps_the_winners_entry(
    house: Wheelhouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hosts whose locks do not see each other publish one key: one entry, no error."""
    key = make_key()
    built = make_wheel(tmp_path / "built")
    real_replace = os.replace
    winners: list[StoredWheel] = []
    raced: list[bool] = []

    def racing_replace(src: object, dst: object) -> None:
        if Path(str(dst)).name == key.digest and not raced:
            raced.append(True)
            with monkeypatch.context() as other_host:
                other_host.setattr(store_module, "_host_token", lambda: "feedbeef")
                winners.append(house.publish(key, built))
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", racing_replace)
    result = house.publish(key, built)
    monkeypatch.undo()
    assert winners and result == winners[0] == house.lookup(key)
    assert [p.name for p in (house.root / "wheels" / "demo-ext").iterdir()] == [key.digest]


# -- locks and concurrency ------------------------------------------------------------------------


_PUBLISHER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from cuda_resolve.wheelhouse import Wheelhouse, WheelKey

    house = Wheelhouse(Path(sys.argv[1]))
    key = WheelKey(**json.loads(sys.argv[2]))
    mode = sys.argv[4]
    if mode == "protocol":
        with house.lock(key, timeout=60):
            entry = house.lookup(key)
            if entry is None:
                time.sleep(0.3)  # "building": every racer would get here without the lock
                entry = house.publish(key, Path(sys.argv[3]))
                print("built", entry.sha256)
            else:
                print("hit", entry.sha256)
    else:
        entry = house.publish(key, Path(sys.argv[3]))
        print("published", entry.sha256)
    """
)


@pytest.mark.parametrize("mode", ["protocol", "bare-publish"])
def test_concurrent_publishers_of_one_key_make_one_wheel(
    house: Wheelhouse, tmp_path: Path, mode: str
) -> None:
    key = make_key()
    built = make_wheel(tmp_path / "built")
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _PUBLISHER,
                str(house.root),
                json.dumps(key.to_json()),
                str(built),
                mode,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append(out.split())
    if mode == "protocol":
        assert sorted(word for word, _ in outputs) == ["built", "hit", "hit", "hit"]
        assert len({sha for _, sha in outputs}) == 1
    folders = list((house.root / "wheels" / "demo-ext").iterdir())
    assert [f.name for f in folders] == [key.digest]  # no .tmp-/.old- left, one entry
    assert (
        len(list(folders[0].glob("*.whl"))) == 1 and len(list(folders[0].glob("entry.json"))) == 1
    )
    entry = house.lookup(key)
    assert entry is not None and house.entries() == [entry]
    assert _links(house.simple_dir / "demo-ext" / "index.html") == [(entry.path, entry.sha256)]


def test_a_lock_timeout_names_the_lock_file_and_its_holder(house: Wheelhouse) -> None:
    key = make_key()
    held = threading.Event()
    done = threading.Event()

    def holder() -> None:
        with house.lock(key, timeout=10):
            held.set()
            done.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(WheelhouseError) as caught, house.lock(key, timeout=0.2):
            pass
    finally:
        done.set()
        thread.join()
    message = caught.value.message
    assert str(house.lock_path(key)) in message and f"pid {os.getpid()}" in message
    assert "timed out after 0.2 s" in message and caught.value.hint
    with house.lock(key, timeout=1):  # free again
        pass


# -- where it lives; what cannot be read or written -----------------------------------------------


def test_default_location_env_then_config_then_cache(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('wheelhouse = "lab/wheels"\n')
    env = {"CUDA_RESOLVE_CONFIG": str(config), "CUDA_RESOLVE_CACHE_DIR": str(tmp_path / "cache")}
    named = Wheelhouse.default({**env, "CUDA_RESOLVE_WHEELHOUSE": str(tmp_path / "nfs")})
    assert named.root == tmp_path / "nfs" and named.origin == "$CUDA_RESOLVE_WHEELHOUSE"
    configured = Wheelhouse.default(env)
    assert configured.root == tmp_path / "lab" / "wheels" and str(config) in configured.origin
    fallback = Wheelhouse.default({**env, "CUDA_RESOLVE_CONFIG": str(tmp_path / "absent.toml")})
    assert fallback.root == tmp_path / "cache" / "wheelhouse" and "default" in fallback.origin


def test_a_wheelhouse_that_cannot_be_written_or_read_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    beneath = Wheelhouse(blocker / "house", origin="$CUDA_RESOLVE_WHEELHOUSE")
    assert beneath.lookup(make_key()) is None and beneath.entries() == []  # nothing there to read
    with pytest.raises(WheelhouseError) as caught:
        beneath.publish(make_key(), make_wheel(tmp_path / "built"))
    assert f"cannot write to the wheelhouse {blocker / 'house'}" in caught.value.message
    assert "$CUDA_RESOLVE_WHEELHOUSE" in (caught.value.hint or "")
    itself = Wheelhouse(blocker)
    with pytest.raises(WheelhouseError, match="is not a folder"):
        itself.lookup(make_key())
    with pytest.raises(WheelhouseError, match="is not a folder"):
        itself.entries()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_a_read_only_wheelhouse_serves_lookups_but_refuses_publish(
    house: Wheelhouse, tmp_path: Path
) -> None:
    entry = house.publish(make_key(), make_wheel(tmp_path / "built"))
    for path in [house.root, *house.root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o555)
    try:
        assert house.lookup(make_key()) == entry
        with pytest.raises(WheelhouseError, match="cannot write to the wheelhouse"):
            house.publish(make_key(arch_list="7.0"), make_wheel(tmp_path / "built"))
    finally:
        for path in [house.root, *house.root.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)


def test_stored_wheel_json_carries_the_listing_fields(house: Wheelhouse, tmp_path: Path) -> None:
    entry = house.publish(make_key(), make_wheel(tmp_path / "built"))
    data = entry.to_json()
    assert isinstance(entry, StoredWheel)
    assert {
        k: data[k]
        for k in ("package", "version", "label", "torch", "variant", "python", "arch_list")
    } == {
        "package": "demo_ext",
        "version": entry.version,
        "label": f"pt2141cu130.sm86.sm90ptx.r{RECIPE[:8]}",
        "torch": "2.14.1",
        "variant": "cu130",
        "python": PYTHON_TAG,
        "arch_list": "8.6;9.0+PTX",
    }
    assert data["path"] == str(entry.path) and data["size"] == entry.size
