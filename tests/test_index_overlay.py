"""Overlays: a lab directory, CUDA_RESOLVE_INDEX_PATH, the user config dir and --index DIR.

Later directories replace entries by key and ``Index.origins`` says which file won. The lab
fixture (tests/data/index/overlay-lab) replaces toolkit 12.4, torch 2.5.1 and kaolin's 0.18.0
wheel list, adds a kaolin recipe, and adds a package (pytorch3d) with no code change.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cuda_resolve.errors import IndexDataError
from cuda_resolve.index import default_index
from cuda_resolve.index.load import (
    INDEX_PATH_ENV,
    clear_cache,
    load_default_index,
    load_index,
    overlay_dirs,
)
from cuda_resolve.index.model import ExtensionWheels, Patch
from cuda_resolve.index.urls import expand_pattern
from cuda_resolve.versions import CudaVersion

LAB = Path(__file__).parent / "data" / "index" / "overlay-lab"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv(INDEX_PATH_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    clear_cache()
    yield
    clear_cache()


def _toolkit_overlay(directory: Path, gcc_max: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cuda.toml").write_text(
        f'[toolkit."12.4"]\ndriver_linux = "550.54.14"\ngcc_max = {gcc_max}\nsource = "test '
        f'overlay {gcc_max}"\n',
        encoding="utf-8",
    )
    return directory


def test_overlay_replaces_entries_by_key_and_records_origins() -> None:
    shipped = load_index(include_user=False)
    index = load_index([LAB], include_user=False)
    lab_cuda, lab_torch = str(LAB / "cuda.toml"), str(LAB / "torch.toml")

    toolkit = index.toolkit(CudaVersion(12, 4))
    assert toolkit is not None and toolkit.gcc_max == 14 and toolkit.unverified == ("gcc_max",)
    assert index.origin("toolkit 12.4") == lab_cuda
    assert index.origin("toolkit 12.6") == shipped.origin("toolkit 12.6")

    release = index.torch_release("2.5.1")
    assert release is not None and [v.name for v in release.variants] == ["cpu", "cu124"]
    cu124 = release.variant("cu124")
    assert cu124 is not None and cu124.index_url == "https://mirror.lab.example/whl/cu124"
    assert cu124.arch_list[-1].ptx
    assert index.origin("torch 2.5.1") == lab_torch
    assert index.origin("torch 2.5.0") == shipped.origin("torch 2.5.0")
    untouched = index.torch_release("2.5.0")
    assert untouched is not None and untouched.variant("cu121") is not None
    assert len(index.torch) == len(shipped.torch)
    assert ("source lab-wiki", lab_cuda) in index.origins


def test_package_overlay_merges_wheels_and_recipes_by_key() -> None:
    index = load_index([LAB], include_user=False)
    lab_kaolin = str(LAB / "packages" / "kaolin.toml")
    kaolin = index.package("kaolin")
    assert kaolin is not None
    # [package] keys the overlay did not set keep their shipped values and origin
    assert kaolin.placeholder_versions == ("0.1",) and kaolin.find_links is not None
    assert not (index.origin("package kaolin") or "").startswith(str(LAB))
    # the 0.18.0 wheel list is replaced, the others stay
    wheels = {str(w.version): w for w in kaolin.wheels}
    assert wheels["0.18.0"].torch == (("2.8.0", ("cu128",)),)
    assert wheels["0.18.0"].python == ("3.11",)
    assert index.origin("package kaolin wheels 0.18.0") == lab_kaolin
    assert wheels["0.17.0"].variants_for("2.5.1") == ("cu118", "cu121", "cu124")
    assert index.origin("package kaolin wheels 0.17.0") != lab_kaolin
    # recipes: the shipped ones plus the lab's
    assert [r.name for r in kaolin.recipes] == [
        "kaolin-v0.18.0",
        "kaolin-master-d52da9f",
        "kaolin-lab-fork",
    ]
    assert index.origin("package kaolin recipe kaolin-lab-fork") == lab_kaolin


def test_a_lab_adds_a_package_without_code() -> None:
    index = load_index([LAB], include_user=False)
    pytorch3d = index.package("pytorch3d")
    assert pytorch3d is not None
    assert index.origin("package pytorch3d") == str(LAB / "packages" / "pytorch3d.toml")
    assert pytorch3d.requires == ("fvcore", "iopath")
    (wheels,) = pytorch3d.wheels
    assert wheels.variants_for("2.1.0") == ("cu118", "cu121")
    assert wheels.python_for("2.1.1") == ("3.10",) and wheels.python_for("2.1.0") == (
        "3.9",
        "3.10",
        "3.11",
    )
    assert pytorch3d.find_links is not None
    url = expand_pattern(pytorch3d.find_links, torch="2.1.0+cu121", variant="cu121", python="3.10")
    assert (
        url
        == "https://dl.fbaipublicfiles.com/pytorch3d/packaging/wheels/py310_cu121_pyt210/download.html"
    )
    (recipe,) = pytorch3d.recipes
    assert recipe.package == "pytorch3d" and recipe.torch == SpecifierSet(">=2.1")
    assert recipe.smoke is not None and recipe.smoke.imports == ("pytorch3d._C",)
    assert recipe.patches == ()


def test_env_var_directories_are_read_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _toolkit_overlay(tmp_path / "first", 20)
    second = _toolkit_overlay(tmp_path / "second", 21)
    monkeypatch.setenv(INDEX_PATH_ENV, os.pathsep.join([str(first), "", str(second)]))
    index = load_index()
    toolkit = index.toolkit(CudaVersion(12, 4))
    assert toolkit is not None and toolkit.gcc_max == 21
    assert index.origin("toolkit 12.4") == str(second / "cuda.toml")
    assert load_index(include_user=False).toolkit(CudaVersion(12, 4)) != toolkit


def test_user_config_dir_then_env_var_then_explicit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = _toolkit_overlay(tmp_path / "config" / "cuda-resolve" / "index", 30)
    assert overlay_dirs() == [user]
    toolkit = load_index().toolkit(CudaVersion(12, 4))
    assert toolkit is not None and toolkit.gcc_max == 30

    env = _toolkit_overlay(tmp_path / "env", 31)
    monkeypatch.setenv(INDEX_PATH_ENV, str(env))
    assert overlay_dirs() == [user, env]
    toolkit = load_index().toolkit(CudaVersion(12, 4))
    assert toolkit is not None and toolkit.gcc_max == 31

    explicit = _toolkit_overlay(tmp_path / "explicit", 32)
    index = load_index([explicit])
    toolkit = index.toolkit(CudaVersion(12, 4))
    assert toolkit is not None and toolkit.gcc_max == 32
    assert index.origin("toolkit 12.4") == str(explicit / "cuda.toml")


def test_env_var_naming_a_missing_directory_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INDEX_PATH_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(IndexDataError, match=INDEX_PATH_ENV):
        load_index()


def test_default_index_sees_overlays_and_extra_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INDEX_PATH_ENV, str(_toolkit_overlay(tmp_path / "env", 40)))
    toolkit = default_index().toolkit(CudaVersion(12, 4))
    assert toolkit is not None and toolkit.gcc_max == 40
    with_lab = load_default_index([LAB])
    assert with_lab is load_default_index((LAB,))
    assert (
        with_lab.package("pytorch3d") is not None and default_index().package("pytorch3d") is None
    )


def test_overlay_without_shipped_index(tmp_path: Path) -> None:
    overlay = _toolkit_overlay(tmp_path / "only", 50)
    index = load_index([overlay], include_shipped=False, include_user=False)
    assert [str(t.version) for t in index.toolkits] == ["12.4"]
    assert index.torch == () and index.packages == ()


def test_model_helpers() -> None:
    wheels = ExtensionWheels(
        version=Version("1.0"),
        python=("3.10", "3.11"),
        torch=(("2.1.0", ("cu118",)), ("2.2.0", ("cu121",))),
        torch_python=(("2.1.0", ("3.10",)),),
    )
    assert wheels.python_for("2.1.0") == ("3.10",)
    assert wheels.python_for("2.2.0") == ("3.10", "3.11")
    assert wheels.python_for("2.3.0") == ()
    always = Patch(file="a.py", find="x", replace="y", reason="r")
    later = Patch(file="a.py", find="x", replace="y", reason="r", torch=SpecifierSet(">=2.13"))
    assert (
        always.applies_to("1.8.0")
        and not later.applies_to("2.12.1+cu126")
        and later.applies_to("2.13.0")
    )


def test_expand_pattern() -> None:
    kaolin_links = (
        "https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-{torch}_cu{cuda_nodot}.html"
    )
    assert expand_pattern(kaolin_links, torch="2.8.0+cu129", variant="cu129") == (
        "https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-2.8.0_cu129.html"
    )
    assert expand_pattern(kaolin_links, torch="2.8.0", variant="cpu") is None
    pyg = "https://data.pyg.org/whl/torch-{torch_minor}.0+{variant}.html"
    assert (
        expand_pattern(pyg, torch="2.5.1", variant="cu124")
        == "https://data.pyg.org/whl/torch-2.5.0+cu124.html"
    )
    wheel = "{version}-{python_tag}-{abi_tag}-{platform}"
    assert expand_pattern(
        wheel,
        torch="2.8.0",
        variant="cu128",
        python="3.13t",
        version="1.0",
        platform="linux_x86_64",
    ) == ("1.0-cp313-cp313t-linux_x86_64")
    assert expand_pattern(wheel, torch="2.8.0", variant="cu128") is None


# -- entries that are not regular files --------------------------------------------------------
# An overlay that silently lost a package would change what the resolver picks without a word:
# like a stray TOML file or an unreadable one, an entry named like an index file that is not a
# regular file is an error naming it.


def _lab_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(LAB, tmp_path / "lab"))


def _make(kind: str, path: Path) -> str:
    """Put a non-regular entry at ``path``; what the error says about it."""
    if kind == "fifo":
        os.mkfifo(path)
        return "FIFO"
    if kind == "folder":
        path.mkdir()
        return "directory"
    path.symlink_to(path.parent / "gone.toml")
    return "No such file"


@pytest.mark.parametrize("kind", ["fifo", "folder", "dangling-link"])
def test_a_package_entry_that_is_not_a_regular_file_is_an_error_naming_it(
    tmp_path: Path, kind: str
) -> None:
    lab = _lab_copy(tmp_path)
    entry = lab / "packages" / "extra.toml"
    said = _make(kind, entry)
    with pytest.raises(IndexDataError) as info:
        load_index([lab], include_user=False)
    assert str(entry) in info.value.message and said in info.value.message


def test_a_fifo_named_cuda_toml_is_named_as_a_fifo_not_as_a_stray(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    os.mkfifo(overlay / "cuda.toml")
    with pytest.raises(IndexDataError) as info:
        load_index([overlay], include_user=False)
    assert str(overlay / "cuda.toml") in info.value.message and "FIFO" in info.value.message
    assert "unexpected file" not in info.value.message


def test_a_cached_parse_does_not_hide_a_fifo_added_later(tmp_path: Path) -> None:
    lab = _lab_copy(tmp_path)
    load_index([lab], include_user=False)  # parsed and cached
    os.mkfifo(lab / "packages" / "extra.toml")
    with pytest.raises(IndexDataError, match="FIFO"):
        load_index([lab], include_user=False)


def test_an_emacs_lock_link_beside_an_edited_file_is_not_an_index_file(tmp_path: Path) -> None:
    lab = _lab_copy(tmp_path)
    expected = load_index([lab], include_user=False)
    (lab / "packages" / ".#pytorch3d.toml").symlink_to("user@host.4242:1700000000")
    (lab / ".#cuda.toml").symlink_to("user@host.4242:1700000000")
    assert load_index([lab], include_user=False) == expected


def test_the_cli_names_a_fifo_in_a_configured_overlay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuda_resolve.cli import main

    lab = _lab_copy(tmp_path)
    fifo = lab / "packages" / "extra.toml"
    os.mkfifo(fifo)
    monkeypatch.setenv(INDEX_PATH_ENV, str(lab))
    assert main(["index", "show", "kaolin"]) != 0
    err = capsys.readouterr().err
    assert str(fifo) in err and "FIFO" in err and "Traceback" not in err
    assert main(["index", "validate", str(lab)]) == 1
    out = capsys.readouterr().out
    assert f"problem: {fifo}" in out and "FIFO" in out


def test_a_file_where_the_packages_folder_belongs_is_an_error(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "packages").write_text('name = "kaolin"\n')
    with pytest.raises(IndexDataError) as info:
        load_index([overlay], include_user=False)
    assert f"{overlay / 'packages'} (not a folder)" in info.value.message
