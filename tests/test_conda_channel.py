"""The conda-facing core without conda: a built wheel converted into a ``.conda`` package in the
local channel, checked by a real conda-ecosystem solver and installer (py-rattler): it solves
with ``__cuda`` present, installs into a prefix, and a record whose pins the environment cannot
meet is refused."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import zipfile
from pathlib import Path

import pytest

from cuda_resolve.conda.channel import LocalChannel
from cuda_resolve.conda.package import package_for, read_package_info, wheel_to_conda
from cuda_resolve.conda.records import CondaRecord, TorchRecord
from cuda_resolve.conda.serve import arch_list_of
from cuda_resolve.errors import UsageError
from cuda_resolve.versions import CudaVersion
from cuda_resolve.wheelhouse.key import WheelKey

rattler = pytest.importorskip("rattler", reason="py-rattler (the test extra) checks the channel")
pytest.importorskip(
    "conda_package_handling", reason="conda-package-handling (the test extra) writes .conda files"
)

KEY = WheelKey(
    package="cuext",
    version="0.1.0",
    torch="2.14.1",
    variant="cu130",
    python_tag="cp311",
    platform="manylinux_2_28_x86_64",
    arch_list="8.0;9.0+PTX",
    recipe_digest="0123456789abcdef",
)
PIP_TORCH = TorchRecord(
    source="pip", version="2.14.1+cu130", build="pypi_0", cuda=CudaVersion(13, 0)
)
SO_BYTES = b"\x7fELF not really, but bytes the test can find again"


def _wheel(folder: Path, *, scripts: bool = False) -> Path:
    """A wheel shaped as the builder writes one: a package with an extension module."""
    path = folder / "cuext-0.1.0+pt2141cu130.sm80.sm90ptx-cp311-cp311-manylinux_2_28_x86_64.whl"
    dist = "cuext-0.1.0+pt2141cu130.sm80.sm90ptx.dist-info"
    files = {
        "cuext/__init__.py": b"from ._ext import add_one\n",
        "cuext/_ext.cpython-311-x86_64-linux-gnu.so": SO_BYTES,
        f"{dist}/METADATA": (
            b"Metadata-Version: 2.1\nName: cuext\nVersion: "
            b"0.1.0+pt2141cu130.sm80.sm90ptx\nSummary: fixture\nLicense: MIT\nRequires-Dist: "
            b"torch>=2.0\nRequires-Dist: numpy\n"
        ),
        f"{dist}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: "
            b"cp311-cp311-manylinux_2_28_x86_64\n"
        ),
        f"{dist}/RECORD": b"",
        "cuext-0.1.0+pt2141cu130.sm80.sm90ptx.data/headers/cuext.h": b"int add_one(void);\n",
    }
    if scripts:
        files[f"{dist}/entry_points.txt"] = b"[console_scripts]\ncuext-info = cuext:main\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def _stand_in(channel: LocalChannel, scratch: Path, *, name: str, version: str, build: str) -> None:
    """A package standing in for a record the environment has (pip's torch in conda's prefix
    data), so that the solver here can see it."""
    from conda_package_handling import api  # type: ignore[import-untyped]

    root = scratch / f"{name}-{version}-{build}"
    (root / "info").mkdir(parents=True)
    index = {
        "name": name,
        "version": version,
        "build": build,
        "build_number": 0,
        "depends": [],
        "subdir": "linux-64",
    }
    (root / "info" / "index.json").write_text(json.dumps(index))
    (root / "info" / "paths.json").write_text(json.dumps({"paths": [], "paths_version": 1}))
    filename = f"{name}-{version}-{build}.conda"
    api.create(str(root), ["info/index.json", "info/paths.json"], filename, str(scratch))
    channel.add(scratch / filename, "linux-64")


def _solve(channel: LocalChannel, specs: list[str], cuda: str | None) -> list[object]:
    virtual = (
        []
        if cuda is None
        else [
            rattler.GenericVirtualPackage(
                rattler.PackageName("__cuda"), rattler.Version(cuda), rattler.BuildString("0")
            )
        ]
    )
    source = rattler.Channel(channel.url)
    return asyncio.run(
        rattler.solve(
            sources=[source],
            specs=specs,
            platforms=["linux-64", "noarch"],
            virtual_packages=virtual,
        )
    )


@pytest.fixture
def channel(tmp_path: Path) -> LocalChannel:
    channel = LocalChannel(tmp_path / "channel")
    channel.index()
    return channel


def _convert(
    tmp_path: Path, channel: LocalChannel, *, torch: TorchRecord = PIP_TORCH, scripts: bool = False
) -> Path:
    package = package_for(KEY, torch=torch, python=None, python_version="3.11")
    built = wheel_to_conda(_wheel(tmp_path, scripts=scripts), package, tmp_path / "out")
    return channel.add(built, package.subdir)


def test_the_package_record_pins_the_torch_record_cuda_and_carries_the_arch_list(
    tmp_path: Path, channel: LocalChannel
) -> None:
    path = _convert(tmp_path, channel)
    index, ours = read_package_info(path)
    assert (
        index["name"] == "cuext" and index["version"] == "0.1.0" and index["subdir"] == "linux-64"
    )
    assert index["depends"] == ["torch ==2.14.1+cu130 pypi_0", "__cuda >=13"]
    build = str(index["build"])
    assert re.fullmatch(r"cp311_pt2141cu130_sm80_sm90ptx_r[0-9a-f]{8}_h[0-9a-f]{8}_0", build), (
        build
    )  # the label's recipe word too
    record = CondaRecord.from_json(index, origin=str(path))
    assert [str(entry) for entry in arch_list_of(record) or ()] == ["8.0", "9.0+PTX"]
    assert ours["arch_list"] == "8.0;9.0+PTX" and ours["wheel_key"] == KEY.to_json()
    assert ours["requires_dist_not_translated"] == ["numpy"]
    repodata = json.loads((channel.root / "linux-64" / "repodata.json").read_text())
    entry = repodata["packages.conda"][path.name]
    assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert entry["depends"] == index["depends"]
    assert (
        json.loads((channel.root / "noarch" / "repodata.json").read_text())["packages.conda"] == {}
    )


def test_rattler_solves_and_installs_it_into_a_prefix(
    tmp_path: Path, channel: LocalChannel
) -> None:
    path = _convert(tmp_path, channel, scripts=True)
    _stand_in(channel, tmp_path, name="torch", version="2.14.1+cu130", build="pypi_0")
    _stand_in(channel, tmp_path, name="torch", version="2.14.0+cu130", build="pypi_0")
    records = _solve(channel, ["cuext"], cuda="13.0")
    chosen = {str(r.name.normalized): (str(r.version), str(r.build)) for r in records}  # type: ignore[attr-defined]
    assert chosen["torch"] == ("2.14.1+cu130", "pypi_0")  # the exact record, not the other torch
    assert chosen["cuext"][0] == "0.1.0"
    prefix = tmp_path / "prefix"
    asyncio.run(rattler.install(records, prefix, cache_dir=tmp_path / "pkgs", show_progress=False))
    site = prefix / "lib" / "python3.11" / "site-packages"
    assert (site / "cuext" / "_ext.cpython-311-x86_64-linux-gnu.so").read_bytes() == SO_BYTES
    assert (prefix / "include" / "python3.11" / "cuext.h").is_file()  # the wheel's .data/headers
    dist_info = next(site.glob("cuext-*.dist-info"))
    assert (dist_info / "INSTALLER").read_text() == "conda\n" and not (
        dist_info / "RECORD"
    ).exists()
    script = (prefix / "bin" / "cuext-info").read_text()
    assert script.startswith(
        f"#!{prefix}/bin/python\n"
    )  # the placeholder was replaced by the installer
    meta = json.loads(next((prefix / "conda-meta").glob("cuext-*.json")).read_text())
    assert meta["fn"] == path.name


def test_a_wrong_pin_is_refused_by_the_solver(tmp_path: Path, channel: LocalChannel) -> None:
    _convert(tmp_path, channel)
    # The environment's torch is another build: the package's pin cannot be met.
    _stand_in(channel, tmp_path, name="torch", version="2.14.0+cu130", build="pypi_0")
    with pytest.raises(Exception, match="torch"):
        _solve(channel, ["cuext"], cuda="13.0")


def test_no_cuda_driver_means_no_solution(tmp_path: Path, channel: LocalChannel) -> None:
    _convert(tmp_path, channel)
    _stand_in(channel, tmp_path, name="torch", version="2.14.1+cu130", build="pypi_0")
    with pytest.raises(Exception, match="__cuda"):
        _solve(channel, ["cuext"], cuda=None)
    with pytest.raises(Exception, match="__cuda"):
        _solve(channel, ["cuext"], cuda="12.8")
    assert _solve(channel, ["cuext"], cuda="13.2")


def test_a_channel_pytorch_is_pinned_by_name_version_and_build(
    tmp_path: Path, channel: LocalChannel
) -> None:
    torch = TorchRecord(
        source="channel",
        version="2.14.1",
        build="cuda130_generic_py311_h0123_300",
        cuda=CudaVersion(13, 0),
    )
    path = _convert(tmp_path, channel, torch=torch)
    index, _ = read_package_info(path)
    assert index["depends"] == ["pytorch ==2.14.1 cuda130_generic_py311_h0123_300", "__cuda >=13"]
    _stand_in(
        channel, tmp_path, name="pytorch", version="2.14.1", build="cuda130_generic_py311_h0123_300"
    )
    _stand_in(
        channel, tmp_path, name="pytorch", version="2.14.1", build="cpu_generic_py311_h0123_0"
    )
    chosen = {str(r.name.normalized): str(r.build) for r in _solve(channel, ["cuext"], cuda="13.0")}  # type: ignore[attr-defined]
    assert chosen["pytorch"] == "cuda130_generic_py311_h0123_300"


def test_a_wheel_built_against_another_torch_is_not_packaged(tmp_path: Path) -> None:
    other = TorchRecord(
        source="pip", version="2.13.0+cu130", build="pypi_0", cuda=CudaVersion(13, 0)
    )
    with pytest.raises(UsageError, match=r"built against torch 2\.14\.1") as caught:
        package_for(KEY, torch=other, python=None, python_version="3.11")
    # the command to paste names the package (it said `conda cuda build <package>`)
    assert (caught.value.hint or "").endswith(f"conda cuda build {KEY.package}")


def test_python_is_pinned_where_it_is_a_conda_package(tmp_path: Path) -> None:
    python = CondaRecord(name="python", version="3.11.7", build="h0_0")
    package = package_for(KEY, torch=PIP_TORCH, python=python, python_version="3.11")
    assert "python >=3.11,<3.12.0a0" in package.depends


def test_prune_keeps_what_environments_use(tmp_path: Path, channel: LocalChannel) -> None:
    used = _convert(tmp_path, channel)
    _stand_in(channel, tmp_path, name="torch", version="2.14.1+cu130", build="pypi_0")
    removed = channel.prune({used.name})
    assert [p.name for p in removed] == ["torch-2.14.1+cu130-pypi_0.conda"]
    assert [p.name for p in channel.packages()] == [used.name]
    repodata = json.loads((channel.root / "linux-64" / "repodata.json").read_text())
    assert list(repodata["packages.conda"]) == [used.name]
