"""The shipped index: it loads, validates, cites its sources, and says what the references say.

The spot checks pin facts the resolver depends on; each names the source it was checked against.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from cuda_resolve.index import Index, default_index
from cuda_resolve.index.load import clear_cache, load_index, validate_shipped
from cuda_resolve.index.model import ArchEntry, Recipe
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion


@pytest.fixture(autouse=True)
def _no_user_overlays(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv("CUDA_RESOLVE_INDEX_PATH", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    clear_cache()
    yield
    clear_cache()


@pytest.fixture(scope="module")
def index() -> Index:
    return load_index(include_user=False)


def cc(text: str) -> ComputeCapability:
    return ComputeCapability.parse(text)


def arch(text: str) -> tuple[ArchEntry, ...]:
    return tuple(
        ArchEntry(cc(part.removesuffix("+PTX")), part.endswith("+PTX")) for part in text.split(";")
    )


# -- loading ----------------------------------------------------------------------------------


def test_shipped_index_validates() -> None:
    assert validate_shipped() == []


def test_default_index_is_parsed_once() -> None:
    first = default_index()
    assert default_index() is first
    clear_cache()
    assert default_index() is not first


def test_parsing_is_fast() -> None:
    best = min(_timed_load() for _ in range(3))
    assert best < 0.25, f"parsing the shipped index took {best:.3f} s"


def _timed_load() -> float:
    start = time.perf_counter()
    load_index(include_user=False)
    return time.perf_counter() - start


def test_every_entry_cites_a_source(index: Index) -> None:
    defined = dict(index.sources)
    entries: list[tuple[str, str]] = []
    entries += [(f"toolkit {t.version}", t.source) for t in index.toolkits]
    entries += [(f"family {f.major}", f.source) for f in index.families]
    entries += [(f"torch {r.version}", r.source) for r in index.torch]
    for package in index.packages:
        entries.append((f"package {package.name}", package.source))
        entries += [(f"{package.name} wheels {w.version}", w.source) for w in package.wheels]
        entries += [(f"{package.name} recipe {r.name}", r.source) for r in package.recipes]
    assert (
        len(entries) > 75
    )  # 26 toolkits, 3 families, 40 releases, 2 packages, 7 wheel lists, 3 recipes
    for label, source in entries:
        assert source.strip(), f"{label} has no source"
        cited = re.findall(r"\[([A-Za-z][\w.-]*)\]", source)
        assert cited, f"{label}: the shipped index cites [keys]: {source!r}"
        for key in cited:
            assert key in defined, f"{label} cites undefined [{key}]"


def test_every_entry_has_an_origin(index: Index) -> None:
    for toolkit in index.toolkits:
        assert (index.origin(f"toolkit {toolkit.version}") or "").endswith("cuda.toml")
    for release in index.torch:
        assert (index.origin(f"torch {release.version}") or "").endswith("torch.toml")
    assert (index.origin("package kaolin wheels 0.18.0") or "").endswith("packages/kaolin.toml")
    assert (index.origin("package pointnet2_ops recipe pointnet2_ops-b5ceb6d") or "").endswith(
        "packages/pointnet2_ops.toml"
    )


# -- CUDA -------------------------------------------------------------------------------------


def test_toolkits_cover_10_2_to_13_5_without_12_7(index: Index) -> None:
    versions = [str(t.version) for t in index.toolkits]
    assert versions[0] == "10.1" and versions[-1] == "13.5"
    for expected in ("10.2", "11.0", "11.8", "12.0", "12.6", "12.8", "12.9", "13.0", "13.4"):
        assert expected in versions
    assert "12.7" not in versions  # no CUDA 12.7 toolkit shipped (compat.md section 1b)


def test_minor_version_families(index: Index) -> None:
    # nvidia-compat-guide: 11.x >= 450.80.02 (Linux) / 452.39 (Windows), 12.x >= 525, 13.x >= 580
    f11, f12, f13 = (index.family(major) for major in (11, 12, 13))
    assert f11 and f12 and f13 and index.family(10) is None
    assert f11.min_driver_linux == DriverVersion.parse("450.80.02")
    assert f11.min_driver_windows == DriverVersion.parse("452.39")
    assert f12.min_driver_linux == DriverVersion.parse("525.60.13")
    assert f13.min_driver_linux >= DriverVersion.parse("580")
    assert "min_driver_windows" in f12.unverified and "min_driver_windows" in f13.unverified


def test_cuda_12_drops_kepler(index: Index) -> None:
    before, after = index.toolkit(CudaVersion(11, 8)), index.toolkit(CudaVersion(12, 0))
    assert before and after
    assert {cc("3.5"), cc("3.7")} <= set(before.archs)
    assert not {cc("3.5"), cc("3.7")} & set(after.archs)
    assert cc("9.0a") in after.specific_archs


def test_cuda_13_drops_maxwell_to_volta(index: Index) -> None:
    before, after = index.toolkit(CudaVersion(12, 9)), index.toolkit(CudaVersion(13, 0))
    assert before and after
    dropped = {cc(x) for x in ("5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2")}
    assert dropped <= set(before.archs)
    assert not dropped & set(after.archs)
    assert min(after.archs) == cc("7.5")
    assert cc("10.1") in before.archs and cc("11.0") in after.archs  # sm_101 renamed sm_110


def test_host_compiler_bounds(index: Index) -> None:
    # nvcc-host-config (host_config.h) and torch-cpp-extension (CUDA_GCC_VERSIONS)
    cuda124, cuda130 = index.toolkit(CudaVersion(12, 4)), index.toolkit(CudaVersion(13, 0))
    assert cuda124 and cuda130
    assert (cuda124.gcc_max, cuda124.clang_max, cuda124.torch_gcc_max_exclusive) == (13, 17, 14)
    assert (cuda130.gcc_max, cuda130.clang_max, cuda130.torch_gcc_max_exclusive) == (15, 20, 16)


def test_unverified_markers_are_kept(index: Index) -> None:
    cuda102 = index.toolkit(CudaVersion(10, 2))
    cuda133 = index.toolkit(CudaVersion(13, 3))
    cuda135 = index.toolkit(CudaVersion(13, 5))
    assert cuda102 and cuda133 and cuda135
    assert {"archs", "gcc_max"} <= set(cuda102.unverified)  # no nvcc 10.2 binary was read
    assert "driver_linux" in cuda133.unverified  # third-party quotes only
    # no toolkit-driver row exists for 13.5: the value is absent rather than guessed
    assert cuda135.driver_linux is None and "driver_linux" not in cuda135.unverified


# -- torch ------------------------------------------------------------------------------------


def test_every_torch_release_from_1_8_to_2_15(index: Index) -> None:
    versions = [str(r.version) for r in index.torch]
    assert len(versions) == 40
    assert versions[0] == "1.8.0" and versions[-1] == "2.15.0"
    for expected in ("1.8.1", "1.10.2", "2.0.1", "2.1.2", "2.7.1", "2.9.1", "2.12.1", "2.14.1"):
        assert expected in versions
    assert "1.8.2" not in versions  # LTS index only, never on PyPI


def test_each_release_has_one_pypi_default_and_a_cpu_build(index: Index) -> None:
    for release in index.torch:
        defaults = [v.name for v in release.variants if v.pypi_default]
        assert len(defaults) == 1, release.version
        cpu = release.variant("cpu")
        assert cpu is not None and cpu.cuda is None and cpu.arch_list == ()
        for variant in release.variants:
            assert variant.index_url == f"https://download.pytorch.org/whl/{variant.name}"
            if variant.cuda is not None:
                assert index.toolkit(variant.cuda) is not None, (release.version, variant.name)


def test_pypi_defaults(index: Index) -> None:
    # pypi-torch-metadata: torch/version.py in the PyPI manylinux x86_64 wheels
    expected = {
        "1.12.1": "cu102",
        "1.13.0": "cu117",
        "2.1.0": "cu121",
        "2.5.1": "cu124",
        "2.7.0": "cu126",
        "2.8.0": "cu128",
        "2.11.0": "cu130",
        "2.14.1": "cu130",
        "2.15.0": "cu132",
    }
    for version, variant in expected.items():
        release = index.torch_release(version)
        assert release is not None
        assert next(v.name for v in release.variants if v.pypi_default) == variant
    r211, r210 = index.torch_release("2.11.0"), index.torch_release("2.10.0")
    assert r211 and r210
    assert r211.pypi_linux_aarch64 == "cu130" and r210.pypi_linux_aarch64 == "cpu"


def test_torch_2_11_pypi_cu130_has_no_ptx(index: Index) -> None:
    # torch-arch-flags + cuobjdump-torch on the PyPI 2.11.0 wheel: SASS sm_75..sm_120 and no PTX
    release = index.torch_release("2.11.0+cu130")
    assert release is not None
    cu130 = release.variant("cu130")
    assert cu130 is not None and cu130.pypi_default and cu130.verified
    assert cu130.arch_list == arch("7.5;8.0;8.6;9.0;10.0;12.0")
    assert not any(entry.ptx for entry in cu130.arch_list)


def test_release_builds_are_written_without_ptx(index: Index) -> None:
    # pytorch-release-builds: release wheels strip +PTX; lists that were not read are marked
    for release in index.torch:
        if release.version < Version("2.8"):
            continue
        for variant in release.variants:
            assert not any(entry.ptx for entry in variant.arch_list), (
                release.version,
                variant.name,
            )
            if variant.name in ("cu129", "cu132") and not variant.pypi_default:
                assert "arch_list" in variant.unverified, (release.version, variant.name)


def test_arch_drops_across_releases(index: Index) -> None:
    def archs(version: str, variant: str) -> set[ComputeCapability]:
        release = index.torch_release(version)
        assert release is not None
        build = release.variant(variant)
        assert build is not None
        return {entry.capability for entry in build.arch_list}

    assert cc("3.7") in archs("2.0.1", "cu117")
    assert cc("3.7") not in archs("2.1.0", "cu121") and cc("3.7") in archs("2.1.0", "cu118")
    assert cc("6.0") not in archs("2.8.0", "cu128") and cc("7.0") in archs("2.8.0", "cu128")
    assert cc("7.0") not in archs("2.11.0", "cu128")  # Volta dropped from cu128 in 2.11
    assert cc("6.1") not in archs("2.11.0", "cu130") and cc("6.0") in archs("2.11.0", "cu126")


def test_variants_only_some_patch_releases_carry(index: Index) -> None:
    r180, r181 = index.torch_release("1.8.0"), index.torch_release("1.8.1")
    r1220, r1221 = index.torch_release("2.12.0"), index.torch_release("2.12.1")
    assert r180 and r181 and r1220 and r1221
    assert r180.variant("cu101") is None and r181.variant("cu101") is not None
    assert r1220.variant("cu129") is None
    cu129 = r1221.variant("cu129")
    assert cu129 is not None and not cu129.verified and "exists" in cu129.unverified
    assert r1220.variant("cu128") is None  # removed in 2.12


def test_per_release_python(index: Index) -> None:
    r1100, r1102, r1220, r1221 = (
        index.torch_release(v) for v in ("1.10.0", "1.10.2", "2.12.0", "2.12.1")
    )
    assert r1100 and r1102 and r1220 and r1221
    assert "3.10" not in r1100.python and "3.10" in r1102.python
    assert "3.13t" in r1220.python and "3.13t" not in r1221.python
    r215 = index.torch_release("2.15.0")
    assert r215 and "3.10" not in r215.python and str(r215.requires_python) == ">=3.11"


def test_torchvision_pairs_by_release(index: Index) -> None:
    # pypi-vision-audio: 0.11.0 and 0.15.0 pin local versions; 0.11.1 / 0.15.1 pair with x.y.0
    pairs = {
        "1.10.0": ("0.11.1", "0.10.0"),
        "1.10.2": ("0.11.3", "0.10.2"),
        "2.0.0": ("0.15.1", "2.0.1"),
        "2.0.1": ("0.15.2", "2.0.2"),
        "2.8.0": ("0.23.0", "2.8.0"),
        "2.12.1": ("0.27.1", None),
        "2.14.1": ("0.29.1", None),
    }
    for version, (vision, audio) in pairs.items():
        release = index.torch_release(version)
        assert release is not None
        assert (release.torchvision, release.torchaudio) == (vision, audio), version


def test_cxx11_abi(index: Index) -> None:
    old, mixed, new, read = (index.torch_release(v) for v in ("2.5.1", "2.6.0", "2.7.0", "2.14.1"))
    assert old and mixed and new and read
    assert old.cxx11_abi is False and "cxx11_abi" in old.unverified
    assert mixed.cxx11_abi is None
    assert new.cxx11_abi is True and "cxx11_abi" in new.unverified
    assert read.cxx11_abi is True and "cxx11_abi" not in read.unverified


# -- kaolin -----------------------------------------------------------------------------------


def test_kaolin_placeholder_is_marked(index: Index) -> None:
    kaolin = index.package("kaolin")
    assert kaolin is not None
    assert kaolin.placeholder_versions == ("0.1",)
    assert all(str(w.version) != "0.1" for w in kaolin.wheels)
    assert "torchvision" in kaolin.requires


def test_kaolin_releases(index: Index) -> None:
    kaolin = index.package("kaolin")
    assert kaolin is not None
    assert [str(w.version) for w in kaolin.wheels] == [
        "0.12.0",
        "0.13.0",
        "0.14.0",
        "0.15.0",
        "0.16.0",
        "0.17.0",
        "0.18.0",
    ]
    assert (
        kaolin.find_links
        == "https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-{torch}_cu{cuda_nodot}.html"
    )


def test_kaolin_0_18_0_matrix(index: Index) -> None:
    kaolin = index.package("Kaolin")
    assert kaolin is not None
    wheels = next(w for w in kaolin.wheels if str(w.version) == "0.18.0")
    assert wheels.variants_for("2.8.0") == ("cu126", "cu128", "cu129")
    assert wheels.python_for("2.8.0") == ("3.9", "3.10", "3.11", "3.12")
    assert "3.13" not in wheels.python_for("2.8.0")
    # the docs table ticks cu126/cu128/cu129 for 2.4-2.5; PyTorch never built those
    assert wheels.variants_for("2.4.0") == ("cu118", "cu121", "cu124")
    assert wheels.variants_for("2.5.1") == ("cu118", "cu121", "cu124")
    assert wheels.variants_for("2.9.0") == () and wheels.python_for("2.9.0") == ()
    assert str(wheels.torch_window) == "<=2.8.0,>=1.6.0"


def test_no_kaolin_wheel_for_new_torch_cuda13_or_python_3_13(index: Index) -> None:
    kaolin = index.package("kaolin")
    assert kaolin is not None
    for wheels in kaolin.wheels:
        assert "3.13" not in wheels.python
        for torch_version, variants in wheels.torch:
            assert Version(torch_version) < Version("2.9")
            assert not any(v.startswith("cu13") for v in variants)


def test_kaolin_per_row_python(index: Index) -> None:
    kaolin = index.package("kaolin")
    assert kaolin is not None
    wheels = next(w for w in kaolin.wheels if str(w.version) == "0.17.0")
    assert wheels.python_for("2.0.1") == ("3.9", "3.10", "3.11")
    assert wheels.python_for("2.5.1") == ("3.9", "3.10", "3.11", "3.12")


def _recipe(index: Index, package: str, name: str) -> Recipe:
    found = index.package(package)
    assert found is not None
    return next(r for r in found.recipes if r.name == name)


def test_kaolin_master_recipe(index: Index) -> None:
    recipe = _recipe(index, "kaolin", "kaolin-master-d52da9f")
    assert recipe.revision.startswith("d52da9f") and len(recipe.revision) == 40
    assert str(recipe.version) == "0.18.0"
    assert dict(recipe.env) == {"FORCE_CUDA": "1", "IGNORE_TORCH_VER": "1"}
    assert recipe.torch_window.contains("2.12.1") and not recipe.torch_window.contains("2.13.0")
    assert recipe.torch.contains("2.14.1") and not recipe.torch.contains("2.5.0")
    assert "setuptools>=77.0.3,<82" in recipe.build_requires
    assert not recipe.submodules and recipe.cuda_min == CudaVersion(11, 0)
    (patch,) = recipe.patches
    assert patch.file == "kaolin/csrc/ops/conversions/mise/mise.cpp"
    assert "std::nullopt, at::kLong" in patch.find and "TensorOptions" in patch.replace
    assert patch.applies_to("2.14.1+cu130") and not patch.applies_to("2.11.0")
    assert recipe.smoke is not None and "kaolin._C" in recipe.smoke.imports
    assert recipe.smoke.gpu_script and "torch.cdist" in recipe.smoke.gpu_script
    compile(recipe.smoke.gpu_script, "kaolin smoke", "exec")


def test_kaolin_tag_recipe(index: Index) -> None:
    recipe = _recipe(index, "kaolin", "kaolin-v0.18.0")
    assert recipe.revision == "06ffb7d955ca26b608c60a9e862327c56b226921"
    assert any(req.startswith("cython") for req in recipe.build_requires)
    assert any(req.startswith("setuptools<82") for req in recipe.build_requires)
    assert recipe.torch.contains("2.8.0") and not recipe.torch.contains("2.9.0")
    assert dict(recipe.env)["FORCE_CUDA"] == "1"


def test_pointnet2_ops_recipe(index: Index) -> None:
    package = index.package("pointnet2-ops")
    assert package is not None and package.wheels == () and package.find_links is None
    recipe = _recipe(index, "pointnet2_ops", "pointnet2_ops-b5ceb6d")
    assert recipe.repository == "https://github.com/erikwijmans/Pointnet2_PyTorch"
    assert recipe.revision == "b5ceb6d9ca0467ea34beb81023f96ee82228f626"
    assert recipe.subdirectory == "pointnet2_ops_lib" and not recipe.submodules
    assert str(recipe.version) == "3.0.0"
    files = [patch.file for patch in recipe.patches]
    assert files == [
        "pointnet2_ops_lib/setup.py",
        "pointnet2_ops_lib/pointnet2_ops/pointnet2_utils.py",
    ]
    for patch in recipe.patches:
        assert (
            patch.find == 'os.environ["TORCH_CUDA_ARCH_LIST"] = "3.7+PTX;5.0;6.0;6.1;6.2;7.0;7.5"'
        )
        assert patch.replace.startswith('os.environ.setdefault("TORCH_CUDA_ARCH_LIST", ')
        assert patch.count == 1 and patch.applies_to("2.14.1")
    smoke = recipe.smoke
    assert smoke is not None and smoke.imports[0] == "pointnet2_ops._ext"
    assert smoke.gpu_script is not None and "subprocess" in smoke.description
    for op in ("furthest_point_sample", "gather_operation", "ball_query"):
        assert op in smoke.gpu_script
    compile(smoke.gpu_script, "pointnet2 smoke", "exec")
