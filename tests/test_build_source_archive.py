"""A recipe's source as an archive (url + sha256): parsed once, fetched over loopback HTTPS through
the project's client, verified before anything is unpacked, cached by hash, unpacked safely.

The archive served is a tar.gz of the fixture package tests/data/packages/cuext made here, laid
out as GitHub's release tarballs are (a pax global header, one top-level ``cuext-0.1.0/``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from test_net_support import BenchHandler, BenchServer, Cas, ClientFactory, SystemTrust

from cuda_resolve.build.archive import ArchiveLimits, unpack_archive
from cuda_resolve.build.source import describe_source, prepare_source, recipe_digest
from cuda_resolve.errors import BuildError, IndexDataError
from cuda_resolve.index.load import load_index
from cuda_resolve.index.model import Recipe, SourceArchive

pytest_plugins = ["test_net_support"]

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "packages" / "cuext"
FIXTURE_INDEX = DATA / "index" / "cuext"
TOP = "cuext-0.1.0"
TORCH = "2.14.1"
PATCHED = 'os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "3.7+PTX;5.0;6.0;6.1;6.2;7.0;7.5")'


# -- archives made here ----------------------------------------------------------------------


def fixture_tarball(mode: str = "w:gz") -> bytes:
    """The fixture package as GitHub serves a tag: pax global header, one top-level folder."""
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer,
        mode=mode,
        format=tarfile.PAX_FORMAT,  # type: ignore[call-overload]
        pax_headers={"comment": "0123456789abcdef0123456789abcdef01234567"},
    ) as tar:
        tar.add(
            FIXTURE, arcname=TOP, filter=lambda info: None if "__pycache__" in info.name else info
        )
    return buffer.getvalue()


TarMember = tuple[str, bytes | None, Callable[[tarfile.TarInfo], None] | None]


def tarball(*members: TarMember, mode: str = "w:gz") -> bytes:
    """A tar of ``(name, content or None for a folder, adjust(info) or None)`` members."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:  # type: ignore[call-overload]
        for name, content, adjust in members:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
            else:
                info.size = len(content)
                info.mode = 0o644
            if adjust is not None:
                adjust(info)
            tar.addfile(info, io.BytesIO(content) if content is not None and info.isreg() else None)
    return buffer.getvalue()


def symlink(target: str) -> Callable[[tarfile.TarInfo], None]:
    def adjust(info: tarfile.TarInfo) -> None:
        info.type, info.linkname, info.size = tarfile.SYMTYPE, target, 0

    return adjust


def hardlink(target: str) -> Callable[[tarfile.TarInfo], None]:
    def adjust(info: tarfile.TarInfo) -> None:
        info.type, info.linkname, info.size = tarfile.LNKTYPE, target, 0

    return adjust


def of_type(kind: bytes) -> Callable[[tarfile.TarInfo], None]:
    def adjust(info: tarfile.TarInfo) -> None:
        info.type, info.size = kind, 0

    return adjust


def zipped(*members: tuple[str, bytes, int]) -> bytes:
    """A zip of ``(name, content, unix mode)`` members (mode S_IFLNK makes a link)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content, mode in members:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            archive.writestr(info, content)
    return buffer.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def unpack(
    data: bytes, dest: Path, *, strip: str | None = None, limits: ArchiveLimits | None = None
) -> None:
    unpack_archive(io.BytesIO(data), dest, strip=strip, label="recipe demo", limits=limits)


# -- recipe files --------------------------------------------------------------------------------


def write_package(folder: Path, recipe_lines: str, *, patched_file: str = "setup.py") -> Path:
    """An index overlay folder holding packages/cuext.toml with one [[recipe]] (and its patch of
    ``patched_file``, the fixture's setup.py relative to the source tree's top); written again
    when called again."""
    (folder / "packages").mkdir(parents=True, exist_ok=True)
    (folder / "packages" / "cuext.toml").write_text(
        f'''format = 1
[sources]
fixture = "tests/data/packages/cuext"

[package]
name = "cuext"
source = "[fixture]"

[[recipe]]
name = "cuext-fixture"
version = "0.1.0"
torch = ">=2.0"
build_requires = ["setuptools>=77.0.3", "wheel", "ninja"]
source = "[fixture]"
{recipe_lines}

[[recipe.patch]]
file = "{patched_file}"
find = 'os.environ["TORCH_CUDA_ARCH_LIST"] = "3.7+PTX;5.0;6.0;6.1;6.2;7.0;7.5"'
replace = '{PATCHED}'
reason = "setup.py assigns TORCH_CUDA_ARCH_LIST unconditionally"
''',
        encoding="utf-8",
    )
    return folder


def recipe_from(folder: Path) -> Recipe:
    """The fixture index with ``folder`` laid over it: the overlay's recipe replaces the git one."""
    package = load_index(
        [FIXTURE_INDEX, folder], include_shipped=False, include_user=False
    ).package("cuext")
    assert package is not None and len(package.recipes) == 1
    return package.recipes[0]


