"""The index's CUDA facts: what ``doctor`` reads instead of the whole index (issue 8, start-up).

They must answer exactly as the index does, be cached beside it under the same key, and be
readable without the package catalogue's classes or ``packaging.specifiers``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_resolve.doctor.checks import run_checks
from cuda_resolve.index.cuda import CudaFacts
from cuda_resolve.index.load import load_cuda_facts, load_index
from cuda_resolve.profile import load_profile
from cuda_resolve.versions import CudaVersion

OVERLAY = Path(__file__).parent / "data" / "index" / "overlay-lab"
PROFILES = sorted((Path(__file__).parent / "data" / "profiles").glob("*.toml"))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("CUDA_RESOLVE_CACHE_DIR", str(directory))
    return directory


def test_the_facts_answer_as_the_index_does(cache_dir: Path) -> None:
    index = load_index([], include_user=False)
    facts = load_cuda_facts([], include_user=False)
    assert isinstance(facts, CudaFacts)
    assert facts.toolkits == index.toolkits and facts.families == index.families
    builds = [(release, variant) for release in index.torch for variant in release.variants]
    assert len(builds) > 50
    for release, variant in builds:
        # What the index's own releases say, read directly (Index.torch_build_arch_list asks the
        # facts).
        expected = (
            (f"{release.version}+{variant.name}", variant.arch_list) if variant.arch_list else None
        )
        for asked in (str(release.version), f"{release.version}+{variant.name}"):
            assert facts.torch_build_arch_list(asked, variant.name) == expected
            assert index.torch_build_arch_list(asked, variant.name) == expected
    assert facts.torch_build_arch_list("2.11.0+cu130", "cu130") is not None
    assert facts.torch_build_arch_list("1.0.0", "cu130") is None
    for toolkit in index.toolkits:
        assert facts.toolkit(toolkit.version) == index.toolkit(toolkit.version)
    assert facts.toolkit(CudaVersion(99, 0)) is None
    for family in index.families:
        assert facts.family(family.major) == index.family(family.major)


@pytest.mark.parametrize("profile", PROFILES, ids=[p.stem for p in PROFILES])
def test_doctor_finds_the_same_with_the_facts_as_with_the_index(
    profile: Path, cache_dir: Path
) -> None:
    index = load_index([], include_user=False)
    env = load_profile(profile, index=index)
    assert run_checks(env, load_cuda_facts([], include_user=False)) == run_checks(env, index)


def test_the_facts_are_cached_under_the_index_key_and_follow_an_edited_overlay(
    tmp_path: Path, cache_dir: Path
) -> None:
    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    before = load_cuda_facts([overlay], include_user=False)
    assert before.torch_build_arch_list("2.5.1+cu124", "cu124") is not None
    names = sorted(path.name for path in (cache_dir / "index").iterdir())
    assert len(names) == 2 and names[0].removesuffix(".cuda.marshal") == names[1].removesuffix(
        ".pickle"
    )

    torch_toml = overlay / "torch.toml"
    torch_toml.write_text(
        torch_toml.read_text().replace(
            'cu124 = { arch_list = "7.0;8.0;8.6;9.0+PTX" }', 'cu124 = { arch_list = "8.0;9.0" }'
        )
    )
    after = load_cuda_facts([overlay], include_user=False)
    known = after.torch_build_arch_list("2.5.1+cu124", "cu124")
    assert known is not None and [str(entry) for entry in known[1]] == ["8.0", "9.0"]


def test_reading_cached_facts_needs_neither_the_catalogue_nor_specifiers(
    tmp_path: Path, cache_dir: Path
) -> None:
    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    load_cuda_facts([overlay], include_user=False)  # fills both cache files
    probe = (
        "import sys; from pathlib import Path; from cuda_resolve.index.load import "
        f"load_cuda_facts;facts = load_cuda_facts([Path({str(overlay)!r})], "
        "include_user=False);assert facts.toolkits;print(sorted(m for m in "
        "('cuda_resolve.index.model', 'cuda_resolve.index._parse', 'packaging.specifiers', "
        "'packaging.version', 'pickle') if m in sys.modules));"
        "assert facts.torch_build_arch_list('2.5.1+cu124', 'cu124');"
        "assert 'packaging.version' not in sys.modules"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        check=True,
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_a_corrupt_facts_file_is_rebuilt_from_the_index(tmp_path: Path, cache_dir: Path) -> None:
    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    first = load_cuda_facts([overlay], include_user=False)
    (facts_file,) = (cache_dir / "index").glob("*.cuda.marshal")
    import marshal

    for corrupt in (
        b"\x80\x05not marshal data",
        marshal.dumps(["CudaFacts", (), ()]),  # a field short
        marshal.dumps(["Popen", "ls"]),  # not a class of the facts
        marshal.dumps({"toolkits": ()}),
        facts_file.read_bytes()[:-3],  # cut short
    ):
        facts_file.write_bytes(corrupt)
        assert load_cuda_facts([overlay], include_user=False) == first


def test_the_facts_come_back_from_plain_data_as_they_were() -> None:
    from cuda_resolve.index.cuda import facts_from_plain, facts_to_plain

    facts = load_index([], include_user=False).cuda_facts()
    plain = facts_to_plain(facts)
    back = facts_from_plain(plain)
    assert back == facts and repr(back) == repr(facts)
    # Each distinct part is written and made once (reading ~2000 objects one by one in Python
    # cost more than unpickling them).
    import marshal

    back = facts_from_plain(marshal.loads(marshal.dumps(plain)))
    capabilities = [c for toolkit in back.toolkits for c in toolkit.archs]
    entries = [e for _, _, arch_list in back.torch_arch_lists for e in arch_list]
    for parts in (capabilities, entries):
        assert len(parts) > 3 * len(set(parts))
        assert len({id(part) for part in parts}) == len(set(parts))
    for bad in (["CudaFacts"], ["Nope", 1], [], (["ArchEntry", 1],), {"a": 1}):
        with pytest.raises(ValueError):
            facts_from_plain(bad)


def test_the_default_facts_and_index_are_read_once_and_forgotten_together(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_resolve.index import load

    overlay = shutil.copytree(OVERLAY, tmp_path / "overlay")
    monkeypatch.setenv("CUDA_RESOLVE_INDEX_PATH", str(overlay))
    load.clear_cache()
    reads: list[str] = []
    real_read = load._read_layer

    def counting_read(root, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(str(root))
        return real_read(root, **kwargs)

    cache_reads: list[str] = []
    real_read_parsed = load._read_parsed

    def counting_read_parsed(key, suffix, expected):  # type: ignore[no-untyped-def]
        cache_reads.append(suffix)
        return real_read_parsed(key, suffix, expected)

    monkeypatch.setattr(load, "_read_layer", counting_read)
    monkeypatch.setattr(load, "_read_parsed", counting_read_parsed)
    facts = load.load_default_cuda_facts()  # a cold cache: the index is parsed to make them
    parsed = len(reads)
    assert parsed == 2  # the shipped index and the overlay
    read_from_cache = len(cache_reads)
    index = load.load_default_index()
    # The index parsed for the facts is kept: neither parsed nor unpickled again.
    assert len(reads) == parsed and len(cache_reads) == read_from_cache
    assert index.cuda_facts() == facts
    assert load.load_default_cuda_facts() is facts

    torch_toml = overlay / "torch.toml"
    torch_toml.write_text(
        torch_toml.read_text().replace(
            'cu124 = { arch_list = "7.0;8.0;8.6;9.0+PTX" }', 'cu124 = { arch_list = "8.0;9.0" }'
        )
    )
    assert load.load_default_cuda_facts() is facts  # remembered for the process
    load.clear_cache()
    known = load.load_default_cuda_facts().torch_build_arch_list("2.5.1+cu124", "cu124")
    assert known is not None and [str(entry) for entry in known[1]] == ["8.0", "9.0"]
    load.clear_cache()


_VERSIONS = (
    "2.5.1", "2.5.1+cu124", "2.5.1a0+git1a2b3c", "2.5.1.dev20240901+cu124", "2.5.1rc1",
    "2.5.1.post2", "2.5", "2.5.0", "2.5.0.0", "v2.5.1", "V2.5.1", " 2.5.1 ", "2.5.1-rc1",
    "2.5.1.a1", "2.5.1-1", "1!2.5.1", "0!2.5.1", "2.5.1_dev3", "2.5.1alpha1", "2.5.1+local.a-b_c",
    "2.5.1+", "2.5.1a1a1", "2.5.1.dev1.post1", "2..5", "latest", "", "2.5.1+cu124+x", "2.05.01",
    "\u0662.\u0665.\u0661", "2.5.\u0661",  # Arabic-Indic digits: PEP 440 takes ASCII ones only
)  # fmt: skip


@pytest.mark.parametrize("version", _VERSIONS)
def test_a_release_key_is_packagings_epoch_and_release(version: str) -> None:
    from packaging.version import InvalidVersion, Version

    from cuda_resolve.index.cuda import release_key

    try:
        parsed = Version(version)
    except InvalidVersion:
        assert release_key(version) is None
        return
    release = list(parsed.release)
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    assert release_key(version) == (parsed.epoch, *release)


def test_only_a_final_release_of_the_index_is_a_builds_base_version() -> None:
    """An overlay may list a pre-release (2.7.0rc1): no build's base version is that release, as
    packaging's base_version never has a pre, post or dev part."""
    from cuda_resolve.index.cuda import ArchEntry, CudaFacts
    from cuda_resolve.versions import ComputeCapability

    rc = (ArchEntry(ComputeCapability(8, 0)),)
    final = (ArchEntry(ComputeCapability(9, 0)),)
    facts = CudaFacts(
        toolkits=(),
        families=(),
        torch_arch_lists=(
            ("2.7.0rc1", "cu128", rc),
            ("2.7.0.post1", "cu128", rc),
            ("1!2.7.0", "cu128", rc),
            ("2.7", "cu128", final),
        ),
    )
    for asked in ("2.7.0", "2.7.0+cu128", "2.7.0rc1", "2.7.0rc1+cu128", "2.7.0.post1", "2.7"):
        assert facts.torch_build_arch_list(asked, "cu128") == ("2.7+cu128", final), asked
    assert facts.torch_build_arch_list("1!2.7.0", "cu128") == ("1!2.7.0+cu128", rc)
    assert facts.torch_build_arch_list("2.8.0", "cu128") is None
    assert facts.torch_build_arch_list("not a version", "cu128") is None
