"""A prebuilt extension wheel the plan takes (as kaolin's from NVIDIA's find-links pages) becomes a
``.conda`` package in the local channel, like a built one: fetched over loopback HTTPS through
cuda-resolve's client (system trust store), checked against the sha256 its page lists, packaged
with the same pins (the environment's exact torch record, ``__cuda``), and solved and installed
by py-rattler. A page whose hash differs, or that lists none, leaves the channel unchanged.

The served index is a fixture package, ``wheelext``, named and laid out as kaolin's: a
per-(torch, CUDA) find-links page and a wheel tagged for the running Python
(``cp311-cp311-linux_x86_64`` here).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _torch_env import standin_torch_venv
from test_net_support import BenchHandler, BenchServer, Cas, ClientFactory, SystemTrust

from cuda_resolve.conda.channel import LocalChannel
from cuda_resolve.conda.convert import build_into_channel
from cuda_resolve.conda.package import read_package_info
from cuda_resolve.errors import CudaResolveError
from cuda_resolve.install.options import InstallOptions

rattler = pytest.importorskip("rattler", reason="py-rattler (the test extra) checks the channel")
pytest.importorskip(
    "conda_package_handling", reason="conda-package-handling (the test extra) writes .conda files"
)

pytest_plugins = ["test_net_support"]

# the stand-in torch's venv runs this Python
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
EXTENSION = f"_C.cpython-{sys.version_info.major}{sys.version_info.minor}-x86_64-linux-gnu.so"
WHEEL_NAME = f"wheelext-0.2.0-{TAG}-{TAG}-linux_x86_64.whl"
SO_BYTES = b"\x7fELF stands in for wheelext's compiled extension"


def fixture_wheel() -> bytes:
    """A prebuilt extension wheel as NVIDIA's kaolin wheels are: plain linux_x86_64, no local
    label."""
    import io

    dist = "wheelext-0.2.0.dist-info"
    files = {
        "wheelext/__init__.py": b"from . import _C\n",
        f"wheelext/{EXTENSION}": SO_BYTES,
        f"{dist}/METADATA": (
            b"Metadata-Version: 2.1\nName: wheelext\nVersion: 0.2.0\nRequires-Dist: "
            b"torch\nRequires-Dist: scipy\n"
        ),
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: "
            f"{TAG}-{TAG}-linux_x86_64\n"
        ).encode(),
        f"{dist}/RECORD": b"",
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@dataclass
class WheelIndex:
    """The served find-links page and wheel, and the cuda-resolve configuration naming them."""

    page_url: str
    wheel_url: str
    wheel: bytes
    config: Path
    set_page: Callable[[str], None]


def index_overlay(folder: Path, base_url: str) -> Path:
    """An index overlay with ``wheelext``: kaolin's find-links and wheel-URL patterns on
    ``base_url``."""
    packages = folder / "packages"
    packages.mkdir(parents=True)
    fixture = (
        "cuda-resolve's tests: a prebuilt extension wheel on a find-links page, laid out as "
        "kaolin's"
    )
    wheel_url = (
        f"{base_url}/torch-{{torch}}_cu{{cuda_nodot}}/"
        "wheelext-{version}-{python_tag}-{abi_tag}-{platform}.whl"
    )
    (packages / "wheelext.toml").write_text(f'''format = 1

[sources]
fixture = "{fixture}"

[package]
name = "wheelext"
import_name = "wheelext"
description = "test fixture: prebuilt wheels per torch and CUDA"
find_links = "{base_url}/torch-{{torch}}_cu{{cuda_nodot}}.html"
wheel_url = "{wheel_url}"
source = "[fixture]"

[[wheels]]
version = "0.2.0"
python = ["3.11", "3.12"]
platforms = ["linux_x86_64"]
torch = [{{ versions = ["2.14.1", "2.11.0"], variants = ["cu130"] }}]
source = "[fixture]"
''')
    return folder


def serve_wheel_index(origin: BenchServer, folder: Path) -> WheelIndex:
    """Serve ``wheelext`` for torch 2.14.1+cu130 on ``origin`` and write a cuda-resolve config
    whose index overlay names it; the page lists the wheel with its sha256."""
    wheel = fixture_wheel()
    wheel_path = f"/torch-2.14.1_cu130/{WHEEL_NAME}"
    page: dict[str, str] = {
        "html": (
            "<html><body><a "
            f'href="torch-2.14.1_cu130/{WHEEL_NAME}#sha256={hashlib.sha256(wheel).hexdigest()}">{WHEEL_NAME}</a></body></html>'
        )
    }

    def page_route(handler: BenchHandler) -> None:
        handler.reply(200, page["html"].encode(), content_type="text/html")

    def wheel_route(handler: BenchHandler) -> None:
        handler.reply(200, wheel, content_type="application/octet-stream")

    origin.routes["/torch-2.14.1_cu130.html"] = page_route
    origin.routes[wheel_path] = wheel_route
    overlay = index_overlay(folder / "index", origin.url("").rstrip("/"))
    config = folder / "cuda-resolve.toml"
    config.write_text(f'index_dirs = ["{overlay}"]\n')
    return WheelIndex(
        page_url=origin.url("/torch-2.14.1_cu130.html"),
        wheel_url=origin.url(wheel_path),
        wheel=wheel,
        config=config,
        set_page=lambda html: page.__setitem__("html", html),
    )


@pytest.fixture(scope="module")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with pip's stand-in torch 2.14.1 (CUDA 13.0): the environment the wheel pairs with."""
    return standin_torch_venv(tmp_path_factory.mktemp("standin-torch")).parent.parent


