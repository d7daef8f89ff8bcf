"""A torch change conda itself makes does not silently orphan what cuda-resolve built for the
old torch (issue 27, item 1, for conda environments): the post-solve veto of
:class:`CondaSession`, driven as in tests/test_conda_session.py (py-rattler solving and
installing, the stand-in ``pytorch`` packages of a channel).

- An extension pip installed (``conda cuda install``, cuda-pip) and built for the old torch:
  conda does not know it links torch, so the solve is refused, naming it, the plugin's setting
  that leaves it (``plugins.cuda_resolve_keep_stale`` in ``.condarc``, or conda's own
  ``CONDA_PLUGINS_CUDA_RESOLVE_KEEP_STALE`` for one command) and the command that rebuilds it
  after (``conda cuda install -p PREFIX --repair``).
- A package of the local channel (cuda-resolve built it against the old ``pytorch``; its pin
  names that build) that the solve removes or leaves: carried along, through the deferral a
  command naming it gets (built again for the new torch after the command, installed through
  conda).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_conda_fetch import SITE
from test_conda_session import (  # noqa: F401
    ACTIVE,
    PY,
    TORCH_BUILD,
    RattlerConda,
    _said,
    conda,
    make_package,
    standin_channel,
)

from cuda_resolve.conda.channel import LocalChannel
from cuda_resolve.conda.records import CondaRecord, read_prefix_records
from cuda_resolve.conda.session import Command, PluginSettings, Solve, Spec
from cuda_resolve.conda.subcommand import cuda_argv
from cuda_resolve.errors import UsageError

try:
    import rattler
except ImportError:  # a conda venv run by hand
    rattler = None  # type: ignore[assignment]
pytestmark = pytest.mark.skipif(
    rattler is None, reason="py-rattler (the test extra) is the solver and transaction here"
)

NEW_BUILD = f"cuda130_{PY}_h1_300"
STALE = "3.0.0+pt2141cu130.sm80"


def newer_torch(folder: Path) -> LocalChannel:
    """The stand-ins' channel (tests/test_conda_session.py), with a stand-in pytorch 2.15.0 for
    CUDA 13.0 too (one channel: strict channel priority takes pytorch from the first)."""
    channel = standin_channel(folder)
    make_package(
        channel,
        folder / "newer-scratch",
        name="pytorch",
        version="2.15.0",
        build=NEW_BUILD,
        build_number=300,
        depends=["python"],
        files={
            f"{SITE}/torch/__init__.py": b"__version__ = '2.15.0'\nfrom . import version\n",
            f"{SITE}/torch/version.py": b"__version__ = '2.15.0'\ncuda = '13.0'\n",
            f"{SITE}/torch-2.15.0.dist-info/METADATA": (
                b"Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0\n"
            ),
            f"{SITE}/torch-2.15.0.dist-info/INSTALLER": b"conda\n",
        },
    )
    return channel


def _torch(prefix: Path) -> str:
    (record,) = [r for r in read_prefix_records(prefix) if r.name == "pytorch"]
    return record.version


def test_a_torch_change_under_an_extension_pip_built_for_the_old_torch_is_refused(
    conda: RattlerConda, tmp_path: Path
) -> None:
    channel = newer_torch(tmp_path)
    prefix = tmp_path / "env"
    conda.run("create", prefix, ["python", "pytorch=2.14.1"], [channel.url])
    # pointnet2_ops built for that torch and installed by pip (conda cuda install does so)
    dist = prefix / SITE / f"pointnet2_ops-{STALE}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: pointnet2_ops\nVersion: {STALE}\n"
    )
    (dist / "INSTALLER").write_text("pip\n")
    # kaolin as conda installed it (a package of a channel): conda's solver relinks its own
    conda_owned = prefix / SITE / "kaolin-0.18.0.dist-info"
    conda_owned.mkdir()
    (conda_owned / "METADATA").write_text("Metadata-Version: 2.1\nName: kaolin\nVersion: 0.18.0\n")
    (conda_owned / "INSTALLER").write_text("conda\n")
    channels = [channel.url]
    with pytest.raises(UsageError) as refused:
        conda.run("install", prefix, ["pytorch=2.15.0"], channels)
    text = str(refused.value)
    assert (
        f"this solve replaces a channel's pytorch 2.14.1 ({TORCH_BUILD}, CUDA 13.0) with " in text
    )
    assert f"a channel's pytorch 2.15.0 ({NEW_BUILD}, CUDA 13.0) in {prefix}" in text
    assert f"pointnet2-ops {STALE} (installed by pip) was built for the old torch" in text
    assert "'undefined symbol'" in text and "nothing was changed" in text
    assert "kaolin" not in text
    assert "conda config --append plugins.cuda_resolve_keep_stale NAME" in text
    repair = f"conda cuda install -p {prefix} --repair"
    assert refused.value.hint == (
        "to change torch and rebuild them for the new one: "
        "CONDA_PLUGINS_CUDA_RESOLVE_KEEP_STALE=pointnet2-ops "
        f"conda install -p {prefix} --override-channels -c {channel.url} pytorch=2.15.0 && {repair}"
    )
    assert _torch(prefix) == "2.14.1"  # refused before the transaction
    # Another name in the setting leaves the refusal as it was.
    conda.settings = dataclasses.replace(ACTIVE, keep_stale=("kaolin",))
    with pytest.raises(UsageError, match="pointnet2-ops"):
        conda.run("install", prefix, ["pytorch=2.15.0"], channels)
    assert _torch(prefix) == "2.14.1"
    # The setting the hint names (as the user spells the package): the change goes ahead, and
    # the note says how to rebuild.
    conda.settings = dataclasses.replace(ACTIVE, keep_stale=("kaolin", "pointnet2_ops"))
    conda.run("install", prefix, ["pytorch=2.15.0"], channels)
    assert _torch(prefix) == "2.15.0"
    assert f"note: pointnet2-ops {STALE} stay built for a channel's pytorch 2.14.1" in _said(conda)
    assert "(plugins.cuda_resolve_keep_stale)" in _said(conda)
    assert repair in _said(conda)
    # The rebuild command is cuda-resolve's install --repair for the environment's python.
    words = repair.split()[2:]
    argv = cuda_argv(words, locate=lambda name: tmp_path / name, default=tmp_path / "active")
    assert argv == ["install", "--repair", "--python", str(prefix / "bin" / "python")]


def test_a_torch_change_that_keeps_the_build_or_finds_no_extension_goes_ahead(
    conda: RattlerConda, tmp_path: Path
) -> None:
    channel = newer_torch(tmp_path)
    prefix = tmp_path / "env"
    conda.run("create", prefix, ["python", "pytorch=2.14.1"], [channel.url])
    conda.run("install", prefix, ["pytorch=2.15.0"], [channel.url])
    assert _torch(prefix) == "2.15.0"
    assert "built for the old torch" not in _said(conda)


def _ours(tmp_path: Path, prefix: Path) -> CondaRecord:
    """wheelext as cuda-resolve leaves it in an environment: a package of the local channel whose
    pin names the channel's pytorch 2.14.1 it was built against."""
    url = (tmp_path / "ours").as_uri()
    record = {
        "name": "wheelext",
        "version": "0.2.0",
        "build": "cp311_pt2141cu130_sm80_h0_0",
        "build_number": 0,
        "depends": [f"pytorch ==2.14.1 {TORCH_BUILD}", "__cuda >=13"],
        "url": f"{url}/linux-64/wheelext-0.2.0-cp311_pt2141cu130_sm80_h0_0.conda",
    }
    (prefix / "conda-meta" / "wheelext-0.2.0-cp311_pt2141cu130_sm80_h0_0.json").write_text(
        json.dumps(record)
    )
    return CondaRecord.from_json(record, origin="test")


