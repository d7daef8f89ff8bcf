"""The conda-channel installer backend without conda: a complete plan (here: a prebuilt wheel on a
loopback find-links page, as kaolin's) is fetched, converted into the local channel, and
installed through the install function the caller gives, which here is py-rattler's solver and
installer (a real conda-ecosystem transaction). What it changed is read back from the prefix's
records; an install that fails leaves the prefix's records as they were and says where the
package stays."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_conda_fetch import SITE, TAG, WheelIndex, served, torch_venv  # noqa: F401 (fixtures)
from test_net_support import ClientFactory

from cuda_resolve.conda.backend import CondaChannelBackend
from cuda_resolve.conda.channel import LocalChannel
from cuda_resolve.conda.convert import channel_plan, environment_torch
from cuda_resolve.conda.records import read_prefix_records
from cuda_resolve.detect import detect_environment
from cuda_resolve.errors import InstallError
from cuda_resolve.install.options import InstallOptions

rattler = pytest.importorskip(
    "rattler", reason="py-rattler (the test extra) stands in for conda's transaction"
)
pytest.importorskip(
    "conda_package_handling", reason="conda-package-handling (the test extra) writes .conda files"
)

pytest_plugins = ["test_net_support"]


def rattler_install(cache: Path, cuda: str | None):  # type: ignore[no-untyped-def]
    """An install function: py-rattler solves ``specs`` against ``channels`` (``__cuda`` as given)
    and installs the solution into ``prefix``."""
    virtual = (
        []
        if cuda is None
        else [
            rattler.GenericVirtualPackage(
                rattler.PackageName("__cuda"), rattler.Version(cuda), rattler.BuildString("0")
            )
        ]
    )

    def install(prefix: Path, channels: Sequence[str], specs: Sequence[str]) -> None:
        records = asyncio.run(
            rattler.solve(
                sources=[rattler.Channel(url) for url in channels],
                specs=list(specs),
                platforms=["linux-64", "noarch"],
                virtual_packages=virtual,
            )
        )
        asyncio.run(rattler.install(records, prefix, cache_dir=cache, show_progress=False))

    return install


def _setup(tmp_path: Path, torch_venv: Path) -> tuple[LocalChannel, LocalChannel, object, object]:
    from test_conda_channel import _stand_in

    from cuda_resolve.index import default_index

    standins = LocalChannel(
        tmp_path / "standins"
    )  # pip's torch as a record, as conda's prefix data has it
    _stand_in(standins, tmp_path, name="torch", version="2.14.1", build="pypi_0")
    env = detect_environment(python=str(torch_venv / "bin" / "python"))
    torch, _ = environment_torch(torch_venv, ["wheelext"])
    index = default_index()
    plan = channel_plan(["wheelext"], env, torch, index, InstallOptions())
    return LocalChannel(tmp_path / "ours"), standins, env, (plan, index)


def _prefix(tmp_path: Path, torch_venv: Path) -> Path:
    """A prefix of its own whose torch is the shared venv's pip torch (its lib/ linked), so
    that installing into it leaves the venv other tests use as it was."""
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(torch_venv / "bin" / "python")
    (prefix / "lib").symlink_to(torch_venv / "lib")
    return prefix


def test_the_plan_is_carried_out_through_the_install_function(
    served: WheelIndex, torch_venv: Path, make_client: ClientFactory, tmp_path: Path
) -> None:
    prefix = _prefix(tmp_path, torch_venv)
    ours, standins, env, (plan, index) = _setup(tmp_path, torch_venv)
    backend = CondaChannelBackend(
        prefix=prefix,
        channel=ours,
        install=rattler_install(tmp_path / "pkgs", "13.0"),
        channels=(standins.url,),
        client=make_client(use_cache=False),
    )
    result = backend.execute(plan, env, index=index, options=InstallOptions())  # type: ignore[arg-type]
    changed = {name: after for name, before, after in result.changed if before is None}
    assert changed["wheelext"] is not None and changed["wheelext"].startswith(
        f"0.2.0 {TAG}_pt2141cu130_"
    )
    [package] = ours.records()
    assert (
        changed["wheelext"] == f"0.2.0 {package.build}"
    )  # exactly the record converted for this torch
    assert result.notes[0].endswith(f"the prebuilt wheel {served.wheel_url}")
    assert (prefix / SITE / "wheelext" / "__init__.py").is_file()


def test_a_failed_install_leaves_the_records_as_they_were(
    served: WheelIndex, torch_venv: Path, make_client: ClientFactory, tmp_path: Path
) -> None:
    prefix = _prefix(tmp_path, torch_venv)
    ours, standins, env, (plan, index) = _setup(tmp_path, torch_venv)
    backend = CondaChannelBackend(
        prefix=prefix,
        channel=ours,
        install=rattler_install(tmp_path / "pkgs", None),  # no driver
        channels=(standins.url,),
        client=make_client(use_cache=False),
    )
    with pytest.raises(
        InstallError, match=r"(?s)conda could not install wheelext\[.*__cuda >=13"
    ) as failed:
        backend.execute(plan, env, index=index, options=InstallOptions())  # type: ignore[arg-type]
    assert "stay in the local channel" in str(failed.value.hint)
    assert read_prefix_records(prefix) == ()
    assert [record.name for record in ours.records()] == ["wheelext"]


def test_the_executors_entry_point_carries_the_plan_out_through_the_backend(
    served: WheelIndex, torch_venv: Path, make_client: ClientFactory, tmp_path: Path
) -> None:
    from cuda_resolve.index import default_index
    from cuda_resolve.install.run import InstallRequest, run

    prefix = _prefix(tmp_path, torch_venv)
    ours, standins, env, _ = _setup(tmp_path, torch_venv)
    backend = CondaChannelBackend(
        prefix=prefix,
        channel=ours,
        install=rattler_install(tmp_path / "pkgs", "13.0"),
        channels=(standins.url,),
        client=make_client(use_cache=False),
    )
    request = InstallRequest(requirements=("wheelext",))
    dry = run(
        InstallRequest(requirements=("wheelext",), dry_run=True),
        env,
        default_index(),
        InstallOptions(),
        backend=backend,
    )  # type: ignore[arg-type]
    assert [item.name for item in dry.plan.items if item.kind == "wheel"] == [
        "wheelext"
    ] and not dry.pip_runs
    assert ours.packages() == [] and read_prefix_records(prefix) == ()  # a dry run changes nothing
    result = run(request, env, default_index(), InstallOptions(), backend=backend)  # type: ignore[arg-type]
    assert [name for name, before, after in result.changed if before is None and after] == [
        "torch",
        "wheelext",
    ]
    assert not result.pip_runs  # nothing went through pip
    assert (prefix / SITE / "wheelext" / "__init__.py").is_file()
