"""The torch that lands is the torch that was planned (issue 27), with the real pip.

A loopback stand-in for PyPI (the user's PyPI mirror, ``PIP_INDEX_URL``) serves torch 2.13.0 as
PyPI does: no local label in its metadata, ``+cu130`` in its ``torch/version.py``. A folder in
``PIP_FIND_LINKS`` holds ``torch-2.13.0+cpu``, as on many shared machines: ``+cpu`` satisfies
``==2.13.0`` and sorts above it, so pip takes it wherever it may see the folder. The torch step
asks the user's index alone; a mirror that serves a CPU build anyway is caught by the check after
pip ran, which restores the environment and names the file pip took."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_support import StaticIndex, make_wheel, serve

from cuda_resolve.errors import InstallError
from cuda_resolve.index import default_index
from cuda_resolve.install.options import InstallOptions
from cuda_resolve.install.run import InstallRequest, run
from cuda_resolve.torch_identity import read_installed_torch


def _torch(folder: Path, version: str, label: str, cuda: str | None) -> Path:
    cuda_text = repr(cuda) if cuda else "None"
    return make_wheel(
        folder,
        "torch",
        version,
        files={
            "torch/__init__.py": "from .version import __version__\n",
            "torch/version.py": f"__version__ = '{label}'\ncuda = {cuda_text}\nhip = None\n",
        },
    )


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("lands")
    built = root / "built"
    pypi = StaticIndex(root / "pypi")
    pypi.add(_torch(built / "pypi", "2.13.0", "2.13.0+cu130", "13.0"))
    wrong = StaticIndex(root / "wrong")  # a mirror serving another build under the same name
    wrong.add(_torch(built / "wrong", "2.13.0+cpu", "2.13.0+cpu", None))
    links = root / "links"
    _torch(links, "2.13.0+cpu", "2.13.0+cpu", None)
    with serve(root / "pypi") as pypi_url, serve(root / "wrong") as wrong_url:
        yield {"pypi": f"{pypi_url}/simple", "wrong": f"{wrong_url}/simple", "links": str(links)}


def _environ(index_url: str, links: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ.update(PIP_INDEX_URL=index_url, PIP_FIND_LINKS=links)
    return environ


def _install(python: Path, environ: dict[str, str], tmp_path: Path) -> object:
    from cuda_resolve.detect import detect_environment

    env = detect_environment(python=str(python), environ=environ, cache_dir=tmp_path / "cache")
    return run(
        InstallRequest(requirements=("torch==2.13.0+cu130",)),
        env,
        default_index(),
        InstallOptions(),
        environ=environ,
    )


def _site(python: Path) -> list[str]:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [done.stdout.strip()]


def test_a_cpu_torch_in_find_links_does_not_replace_pypis_cuda_build(
    bench: dict[str, str], tmp_path: Path
) -> None:
    python = copy_venv(tmp_path / "venv")
    environ = _environ(bench["pypi"], bench["links"])
    result = _install(python, environ, tmp_path)
    [step] = result.plan.steps  # type: ignore[attr-defined]
    assert step.torch_index_only and step.pypi_index
    landed = read_installed_torch(_site(python))
    assert landed is not None
    assert (landed.label, landed.pip_version, landed.source) == ("2.13.0+cu130", "2.13.0", "pypi")
    assert "torch" in result.verified  # type: ignore[attr-defined]


def test_a_mirror_serving_a_cpu_build_is_refused_and_the_environment_restored(
    bench: dict[str, str], tmp_path: Path
) -> None:
    python = copy_venv(tmp_path / "venv")
    environ = _environ(bench["wrong"], bench["links"])
    with pytest.raises(InstallError) as failed:
        _install(python, environ, tmp_path)
    message = str(failed.value)
    assert "torch 2.13.0+cpu was installed where the plan is 2.13.0+cu130 (a CPU build)" in message
    # The file pip took, from the mirror (not the find-links folder, which the step never saw).
    assert "torch-2.13.0" in message and "127.0.0.1" in message and bench["links"] not in message
    assert "restored" in str(failed.value.hint)
    assert read_installed_torch(_site(python)) is None  # the environment is as it was


def test_the_pypi_torch_step_keeps_the_users_index_and_drops_links_and_extra_indexes(
    tmp_path: Path,
) -> None:
    from cuda_resolve.install.pip import TargetPip
    from cuda_resolve.install.pipconfig import pip_indexes
    from cuda_resolve.install.prepare import options_for_torch_step

    words = ["-i", "http://m.test/simple", "--find-links", "/x", "--extra-index-url"]
    words += ["http://e.test/simple", "--no-cache-dir"]
    kept = options_for_torch_step(words, keep_index=True)
    assert "http://m.test/simple" in kept and "--no-cache-dir" in kept
    assert "/x" not in kept and "http://e.test/simple" not in kept
    assert "http://m.test/simple" not in options_for_torch_step(words)  # the PyTorch index's step
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nindex-url = http://mirror.test/simple\nfind-links = /opt/wheels\n"
        "extra-index-url = http://extra.test/simple\ntimeout = 30\n",
        encoding="utf-8",
    )
    python = copy_venv(tmp_path / "venv")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ.update(PIP_CONFIG_FILE=str(config), PIP_FIND_LINKS="/more/wheels")
    pip = TargetPip(str(python), environ=environ, log_path=tmp_path / "log")
    step = pip.environ_for(torch_index_only=True, pypi_index=True)
    seen = pip_indexes(str(python), step)  # what the target's pip reads in that environment
    assert seen.index_url == "http://mirror.test/simple"
    assert seen.find_links == () and seen.extra_index_urls == ()
    assert step["PIP_TIMEOUT"] == "30"  # the rest of the configuration is kept
    torch_index = pip_indexes(str(python), pip.environ_for(torch_index_only=True))
    assert torch_index.index_url == "https://pypi.org/simple"  # the step names its index itself


def test_torch_from_pypi_in_a_builds_overlay_asks_the_users_index_alone(tmp_path: Path) -> None:
    import dataclasses
    import tempfile

    from test_builder_runner import USER_ENV, FakePip, _build, _spec

    source = tmp_path / "src"
    source.mkdir()
    (source / "setup.py").write_text("raise SystemExit('the fake runner never runs this')\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(scratch))
        fake = FakePip()
        _build(fake, tmp_path, source, spec=dataclasses.replace(_spec(), torch_index=None))
    torch = fake.runs[0]
    assert torch.command[-1] == "torch==2.14.1"
    assert torch.environ["PIP_INDEX_URL"] == USER_ENV["PIP_INDEX_URL"]  # the user's PyPI mirror
    assert "PIP_FIND_LINKS" not in torch.environ and "PIP_EXTRA_INDEX_URL" not in torch.environ


def test_the_landing_check_compares_release_variant_and_cuda_and_names_the_file() -> None:
    from cuda_resolve.install.verify import planned_torch, torch_mismatch, torch_supplier
    from cuda_resolve.plan import PlanItem
    from cuda_resolve.torch_identity import TorchIdentity, identity_from

    wheel = PlanItem(name="torch", version="2.13.0", kind="wheel", variant="cu130")
    kept = PlanItem(name="torch", version="2.13.0+cu130", kind="installed")
    planned = planned_torch([wheel])
    assert planned is not None and planned == planned_torch([kept])
    assert planned_torch([PlanItem(name="numpy", version="2.0", kind="wheel")]) is None

    def landed(label: str, cuda: str | None, pip: str | None = None) -> TorchIdentity | None:
        return identity_from(
            version_py={"__version__": label, "cuda": cuda}, metadata_version=pip or label
        )

    assert torch_mismatch(planned, landed("2.13.0+cu130", "13.0", "2.13.0")) is None
    cpu = torch_mismatch(planned, landed("2.13.0+cpu", None))
    assert cpu is not None and "(a CPU build)" in cpu
    other = torch_mismatch(planned, landed("2.13.0+cu126", "12.6"))
    assert other is not None and "another build variant" in other
    release = torch_mismatch(planned, landed("2.14.0+cu130", "13.0"))
    assert release is not None and "another release" in release
    cuda = torch_mismatch(planned, landed("2.13.0", "12.8", "2.13.0"))
    assert cuda is not None and "another build variant" in cuda  # cu128, not cu130
    mixed = torch_mismatch(planned, landed("2.13.0+cu130", "12.8"))  # a label and a CUDA apart
    assert mixed is not None and "torch.version.cuda is 12.8" in mixed
    assert "no torch is installed" in (torch_mismatch(planned, None) or "")

    took = landed("2.13.0+cpu", None)
    assert took is not None
    lines = [
        "Looking in links: /opt/wheels",
        "Processing /opt/wheels/torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl",
        "Downloading http://m.test/files/numpy-2.0-py3-none-any.whl (1 kB)",
    ]
    named = torch_supplier(took, lines)
    assert named.startswith("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl (pip: ")
    quoted = ["Downloading http://m.test/whl/torch-2.13.0%2Bcpu-py3-none-any.whl (1 kB)"]
    assert torch_supplier(took, quoted).startswith("http://m.test/whl/torch-2.13.0%2Bcpu")
    assert "local label" in torch_supplier(took, [])


def test_the_landing_check_refuses_a_cpu_torch_unless_pip_installs_elsewhere(
    tmp_path: Path,
) -> None:
    from cuda_resolve.environment import Environment, Machine, PythonInfo
    from cuda_resolve.install.transaction import _check_torch_landed
    from cuda_resolve.plan import Plan, PlanItem

    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\n")
    env = Environment(
        machine=Machine(), python=PythonInfo(version="3.11.7", site_packages=(str(site),))
    )
    item = PlanItem(name="torch", version="2.13.0", kind="wheel", variant="cu130")
    plan = Plan(environment=env, items=(item,), pass_through=(), reasons=(), rejected=())
    notes: list[str] = []
    with pytest.raises(InstallError, match=r"\(a CPU build\)"):
        _check_torch_landed(plan, env, InstallOptions(), [], tmp_path / "log", notes)
    elsewhere = InstallOptions(pip_args=("--target", str(tmp_path / "t")))
    _check_torch_landed(plan, env, elsewhere, [], tmp_path / "log", notes)
    assert notes == ["pip installs outside the target's site-packages: torch's build not checked"]