def test_a_package_built_for_the_replaced_torch_is_carried_along(
    conda: RattlerConda, tmp_path: Path
) -> None:
    channel = newer_torch(tmp_path)
    prefix = tmp_path / "env"
    conda.run("create", prefix, ["python", "pytorch=2.14.1"], [channel.url])
    ours = _ours(tmp_path, prefix)
    (pytorch,) = [r for r in channel.records() if r.version == "2.15.0"]
    # the solve of `conda install pytorch=2.15.0`: the new torch, wheelext removed (its pin)
    solve = Solve(prefix=prefix, link=(pytorch,), unlink=(ours,), dry_run=True)
    conda.session.veto(solve, ACTIVE)
    (deferred,) = conda.session.deferred
    assert (deferred.prefix, deferred.specs, deferred.requirements) == (
        prefix,
        ("wheelext",),
        ("wheelext",),
    )
    said = _said(conda)
    assert "wheelext was built by cuda-resolve for a channel's pytorch 2.14.1" in said
    assert "carried along" in said
    assert f"wheelext would be built against a channel's pytorch 2.15.0 ({NEW_BUILD}" in said
    conda.session.veto(solve, ACTIVE)  # conda may post-solve again: carried once
    assert [d.specs for d in conda.session.deferred] == [("wheelext",)]
    # A solve that brings wheelext again (built for the new torch) carries nothing.
    conda.session.deferred.clear()
    again = CondaRecord(name="wheelext", version="0.2.0", build="cp311_pt2150cu130_sm80_h0_0")
    conda.session.veto(Solve(prefix=prefix, link=(pytorch, again), unlink=(ours,)), ACTIVE)
    assert conda.session.deferred == []
    # The same pytorch build (a solve that only relinks it): nothing is replaced.
    (old,) = [r for r in read_prefix_records(prefix) if r.name == "pytorch"]
    conda.session.veto(Solve(prefix=prefix, link=(old,)), ACTIVE)
    assert conda.session.deferred == []


