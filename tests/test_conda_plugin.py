"""The conda plugin's hooks against a real conda (conda is not on PyPI: these run where conda is
importable, by hand in the scratch conda of docs/conda.md, and skip elsewhere).

A package converted by the conda-agnostic core is installed by conda's own solver and
transaction into a prefix whose torch pip installed (visible through the plugin's prefix-data
loader); a torch record the pin does not accept, or a driver below the package's CUDA, is
refused by conda's solver; the CPU-torch veto, the inactive-plugin hint, the settings, the
subcommand and the health check answer through conda.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "conda",
    reason="conda is not on PyPI; run these with a conda that has the plugin installed "
    "(docs/conda.md)",
)
pytest.importorskip("conda.plugins.types", reason="needs a conda with plugin hooks (26.x)")

from conda.base.context import context, reset_context
from conda.core.prefix_data import PrefixData
from conda.exceptions import CondaError, PackagesNotFoundInChannelsError, UnsatisfiableError
from conda.models.records import PackageRecord
from test_conda_session import cuext_channel, pip_torch

from conda_plugin import actions
from cuda_resolve.conda.channel import LocalChannel
from cuda_resolve.conda.session import refuse_insecure_tls

pytest_plugins = ("conda.testing.fixtures",)
pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::PendingDeprecationWarning"
)

FIXTURE_INDEX = Path(__file__).parent / "data" / "index" / "cuext"


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """cuda-resolve sees the fixture index (cuext is curated) and an 8.0 GPU on driver 580."""
    config = tmp_path / "cuda-resolve.toml"
    config.write_text(f'index_dirs = ["{FIXTURE_INDEX}"]\n')
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "580.65.06")
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "8.0")
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CONDA_PLUGINS_CUDA_RESOLVE_ACTIVE", "false")
    reset_context()
    return monkeypatch


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, ["LOCAL"]),
        ([], ["LOCAL"]),
        (["conda-forge"], ["conda-forge", "LOCAL"]),
        (("conda-forge", "nvidia"), ["conda-forge", "nvidia", "LOCAL"]),
        ("conda-forge", ["conda-forge", "LOCAL"]),
        (["LOCAL", "conda-forge"], ["LOCAL", "conda-forge"]),
    ],
    ids=["none", "empty", "list", "tuple", "str", "already-there"],
)
def test_the_local_channel_is_added_after_the_users_channels(
    given: object, expected: list[str], tmp_path: Path, settings: pytest.MonkeyPatch
) -> None:
    url = (tmp_path / "channel").as_uri()
    context._set_argparse_args(
        {
            "channel": [url if c == "LOCAL" else c for c in given]
            if isinstance(given, list)
            else given
        }
    )
    args = context._argparse_args  # what the plugin's hooks are given
    actions._add_channel(args, url)
    assert args["channel"] == [url if c == "LOCAL" else c for c in expected]
    assert (
        context._argparse_args["channel"] == args["channel"]
    )  # conda's solve reads them from there
    reset_context()


def _active(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    monkeypatch.setenv("CONDA_PLUGINS_CUDA_RESOLVE_ACTIVE", "true" if on else "false")
    reset_context()


@pytest.mark.parametrize("solver", ["classic", "rattler"])
@pytest.mark.parametrize(
    "torch_version", ["2.14.1", "2.11.0+cu130"]
)  # PyPI's and the PyTorch index's spelling
def test_conda_installs_the_converted_package_against_pips_torch(
    solver: str, torch_version: str, tmp_path: Path, settings: pytest.MonkeyPatch, conda_cli: object
) -> None:
    if solver == "rattler":
        pytest.importorskip("conda_rattler_solver", reason="conda-rattler-solver is not installed")
    channel = cuext_channel(tmp_path, torch_version)
    prefix = tmp_path / "env"
    pip_torch(prefix, torch_version)
    settings.setenv("CONDA_SOLVER", solver)
    settings.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    settings.setenv("CONDA_PREFIX_DATA_INTEROPERABILITY", "true")
    reset_context()
    torch = PrefixData(str(prefix), interoperability=True).get("torch")
    assert (torch.version, torch.build) == (
        torch_version,
        "pypi_0",
    )  # the plugin's prefix-data loader
    conda_cli("install", "-y", "-p", str(prefix), "--override-channels", "-c", channel.url, "cuext")  # type: ignore[operator]
    assert (prefix / "lib" / "python3.11" / "site-packages" / "cuext" / "__init__.py").is_file()
    installed = PrefixData(str(prefix), interoperability=False)
    installed.reload()
    assert installed.get("cuext").build.startswith("cp311_pt")
    conda_cli("remove", "-y", "-p", str(prefix), "cuext")  # type: ignore[operator]
    assert not (prefix / "lib" / "python3.11" / "site-packages" / "cuext").exists()


@pytest.mark.parametrize("torch_version, cuda", [("2.13.0", "13.0"), ("2.14.1", "12.8")])
def test_conda_refuses_what_the_record_does_not_allow(
    torch_version: str, cuda: str, tmp_path: Path, settings: pytest.MonkeyPatch, conda_cli: object
) -> None:
    channel = cuext_channel(tmp_path)
    prefix = tmp_path / "env"
    pip_torch(prefix, torch_version)
    settings.setenv("CONDA_OVERRIDE_CUDA", cuda)
    settings.setenv("CONDA_PREFIX_DATA_INTEROPERABILITY", "true")
    reset_context()
    with pytest.raises((UnsatisfiableError, CondaError)):
        conda_cli(
            "install", "-y", "-p", str(prefix), "--override-channels", "-c", channel.url, "cuext"
        )  # type: ignore[operator]
    assert not (prefix / "lib" / "python3.11" / "site-packages" / "cuext").exists()


def test_a_cpu_pytorch_is_vetoed_on_a_gpu_machine(
    settings: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings.setenv(
        "CONDA_PREFIX", str(tmp_path)
    )  # the solve's target: an environment of no packages
    reset_context()
    assert Path(context.target_prefix) == tmp_path
    cpu = PackageRecord(
        name="pytorch",
        version="2.5.1",
        build="cpu_generic_py311_h0_0",
        build_number=0,
        channel="conda-forge",
        subdir="linux-64",
        fn="pytorch-2.5.1-cpu_generic_py311_h0_0.conda",
    )
    cuda = PackageRecord(
        name="pytorch",
        version="2.5.1",
        build="cuda126_generic_py311_h0_300",
        build_number=300,
        channel="conda-forge",
        subdir="linux-64",
        fn="pytorch-2.5.1-cuda126_generic_py311_h0_300.conda",
    )
    actions.veto_solve([cpu])  # inactive: conda decides alone
    _active(settings, True)
    with pytest.raises(CondaError, match="CPU-only"):
        actions.veto_solve([cpu])
    actions.veto_solve([cuda])
    settings.setenv("CUDA_RESOLVE_CUDA_ARCH", "")  # no GPU: a CPU build is what the machine can run
    actions.veto_solve([cpu])


def test_the_inactive_plugin_names_the_step_that_activates_it(settings: pytest.MonkeyPatch) -> None:
    error = PackagesNotFoundInChannelsError(["cuext"], ["file:///nowhere"])
    [hint] = list(actions.error_hints(error))
    assert "conda config --set plugins.cuda_resolve_active true" in hint.text
    assert (
        list(actions.error_hints(PackagesNotFoundInChannelsError(["numpyy"], ["file:///nowhere"])))
        == []
    )
    _active(settings, True)
    assert list(actions.error_hints(error)) == []


def test_settings_subcommand_and_health_check_are_registered(
    settings: pytest.MonkeyPatch, conda_cli: object
) -> None:
    assert context.plugins.cuda_resolve_active is False
    _active(settings, True)
    assert context.plugins.cuda_resolve_active is True
    out, _, _ = conda_cli("cuda", "--help")  # type: ignore[operator]
    assert "activate / deactivate" in out
    out, _, _ = conda_cli("doctor", "--list")  # type: ignore[operator]
    assert "cuda-resolve:" in out


def test_ssl_verify_false_is_refused_before_downloading(settings: pytest.MonkeyPatch) -> None:
    settings.setenv("CONDA_SSL_VERIFY", "false")
    reset_context()
    settings_now = actions.plugin_settings()
    with pytest.raises(CondaError, match="never downloads without verifying TLS"):
        actions._converted(lambda: refuse_insecure_tls(settings_now, {}))


def test_a_build_sets_conda_variables_that_go_when_its_package_does(
    tmp_path: Path, settings: pytest.MonkeyPatch, conda_cli: object
) -> None:
    channel = cuext_channel(tmp_path)
    settings.setenv("CUDA_RESOLVE_CONDA_CHANNEL", str(channel.root))
    prefix = tmp_path / "env"
    pip_torch(prefix, "2.14.1")
    [path] = channel.packages()
    actions.session().built.append((prefix, path))
    actions.after_install("install")
    data = PrefixData(str(prefix))
    assert data.get_environment_env_vars() == {"TORCH_CUDA_ARCH_LIST": "8.0"}
    actions.unset_build_variables(prefix)  # no package of the channel is installed: they go
    assert PrefixData(str(prefix)).get_environment_env_vars() == {}
    # A value the user changed since is theirs: it stays.
    actions.session().built.append((prefix, path))
    actions.after_install("install")
    conda_cli("env", "config", "vars", "set", "-p", str(prefix), "TORCH_CUDA_ARCH_LIST=9.0")  # type: ignore[operator]
    actions.unset_build_variables(prefix)
    assert PrefixData(str(prefix)).get_environment_env_vars() == {"TORCH_CUDA_ARCH_LIST": "9.0"}


def test_active_a_fitting_channel_build_is_pinned_and_nothing_is_built(
    tmp_path: Path, settings: pytest.MonkeyPatch, conda_cli: object
) -> None:
    channel = cuext_channel(tmp_path)  # stands in for a channel's build: sm80, pip's torch 2.14.1
    prefix = tmp_path / "env"
    pip_torch(prefix, "2.14.1")
    settings.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    settings.setenv("CUDA_RESOLVE_CONDA_CHANNEL", str(tmp_path / "ours"))
    settings.setenv(
        "CONDA_PREFIX_DATA_INTEROPERABILITY", "false"
    )  # the plugin turns it on (restored after)
    _active(settings, True)
    out, _, _ = conda_cli(
        "install", "-y", "-p", str(prefix), "--override-channels", "-c", channel.url, "cuext"
    )  # type: ignore[operator]
    assert "cuda-resolve: the channel build cuext 0.1.0" in out and "fits" in out
    assert "building" not in out and not (tmp_path / "ours").exists()
    assert (prefix / "lib" / "python3.11" / "site-packages" / "cuext" / "__init__.py").is_file()


def test_a_dry_run_says_what_would_be_built_and_builds_nothing(
    tmp_path: Path, settings: pytest.MonkeyPatch, conda_cli: object
) -> None:
    from conda.exceptions import DryRunExit

    empty = LocalChannel(tmp_path / "empty")
    empty.index()
    prefix = tmp_path / "env"
    pip_torch(prefix, "2.14.1")
    settings.setenv("CUDA_RESOLVE_CONDA_CHANNEL", str(tmp_path / "ours"))
    _active(settings, True)
    out, _, _ = conda_cli(
        "install",
        "--dry-run",
        "-p",
        str(prefix),
        "--override-channels",
        "-c",
        empty.url,
        "cuext=0.1",
        raises=DryRunExit,
    )  # type: ignore[operator]
    assert "would build cuext==0.1.* against pip's torch 2.14.1" in out
    assert not (tmp_path / "ours").exists() and not (tmp_path / "cache" / "wheelhouse").exists()


def test_conda_cuda_commands_target_the_environment_conda_names(
    settings: pytest.MonkeyPatch, conda_cli: object, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import sys

    prefix = Path(sys.prefix)  # the environment running this conda: it has a python
    code = actions.subcommand(("detect", "-p", str(prefix), "--json"))
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert Path(report["python"]["executable"]).parent.parent == prefix
    with pytest.raises(CondaError, match="the target is the conda environment"):
        actions.subcommand(("plan", "-p", str(prefix), "--python", sys.executable, "cuext"))
    with pytest.raises(CondaError, match="no such command"):
        actions.subcommand(("frobnicate",))


def _other_channel(tmp_path: Path) -> LocalChannel:
    """A channel with one unrelated package (no files), as any later install brings."""
    import json as _json

    from conda_package_handling import api

    root = tmp_path / "other-pkg"
    (root / "info").mkdir(parents=True)
    (root / "info" / "index.json").write_text(
        _json.dumps(
            {
                "name": "other",
                "version": "1.0",
                "build": "0",
                "build_number": 0,
                "depends": [],
                "subdir": "linux-64",
            }
        )
    )
    (root / "info" / "paths.json").write_text(_json.dumps({"paths": [], "paths_version": 1}))
    api.create(
        str(root), ["info/index.json", "info/paths.json"], "other-1.0-0.conda", str(tmp_path)
    )
    channel = LocalChannel(tmp_path / "other")
    channel.add(tmp_path / "other-1.0-0.conda", "linux-64")
    return channel


@pytest.mark.parametrize("solver", ["classic", "rattler"])
def test_later_installs_still_solve_in_an_environment_with_our_packages(
    solver: str, tmp_path: Path, settings: pytest.MonkeyPatch, conda_cli: object
) -> None:
    if solver == "rattler":
        pytest.importorskip("conda_rattler_solver", reason="conda-rattler-solver is not installed")
    channel = cuext_channel(tmp_path)
    other = _other_channel(tmp_path)
    prefix = tmp_path / "env"
    pip_torch(prefix, "2.14.1")
    settings.setenv("CONDA_SOLVER", solver)
    settings.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    settings.setenv("CUDA_RESOLVE_CONDA_CHANNEL", str(channel.root))
    settings.setenv("CONDA_PREFIX_DATA_INTEROPERABILITY", "true")
    reset_context()
    conda_cli("install", "-y", "-p", str(prefix), "--override-channels", "-c", channel.url, "cuext")  # type: ignore[operator]
    # Later, with the plugin active and pip interop left off, an unrelated install: the plugin
    # lets the solve see the local channel and pip's torch, which cuext's record needs.
    settings.setenv("CONDA_PREFIX_DATA_INTEROPERABILITY", "false")
    _active(settings, True)
    conda_cli("install", "-y", "-p", str(prefix), "--override-channels", "-c", other.url, "other")  # type: ignore[operator]
    assert {"cuext", "other"} <= {
        record.name for record in PrefixData(str(prefix), interoperability=False).iter_records()
    }
    # Removing the unrelated package keeps cuext (its pin on pip's torch is met); removing cuext
    # never takes pip's torch along as a dependency left over.
    assert _would_remove(settings, conda_cli, prefix, "other") == ["other"]
    assert _would_remove(settings, conda_cli, prefix, "cuext") == ["cuext"]


def _would_remove(
    settings: pytest.MonkeyPatch, conda_cli: object, prefix: Path, name: str
) -> list[str]:
    import json as _json

    from conda.exceptions import DryRunExit

    settings.setenv(
        "CONDA_PREFIX_DATA_INTEROPERABILITY", "false"
    )  # a new conda command starts as configured
    reset_context()

    out, _, _ = conda_cli(
        "remove", "--dry-run", "--json", "-p", str(prefix), name, raises=DryRunExit
    )  # type: ignore[operator]
    return sorted(str(item["name"]) for item in _json.loads(out)["actions"]["UNLINK"])