def archive_lines(url: str, digest: str, extra: str = "") -> str:
    return f'[recipe.archive]\nurl = "{url}"\nsha256 = "{digest}"\n{extra}'


# -- parsing ---------------------------------------------------------------------------------


def test_an_archive_recipe_parses_with_or_without_a_git_source(tmp_path: Path) -> None:
    digest = "ab" * 32
    alone = recipe_from(
        write_package(
            tmp_path / "alone", archive_lines("https://files.example/cuext-0.1.0.tar.gz", digest)
        )
    )
    assert alone.archive == SourceArchive(
        url="https://files.example/cuext-0.1.0.tar.gz", sha256=digest, strip=None
    )
    assert alone.repository is None and alone.revision is None
    both = recipe_from(
        write_package(
            tmp_path / "both",
            'repository = "https://github.com/example/cuext"\n'
            f'revision = "{"0" * 40}"\n'
            + archive_lines("http://127.0.0.1:8/c.zip", digest, 'strip = ""'),
        )
    )
    assert both.archive is not None and both.archive.strip == "" and both.revision == "0" * 40
    # the archive wins over the clone; --source over both
    assert describe_source(both) == f"archive http://127.0.0.1:8/c.zip (sha256 {digest})"
    assert describe_source(both, Path("/src/cuext")) == "--source /src/cuext"
    git_only = replace(both, archive=None)
    assert describe_source(git_only) == "git clone https://github.com/example/cuext at 000000000000"


@pytest.mark.parametrize(
    ("lines", "path", "message"),
    [
        (
            archive_lines("https://h/a.tgz", "AB" * 32),
            "recipe[0].archive.sha256",
            "64 lower-case hex digits",
        ),
        (
            archive_lines("https://h/a.tgz", "ab" * 31),
            "recipe[0].archive.sha256",
            "64 lower-case hex digits",
        ),
        (
            archive_lines("http://files.example/a.tgz", "ab" * 32),
            "recipe[0].archive.url",
            "plain http:// is refused",
        ),
        (
            archive_lines("ftp://files.example/a.tgz", "ab" * 32),
            "recipe[0].archive.url",
            "ftp:// is refused",
        ),
        (
            archive_lines("https://h/a.tgz", "ab" * 32, 'strip = "a/b"'),
            "recipe[0].archive.strip",
            "top-level folder",
        ),
        (
            archive_lines("https://h/a.tgz", "ab" * 32, "size = 3"),
            "recipe[0].archive.size",
            "unknown key",
        ),
        (
            '[recipe.archive]\nurl = "https://h/a.tgz"',
            "recipe[0].archive.sha256",
            "is required but missing",
        ),
        ("", "recipe[0].repository", "a git repository (with revision) or an [recipe.archive]"),
        (
            f'revision = "{"0" * 40}"\n' + archive_lines("https://h/a.tgz", "ab" * 32),
            "recipe[0].revision",
            "the recipe names none",
        ),
        (
            'repository = "https://github.com/example/cuext"\n'
            + archive_lines("https://h/a.tgz", "ab" * 32),
            "recipe[0].revision",
            "is required but missing",
        ),
        (
            "submodules = true\n" + archive_lines("https://h/a.tgz", "ab" * 32),
            "recipe[0].submodules",
            "submodules would be missing",
        ),
    ],
)
def test_a_bad_archive_entry_names_file_path_and_value(
    tmp_path: Path, lines: str, path: str, message: str
) -> None:
    folder = write_package(tmp_path / "overlay", lines)
    with pytest.raises(IndexDataError) as info:
        recipe_from(folder)
    text = info.value.message
    assert (
        str(folder / "packages" / "cuext.toml") in text and f": {path}" in text and message in text
    ), text