def test_when_conda_keeps_our_package_with_its_torch_the_hint_names_the_way_through(
    conda: RattlerConda, tmp_path: Path
) -> None:
    """A real conda keeps a package the user asked for with the exact pytorch its record pins,
    so it refuses the change as unsatisfiable before any post-solve (tests/
    test_conda_torch_change_conda.py runs it); the plugin's hint on that error is this."""
    channel = newer_torch(tmp_path)
    prefix = tmp_path / "env"
    conda.run("create", prefix, ["python", "pytorch=2.14.1"], [channel.url])
    options = ("--override-channels", "-c", channel.url)

    def hint(*specs: str, settings: PluginSettings = ACTIVE) -> str | None:
        parsed = tuple(
            Spec(text=text, name=text.split("=")[0].split(">")[0], version="") for text in specs
        )
        command = Command(name="install", prefix=prefix, specs=parsed, channel_options=options)
        conda.session.before_command(command, settings)
        return conda.session.unsatisfiable_hint(settings)

    assert hint("pytorch=2.15.0") is None  # nothing of ours: conda's error is about something else
    _ours(tmp_path, prefix)
    said = hint("pytorch=2.15.0")
    assert said == (
        "wheelext was built by cuda-resolve for a channel's pytorch 2.14.1 "
        f"({TORCH_BUILD}, CUDA 13.0), and conda keeps it as asked for, with the torch its "
        "record pins; remove it first, and the install builds it again for the new torch: "
        f"conda remove -p {prefix} wheelext && conda install -p {prefix} --override-channels "
        f"-c {channel.url} pytorch=2.15.0 wheelext"
    )
    assert hint("pytorch=2.15.0", "wheelext") == said  # named already: named once
    assert hint("pytorch=2.14.1") is None  # the torch it pins: not why conda refused
    assert hint("pytorch>=2.14") is None
    assert hint("numpy") is None
    assert hint("pytorch=2.15.0", settings=PluginSettings()) is None  # inactive
