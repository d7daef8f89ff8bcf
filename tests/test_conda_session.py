"""The conda plugin's decisions without conda: :class:`CondaSession` (the state between conda's
hooks) driven through conda's command flow, with py-rattler as the solver and the transaction
behind the session's seams (:class:`Solver`, :class:`CondaInstall`, :class:`PrefixRecords`).

:class:`RattlerConda` runs a command as conda does: the pre-command, the solve (py-rattler's
solver over the command's channels, ``__cuda`` as a virtual package), the post-solve veto
before anything changes, the transaction (py-rattler's installer), then the post-command. The
channels hold small packages the tests make (a ``python`` that makes the prefix a venv of this
interpreter, a CUDA and a CPU-only stand-in ``pytorch``); the extension ``wheelext`` is a
prebuilt wheel on a loopback HTTPS find-links page (tests/test_conda_fetch.py), so nothing is
compiled. tests/test_conda_plugin.py and tests/test_conda_create.py run the same hooks through
a real conda, by hand (conda is not on PyPI).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_conda_fetch import EXTENSION, SITE, TAG, WHEEL_NAME, WheelIndex, served  # noqa: F401

from cuda_resolve.conda.channel import LocalChannel
from cuda_resolve.conda.package import package_for, wheel_to_conda
from cuda_resolve.conda.records import CondaRecord, TorchRecord, read_prefix_records
from cuda_resolve.conda.session import (
    Command,
    CommandEdit,
    CondaSession,
    PluginSettings,
    Solve,
    Spec,
    inactive_hint,
    refuse_insecure_tls,
    requirement,
)
from cuda_resolve.conda.subcommand import cuda_argv
from cuda_resolve.errors import UsageError
from cuda_resolve.versions import CudaVersion
from cuda_resolve.wheelhouse.key import WheelKey

try:
    import rattler
except ImportError:  # a conda venv run by hand (tests/test_conda_create.py imports the packages)
    rattler = None
pytestmark = pytest.mark.skipif(
    rattler is None, reason="py-rattler (the test extra) is the solver and transaction here"
)

pytest_plugins = ["test_net_support"]

PY = TAG.replace("cp", "py")
TORCH_BUILD = f"cuda130_{PY}_h0_300"  # conda-forge ranks its CUDA builds first by build number
CPU_BUILD = f"cpu_{PY}_h0_0"
ACTIVE = PluginSettings(active=True)
FIXTURE_INDEX = Path(__file__).parent / "data" / "index" / "cuext"


# -- packages the tests make ----------------------------------------------------------------------


def make_package(
    channel: LocalChannel,
    scratch: Path,
    *,
    name: str,
    version: str,
    build: str,
    depends: list[str],
    files: dict[str, bytes],
    links: dict[str, str] | None = None,
    build_number: int = 0,
) -> None:
    """A small ``.conda`` package in ``channel`` (files and symbolic links)."""
    from conda_package_handling import api  # type: ignore[import-untyped]

    root = scratch / f"{name}-{version}-{build}"
    (root / "info").mkdir(parents=True)
    paths: list[dict[str, object]] = []
    for relative, data in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
        paths.append(
            {
                "_path": relative,
                "path_type": "hardlink",
                "sha256": hashlib.sha256(data).hexdigest(),
                "size_in_bytes": len(data),
            }
        )
    for relative, target in (links or {}).items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / relative)
        paths.append({"_path": relative, "path_type": "softlink"})
    index = {
        "name": name,
        "version": version,
        "build": build,
        "build_number": build_number,
        "depends": depends,
        "subdir": "linux-64",
    }
    (root / "info" / "index.json").write_text(json.dumps(index))
    (root / "info" / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}))
    (root / "info" / "files").write_text("".join(f"{p['_path']}\n" for p in paths))
    members = ["info/index.json", "info/paths.json", "info/files", *files, *(links or {})]
    api.create(str(root), members, f"{name}-{version}-{build}.conda", str(scratch))
    channel.add(scratch / f"{name}-{version}-{build}.conda", "linux-64")


def standin_channel(folder: Path) -> LocalChannel:
    """``python`` (the prefix becomes a venv of this interpreter) and two ``pytorch`` builds, one
    for CUDA 13.0 and one CPU-only, each a stand-in torch 2.14.1."""
    channel = LocalChannel(folder / "standins")
    scratch = folder / "standins-scratch"
    base = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    version = ".".join(map(str, sys.version_info[:3]))
    cfg = f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {version}\n"
    make_package(
        channel,
        scratch,
        name="python",
        version=version,
        build="0",
        depends=[],
        # site-packages exists from the start, as conda-forge's python ships a README in it
        files={"pyvenv.cfg": cfg.encode(), f"{SITE}/README.txt": b"site-packages\n"},
        links={"bin/python": str(base)},
    )
    for build, cuda in ((TORCH_BUILD, "'13.0'"), (CPU_BUILD, "None")):
        make_package(
            channel,
            scratch,
            name="pytorch",
            version="2.14.1",
            build=build,
            build_number=int(build.rsplit("_", 1)[1]),
            depends=["python"],
            files={
                f"{SITE}/torch/__init__.py": b"__version__ = '2.14.1'\nfrom . import version\n",
                f"{SITE}/torch/version.py": f"__version__ = '2.14.1'\ncuda = {cuda}\n".encode(),
                f"{SITE}/torch-2.14.1.dist-info/METADATA": (
                    b"Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1\n"
                ),
                f"{SITE}/torch-2.14.1.dist-info/INSTALLER": b"conda\n",
            },
        )
    return channel


def pip_torch(prefix: Path, version: str = "2.14.1") -> None:
    """What `pip install torch` leaves that the session reads (no 2 GB download)."""
    site = prefix / "lib" / "python3.11" / "site-packages"
    dist = site / f"torch-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    (dist / "INSTALLER").write_text("pip\n")
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(f"__version__ = '{version}'\ncuda = '13.0'\n")
    (prefix / "conda-meta").mkdir(parents=True, exist_ok=True)
    (prefix / "conda-meta" / "history").write_text("")


def cuext_channel(folder: Path, torch_version: str = "2.14.1") -> LocalChannel:
    """cuext 0.1.0 built here for sm80 against pip's torch (CUDA 13.0), in a channel."""
    wheel = folder / "cuext-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("cuext/__init__.py", "VALUE = 1\n")
        metadata = "Metadata-Version: 2.1\nName: cuext\nVersion: 0.1.0\n"
        archive.writestr("cuext-0.1.0.dist-info/METADATA", metadata)
        wheel_text = "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
        archive.writestr("cuext-0.1.0.dist-info/WHEEL", wheel_text)
        archive.writestr("cuext-0.1.0.dist-info/RECORD", "")
    key = WheelKey(
        package="cuext",
        version="0.1.0",
        torch=torch_version.split("+")[0],
        variant="cu130",
        python_tag="cp311",
        platform="manylinux_2_28_x86_64",
        arch_list="8.0",
        recipe_digest="0123456789abcdef",
    )
    torch = TorchRecord(
        source="pip", version=torch_version, build="pypi_0", cuda=CudaVersion(13, 0)
    )
    package = package_for(key, torch=torch, python=None, python_version="3.11")
    channel = LocalChannel(folder / "cuext-channel")
    channel.add(wheel_to_conda(wheel, package, folder / "out"), package.subdir)
    return channel