def test_the_recipe_digest_follows_the_archive_content_not_its_url() -> None:
    base = Recipe(
        name="r",
        package="p",
        version=Version("1.0"),
        repository="https://github.com/example/p",
        revision="0" * 40,
    )
    with_archive = replace(base, archive=SourceArchive(url="https://a/p.tgz", sha256="ab" * 32))
    digests = {
        "git": recipe_digest(base, TORCH),
        "archive": recipe_digest(with_archive, TORCH),
        "other content": recipe_digest(
            replace(with_archive, archive=SourceArchive(url="https://a/p.tgz", sha256="cd" * 32)),
            TORCH,
        ),
        "kept layout": recipe_digest(
            replace(
                with_archive,
                archive=SourceArchive(url="https://a/p.tgz", sha256="ab" * 32, strip=""),
            ),
            TORCH,
        ),
    }
    assert len(set(digests.values())) == 4, digests
    moved = replace(
        with_archive, archive=SourceArchive(url="https://mirror/p.tgz", sha256="ab" * 32)
    )
    assert recipe_digest(moved, TORCH) == digests["archive"]
    # a git-only recipe's digest is the one it had before archives existed: its wheels stay found
    before = {
        "name": "r",
        "version": "1.0",
        "repository": "https://github.com/example/p",
        "revision": "0" * 40,
        "subdirectory": "",
        "submodules": False,
        "build_requires": [],
        "env": [],
        "patches": [],
    }
    assert digests["git"] == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()


# -- fetched over loopback HTTPS ----------------------------------------------------------------


@pytest.fixture
def trusted(cas: Cas, system_trust: SystemTrust) -> None:
    system_trust(cas.origin)


def serve(server: BenchServer, path: str, body: bytes) -> str:
    def route(handler: BenchHandler) -> None:
        handler.reply(200, body, content_type="application/gzip")

    server.routes[path] = route
    return server.url(path)


