"""``conda create -p P pytorch wheelext`` in one command, through a real conda (conda is not on
PyPI: these run where conda is importable, by hand in the scratch conda of docs/conda.md, and
skip elsewhere).

No channel here has python or pytorch, so the test makes them: a ``python`` package that makes
the prefix a venv of this machine's interpreter (``pyvenv.cfg`` and a ``bin/python`` link) and a
``pytorch`` package holding a stand-in torch 2.14.1 built for CUDA 13.0 (two small files). The
extension is ``wheelext``, a prebuilt wheel on a loopback HTTPS find-links page laid out as
kaolin's (tests/test_conda_fetch.py), so nothing is compiled. With the plugin active, conda
creates the environment with python and pytorch, then the plugin fetches the wheel for that
torch, converts it into the local channel and installs it through conda's own solver and
transaction; a solve that brings no CUDA torch is refused before anything exists, and a failure
after the environment exists names what is there and the one command that finishes the job.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "conda",
    reason="conda is not on PyPI; run these with a conda that has the plugin installed "
    "(docs/conda.md)",
)
pytest.importorskip("conda.plugins.types", reason="needs a conda with plugin hooks (26.x)")

from conda.base.context import reset_context
from conda.core.prefix_data import PrefixData
from conda.exceptions import CondaError, DryRunExit
from test_conda_fetch import EXTENSION, SITE, WHEEL_NAME, WheelIndex, serve_wheel_index
from test_conda_session import TORCH_BUILD, standin_channel
from test_net_support import BenchServer, Cas, SystemTrust

from conda_plugin import actions
from cuda_resolve.conda.channel import LocalChannel

pytest_plugins = ("conda.testing.fixtures", "test_net_support")
pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::PendingDeprecationWarning"
)


@pytest.fixture
def setup(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[WheelIndex, LocalChannel]]:
    from cuda_resolve.index.load import clear_cache

    system_trust(cas.origin)
    served = serve_wheel_index(origin, tmp_path)
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(served.config))
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "580.65.06")
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "8.0")
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_RESOLVE_CONDA_CHANNEL", str(tmp_path / "ours"))
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    monkeypatch.setenv("CONDA_PLUGINS_CUDA_RESOLVE_ACTIVE", "true")
    monkeypatch.setenv("CONDA_PKGS_DIRS", str(tmp_path / "pkgs"))
    monkeypatch.setenv("CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY", "false")  # no channel here has pip
    reset_context()
    clear_cache()
    actions.session().deferred.clear()
    actions.session().built.clear()
    yield served, standin_channel(tmp_path)
    clear_cache()
    actions.session().deferred.clear()


def _records(prefix: Path) -> dict[str, object]:
    data = PrefixData(str(prefix), interoperability=False)
    data.reload()
    return {record.name: record for record in data.iter_records()}


@pytest.mark.parametrize("solver", ["classic", "rattler"])
def test_create_with_pytorch_and_the_extension_in_one_command(
    solver: str,
    setup: tuple[WheelIndex, LocalChannel],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    conda_cli: object,
) -> None:
    if solver == "rattler":
        pytest.importorskip("conda_rattler_solver", reason="conda-rattler-solver is not installed")
    _, standins = setup
    monkeypatch.setenv("CONDA_SOLVER", solver)
    reset_context()
    prefix = tmp_path / "env"
    out, _, _ = conda_cli(
        "create",
        "-y",
        "-p",
        str(prefix),
        "--override-channels",
        "-c",
        standins.url,
        "pytorch",
        "wheelext",
    )  # type: ignore[operator]
    assert "conda installs the rest first" in out
    records = _records(prefix)
    assert {"python", "pytorch", "wheelext"} <= set(records)
    ours = records["wheelext"]
    assert str(ours.channel.base_url).startswith((tmp_path / "ours").as_uri())  # type: ignore[attr-defined]
    assert f"pytorch ==2.14.1 {TORCH_BUILD}" in ours.depends and "__cuda >=13" in ours.depends  # type: ignore[attr-defined]
    assert (prefix / SITE / "wheelext" / EXTENSION).is_file()
    assert (
        "wheelext" in (prefix / "conda-meta" / "history").read_text()
    )  # a request conda remembers
    # conda's own remove takes it out again, and leaves the torch it pinned.
    conda_cli("remove", "-y", "-p", str(prefix), "wheelext")  # type: ignore[operator]
    assert "wheelext" not in _records(prefix) and "pytorch" in _records(prefix)
    assert not (prefix / SITE / "wheelext").exists()


def test_a_solve_without_a_cuda_torch_is_refused_before_anything_exists(
    setup: tuple[WheelIndex, LocalChannel], tmp_path: Path, conda_cli: object
) -> None:
    _, standins = setup
    prefix = tmp_path / "env"
    for specs, said in (
        (["pytorch=*=cpu*", "wheelext"], "must be built against a CUDA torch"),
        (["python", "wheelext"], "leaves none"),
        (["wheelext"], "installs nothing else"),
    ):
        actions.session().deferred.clear()
        with pytest.raises(CondaError, match=said):
            conda_cli(
                "create", "-y", "-p", str(prefix), "--override-channels", "-c", standins.url, *specs
            )  # type: ignore[operator]
        assert not (prefix / "conda-meta").exists(), specs
    assert not (tmp_path / "ours").exists()


def test_a_dry_run_names_the_torch_it_would_build_against(
    setup: tuple[WheelIndex, LocalChannel], tmp_path: Path, conda_cli: object
) -> None:
    _, standins = setup
    prefix = tmp_path / "env"
    out, _, _ = conda_cli(
        "create",
        "--dry-run",
        "-p",
        str(prefix),
        "--override-channels",
        "-c",
        standins.url,  # type: ignore[operator]
        "pytorch",
        "wheelext",
        raises=DryRunExit,
    )
    assert (
        f"wheelext would be built against a channel's pytorch 2.14.1 ({TORCH_BUILD}, CUDA 13.0)"
        in out
    )
    assert not prefix.exists() and not (tmp_path / "ours").exists()


def test_a_failure_after_the_environment_exists_names_it_and_the_command_that_finishes(
    setup: tuple[WheelIndex, LocalChannel], tmp_path: Path, conda_cli: object
) -> None:
    served, standins = setup
    digest = hashlib.sha256(served.wheel).hexdigest()
    good_page = f'<a href="torch-2.14.1_cu130/{WHEEL_NAME}#sha256={digest}">w</a>'
    served.set_page(
        f'<a href="torch-2.14.1_cu130/{WHEEL_NAME}">w</a>'
    )  # no hash: the plugin refuses the file
    prefix = tmp_path / "env"
    with pytest.raises(CondaError) as failed:
        conda_cli(
            "create",
            "-y",
            "-p",
            str(prefix),
            "--override-channels",
            "-c",
            standins.url,
            "pytorch",
            "wheelext",
        )  # type: ignore[operator]
    text = str(failed.value)
    assert f"{prefix} exists with 2 conda package(s), a channel's pytorch 2.14.1" in text
    assert "wheelext is not installed in it" in text and "without a sha256" in text
    # the command's channel options too: pasted, it solves where the command did
    finish = f"conda install -p {prefix} --override-channels -c {standins.url} wheelext"
    assert text.rstrip().endswith(f"finish with: {finish}")
    assert set(_records(prefix)) == {"python", "pytorch"}  # what exists is what was said
    # The page is fixed; the named command, as written, finishes the job.
    served.set_page(good_page)
    conda_cli(*finish.split()[1:], "-y")  # type: ignore[operator]
    assert "wheelext" in _records(prefix)


def test_install_with_a_torch_spec_builds_against_the_torch_the_command_leaves(
    setup: tuple[WheelIndex, LocalChannel], tmp_path: Path, conda_cli: object
) -> None:
    _, standins = setup
    prefix = tmp_path / "env"
    conda_cli(
        "create", "-y", "-p", str(prefix), "--override-channels", "-c", standins.url, "python"
    )  # type: ignore[operator]
    # No torch yet: the build waits for the one this install brings.
    out, _, _ = conda_cli(
        "install",
        "-y",
        "-p",
        str(prefix),
        "--override-channels",
        "-c",
        standins.url,
        "pytorch",
        "wheelext",
    )  # type: ignore[operator]
    assert "conda installs the rest first" in out
    records = _records(prefix)
    assert f"pytorch ==2.14.1 {TORCH_BUILD}" in records["wheelext"].depends  # type: ignore[attr-defined]