# -- the session's seams over py-rattler ----------------------------------------------------------


def _record(record: object) -> CondaRecord:
    """A py-rattler record (a channel's or a prefix's) as cuda-resolve's."""
    data = json.loads(record.to_json())  # type: ignore[attr-defined]
    return CondaRecord.from_json(
        {**data, "channel": str(data.get("channel") or ""), "url": str(data.get("url") or "")},
        origin="py-rattler",
    )


def _installed(prefix: Path) -> list[object]:
    meta = prefix / "conda-meta"
    return [rattler.PrefixRecord.from_path(path) for path in sorted(meta.glob("*.json"))]


@dataclass
class RattlerSolver:
    """The Solver seam: py-rattler's gateway reads the command's channels."""

    channels: list[str]
    cache: Path
    pip_seen: bool = False

    def channel_records(self, spec: Spec) -> Sequence[CondaRecord]:
        gateway = rattler.Gateway(cache_dir=self.cache)
        query = gateway.query(self.channels, ["linux-64", "noarch"], [spec.text], recursive=False)
        return [_record(record) for found in asyncio.run(query) for record in found]

    def see_pip_records(self) -> None:
        self.pip_seen = True


@dataclass
class MetaPrefix:
    """The PrefixRecords seam over files, as conda keeps them: the records in ``conda-meta``,
    the variables in ``conda-meta/state`` (``{"env_vars": {...}}``, conda's PrefixData)."""

    def records(self, prefix: Path) -> Sequence[CondaRecord]:
        return read_prefix_records(prefix)

    def _state(self, prefix: Path) -> dict[str, dict[str, str]]:
        state = prefix / "conda-meta" / "state"
        return json.loads(state.read_text()) if state.is_file() else {}

    def env_vars(self, prefix: Path) -> dict[str, str]:
        return dict(self._state(prefix).get("env_vars", {}))

    def set_env_vars(self, prefix: Path, variables: Mapping[str, str]) -> None:
        state = self._state(prefix)
        state["env_vars"] = {**state.get("env_vars", {}), **variables}
        (prefix / "conda-meta" / "state").write_text(json.dumps(state))

    def unset_env_vars(self, prefix: Path, names: Sequence[str]) -> None:
        state = self._state(prefix)
        state["env_vars"] = {k: v for k, v in state.get("env_vars", {}).items() if k not in names}
        (prefix / "conda-meta" / "state").write_text(json.dumps(state))


