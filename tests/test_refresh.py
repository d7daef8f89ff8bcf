"""index refresh on the bench: a fake PyPI (JSON API, PEP 658 files, wheels served by range) and a
fake PyTorch index page; the overlay it writes reads back through the index loader."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.version import Version
from test_net_support import (
    BenchHandler,
    BenchServer,
    Cas,
    ClientFactory,
    SystemTrust,
    closed_port,
    ranged,
)

from cuda_resolve.errors import NetworkError, UsageError
from cuda_resolve.index.load import load_index
from cuda_resolve.index.model import Index
from cuda_resolve.refresh import (
    cuda_pin,
    derive_torch,
    parse_index_page,
    python_versions,
    refresh_kaolin,
    refresh_torch,
    variant_from_version_py,
)

pytest_plugins = ["test_net_support"]

FILLER = 400_000  # stands in for libtorch_cuda.so: a reader must not fetch it


def make_wheel(
    version: str, *, requires_dist: list[str], requires_python: str, cuda: str | None
) -> tuple[bytes, str]:
    metadata = (
        "\n".join(
            [
                "Metadata-Version: 2.1",
                "Name: torch",
                f"Version: {version}",
                f"Requires-Python: {requires_python}",
            ]
            + [f"Requires-Dist: {line}" for line in requires_dist]
        )
        + "\n\nTensors and dynamic neural networks\n"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("torch/__init__.py", "")
        archive.writestr(
            zipfile.ZipInfo("torch/lib/libtorch_cuda.so"),
            os.urandom(FILLER),
            compress_type=zipfile.ZIP_STORED,
        )
        archive.writestr(
            "torch/version.py", f"__version__ = '{version}'\ncuda = {cuda!r}\nhip = None\n"
        )
        archive.writestr(f"torch-{version}.dist-info/METADATA", metadata)
    return buffer.getvalue(), metadata


def static_text(text: str) -> Callable[[BenchHandler], None]:
    def route(handler: BenchHandler) -> None:
        handler.reply(200, text.encode(), content_type="text/plain")

    return route


@dataclass
class FakePypi:
    server: BenchServer
    json_url: str
    page_url: str
    wheel_bytes_sent: list[int] = field(default_factory=list)
    wheel_sizes: dict[str, int] = field(default_factory=dict)


PIN_124 = (
    'nvidia-cuda-runtime-cu12==12.4.127; platform_system == "Linux" and '
    'platform_machine == "x86_64"'
)
PIN_132 = 'cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"'

# (version, filename tail, requires_dist, cuda in version.py, serve PEP 658 file)
WHEELS = [
    ("1.8.0", "cp36-cp36m-manylinux1_x86_64", [], "10.2", True),
    ("1.8.0", "cp37-cp37m-manylinux1_x86_64", [], "10.2", True),
    ("1.8.0", "cp38-cp38-manylinux1_x86_64", [], "10.2", True),
    ("1.8.0", "cp39-cp39-manylinux1_x86_64", [], "10.2", True),
    ("1.8.0", "cp38-cp38-manylinux2014_aarch64", [], None, False),
    ("1.8.0", "cp38-cp38-win_amd64", [], None, False),
    ("2.5.1", "cp311-cp311-manylinux1_x86_64", ["filelock", PIN_124], "12.4", True),
    ("2.5.1", "cp312-cp312-manylinux1_x86_64", ["filelock", PIN_124], "12.4", True),
    ("2.5.1", "cp313-cp313t-manylinux1_x86_64", ["filelock", PIN_124], "12.4", True),
    ("2.5.1", "cp312-cp312-manylinux2014_aarch64", ["filelock", PIN_124], None, False),
    ("2.16.0", "cp312-cp312-manylinux_2_28_x86_64", [PIN_132, "sympy>=1.13"], "13.2", False),
    ("2.16.0", "cp312-cp312-manylinux_2_28_aarch64", [PIN_132], "13.2", False),
    ("2.17.0rc1", "cp312-cp312-manylinux_2_28_x86_64", [PIN_132], "13.2", False),
]
REQUIRES = {"1.8.0": ">=3.6.2", "2.5.1": ">=3.8.0", "2.16.0": ">=3.11", "2.17.0rc1": ">=3.11"}
PAGE = (
    "\n".join(
        "<a "
        f'href="/whl/{v}/torch-2.5.1%2B{v}-cp311-cp311-linux_x86_64.whl#sha256=00">torch-2.5.1+{v}</a><br/>'
        for v in ("cpu", "cu121", "cu124", "cu126")
    )
    + '\n<a href="/whl/cu124/torch-2.5.1%2Bcu124-cp311-cp311-win_amd64.whl">win</a>\n'
)


@pytest.fixture
def trusted(cas: Cas, system_trust: SystemTrust) -> None:
    system_trust(cas.origin)


@pytest.fixture
def pypi(origin: BenchServer, trusted: None) -> FakePypi:
    fake = FakePypi(
        server=origin, json_url=origin.url("/pypi/torch/json"), page_url=origin.url("/whl/torch/")
    )
    releases: dict[str, list[dict[str, object]]] = {}
    for version, tail, requires, cuda, pep658 in WHEELS:
        filename = f"torch-{version}-{tail}.whl"
        body, metadata = make_wheel(
            version, requires_dist=requires, requires_python=REQUIRES[version], cuda=cuda
        )
        origin.routes[f"/packages/{filename}"] = ranged(body, fake.wheel_bytes_sent)
        fake.wheel_sizes[filename] = len(body)
        record: dict[str, object] = {
            "filename": filename,
            "url": f"../../packages/{filename}",
            "requires_python": REQUIRES[version],
            "size": len(body),
            "yanked": False,
            "digests": {"sha256": hashlib.sha256(body).hexdigest()},
        }
        if pep658:
            origin.routes[f"/packages/{filename}.metadata"] = static_text(metadata)
            record["core-metadata"] = {"sha256": hashlib.sha256(metadata.encode()).hexdigest()}
        releases.setdefault(version, []).append(record)
    document = json.dumps({"info": {"name": "torch"}, "releases": releases}).encode()
    origin.routes["/pypi/torch/json"] = lambda handler: handler.reply(
        200, document, content_type="application/json"
    )
    origin.routes["/whl/torch/"] = lambda handler: handler.reply(
        200, PAGE.encode(), content_type="text/html"
    )
    return fake


@pytest.fixture(scope="module")
def shipped() -> Index:
    return load_index(include_user=False)


# -- pure helpers -----------------------------------------------------------------------------


def test_cuda_pin_reads_runtime_pins_under_markers() -> None:
    assert cuda_pin([PIN_124], platform="linux_x86_64", python="3.11") == (
        "cu124",
        "12.4.127",
        PIN_124,
    )
    assert cuda_pin([PIN_124], platform="linux_aarch64", python="3.11") is None
    assert cuda_pin([PIN_132], platform="linux_aarch64", python="3.12") == (
        "cu132",
        "13.2.2",
        PIN_132,
    )
    legacy = 'nvidia-cuda-runtime-cu11 (==11.8.89) ; platform_system == "Linux"'
    assert cuda_pin([legacy], platform="linux_x86_64", python="3.10") == (
        "cu118",
        "11.8.89",
        legacy,
    )
    assert (
        cuda_pin(
            ["nvidia-cuda-runtime-cu12>=12.1", "nvidia-cudnn-cu12==9.1.0.70"],
            platform="linux_x86_64",
            python="3.11",
        )
        is None
    )


def test_version_py_both_spellings() -> None:
    assert variant_from_version_py("cuda = '10.2'\n") == "cu102"
    assert (
        variant_from_version_py("from typing import Optional\ncuda: Optional[str] = '13.2'\n")
        == "cu132"
    )
    assert variant_from_version_py("cuda = None\n") == "cpu"
    assert variant_from_version_py("def broken(:\n") is None
    assert variant_from_version_py("hip = '6.2'\n") is None


def test_python_versions_from_tags() -> None:
    names = [
        "torch-2.15.0-cp314-cp314t-manylinux_2_28_x86_64.whl",
        "torch-2.15.0-cp311-cp311-win_amd64.whl",
        "torch-1.8.0-cp36-cp36m-manylinux1_x86_64.whl",
        "torch-2.5.1-cp39-none-macosx_11_0_arm64.whl",
        "not-a-wheel.tar.gz",
    ]
    assert python_versions(names) == ("3.6", "3.9", "3.11", "3.14t")


def test_index_page_variants() -> None:
    assert parse_index_page(PAGE) == {Version("2.5.1"): ("cpu", "cu121", "cu124", "cu126")}


# -- deriving ---------------------------------------------------------------------------------


def test_facts_come_from_metadata_pins_and_version_py_without_downloading_wheels(
    pypi: FakePypi, make_client: ClientFactory
) -> None:
    facts, unreachable = derive_torch(
        make_client(),
        versions=["1.8.0", "2.5.1", "2.16.0"],
        pypi_json=pypi.json_url,
        pytorch_page=None,
    )
    assert unreachable == ()
    by_version = {str(f.version): f for f in facts}
    old = by_version["1.8.0"]
    assert (old.pypi_default, old.pypi_cuda_runtime, old.pypi_linux_aarch64) == (
        "cu102",
        "bundled",
        "cpu",
    )
    assert "torch/version.py" in old.readings[0].evidence
    mid = by_version["2.5.1"]
    assert mid.python == ("3.11", "3.12", "3.13t")
    assert (mid.pypi_default, mid.pypi_cuda_runtime, mid.pypi_linux_aarch64) == (
        "cu124",
        "12.4.127",
        "cpu",
    )
    x86, arm = mid.readings
    assert x86.evidence.startswith("PEP 658 metadata file") and "12.4.127" in x86.evidence
    assert arm.evidence.startswith("METADATA read from the wheel by range requests")
    new = by_version["2.16.0"]
    assert (new.pypi_default, new.pypi_cuda_runtime, new.pypi_linux_aarch64) == (
        "cu132",
        "13.2.2",
        "cu132",
    )
    assert new.requires_python == ">=3.11" and new.problems == ()
    assert sum(pypi.wheel_bytes_sent) < sum(pypi.wheel_sizes.values()) // 4  # never whole wheels


def test_default_selection_skips_pre_releases(pypi: FakePypi, make_client: ClientFactory) -> None:
    facts, _ = derive_torch(make_client(), pypi_json=pypi.json_url, pytorch_page=None)
    assert [str(f.version) for f in facts] == ["1.8.0", "2.5.1", "2.16.0"]


def test_unknown_version_is_a_usage_error(pypi: FakePypi, make_client: ClientFactory) -> None:
    with pytest.raises(UsageError, match=r"torch 2\.5\.9 is not on PyPI") as info:
        derive_torch(make_client(), versions=["2.5.9"], pypi_json=pypi.json_url, pytorch_page=None)
    assert info.value.hint is not None and "2.5.1" in info.value.hint


def test_unreachable_pytorch_index_is_reported_and_the_rest_goes_on(
    pypi: FakePypi, make_client: ClientFactory
) -> None:
    dead = f"https://127.0.0.1:{closed_port()}/whl/torch/"
    facts, unreachable = derive_torch(
        make_client(), versions=["2.5.1"], pypi_json=pypi.json_url, pytorch_page=dead
    )
    assert [u.url for u in unreachable] == [dead]
    assert "refused" in unreachable[0].error and dead in unreachable[0].error
    assert facts[0].pypi_default == "cu124" and facts[0].index_variants is None


def test_unreachable_pypi_is_an_error_with_no_fallback(
    clean_env: None, make_client: ClientFactory
) -> None:
    dead = f"https://127.0.0.1:{closed_port()}/pypi/torch/json"
    with pytest.raises(NetworkError) as info:
        derive_torch(make_client(), pypi_json=dead, pytorch_page=None)
    assert dead in str(info.value)


def test_pep658_file_with_a_wrong_declared_hash_is_refused(
    pypi: FakePypi, make_client: ClientFactory
) -> None:
    pypi.server.routes["/packages/torch-1.8.0-cp39-cp39-manylinux1_x86_64.whl.metadata"] = (
        lambda handler: handler.reply(200, b"Metadata-Version: 2.1\nName: torch\nVersion: 6.6.6\n")
    )
    facts, _ = derive_torch(
        make_client(), versions=["1.8.0"], pypi_json=pypi.json_url, pytorch_page=None
    )
    assert facts[0].pypi_default is None
    assert any("sha256 mismatch" in p for p in facts[0].problems)


# -- comparing and writing the overlay --------------------------------------------------------


def test_refresh_lists_changes_and_writes_only_differing_entries(
    pypi: FakePypi, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    out = tmp_path / "overlay"
    result = refresh_torch(
        make_client(),
        index=shipped,
        shipped=shipped,
        output_dir=out,
        versions=["1.8.0", "2.5.1", "2.16.0"],
        pypi_json=pypi.json_url,
        pytorch_page=None,
        today="2026-12-02",
    )
    described = [c.describe() for c in result.changes]
    assert "torch 2.5.1: python: 3.9, 3.10, 3.11, 3.12, 3.13 -> 3.11, 3.12, 3.13t" in described
    assert any(d.startswith("torch 2.16.0: new release (PyPI default cu132") for d in described)
    assert not any(d.startswith("torch 1.8.0") for d in described)  # agrees with the shipped index
    assert result.overlay == out / "torch.toml"
    assert result.overlay_releases == ("2.5.1", "2.16.0")

    merged = load_index([out], include_user=False)
    new = merged.torch_release("2.16.0")
    assert new is not None and new.version == Version("2.16.0")
    assert [(v.name, v.pypi_default, v.unverified) for v in new.variants] == [
        ("cu132", True, ("arch_list",))
    ]
    assert new.pypi_cuda_runtime == "13.2.2" and new.pypi_linux_aarch64 == "cu132"
    refreshed, before = merged.torch_release("2.5.1"), shipped.torch_release("2.5.1")
    assert refreshed is not None and before is not None
    assert refreshed.python == ("3.11", "3.12", "3.13t")
    assert {v.name: v.arch_list for v in refreshed.variants} == {
        v.name: v.arch_list for v in before.variants
    }
    assert refreshed.torchvision == before.torchvision and refreshed.cxx11_abi == before.cxx11_abi
    assert "[cuda-resolve-refresh] 2026-12-02" in refreshed.source
    assert merged.origin("torch 2.5.1") == str(out / "torch.toml")
    assert merged.origin("torch 1.8.0") != str(out / "torch.toml")

    # again, now against the index with the overlay: nothing new, the overlay kept
    again = refresh_torch(
        make_client(),
        index=merged,
        shipped=shipped,
        output_dir=out,
        versions=["2.5.1"],
        pypi_json=pypi.json_url,
        pytorch_page=None,
        today="2026-12-03",
    )
    assert again.changes == ()
    assert again.overlay_releases == ("2.5.1", "2.16.0")  # 2.16.0 kept from the previous run
    assert load_index([out], include_user=False).torch_release("2.16.0") is not None


def test_variants_follow_the_pytorch_index_page_when_reachable(
    pypi: FakePypi, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    result = refresh_torch(
        make_client(),
        index=shipped,
        shipped=shipped,
        output_dir=tmp_path / "o",
        versions=["2.5.1"],
        pypi_json=pypi.json_url,
        pytorch_page=pypi.page_url,
    )
    variants = next(c for c in result.changes if c.key == "variants")
    assert (variants.old, variants.new) == ("cpu cu118 cu121 cu124", "cpu cu121 cu124 cu126")
    release = load_index([tmp_path / "o"], include_user=False).torch_release("2.5.1")
    assert release is not None
    by_name = {v.name: v for v in release.variants}
    assert by_name["cu126"].unverified == ("arch_list",) and by_name["cu126"].arch_list == ()
    assert by_name["cu121"].unverified == ()  # its existence is confirmed by the page now
    assert by_name["cu124"].pypi_default


def test_dry_run_writes_nothing(
    pypi: FakePypi, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    result = refresh_torch(
        make_client(),
        index=shipped,
        shipped=shipped,
        output_dir=tmp_path / "o",
        versions=["2.16.0"],
        pypi_json=pypi.json_url,
        pytorch_page=None,
        dry_run=True,
    )
    assert result.overlay is None and "[[torch]]" in result.document
    assert not (tmp_path / "o").exists()


def test_nothing_to_write_when_everything_agrees(
    pypi: FakePypi, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    result = refresh_torch(
        make_client(),
        index=shipped,
        shipped=shipped,
        output_dir=tmp_path / "o",
        versions=["1.8.0"],
        pypi_json=pypi.json_url,
        pytorch_page=None,
    )
    assert result.changes == () and result.overlay is None and result.overlay_releases == ()
    assert not (tmp_path / "o" / "torch.toml").exists()


def test_a_failed_reading_keeps_the_current_value(
    pypi: FakePypi, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    def gone(handler: BenchHandler) -> None:
        handler.reply(500, b"storage error")

    pypi.server.routes["/packages/torch-2.5.1-cp312-cp312-manylinux2014_aarch64.whl"] = gone
    result = refresh_torch(
        make_client(),
        index=shipped,
        shipped=shipped,
        output_dir=tmp_path / "o",
        versions=["2.5.1"],
        pypi_json=pypi.json_url,
        pytorch_page=None,
    )
    assert any("HTTP 500" in p for p in result.facts[0].problems)
    assert not any(c.key == "pypi_linux_aarch64" for c in result.changes)


def test_refresh_fetch_errors_name_the_wheel(pypi: FakePypi, make_client: ClientFactory) -> None:
    pypi.server.routes.pop("/packages/torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    facts, _ = derive_torch(
        make_client(), versions=["2.16.0"], pypi_json=pypi.json_url, pytorch_page=None
    )
    problem = facts[0].problems[0]
    assert problem.startswith("torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl: HTTP 404")
    assert "/packages/torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl" in problem


# -- the command line -------------------------------------------------------------------------


def _run(argv: list[str], client: object) -> int:
    import argparse

    from cuda_resolve.cli.index_refresh import handle_refresh, register_refresh

    parser = argparse.ArgumentParser(prog="cuda-resolve index")
    register_refresh(parser.add_subparsers(dest="index_command"))
    args = parser.parse_args(argv)
    return handle_refresh(args, client=client)


@pytest.fixture
def mirrored_client(
    pypi: FakePypi, make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> object:
    """Canonical URLs in, the bench out: PyPI mirrored on the bench, the PyTorch index dead."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CUDA_RESOLVE_INDEX_PATH", raising=False)
    dead = f"https://127.0.0.1:{closed_port()}/"

    def rewrite(url: str) -> str:
        return url.replace("https://pypi.org/", pypi.server.url("/")).replace(
            "https://download.pytorch.org/", dead
        )

    return make_client(rewrite=rewrite)


