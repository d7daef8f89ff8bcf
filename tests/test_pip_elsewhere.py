"""pip sent elsewhere by its variables (PIP_TARGET, PIP_PREFIX, PIP_ROOT, PIP_USER) still runs
when everything planned is installed in the target.

Found walking docs/install.md as a user (H7): ``PIP_TARGET=/tmp/tgt cuda-pip install
pointnet2_ops`` into a venv that already had the build said ``nothing to change: everything was
already installed`` and put nothing into /tmp/tgt, where a plain ``pip install`` installs; with
``--target /tmp/tgt`` on the command line pip did run. What the target has says nothing of the
folder those variables name."""

from __future__ import annotations

import pytest
from test_installed_builds import LABEL, _env, _plan

from cuda_resolve.index import default_index
from cuda_resolve.install.options import InstallOptions
from cuda_resolve.install.prepare import complete_plan

INSTALLED = {"torch": "2.11.0", "pointnet2-ops": LABEL}


def _complete(environ: dict[str, str]) -> tuple[str | None, int]:
    env = _env()
    done = complete_plan(
        _plan(env),
        env,
        default_index(),
        InstallOptions(),
        pip=None,
        installed=INSTALLED,
        environ=environ,
    )
    return done.skip_pip, len(done.steps)


def test_everything_installed_runs_no_pip() -> None:
    skip, steps = _complete({})
    assert skip is not None and steps == 0


@pytest.mark.parametrize(
    "variable, value",
    [("PIP_TARGET", "/tmp/tgt"), ("PIP_PREFIX", "/opt/x"), ("PIP_ROOT", "/r"), ("PIP_USER", "1")],
)
def test_a_variable_sending_pip_elsewhere_runs_pip(variable: str, value: str) -> None:
    skip, steps = _complete({variable: value})
    assert skip is None and steps == 1


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off"])
def test_pip_user_off_is_not_elsewhere(value: str) -> None:
    skip, _ = _complete({"PIP_USER": value})
    assert skip is not None