def _virtual(cuda: str | None) -> list[object]:
    if cuda is None:
        return []
    name, version = rattler.PackageName("__cuda"), rattler.Version(cuda)
    build = getattr(rattler, "BuildString", str)("0")  # older py-rattler (conda's): a str
    return [rattler.GenericVirtualPackage(name, version, build)]


def rattler_solve(
    prefix: Path, channels: Sequence[str], specs: Sequence[str], cuda: str | None
) -> list[object]:
    """py-rattler's solve of ``specs`` into ``prefix``, keeping what is installed there."""
    installed = _installed(prefix)
    kept = [str(record.name.normalized) for record in installed]  # type: ignore[attr-defined]
    return list(
        asyncio.run(
            rattler.solve(
                sources=list(dict.fromkeys(channels)),
                specs=[rattler.MatchSpec(text) for text in (*specs, *kept)],
                platforms=["linux-64", "noarch"],
                locked_packages=installed,
                virtual_packages=_virtual(cuda),
            )
        )
    )


@dataclass
class RattlerInstall:
    """The CondaInstall seam: py-rattler's solver, then its installer (one transaction)."""

    cache: Path
    cuda: str | None = "13.0"
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, prefix: Path, channels: Sequence[str], specs: Sequence[str]) -> None:
        self.calls.append(tuple(specs))
        records = rattler_solve(prefix, channels, specs, self.cuda)
        asyncio.run(rattler.install(records, prefix, cache_dir=self.cache, show_progress=False))