@pytest.fixture
def served(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[WheelIndex]:
    from cuda_resolve.index.load import clear_cache

    system_trust(cas.origin)  # the loopback origin's CA is the OS store: truststore accepts it
    index = serve_wheel_index(origin, tmp_path)
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(index.config))
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "580.65.06")
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "8.0")
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    clear_cache()  # the overlay names this test's server port
    yield index
    clear_cache()


def _into_channel(prefix: Path, channel: LocalChannel, client: object) -> list[object]:
    from cuda_resolve.index import default_index

    return list(
        build_into_channel(
            ["wheelext"],
            prefix,
            channel=channel,
            index=default_index(),
            options=InstallOptions(),
            client=client,
        )
    )  # type: ignore[arg-type]


def _stand_in(channel: LocalChannel, scratch: Path, *, name: str, version: str, build: str) -> None:
    from test_conda_channel import _stand_in as stand_in

    stand_in(channel, scratch, name=name, version=version, build=build)


def test_the_planned_wheel_is_fetched_checked_and_packaged_with_the_torch_pin(
    served: WheelIndex,
    torch_venv: Path,
    make_client: ClientFactory,
    origin: BenchServer,
    tmp_path: Path,
) -> None:
    channel = LocalChannel(tmp_path / "channel")
    [item] = _into_channel(torch_venv, channel, make_client(use_cache=False))
    index, ours = read_package_info(item.path)  # type: ignore[attr-defined]
    assert index["name"] == "wheelext" and index["version"] == "0.2.0"
    assert index["depends"] == [
        "torch ==2.14.1 pypi_0",
        "__cuda >=13",
    ]  # the same pins as a built package
    sha = hashlib.sha256(served.wheel).hexdigest()
    # The torch build's arch list (the index's cu130 list), and the file's hash in the recipe word.
    assert re.fullmatch(
        rf"{TAG}_pt2141cu130(_sm\d+)+_r{sha[:8]}_h[0-9a-f]{{8}}_0", str(index["build"])
    ), index["build"]
    assert ours["downloaded_from"] == served.wheel_url and ours["wheel_sha256"] == sha
    assert "arch list of the torch build" in str(ours["arch_list_source"])
    assert item.downloaded_from == served.wheel_url  # type: ignore[attr-defined]
    assert [seen.path for seen in origin.requests_to(f"/torch-2.14.1_cu130/{WHEEL_NAME}")]
    # py-rattler solves it with the environment's torch record and installs the wheel's files.
    _stand_in(channel, tmp_path, name="torch", version="2.14.1", build="pypi_0")
    virtual = [
        rattler.GenericVirtualPackage(
            rattler.PackageName("__cuda"), rattler.Version("13.0"), rattler.BuildString("0")
        )
    ]
    records = asyncio.run(
        rattler.solve(
            sources=[rattler.Channel(channel.url)],
            specs=["wheelext"],
            platforms=["linux-64", "noarch"],
            virtual_packages=virtual,
        )
    )
    prefix = tmp_path / "prefix"
    asyncio.run(rattler.install(records, prefix, cache_dir=tmp_path / "pkgs", show_progress=False))
    assert (prefix / SITE / "wheelext" / EXTENSION).read_bytes() == SO_BYTES
    # Converting it again (a later environment, a pruned channel) needs no download.
    before = len(origin.requests_to(f"/torch-2.14.1_cu130/{WHEEL_NAME}"))
    [again] = _into_channel(
        torch_venv, LocalChannel(tmp_path / "other"), make_client(use_cache=False)
    )
    assert (
        again.cache_hit and len(origin.requests_to(f"/torch-2.14.1_cu130/{WHEEL_NAME}")) == before
    )  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "page, refusal",
    [
        (
            f'<a href="torch-2.14.1_cu130/{WHEEL_NAME}#sha256={"0" * 64}">w</a>',
            "sha256",
        ),  # the served file differs
        (f'<a href="torch-2.14.1_cu130/{WHEEL_NAME}">w</a>', "without a sha256"),
        (
            f'<a href="torch-2.14.1_cu130/{WHEEL_NAME.replace(TAG, "cp39")}#sha256=00">w</a>',
            "does not list",
        ),
    ],
)
def test_a_wheel_that_cannot_be_checked_never_reaches_the_channel(
    served: WheelIndex,
    torch_venv: Path,
    make_client: ClientFactory,
    tmp_path: Path,
    page: str,
    refusal: str,
) -> None:
    served.set_page(page)
    channel = LocalChannel(tmp_path / "channel")
    with pytest.raises(CudaResolveError, match=refusal):
        _into_channel(torch_venv, channel, make_client(use_cache=False))
    assert channel.packages() == []
    assert not any(path.is_file() for path in (tmp_path / "cache").rglob("*.whl"))


def test_the_download_honours_the_trust_store(
    served: WheelIndex,
    torch_venv: Path,
    make_client: ClientFactory,
    tmp_path: Path,
    cas: Cas,
    system_trust: SystemTrust,
) -> None:
    system_trust(cas.unrelated)  # the origin's CA is no longer trusted: nothing is fetched
    channel = LocalChannel(tmp_path / "channel")
    with pytest.raises(CudaResolveError, match=r"(?i)certificate"):
        _into_channel(torch_venv, channel, make_client(use_cache=False))
    assert channel.packages() == []