def test_cli_prints_changes_and_unreachable_indexes_and_writes_the_overlay(
    mirrored_client: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "overlay"
    assert (
        _run(
            ["refresh", "torch", "--versions", "2.5.1", "2.16.0", "--output", str(out)],
            mirrored_client,
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "read 2 torch releases" in text
    assert "unreachable: https://download.pytorch.org/whl/torch/:" in text and "refused" in text
    assert "(continuing with what was reachable)" in text
    assert "torch 2.5.1: python: 3.9, 3.10, 3.11, 3.12, 3.13 -> 3.11, 3.12, 3.13t" in text
    assert "torch 2.16.0: new release" in text
    assert f"wrote {out / 'torch.toml'}" in text
    assert load_index([out], include_user=False).torch_release("2.16.0") is not None


def test_cli_json_and_dry_run(
    mirrored_client: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "overlay"
    assert (
        _run(
            ["refresh", "--versions", "2.16.0", "--output", str(out), "--dry-run", "--json"],
            mirrored_client,
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["read"] == ["2.16.0"] and data["overlay"] is None and data["dry_run"] is True
    assert data["changes"][0]["key"] == "release" and "[[torch]]" in data["document"]
    assert data["unreachable"][0]["url"] == "https://download.pytorch.org/whl/torch/"
    assert not out.exists()


# -- kaolin -----------------------------------------------------------------------------------

KAOLIN_S3 = "https://nvidia-kaolin.s3.us-east-2.amazonaws.com/"


def kaolin_page(torch: str, nodot: str, versions: dict[str, list[str]]) -> bytes:
    links = [
        "<a "
        f'href="torch-{torch}_cu{nodot}/kaolin-{kaolin}-{tag}-{tag}-linux_x86_64.whl">kaolin-{kaolin}</a><br>'
        for kaolin, tags in versions.items()
        for tag in tags
    ]
    return ("<html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode()


def _serve(body: bytes) -> Callable[[BenchHandler], None]:
    def route(handler: BenchHandler) -> None:
        handler.reply(200, body, content_type="text/html")

    return route


def test_kaolin_rows_are_checked_against_their_find_links_pages(
    origin: BenchServer, trusted: None, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    entry = next(w for w in shipped.package("kaolin").wheels if str(w.version) == "0.12.0")  # type: ignore[union-attr]
    for torch, variants in entry.torch:
        for variant in variants:
            if (torch, variant) == ("1.11.0", "cu102"):
                continue  # no page: 404
            versions = {"0.12.0": ["cp37", "cp38", "cp39"]}
            if (torch, variant) == ("1.12.1", "cu116"):
                versions["0.13.0"] = ["cp38"]  # another release on the same page
            origin.routes[f"/kaolin/torch-{torch}_{variant}.html"] = _serve(
                kaolin_page(torch, variant[2:], versions)
            )
    client = make_client(rewrite=lambda url: url.replace(KAOLIN_S3, origin.url("/kaolin/")))
    from cuda_resolve.refresh import refresh_kaolin

    out = tmp_path / "overlay"
    result = refresh_kaolin(
        client,
        index=shipped,
        shipped=shipped,
        output_dir=out,
        versions=["0.12.0"],
        today="2026-12-02",
    )
    assert result.unreachable == ()
    assert [c.describe() for c in result.changes] == [
        "kaolin 0.12.0: torch: "
        + "; ".join(f"{t}: {' '.join(v)}" for t, v in entry.torch)
        + " -> "
        + "; ".join(
            f"{t}: {' '.join(v)}" if t != "1.11.0" else "1.11.0: cu113" for t, v in entry.torch
        )
    ]
    assert result.overlay == out / "packages" / "kaolin.toml"
    merged = load_index([out], include_user=False).package("kaolin")
    assert merged is not None
    refreshed = next(w for w in merged.wheels if str(w.version) == "0.12.0")
    assert dict(refreshed.torch)["1.11.0"] == ("cu113",)
    assert refreshed.unverified == ()  # the rows are read from the pages now
    assert merged.find_links == shipped.package("kaolin").find_links  # type: ignore[union-attr]
    assert len(merged.wheels) == len(shipped.package("kaolin").wheels)  # type: ignore[union-attr]


def test_kaolin_host_unreachable_is_reported_once_and_changes_nothing(
    clean_env: None, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    dead = f"https://127.0.0.1:{closed_port()}/"
    client = make_client(rewrite=lambda url: url.replace(KAOLIN_S3, dead))
    from cuda_resolve.refresh import refresh_kaolin

    result = refresh_kaolin(
        client, index=shipped, shipped=shipped, output_dir=tmp_path / "o", versions=["0.17.0"]
    )
    assert len(result.unreachable) == 1
    assert "refused" in result.unreachable[0].error and "other pages" in result.unreachable[0].error
    assert result.unreachable[0].url.startswith(KAOLIN_S3)
    assert result.changes == () and result.overlay is None
    assert result.facts[0].unread  # the rows were not confirmed, and not changed either


def test_a_release_without_an_aarch64_wheel_clears_the_aarch64_variant(shipped: Index) -> None:
    """Real finding on PyPI: torch 1.9.1 has no Linux aarch64 wheel (1.9.0 has a CPU one)."""
    from cuda_resolve.refresh import ReleaseFacts, apply_facts, compare

    current = shipped.torch_release("1.9.1")
    assert current is not None
    facts = ReleaseFacts(
        version=Version("1.9.1"),
        python=current.python,
        requires_python=">=3.6.2",
        pypi_default="cu102",
        pypi_cuda_runtime="bundled",
        pypi_linux_aarch64=None,
        has_aarch64=False,
        index_variants=None,
    )
    updated = apply_facts(current, facts, today="2026-12-02")
    assert updated.pypi_linux_aarch64 is None
    # The shipped index now records that finding (a per-release override), so there is no change ...
    assert current.pypi_linux_aarch64 is None
    assert compare(shipped, [updated]) == ()
    # ... while the same reading against a release that claims an aarch64 wheel is one.
    claims = shipped.torch_release("1.9.0")
    assert claims is not None and claims.pypi_linux_aarch64 == "cpu"
    refuted = apply_facts(
        claims, dataclasses.replace(facts, version=Version("1.9.0")), today="2026-12-02"
    )
    assert [c.describe() for c in compare(shipped, [refuted])] == [
        "torch 1.9.0: pypi_linux_aarch64: cpu -> (none)"
    ]
    # a reading that failed is not evidence: the current value stays
    failed = apply_facts(
        current,
        ReleaseFacts(
            version=Version("1.9.1"),
            python=(),
            requires_python=None,
            pypi_default=None,
            pypi_cuda_runtime=None,
            pypi_linux_aarch64=None,
            has_aarch64=True,
            index_variants=None,
            problems=("HTTP 503",),
        ),
        today="2026-12-02",
    )
    assert compare(shipped, [failed]) == ()


def test_cli_kaolin_with_every_page_unreachable_says_nothing_was_checked(
    clean_env: None,
    make_client: ClientFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """'no changes: the index agrees' would be false comfort when no page could be read."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CUDA_RESOLVE_INDEX_PATH", raising=False)
    dead = f"https://127.0.0.1:{closed_port()}/"
    client = make_client(rewrite=lambda url: url.replace(KAOLIN_S3, dead))
    code = _run(
        ["refresh", "kaolin", "--versions", "0.17.0", "--output", str(tmp_path / "o")], client
    )
    text = capsys.readouterr().out
    assert code == 1
    assert "agrees" not in text
    assert "not checked: kaolin 0.17.0" in text
    code = _run(
        ["refresh", "kaolin", "--versions", "0.17.0", "--output", str(tmp_path / "o"), "--json"],
        client,
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["unchecked"] == ["0.17.0"]


# -- answers of the wrong shape, and reuse (issue 8) -------------------------------------------

LOGIN = (
    b"<html><body><form action='/login'>Welcome to CampusNet: please log in</form></body></html>"
)


def _login(handler: BenchHandler) -> None:
    handler.reply(200, LOGIN, content_type="text/html")


class _AllRoutes(dict[str, Callable[[BenchHandler], None]]):
    """Routes that answer every path with one handler."""

    def __init__(self, route: Callable[[BenchHandler], None]) -> None:
        super().__init__()
        self._route = route

    def get(self, key: str, default: object = None) -> Callable[[BenchHandler], None]:
        return self._route


def test_a_captive_portal_answering_for_the_pytorch_page_fails_and_writes_nothing(
    pypi: FakePypi, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    pypi.server.routes["/whl/torch/"] = _login
    out = tmp_path / "overlay"
    with pytest.raises(NetworkError) as info:
        refresh_torch(
            make_client(),
            index=shipped,
            shipped=shipped,
            output_dir=out,
            versions=["2.5.1"],
            pypi_json=pypi.json_url,
            pytorch_page=pypi.page_url,
            today="2026-12-02",
        )
    assert pypi.page_url in str(info.value) and "torch wheel" in str(info.value)
    assert not out.exists()


def test_a_captive_portal_answering_for_pypi_fails_through_the_cli(
    pypi: FakePypi,
    make_client: ClientFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cuda_resolve.cli.index_refresh as cli
    from cuda_resolve.cli import main

    pypi.server.routes["/pypi/torch/json"] = _login
    client = make_client(rewrite=lambda url: url.replace("https://pypi.org/", pypi.server.url("/")))
    monkeypatch.setattr(cli, "_client", lambda args: client)
    out = tmp_path / "overlay"
    code = main(["index", "refresh", "torch", "--versions", "2.5.1", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "expected JSON" in err and "/pypi/torch/json" in err
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize(
    ("document", "where"),
    [
        (b"[1, 2]", "a JSON list"),
        (b'{"info": {"name": "torch"}}', "without a 'releases' object"),
        (b'{"releases": {"2.5.1": {"a": 1}}}', "releases['2.5.1'] is not a list"),
        (b'{"releases": {"2.5.1": ["x"]}}', "releases['2.5.1'][0] is not an object"),
        (
            b'{"releases": {"2.5.1": [{"filename": 3, "url": "u"}]}}',
            "releases['2.5.1'][0].filename",
        ),
        (
            b'{"releases": {"2.5.1": [{"filename": "torch-2.5.1-cp311-cp311-linux_x86_64.whl", '
            b'"url": "ftp://x/t.whl"}]}}',
            "not an https URL",
        ),
        (b'{"info": {"name": "numpy"}, "releases": {}}', "the project 'numpy'"),
        (b"[" * 100_000, "expected JSON"),
    ],
)
def test_malformed_pypi_json_is_an_error_naming_the_url(
    pypi: FakePypi, make_client: ClientFactory, document: bytes, where: str
) -> None:
    pypi.server.routes["/pypi/torch/json"] = lambda handler: handler.reply(
        200, document, content_type="application/json"
    )
    with pytest.raises(NetworkError) as info:
        derive_torch(make_client(), versions=["2.5.1"], pypi_json=pypi.json_url, pytorch_page=None)
    assert where in str(info.value) and pypi.json_url in str(info.value)


def test_a_metadata_file_that_is_not_torch_metadata_is_refused() -> None:
    from cuda_resolve.refresh.torch import _checked_metadata

    with pytest.raises(NetworkError, match="core metadata of a torch wheel"):
        _checked_metadata(LOGIN.decode(), "https://pypi.example/x.whl.metadata")
    with pytest.raises(NetworkError, match="Name: numpy"):
        _checked_metadata(
            "Metadata-Version: 2.1\nName: numpy\n", "https://pypi.example/x.whl.metadata"
        )


def test_a_release_missing_from_the_pytorch_page_keeps_its_variants(
    pypi: FakePypi, make_client: ClientFactory
) -> None:
    facts, _ = derive_torch(
        make_client(),
        versions=["1.8.0", "2.5.1"],
        pypi_json=pypi.json_url,
        pytorch_page=pypi.page_url,
    )
    by_version = {str(f.version): f for f in facts}
    assert by_version["2.5.1"].index_variants == ("cpu", "cu121", "cu124", "cu126")
    assert by_version["1.8.0"].index_variants is None  # not on the page: unknown, not "none"


def test_kaolin_page_answered_by_a_login_page_is_an_error(
    origin: BenchServer, trusted: None, make_client: ClientFactory, shipped: Index, tmp_path: Path
) -> None:
    origin.routes = _AllRoutes(_login)  # every page is the portal's login page
    client = make_client(rewrite=lambda url: url.replace(KAOLIN_S3, origin.url("/")))
    with pytest.raises(NetworkError, match="find-links page"):
        refresh_kaolin(
            client, index=shipped, shipped=shipped, output_dir=tmp_path / "o", versions=["0.12.0"]
        )
    assert not (tmp_path / "o").exists()


def test_a_second_refresh_reuses_what_it_read(
    pypi: FakePypi, make_client: ClientFactory, tmp_path: Path
) -> None:
    from cuda_resolve.refresh import ReadingCache

    versions = ["1.8.0", "2.5.1", "2.16.0"]
    first, _ = derive_torch(
        make_client(),
        versions=versions,
        pypi_json=pypi.json_url,
        pytorch_page=pypi.page_url,
        readings=ReadingCache(tmp_path / "readings.json"),
    )
    seen = len(pypi.server.seen)
    second, _ = derive_torch(
        make_client(),
        versions=versions,
        pypi_json=pypi.json_url,
        pytorch_page=pypi.page_url,
        readings=ReadingCache(tmp_path / "readings.json"),
    )
    again = [s.path for s in pypi.server.seen[seen:]]
    assert again == ["/pypi/torch/json", "/whl/torch/"]  # no metadata file, no wheel range
    assert [
        (f.pypi_default, f.pypi_cuda_runtime, f.pypi_linux_aarch64, f.requires_python)
        for f in second
    ] == [
        (f.pypi_default, f.pypi_cuda_runtime, f.pypi_linux_aarch64, f.requires_python)
        for f in first
    ]


def test_the_json_document_is_revalidated_with_its_etag(
    pypi: FakePypi, make_client: ClientFactory
) -> None:
    document = json.dumps({"info": {"name": "torch"}, "releases": {}}).encode()

    def with_etag(handler: BenchHandler) -> None:
        if handler.headers.get("If-None-Match") == '"v1"':
            handler.reply(304, b"", headers={"ETag": '"v1"'})
        else:
            handler.reply(200, document, content_type="application/json", headers={"ETag": '"v1"'})

    pypi.server.routes["/pypi/torch/json"] = with_etag
    client = make_client()
    derive_torch(client, pypi_json=pypi.json_url, pytorch_page=None)
    derive_torch(client, pypi_json=pypi.json_url, pytorch_page=None)
    asked = pypi.server.requests_to("/pypi/torch/json")
    assert len(asked) == 2 and asked[1].headers.get("If-None-Match") == '"v1"'