class Lines:
    """The session's reporter: what the plugin would print."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, text: str) -> None:
        self.lines.append(text)

    def note(self, text: str) -> None:
        self.lines.append(f"note: {text}")

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        pass

    def __str__(self) -> str:
        return "\n".join(self.lines)


def _spec(text: str) -> Spec:
    spec = rattler.MatchSpec(text)
    version = "" if spec.version is None else str(spec.version)
    return Spec(text=text, name=spec.name.normalized, version=version)


@dataclass
class RattlerConda:
    """A conda command's flow with the session's hooks, py-rattler solving and installing."""

    session: CondaSession
    solver: RattlerSolver
    install: RattlerInstall
    settings: PluginSettings = ACTIVE
    solves: list[Solve] = field(default_factory=list)

    def run(
        self,
        command: str,
        prefix: Path,
        specs: Sequence[str],
        channels: Sequence[str],
        *,
        dry_run: bool = False,
    ) -> CommandEdit | None:
        self.solver.channels = list(channels)
        request = Command(
            name=command,
            prefix=prefix,
            specs=tuple(map(_spec, specs)),
            dry_run=dry_run,
            # as `conda COMMAND --override-channels -c URL ...` gives them (the hints repeat them)
            channel_options=("--override-channels", *(w for c in channels for w in ("-c", c))),
        )
        edit = self.session.before_command(request, self.settings)  # the pre-command
        texts = list(specs if edit is None or edit.specs is None else edit.specs)
        if edit is not None and edit.add_channel and edit.add_channel not in channels:
            channels = [*channels, edit.add_channel]
        if edit is not None and edit.dry_run_done:
            return edit
        records = rattler_solve(prefix, channels, texts, self.install.cuda)
        before = {(r.name, r.version, r.build) for r in map(_record, _installed(prefix))}
        after = [_record(record) for record in records]
        link = tuple(r for r in after if (r.name, r.version, r.build) not in before)
        names = {r.name for r in after}
        unlink = tuple(r for r in map(_record, _installed(prefix)) if r.name not in names)
        solve = Solve(prefix=prefix, link=link, unlink=unlink, dry_run=dry_run)
        self.solves.append(solve)
        self.session.veto(solve, self.settings)  # the post-solve: nothing has changed yet
        if dry_run:
            return edit
        cache = self.install.cache
        asyncio.run(rattler.install(records, prefix, cache_dir=cache, show_progress=False))
        self.session.after_command(self.settings, channels)  # the post-command
        return edit


@pytest.fixture
def conda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RattlerConda]:
    """An active plugin's session on an 8.0 GPU with driver 580, py-rattler behind its seams,
    the local channel in this test's folder."""
    monkeypatch.setenv("CUDA_RESOLVE_DRIVER", "580.65.06")
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "8.0")
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_RESOLVE_CONDA_CHANNEL", str(tmp_path / "ours"))
    solver = RattlerSolver(channels=[], cache=tmp_path / "rattler-cache")
    install = RattlerInstall(cache=tmp_path / "pkgs")
    session = CondaSession(
        solver=solver, install=install, prefixes=MetaPrefix(), reporter=Lines(), environ={}
    )
    yield RattlerConda(session=session, solver=solver, install=install)


def _names(prefix: Path) -> set[str]:
    return {record.name for record in read_prefix_records(prefix)}


def _said(conda: RattlerConda) -> str:
    return str(conda.session.reporter)


# -- the post-solve veto --------------------------------------------------------------------------