def test_the_archive_is_fetched_verified_unpacked_patched_and_then_cached(
    origin: BenchServer, trusted: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    body = fixture_tarball()
    url = serve(origin, f"/files/{TOP}.tar.gz", body)
    recipe = recipe_from(write_package(tmp_path / "overlay", archive_lines(url, sha(body))))
    cache = tmp_path / "sources"
    said: list[str] = []

    first = prepare_source(
        recipe,
        tmp_path / "work1",
        torch_version=TORCH,
        client=make_client(),
        cache_dir=cache,
        say=said.append,
    )
    assert first.root == tmp_path / "work1" / "src" == first.build_dir
    assert sorted(p.name for p in first.root.iterdir()) == [
        "csrc",
        "cuext",
        "setup.py",
    ]  # cuext-0.1.0/ stripped
    assert PATCHED in (first.root / "setup.py").read_text()
    assert (first.root / "csrc" / "add_one.cu").read_bytes() == (
        FIXTURE / "csrc" / "add_one.cu"
    ).read_bytes()
    assert first.origin == f"archive {url} (sha256 {sha(body)})" and first.identity is None
    assert [p.file for p in first.patches] == ["setup.py"]
    assert len(origin.requests_to(f"/files/{TOP}.tar.gz")) == 1
    assert [p.name for p in cache.iterdir()] == [sha(body)]  # kept by hash, nothing else
    assert any(s.startswith("downloading ") for s in said) and any(
        "sha256 verified" in s for s in said
    )

    # A second build opens the cached file: no request, and no client is even needed.
    del origin.routes[f"/files/{TOP}.tar.gz"]
    said.clear()
    second = prepare_source(
        recipe, tmp_path / "work2", torch_version=TORCH, cache_dir=cache, say=said.append
    )
    assert (second.root / "setup.py").read_text() == (first.root / "setup.py").read_text()
    assert len(origin.requests_to(f"/files/{TOP}.tar.gz")) == 1
    assert any("from the cache" in s for s in said) and not any(
        s.startswith("downloading") for s in said
    )


def test_the_archive_wins_over_the_clone_and_source_dir_over_both(
    origin: BenchServer, trusted: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    body = fixture_tarball()
    url = serve(origin, "/c.tar.gz", body)
    # a repository no clone could reach: the build must not try it
    both = recipe_from(
        write_package(
            tmp_path / "both",
            'repository = "file:///nonexistent/cuext.git"\n'
            f'revision = "{"1" * 40}"\n' + archive_lines(url, sha(body)),
        )
    )
    prepared = prepare_source(
        both,
        tmp_path / "work",
        torch_version=TORCH,
        client=make_client(),
        cache_dir=tmp_path / "sources",
    )
    assert prepared.origin.startswith("archive ") and (prepared.root / "setup.py").is_file()

    alone = recipe_from(write_package(tmp_path / "alone", archive_lines(url, sha(body))))
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "setup.py").write_text((FIXTURE / "setup.py").read_text())
    requests_before = len(origin.requests_to("/c.tar.gz"))
    given = prepare_source(
        alone,
        tmp_path / "work2",
        torch_version=TORCH,
        source_dir=copy,
        cache_dir=tmp_path / "empty",
    )
    assert given.origin == f"--source {copy}" and given.identity is not None
    assert "pins an archive by sha256, which a folder cannot be checked against" in given.notes[0]
    assert PATCHED in (given.root / "setup.py").read_text()
    assert (
        len(origin.requests_to("/c.tar.gz")) == requests_before
        and not (tmp_path / "empty").exists()
    )


def test_an_archive_without_the_recipes_subdirectory_is_named(
    origin: BenchServer, trusted: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    body = fixture_tarball()
    url = serve(origin, "/c.tar.gz", body)
    recipe = recipe_from(
        write_package(
            tmp_path / "overlay",
            'subdirectory = "pointnet2_ops_lib"\n' + archive_lines(url, sha(body)),
        )
    )
    with pytest.raises(
        BuildError, match=r"recipe cuext-fixture: the source has no pointnet2_ops_lib/ to build"
    ):
        prepare_source(
            recipe,
            tmp_path / "work",
            torch_version=TORCH,
            client=make_client(),
            cache_dir=tmp_path / "sources",
        )


def test_a_cached_archive_that_changed_is_downloaded_again(
    origin: BenchServer, trusted: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    body = fixture_tarball()
    url = serve(origin, "/c.tar.gz", body)
    recipe = recipe_from(write_package(tmp_path / "overlay", archive_lines(url, sha(body))))
    cache = tmp_path / "sources"
    cache.mkdir()
    (cache / sha(body)).write_bytes(tarball(("evil.txt", b"not the recorded archive", None)))
    prepared = prepare_source(
        recipe, tmp_path / "work", torch_version=TORCH, client=make_client(), cache_dir=cache
    )
    assert not (prepared.root / "evil.txt").exists() and (prepared.root / "setup.py").is_file()
    assert len(origin.requests_to("/c.tar.gz")) == 1
    assert (cache / sha(body)).read_bytes() == body


def test_a_hash_mismatch_is_refused_before_anything_is_unpacked(
    origin: BenchServer, trusted: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    body = fixture_tarball()
    url = serve(origin, "/c.tar.gz", body)
    recorded = sha(b"the file the recipe's author hashed")
    recipe = recipe_from(write_package(tmp_path / "overlay", archive_lines(url, recorded)))
    cache = tmp_path / "sources"
    with pytest.raises(BuildError) as info:
        prepare_source(
            recipe, tmp_path / "work", torch_version=TORCH, client=make_client(), cache_dir=cache
        )
    message = info.value.message
    assert (
        "recipe cuext-fixture" in message
        and url in message
        and recorded in message
        and sha(body) in message
    ), message
    assert "nothing was kept or unpacked" in (info.value.hint or "")
    assert not (tmp_path / "work" / "src").exists()
    assert not cache.exists() or list(cache.iterdir()) == []  # no file, no partial file


def test_a_traversal_archive_is_refused_and_writes_nothing(
    origin: BenchServer, trusted: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    body = tarball(
        (f"{TOP}/setup.py", b"print('x')\n", None), (f"{TOP}/../../escaped.txt", b"owned\n", None)
    )
    url = serve(origin, "/evil.tar.gz", body)
    recipe = recipe_from(write_package(tmp_path / "overlay", archive_lines(url, sha(body))))
    work = tmp_path / "deep" / "work"
    with pytest.raises(
        BuildError, match=r"escaped.txt' climbs out of the tree with '\.\.'; nothing was unpacked"
    ):
        prepare_source(
            recipe, work, torch_version=TORCH, client=make_client(), cache_dir=tmp_path / "sources"
        )
    assert not (work / "src").exists()
    assert [p for p in tmp_path.rglob("escaped.txt")] == []


# -- unpacking, member by member -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz", "w:"])
def test_tar_flavours_unpack_with_the_top_folder_stripped(tmp_path: Path, mode: str) -> None:
    unpack(fixture_tarball(mode), tmp_path / "out")
    assert (tmp_path / "out" / "setup.py").read_bytes() == (FIXTURE / "setup.py").read_bytes()


def test_a_zip_unpacks_with_modes_and_inside_links(tmp_path: Path) -> None:
    data = zipped(
        ("pkg-1/", b"", stat.S_IFDIR | 0o755),
        ("pkg-1/run.sh", b"#!/bin/sh\n", stat.S_IFREG | 0o755),
        ("pkg-1/src/a.c", b"int a;\n", stat.S_IFREG | 0o644),
        ("pkg-1/include/a.c", b"../src/a.c", stat.S_IFLNK | 0o777),
    )
    unpack(data, tmp_path / "out")
    out = tmp_path / "out"
    assert os.access(out / "run.sh", os.X_OK) and not os.access(out / "src" / "a.c", os.X_OK)
    assert (
        os.readlink(out / "include" / "a.c") == "../src/a.c"
        and (out / "include" / "a.c").read_text() == "int a;\n"
    )


def test_strip_is_automatic_explicit_or_off(tmp_path: Path) -> None:
    two_tops = tarball(("a/x", b"1", None), ("b/y", b"2", None))
    unpack(two_tops, tmp_path / "two")
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["a", "b"]
    one_top = tarball(("pkg/", None, None), ("pkg/setup.py", b"s", None))
    unpack(one_top, tmp_path / "kept", strip="")
    assert (tmp_path / "kept" / "pkg" / "setup.py").is_file()
    unpack(one_top, tmp_path / "named", strip="pkg")
    assert (tmp_path / "named" / "setup.py").is_file()
    with pytest.raises(
        BuildError,
        match=r"strips the archive's top-level folder 'other', but the archive holds pkg",
    ):
        unpack(one_top, tmp_path / "wrong", strip="other")
    lone_file = tarball(("setup.py", b"s", None))
    unpack(lone_file, tmp_path / "lone")
    assert (tmp_path / "lone" / "setup.py").is_file()


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ((("/etc/cron.d/x", b"x", None),), "has an absolute path"),
        ((("pkg/../../x", b"x", None),), "climbs out of the tree"),
        (
            (("pkg/link", b"", symlink("/etc/passwd")),),
            "is a link to '/etc/passwd', outside the tree",
        ),
        (
            (("pkg/sub/link", b"", symlink("../../../x")),),
            "is a link to '../../../x', outside the tree",
        ),
        (
            (("pkg/a", b"x", None), ("pkg/h", b"", hardlink("/etc/passwd"))),
            "is a hard link to '/etc/passwd', outside the tree",
        ),
        (
            (("pkg/a", b"x", None), ("pkg/h", b"", hardlink("pkg/../../a"))),
            "is a hard link to 'pkg/../../a', outside the tree",
        ),
        (
            (("pkg/a", b"x", None), ("pkg/h", b"", hardlink("pkg/missing"))),
            "not a file listed before it",
        ),
        ((("pkg/fifo", b"", of_type(tarfile.FIFOTYPE)),), "is a FIFO"),
        ((("pkg/null", b"", of_type(tarfile.CHRTYPE)),), "is a device"),
        ((("pkg/disk", b"", of_type(tarfile.BLKTYPE)),), "is a device"),
        ((("pkg/a", b"x", None), ("pkg/a", b"y", None)), "is listed twice"),
    ],
)
def test_hostile_tar_members_are_refused_before_writing(
    tmp_path: Path, members: tuple[TarMember, ...], message: str
) -> None:
    dest = tmp_path / "out"
    with pytest.raises(BuildError, match="nothing was unpacked") as info:
        unpack(tarball(*members), dest)
    assert message in info.value.message, info.value.message
    assert not dest.exists()


def test_links_through_links_and_writes_through_links_are_refused(tmp_path: Path) -> None:
    # "here" -> "." is inside and "up" -> "here/.." reads as inside, but really leads to the parent.
    chained = tarball(
        ("pkg/setup.py", b"s", None),
        ("pkg/here", b"", symlink(".")),
        ("pkg/up", b"", symlink("here/..")),
    )
    with pytest.raises(
        BuildError, match=r"'pkg/up' leads to .*outside the tree \(through another link\)"
    ):
        unpack(chained, tmp_path / "chained")
    assert not (tmp_path / "chained").exists()
    # a file written under an inside link would land wherever the link points: never followed
    (tmp_path / "victim").mkdir()
    through = tarball(
        ("pkg/sub/", None, None), ("pkg/l", b"", symlink("sub")), ("pkg/l/x.txt", b"x", None)
    )
    with pytest.raises(BuildError, match=r"'pkg/l/x.txt' lies under 'l', which is not a folder"):
        unpack(through, tmp_path / "through")
    assert not (tmp_path / "through").exists()


def test_hostile_zip_members_are_refused(tmp_path: Path) -> None:
    for members, message in [
        ((("pkg/../../x", b"x", stat.S_IFREG | 0o644),), "climbs out of the tree"),
        ((("pkg/l", b"/etc/passwd", stat.S_IFLNK | 0o777),), "outside the tree"),
        ((("pkg/fifo", b"", stat.S_IFIFO | 0o644),), "device, FIFO or socket"),
        ((("C:\\x", b"", stat.S_IFREG | 0o644),), "backslash"),
    ]:
        with pytest.raises(BuildError) as info:
            unpack(zipped(*members), tmp_path / "out")
        assert message in info.value.message, info.value.message
        assert not (tmp_path / "out").exists()


def test_member_count_and_unpacked_size_are_bounded(tmp_path: Path) -> None:
    many = tarball(*((f"pkg/f{i}", b"x", None) for i in range(11)))
    with pytest.raises(BuildError, match="has more than the 10 members allowed"):
        unpack(many, tmp_path / "many", limits=ArchiveLimits(members=10))
    big = tarball(("pkg/a", b"x" * 600, None), ("pkg/b", b"x" * 600, None))
    with pytest.raises(BuildError, match="unpacks to 1200 bytes, more than the 1000 allowed"):
        unpack(big, tmp_path / "big", limits=ArchiveLimits(total_bytes=1000))
    # a hard link copies bytes too: counted as written, not as declared
    linked = tarball(("pkg/a", b"x" * 600, None), ("pkg/b", b"", hardlink("pkg/a")))
    with pytest.raises(
        BuildError, match="unpacks to more bytes than allowed; the unpacked files were removed"
    ):
        unpack(linked, tmp_path / "linked", limits=ArchiveLimits(total_bytes=1000))
    assert not any((tmp_path / name).exists() for name in ("many", "big", "linked"))


def test_something_that_is_not_an_archive_is_named(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="not a readable tar or zip archive"):
        unpack(b"<html>login</html>" * 40, tmp_path / "out")


def test_the_shipped_kaolin_tag_recipe_builds_from_its_cited_tarball() -> None:
    """Only kaolin v0.18.0 has a published sha256 (conda-forge's feedstock); the others stay on
    git."""
    index = load_index(include_user=False)
    recipes = {r.name: r for p in index.packages for r in p.recipes}
    tag = recipes["kaolin-v0.18.0"]
    assert tag.archive == SourceArchive(
        url="https://github.com/NVIDIAGameWorks/kaolin/archive/refs/tags/v0.18.0.tar.gz",
        sha256="264132280c4713c9554b7c13a8bcad2c0af4da51105cf6ce06dbf01011748aa0",
    )
    assert "[kaolin-conda-forge]" in tag.source and not tag.submodules
    assert describe_source(tag).startswith("archive https://github.com/")
    assert (
        recipes["kaolin-master-d52da9f"].archive is None
        and recipes["pointnet2_ops-b5ceb6d"].archive is None
    )
