"""One identity for an installed torch (issue 27): release, variant, source, pip's version.

PyPI's wheel says ``2.15.0`` in its metadata and ``2.15.0+cu132`` in ``torch/version.py``; the
PyTorch index's says ``2.15.0+cu132`` in both. Detection, profiles, plans, locks and ``sync``
read one :class:`~cuda_resolve.torch_identity.TorchIdentity`: installing torch from a loopback
'PyPI', locking this machine and ``sync --check`` then report no drift, and a lock made from a
saved profile of that machine names the same file."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _torch_env import copy_venv
from test_lock_support import StaticIndex, make_wheel, serve

from cuda_resolve.cli import main
from cuda_resolve.environment import TorchInfo
from cuda_resolve.torch_identity import identity_from, identity_of, read_installed_torch
from cuda_resolve.versions import CudaVersion

# -- the identity from what was read ---------------------------------------------------------


def test_pypis_file_is_a_cuda_build_known_to_pip_without_its_label() -> None:
    found = identity_from(
        version_py={"__version__": "2.15.0+cu132", "cuda": "13.2", "hip": None},
        metadata_version="2.15.0",
    )
    assert found is not None
    assert (found.release, found.variant, found.cuda) == ("2.15.0", "cu132", CudaVersion(13, 2))
    assert (found.source, found.pip_version, found.requirement) == (
        "pypi",
        "2.15.0",
        "torch==2.15.0",
    )
    assert found.label == "2.15.0+cu132"


def test_the_pytorch_index_file_carries_its_label_for_pip_too() -> None:
    found = identity_from(
        version_py={"__version__": "2.15.0+cu132", "cuda": "13.2", "hip": None},
        metadata_version="2.15.0+cu132",
    )
    assert found is not None
    assert (found.source, found.requirement) == ("pytorch", "torch==2.15.0+cu132")
    pypi = identity_from(
        version_py={"__version__": "2.15.0+cu132", "cuda": "13.2"}, metadata_version="2.15.0"
    )
    assert pypi is not None and pypi.same_build(found) and pypi.source != found.source


def test_cpu_rocm_and_unlabelled_builds() -> None:
    cpu = identity_from(
        version_py={"__version__": "2.13.0+cpu", "cuda": None}, metadata_version="2.13.0+cpu"
    )
    assert cpu is not None and (cpu.variant, cpu.cuda) == ("cpu", None)
    # macOS and old PyPI CPU wheels: no label anywhere, version.py names no CUDA: a CPU build
    plain = identity_from(
        version_py={"__version__": "2.13.0", "cuda": None}, metadata_version="2.13.0"
    )
    assert plain is not None and plain.variant == "cpu"
    rocm = identity_from(
        version_py={"__version__": "2.4.1", "cuda": None, "hip": "6.1.40091-a8dbc0c19"},
        metadata_version="2.4.1",
    )
    assert rocm is not None and rocm.variant == "rocm6.1"
    # no version.py: the label decides, else nothing is known of the variant
    bare = identity_from(version_py=None, metadata_version="2.5.1+cu124")
    assert bare is not None and (bare.variant, bare.cuda) == ("cu124", CudaVersion(12, 4))
    unlabelled = identity_from(version_py=None, metadata_version="2.5.1")
    assert unlabelled is not None and unlabelled.variant is None
    assert identity_from(version_py=None, metadata_version=None) is None


def test_a_file_given_by_url_keeps_its_source_and_names_the_url() -> None:
    found = identity_from(
        version_py={"__version__": "2.15.0+cu132", "cuda": "13.2"},
        metadata_version="2.15.0",
        direct_url=json.dumps({"url": "https://mirror.example/torch-2.15.0-cp311.whl"}),
    )
    assert found is not None and found.source == "pypi"
    assert found.url == "https://mirror.example/torch-2.15.0-cp311.whl"
    assert found.url in found.describe_source()
    broken = identity_from(version_py=None, metadata_version="2.15.0", direct_url="{not json")
    assert broken is not None and broken.url is None


def test_a_detected_or_profiled_torch_has_the_same_identity() -> None:
    detected = TorchInfo(version="2.15.0+cu132", cuda=CudaVersion(13, 2), pip_version="2.15.0")
    assert identity_of(detected) == identity_from(
        version_py={"__version__": "2.15.0+cu132", "cuda": "13.2"}, metadata_version="2.15.0"
    )
    older = identity_of(TorchInfo(version="2.15.0+cu132", cuda=CudaVersion(13, 2)))
    assert (older.source, older.requirement) == ("unknown", "torch==2.15.0+cu132")
    cpu = identity_of(TorchInfo(version="2.13.0", pip_version="2.13.0"))
    assert cpu.variant == "cpu"


def test_the_installed_files_are_read_first_on_the_path_without_importing(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for site, label, metadata in ((first, "2.15.0+cu132", "2.15.0"), (second, "2.1.0", "2.1.0")):
        (site / "torch").mkdir(parents=True)
        (site / "torch" / "__init__.py").write_text("raise SystemExit('never imported')\n")
        (site / "torch" / "version.py").write_text(f"__version__ = '{label}'\ncuda = '13.2'\n")
        meta = site / f"torch-{metadata}.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {metadata}\n")
        (meta / "INSTALLER").write_text("pip\n")
    found = read_installed_torch([str(first), str(second)])
    assert found is not None
    assert (found.label, found.pip_version, found.installer) == ("2.15.0+cu132", "2.15.0", "pip")
    assert read_installed_torch([str(tmp_path / "nothing")]) is None


def test_a_profile_keeps_pips_version(tmp_path: Path) -> None:
    from cuda_resolve.errors import CudaResolveError
    from cuda_resolve.profile import dump_profile, load_profile

    path = tmp_path / "p.toml"
    path.write_text(
        '[machine]\nos = "linux"\narch = "x86_64"\n[python]\nversion = "3.11.7"\n'
        '[torch]\nversion = "2.15.0+cu132"\ncuda = "13.2"\npip_version = "2.15.0"\n'
    )
    env = load_profile(path)
    assert env.torch is not None and identity_of(env.torch).source == "pypi"
    again = tmp_path / "again.toml"
    again.write_text(dump_profile(env))
    assert load_profile(again).torch == env.torch
    path.write_text(path.read_text().replace('pip_version = "2.15.0"', 'pip_version = "x y"'))
    with pytest.raises(CudaResolveError, match="pip_version"):
        load_profile(path)


# -- install, lock, sync --check: no drift ---------------------------------------------------


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("identity")
    index = StaticIndex(root / "pypi")
    index.add(
        make_wheel(
            root / "built",
            "torch",
            "2.15.0",
            files={
                "torch/__init__.py": "from .version import __version__\n",
                "torch/version.py": "__version__ = '2.15.0+cu132'\ncuda = '13.2'\nhip = None\n",
            },
        )
    )
    with serve(root / "pypi") as url:
        yield f"{url}/simple"


def _locked_torch(lock: Path) -> dict[str, object]:
    from cuda_resolve._toml import parse_toml_text
    from cuda_resolve.errors import UsageError

    data = parse_toml_text(
        lock.read_text(encoding="utf-8"), origin=str(lock), error=UsageError
    ).data
    [torch] = [p for p in data["packages"] if p["name"] == "torch"]
    return dict(torch)


def test_install_lock_and_sync_check_agree_and_a_saved_profile_locks_the_same_file(
    pypi: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuda_resolve.detect import detect_environment
    from cuda_resolve.index import default_index
    from cuda_resolve.install.options import InstallOptions
    from cuda_resolve.install.run import InstallRequest, run

    python = copy_venv(tmp_path / "venv")
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_INDEX_URL", pypi)
    environ = dict(os.environ)
    env = detect_environment(python=str(python), environ=environ, cache_dir=tmp_path / "cache")
    run(
        InstallRequest(requirements=("torch==2.15.0+cu132",)),
        env,
        default_index(),
        InstallOptions(),
        environ=environ,
    )
    here = tmp_path / "pylock.here.toml"
    words = ["lock", "torch==2.15.0", "--index-url", pypi, "--python-for", f"this={python}"]
    # `--profile this` is the target lock would install into: the venv, as if activated (the
    # running interpreter is cuda-resolve's own venv, which would otherwise be the target).
    monkeypatch.setenv("VIRTUAL_ENV", str(python.parent.parent))
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    assert main([*words, "--profile", "this", "-o", str(here)]) == 0
    locked = _locked_torch(here)
    assert locked["version"] == "2.15.0"  # PyPI's file, as installed: not torch==2.15.0+cu132
    capsys.readouterr()
    check = ["sync", str(here), "--name", "this", "--python", str(python), "--check", "--json"]
    assert main(check) == 0
    report = json.loads(capsys.readouterr().out)
    states = {entry["name"]: entry["state"] for entry in report["packages"]}
    assert states == {"torch": "ok"} and report["drift"] is False
    profile = tmp_path / "machine.toml"
    assert main(["detect", "--python", str(python), "--save-profile", str(profile)]) == 0
    assert 'pip_version = "2.15.0"' in profile.read_text(encoding="utf-8")
    saved = tmp_path / "pylock.saved.toml"
    words[-1] = f"machine={python}"
    assert main([*words, "--profile", str(profile), "-o", str(saved)]) == 0
    assert _locked_torch(saved)["wheels"] == locked["wheels"]  # the same file, hash and URL