def test_a_solve_that_brings_a_cpu_torch_is_vetoed_before_anything_is_installed(
    conda: RattlerConda, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    standins = standin_channel(tmp_path)
    prefix = tmp_path / "env"
    with pytest.raises(UsageError, match=r"CPU-only.*nothing would run on the GPU") as vetoed:
        conda.run("create", prefix, ["python", "pytorch=*=cpu*"], [standins.url])
    assert "pytorch=*=cuda*" in str(vetoed.value.hint)
    [solve] = conda.solves
    assert {(r.name, r.build) for r in solve.link} >= {("pytorch", CPU_BUILD)}  # what was refused
    assert not (prefix / "conda-meta").exists()  # refused before the transaction
    conda.run("create", prefix, ["python", "pytorch=*=cuda*"], [standins.url])  # a CUDA build
    assert _names(prefix) == {"python", "pytorch"}


def test_the_veto_stands_aside_when_inactive_or_where_there_is_no_gpu(
    conda: RattlerConda, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    standins = standin_channel(tmp_path)
    conda.settings = PluginSettings(active=False)
    conda.run("create", tmp_path / "inactive", ["python", "pytorch=*=cpu*"], [standins.url])
    assert _names(tmp_path / "inactive") == {"python", "pytorch"}
    conda.settings = ACTIVE
    monkeypatch.setenv("CUDA_RESOLVE_CUDA_ARCH", "")  # no GPU: a CPU build is what it can run
    conda.run("create", tmp_path / "no-gpu", ["python", "pytorch=*=cpu*"], [standins.url])
    assert _names(tmp_path / "no-gpu") == {"python", "pytorch"}


def test_a_channel_pytorch_over_pips_torch_that_packages_pin_is_vetoed(
    conda: RattlerConda, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    pip_torch(prefix)
    built = {"name": "cuext", "version": "0.1.0", "build": "cp311_pt2141cu130_sm80_h0_0"}
    record = {**built, "build_number": 0, "depends": ["torch ==2.14.1 pypi_0"]}
    (prefix / "conda-meta" / "cuext-0.1.0-cp311_pt2141cu130_sm80_h0_0.json").write_text(
        json.dumps(record)
    )
    pytorch = CondaRecord(name="pytorch", version="2.14.1", build=TORCH_BUILD)
    with pytest.raises(UsageError, match=r"over pip's torch 2\.14\.1.*which cuext"):
        conda.session.veto(Solve(prefix=prefix, link=(pytorch,)), ACTIVE)


# -- the torch comes with the command: deferred, vetoed, finished ---------------------------------


def test_create_with_pytorch_and_the_extension_in_one_command(
    conda: RattlerConda, served: WheelIndex, tmp_path: Path
) -> None:
    standins = standin_channel(tmp_path)
    prefix = tmp_path / "env"
    edit = conda.run("create", prefix, ["pytorch", "wheelext"], [standins.url])
    assert edit is not None and edit.specs == ("pytorch",)  # conda installs the rest first
    assert "conda installs the rest first" in _said(conda)
    assert not any(r.name == "wheelext" for r in conda.solves[0].link)
    # after the command: fetched for the torch it brought, installed through the backend
    assert conda.install.calls and conda.install.calls[0][0].startswith("wheelext[version=")
    records = {record.name: record for record in read_prefix_records(prefix)}
    assert set(records) == {"python", "pytorch", "wheelext"}
    ours = records["wheelext"]
    assert ours.url.startswith((tmp_path / "ours").as_uri())
    assert f"pytorch ==2.14.1 {TORCH_BUILD}" in ours.depends and "__cuda >=13" in ours.depends
    assert (prefix / SITE / "wheelext" / EXTENSION).is_file()
    assert not conda.session.deferred  # finished
    assert MetaPrefix().env_vars(prefix) == {}  # a prebuilt wheel: nothing compiled here


@pytest.mark.parametrize(
    ("specs", "said"),
    [
        (["pytorch=*=cpu*", "wheelext"], "must be built against a CUDA torch"),
        (["python", "wheelext"], "leaves none"),
        (["wheelext"], "installs nothing else"),
    ],
    ids=["cpu-torch", "no-torch", "nothing-else"],
)
def test_a_solve_without_a_cuda_torch_is_refused_before_anything_exists(
    specs: list[str], said: str, conda: RattlerConda, served: WheelIndex, tmp_path: Path
) -> None:
    standins = standin_channel(tmp_path)
    prefix = tmp_path / "env"
    with pytest.raises(UsageError, match=said) as refused:
        conda.run("create", prefix, specs, [standins.url])
    assert "nothing was changed" in str(refused.value)
    assert not (prefix / "conda-meta").exists() and not (tmp_path / "ours").exists()
    assert conda.install.calls == []


def test_a_dry_run_names_the_torch_it_would_build_against(
    conda: RattlerConda, served: WheelIndex, tmp_path: Path
) -> None:
    standins = standin_channel(tmp_path)
    prefix = tmp_path / "env"
    conda.run("create", prefix, ["pytorch", "wheelext"], [standins.url], dry_run=True)
    said = f"wheelext would be built against a channel's pytorch 2.14.1 ({TORCH_BUILD}, CUDA 13.0)"
    assert said in _said(conda)
    assert not prefix.exists() and not (tmp_path / "ours").exists()


def test_a_failure_after_the_environment_exists_leaves_its_records_and_names_the_finish(
    conda: RattlerConda, served: WheelIndex, tmp_path: Path
) -> None:
    standins = standin_channel(tmp_path)
    digest = hashlib.sha256(served.wheel).hexdigest()
    good_page = f'<a href="torch-2.14.1_cu130/{WHEEL_NAME}#sha256={digest}">w</a>'
    served.set_page(f'<a href="torch-2.14.1_cu130/{WHEEL_NAME}">w</a>')  # no hash: refused
    prefix = tmp_path / "env"
    with pytest.raises(UsageError) as failed:
        conda.run("create", prefix, ["pytorch", "wheelext"], [standins.url])
    text = str(failed.value)
    assert f"{prefix} exists with 2 conda package(s), a channel's pytorch 2.14.1" in text
    assert "wheelext is not installed in it" in text and "without a sha256" in text
    finish = f"conda install -p {prefix} --override-channels -c {standins.url} wheelext"
    assert str(failed.value.hint).endswith(f"finish with: {finish}")
    assert _names(prefix) == {"python", "pytorch"}  # what exists is what was said
    # The page is fixed; the named command (the install path: torch present) finishes the job.
    served.set_page(good_page)
    edit = conda.run("install", prefix, ["wheelext"], [standins.url])
    assert edit is not None and edit.add_channel == (tmp_path / "ours").as_uri()
    assert edit.specs is not None and edit.specs[0].startswith("wheelext[version='==0.2.0'")
    assert _names(prefix) == {"python", "pytorch", "wheelext"}


def test_a_failed_install_through_the_backend_leaves_the_records_as_they_were(
    conda: RattlerConda, served: WheelIndex, tmp_path: Path
) -> None:
    standins = standin_channel(tmp_path)
    prefix = tmp_path / "env"
    conda.install.cuda = None  # the backend's solve sees no driver: __cuda >=13 is not met
    conda.run("create", prefix, ["python", "pytorch"], [standins.url])
    installed = read_prefix_records(prefix)
    both = (_spec("pytorch"), _spec("wheelext"))  # the torch in the command: wheelext waits
    conda.session.before_command(Command(name="install", prefix=prefix, specs=both), ACTIVE)
    with pytest.raises(UsageError, match=r"(?s)not installed in it: conda could not install"):
        conda.session.after_command(ACTIVE, [standins.url])
    assert read_prefix_records(prefix) == installed
    assert [record.name for record in LocalChannel(tmp_path / "ours").records()] == ["wheelext"]


# -- the install path: torch present --------------------------------------------------------------


def test_a_fitting_channel_build_is_pinned_and_nothing_is_built(
    conda: RattlerConda, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "cuda-resolve.toml"
    config.write_text(f'index_dirs = ["{FIXTURE_INDEX}"]\n')
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    from cuda_resolve.index.load import clear_cache

    clear_cache()
    channel = cuext_channel(tmp_path)  # stands in for a channel's build: sm80, pip's torch
    prefix = tmp_path / "env"
    pip_torch(prefix)
    conda.solver.channels = [channel.url]
    request = Command(name="install", prefix=prefix, specs=(_spec("cuext"),))
    edit = conda.session.before_command(request, ACTIVE)
    [record] = channel.records()
    assert edit == CommandEdit(specs=(f"cuext[version='==0.1.0',build={record.build}]",))
    assert "the channel build cuext 0.1.0" in _said(conda) and "fits" in _said(conda)
    assert conda.solver.pip_seen  # its pin names pip's torch
    assert "building" not in _said(conda) and not (tmp_path / "ours").exists()
    # A dry run of a name no channel serves says what it would build, and builds nothing.
    dry = Command(name="install", prefix=prefix, specs=(_spec("cuext=0.1"),), dry_run=True)
    conda.solver.channels = []
    edit = conda.session.before_command(dry, ACTIVE)
    assert edit is not None and edit.dry_run_done
    assert "would build cuext==0.1.* against pip's torch 2.14.1" in _said(conda)
    assert not (tmp_path / "ours").exists() and not (tmp_path / "cache" / "wheelhouse").exists()
    clear_cache()


def test_later_commands_see_the_local_channel_and_pips_torch(
    conda: RattlerConda, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    pip_torch(prefix)
    ours = (tmp_path / "ours").as_uri()
    record = {"name": "cuext", "version": "0.1.0", "build": "b_0", "url": f"{ours}/linux-64/c"}
    (prefix / "conda-meta" / "cuext-0.1.0-b_0.json").write_text(json.dumps(record))
    unrelated = Command(name="install", prefix=prefix, specs=(_spec("other"),))
    assert conda.session.before_command(unrelated, ACTIVE) == CommandEdit(add_channel=ours)
    assert conda.solver.pip_seen
    conda.solver.pip_seen = False
    remove = Command(name="remove", prefix=prefix, specs=(_spec("cuext"),))
    assert conda.session.before_command(remove, ACTIVE) == CommandEdit(add_channel=ours)
    assert not conda.solver.pip_seen  # removing ours: pip's torch is not a leftover to remove
    assert conda.session.before_command(unrelated, PluginSettings()) is None  # inactive


# -- conda variables after a build ----------------------------------------------------------------


def test_a_build_sets_conda_variables_that_go_when_its_package_does(
    conda: RattlerConda, tmp_path: Path
) -> None:
    channel = cuext_channel(tmp_path)
    prefix = tmp_path / "env"
    pip_torch(prefix)
    [path] = channel.packages()
    settings = PluginSettings(active=True, channel=str(channel.root))
    conda.session.built.append((prefix, path))
    conda.session.after_command(settings, [])
    prefixes = MetaPrefix()
    assert prefixes.env_vars(prefix) == {"TORCH_CUDA_ARCH_LIST": "8.0"}
    assert not conda.session.built
    conda.session.after_remove(prefix, settings)  # no package of the channel is installed
    assert prefixes.env_vars(prefix) == {}
    # A value the user changed since is theirs: it stays.
    conda.session.built.append((prefix, path))
    conda.session.after_command(settings, [])
    prefixes.set_env_vars(prefix, {"TORCH_CUDA_ARCH_LIST": "9.0"})
    conda.session.after_remove(prefix, settings)
    assert prefixes.env_vars(prefix) == {"TORCH_CUDA_ARCH_LIST": "9.0"}


# -- plain functions the hooks use ----------------------------------------------------------------


def test_settings_and_specs_become_what_the_builds_read(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="never downloads without verifying TLS"):
        refuse_insecure_tls(PluginSettings(ssl_verify=False), {})
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    environ: dict[str, str] = {}
    proxies = (("https", "http://proxy:3128"), ("ftp", "x"))
    refuse_insecure_tls(PluginSettings(ssl_verify=str(bundle), proxy_servers=proxies), environ)
    assert environ == {
        "REQUESTS_CA_BUNDLE": str(bundle),
        "PIP_CERT": str(bundle),
        "HTTPS_PROXY": "http://proxy:3128",
    }
    assert requirement(_spec("pointnet2_ops=3.0")) == "pointnet2_ops==3.0.*"
    assert requirement(_spec("kaolin>=0.17,<0.18")) == "kaolin>=0.17,<0.18"
    assert requirement(_spec("kaolin")) == "kaolin"
    with pytest.raises(UsageError, match="PEP 440"):
        requirement(Spec(text="x=1.0a b", name="x", version="1.0a b"))


def test_the_inactive_hint_names_only_what_cuda_resolve_builds() -> None:
    from cuda_resolve.index import default_index

    text = inactive_hint(["pointnet2_ops", "numpyy"], default_index())
    assert text is not None and text.startswith("cuda-resolve can build pointnet2_ops for")
    assert "conda config --set plugins.cuda_resolve_active true" in text
    assert inactive_hint(["numpyy", "pytorch"], default_index()) is None


def test_conda_cuda_commands_target_the_environment(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").touch()
    python = str(prefix / "bin" / "python")

    def locate(name: str) -> Path:
        return tmp_path / name

    def argv(*words: str) -> list[str]:
        return cuda_argv(words, locate=locate, default=tmp_path / "active")

    assert argv("plan", "-n", "env", "kaolin") == ["plan", "kaolin", "--python", python]
    assert argv("detect", f"--prefix={prefix}", "--json") == [
        "detect",
        "--json",
        "--python",
        python,
    ]
    assert argv("lock", "-p", str(prefix), "torch") == [
        *("lock", "torch", "--profile", "this", "--python-for", f"this={python}")
    ]
    with pytest.raises(UsageError, match="the target is the conda environment"):
        argv("plan", "-p", str(prefix), "--python", sys.executable, "cuext")
    with pytest.raises(UsageError, match="no such command"):
        argv("frobnicate")
    with pytest.raises(UsageError, match="-n needs a value"):
        argv("doctor", "-n")
    with pytest.raises(UsageError, match="has no python"):
        argv("doctor")  # the active environment here has none
