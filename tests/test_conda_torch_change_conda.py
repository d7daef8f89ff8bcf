"""A torch change through a real conda (issue 27, item 1, for conda environments): what the
user of ``conda install pytorch=NEW`` sees, where tests/test_conda_torch_change.py drives the
same session with py-rattler. conda is not on PyPI: these run where conda is importable, by hand
in the scratch conda of docs/conda.md, and skip elsewhere.

The channel is the stand-ins' (tests/test_conda_session.py: ``python`` makes the prefix a venv
of this interpreter; ``pytorch`` 2.14.1 and 2.15.0 for CUDA 13.0 are two small files each):

- an extension pip installed and built for 2.14.1: conda's solve is vetoed by the plugin (its
  message, not conda's: conda does not know pip's package links torch), with the plugin's
  setting ``cuda_resolve_keep_stale`` in its hint, which conda reads from ``.condarc``
  (``conda config --append``) and from its own ``CONDA_PLUGINS_CUDA_RESOLVE_KEEP_STALE``;
- the plugin's own package (``wheelext`` from the local channel, pinned to the pytorch it was
  made for, and in the environment's history as asked for): conda's own solver, classic and
  rattler alike, refuses the change as unsatisfiable before any post-solve runs, so the
  plugin's word comes through conda's error-hint hook (``conda_error_hints``): why, and the
  two commands (remove it, then install the new torch with it, which builds it again for that
  torch after the command), which work as written.
"""

from __future__ import annotations

import hashlib
import shlex
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
from conda.exceptions import CondaError, UnsatisfiableError
from test_conda_fetch import SITE, WHEEL_NAME, WheelIndex, serve_wheel_index
from test_conda_torch_change import NEW_BUILD, STALE, newer_torch
from test_net_support import BenchHandler, BenchServer, Cas, SystemTrust

from conda_plugin import actions
from cuda_resolve.conda.channel import LocalChannel

pytest_plugins = ("conda.testing.fixtures", "test_net_support")
pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::PendingDeprecationWarning"
)


@pytest.fixture(params=["classic", "rattler"])
def setup(
    request: pytest.FixtureRequest,
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[WheelIndex, LocalChannel]]:
    """The stand-ins' channel with both pytorch releases; wheelext's find-links pages for torch
    2.14.1 and 2.15.0 on a loopback HTTPS origin; an active plugin on an 8.0 GPU, driver 580."""
    from cuda_resolve.index.load import clear_cache

    if request.param == "rattler":
        pytest.importorskip("conda_rattler_solver", reason="conda-rattler-solver is not installed")
    monkeypatch.setenv("CONDA_SOLVER", request.param)
    system_trust(cas.origin)
    served = serve_wheel_index(origin, tmp_path)
    overlay = tmp_path / "index" / "packages" / "wheelext.toml"
    overlay.write_text(overlay.read_text().replace('["2.14.1",', '["2.15.0", "2.14.1",'))
    digest = hashlib.sha256(served.wheel).hexdigest()
    page = f'<a href="torch-2.15.0_cu130/{WHEEL_NAME}#sha256={digest}">{WHEEL_NAME}</a>'

    def page_route(handler: BenchHandler) -> None:
        handler.reply(200, page.encode(), content_type="text/html")

    def wheel_route(handler: BenchHandler) -> None:
        handler.reply(200, served.wheel, content_type="application/octet-stream")

    origin.routes["/torch-2.15.0_cu130.html"] = page_route
    origin.routes[f"/torch-2.15.0_cu130/{WHEEL_NAME}"] = wheel_route
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(served.config))
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "580.65.06")
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "8.0")
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_RESOLVE_CONDA_CHANNEL", str(tmp_path / "ours"))
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    monkeypatch.setenv("CONDA_PLUGINS_CUDA_RESOLVE_ACTIVE", "true")
    monkeypatch.delenv("CONDA_PLUGINS_CUDA_RESOLVE_KEEP_STALE", raising=False)
    monkeypatch.setenv("CONDARC", str(tmp_path / "condarc"))  # the user's .condarc, here
    monkeypatch.setenv("CONDA_PKGS_DIRS", str(tmp_path / "pkgs"))
    monkeypatch.setenv("CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY", "false")  # no channel here has pip
    reset_context()
    clear_cache()
    actions.session().deferred.clear()
    actions.session().built.clear()
    yield served, newer_torch(tmp_path)
    clear_cache()
    actions.session().deferred.clear()
    actions.session().built.clear()


def _records(prefix: Path) -> dict[str, object]:
    data = PrefixData(str(prefix), interoperability=False)
    data.reload()
    return {record.name: record for record in data.iter_records()}


def _torch(prefix: Path) -> str:
    return str(_records(prefix)["pytorch"].version)  # type: ignore[attr-defined]


def _pip_extension(prefix: Path) -> None:
    """pointnet2_ops built for torch 2.14.1 and installed by pip (as conda cuda install does)."""
    dist = prefix / SITE / f"pointnet2_ops-{STALE}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: pointnet2_ops\nVersion: {STALE}\n"
    )
    (dist / "INSTALLER").write_text("pip\n")


def test_conda_install_of_another_torch_is_vetoed_and_the_setting_lets_it_through(
    setup: tuple[WheelIndex, LocalChannel],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    conda_cli: object,
) -> None:
    _, channel = setup
    prefix = tmp_path / "env"
    where = ["-p", str(prefix), "--override-channels", "-c", channel.url]
    conda_cli("create", "-y", *where, "python", "pytorch=2.14.1")  # type: ignore[operator]
    _pip_extension(prefix)
    with pytest.raises(CondaError) as refused:
        conda_cli("install", "-y", *where, "pytorch=2.15.0")  # type: ignore[operator]
    text = str(refused.value)
    assert f"with a channel's pytorch 2.15.0 ({NEW_BUILD}, CUDA 13.0) in {prefix}" in text
    assert f"pointnet2-ops {STALE} (installed by pip) was built for the old torch" in text
    assert "conda config --append plugins.cuda_resolve_keep_stale NAME" in text
    repair = f"conda cuda install -p {prefix} --repair"
    hint = (
        "CONDA_PLUGINS_CUDA_RESOLVE_KEEP_STALE=pointnet2-ops conda install "
        f"{' '.join(where)} pytorch=2.15.0 && {repair}"
    )
    assert text.rstrip().endswith(hint), text
    assert _torch(prefix) == "2.14.1"  # vetoed before conda's transaction
    # The setting, as the message says to set it: conda writes it, conda reads it back.
    condarc = ["--file", str(tmp_path / "condarc")]
    append = ["--append", "plugins.cuda_resolve_keep_stale", "kaolin"]
    conda_cli("config", *condarc, *append)  # type: ignore[operator]
    reset_context()
    assert actions.plugin_settings().keep_stale == ("kaolin",)
    with pytest.raises(CondaError, match="pointnet2-ops"):  # another name: still refused
        conda_cli("install", "-y", *where, "pytorch=2.15.0")  # type: ignore[operator]
    # The hint's one-command form: conda's own variable for the plugin's setting.
    monkeypatch.setenv("CONDA_PLUGINS_CUDA_RESOLVE_KEEP_STALE", "pointnet2-ops")
    reset_context()
    assert "pointnet2-ops" in actions.plugin_settings().keep_stale
    said, _, _ = conda_cli("install", "-y", *where, "pytorch=2.15.0")  # type: ignore[operator]
    assert _torch(prefix) == "2.15.0"
    assert f"note: pointnet2-ops {STALE} stay built for a channel's pytorch 2.14.1" in said
    assert repair in said


def test_conda_stops_a_torch_change_under_the_plugins_own_package_and_the_hint_gets_through(
    setup: tuple[WheelIndex, LocalChannel], tmp_path: Path, conda_cli: object
) -> None:
    """conda keeps a package the user asked for (its history) with the exact pytorch its record
    pins: both solvers refuse the change before any post-solve runs. The plugin's error hint
    (conda's ``conda_error_hints``) says why and gives the commands, which work as written."""
    _, channel = setup
    prefix = tmp_path / "env"
    where = ["-p", str(prefix), "--override-channels", "-c", channel.url]
    conda_cli("create", "-y", *where, "pytorch=2.14.1", "wheelext")  # type: ignore[operator]
    ours = _records(prefix)["wheelext"]
    assert "pytorch ==2.14.1" in " ".join(ours.depends)  # type: ignore[attr-defined]
    with pytest.raises(UnsatisfiableError) as refused:
        conda_cli("install", "-y", *where, "pytorch=2.15.0")  # type: ignore[operator]
    assert _torch(prefix) == "2.14.1"
    (hint,) = [h.text for h in actions.error_hints(refused.value)]
    assert hint.startswith(
        "wheelext was built by cuda-resolve for a channel's pytorch 2.14.1 "
        "(cuda130_py311_h0_300, CUDA 13.0), and conda keeps it as asked for"
    ), hint
    commands = hint.rsplit(": ", 1)[1]
    assert commands == (
        f"conda remove -p {prefix} wheelext && conda install {' '.join(where)} "
        "pytorch=2.15.0 wheelext"
    )
    # Another error, or another command, gets no such hint.
    assert list(actions.error_hints(CondaError("other"))) == []
    # Followed as written (each command a conda command line in this process).
    actions.session().deferred.clear()
    for line in commands.split(" && "):
        words = shlex.split(line)[1:]
        conda_cli(*words[:1], "-y", *words[1:])  # type: ignore[operator]
    assert _torch(prefix) == "2.15.0"
    again = _records(prefix)["wheelext"]
    assert f"pytorch ==2.15.0 {NEW_BUILD}" in again.depends  # type: ignore[attr-defined]
