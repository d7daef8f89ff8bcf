"""cuda_resolve._dist_metadata reads what importlib.metadata reads, without importing it."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from cuda_resolve._dist_metadata import installed_distributions, name_and_version, source_text


def _importlib_view(search_path: list[str]) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for dist in metadata.distributions(path=search_path):
        name = dist.metadata["Name"]
        if name and canonicalize_name(name) not in found:
            found[canonicalize_name(name)] = (name, dist.version)
    return found


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_this_environment_reads_as_importlib_metadata_reads_it() -> None:
    search_path = [entry for entry in sys.path if entry]
    ours = {
        key: (name, version)
        for key, (name, version, _meta) in installed_distributions(search_path).items()
    }
    assert len(ours) > 20  # pytest, packaging, resolvelib, ... : a real environment
    assert ours == _importlib_view(search_path)


def test_odd_metadata_layouts_read_as_importlib_metadata_reads_them(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    # Header names in any case, a folded header, a body after the blank line naming another version.
    _write(
        first / "Odd_Name-1.0.dist-info" / "METADATA",
        "Metadata-Version: 2.1\nname: Odd_Name\nSummary: one\n  folded: not a header\nVERSION: "
        "1.0+cu130\n\nVersion: 9\n",
    )
    _write(
        first / "legacy-2.0-py3.11.egg-info" / "PKG-INFO",
        "Metadata-Version: 1.1\nName: legacy\nVersion: 2.0\n",
    )
    _write(
        first / "single_file-0.5-py3.11.egg-info",
        "Metadata-Version: 1.0\nName: single-file\nVersion: 0.5\n",
    )
    _write(first / "no_metadata-1.0.dist-info" / "RECORD", "")
    # The first of a name on the path wins: the later folder's other version is not seen.
    _write(second / "odd_name-2.0.dist-info" / "METADATA", "Name: odd-name\nVersion: 2.0\n")
    _write(second / "other-3.0.dist-info" / "METADATA", "Name: other\r\nVersion: 3.0\r\n")
    search_path = [str(first), str(second)]
    ours = installed_distributions(search_path)
    assert (
        {key: (name, version) for key, (name, version, _meta) in ours.items()}
        == _importlib_view(search_path)
        == {
            "odd-name": ("Odd_Name", "1.0+cu130"),
            "legacy": ("legacy", "2.0"),
            "single-file": ("single-file", "0.5"),
            "other": ("other", "3.0"),
        }
    )
    assert ours["odd-name"][2] == str(first / "Odd_Name-1.0.dist-info")
    only = installed_distributions(search_path, wanted=lambda name: name == "legacy")
    assert list(only) == ["legacy"]
    assert name_and_version(str(tmp_path / "absent")) == (None, None)


def test_its_text_runs_in_a_target_interpreter_as_the_scripts_prepend_it(tmp_path: Path) -> None:
    _write(tmp_path / "tiny-1.0.dist-info" / "METADATA", "Name: tiny\nVersion: 1.0\n")
    script = source_text() + (
        "\nimport json, sys\nfound = installed_distributions(sys.argv[1:])\n"
        "print(json.dumps([found, sorted(m for m in sys.modules if "
        "m.startswith(('importlib.metadata', 'email')))]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    found, heavy = json.loads(done.stdout)
    assert found == {"tiny": ["tiny", "1.0", str(tmp_path / "tiny-1.0.dist-info")]}
    assert heavy == []  # the point: nothing that costs an interpreter start 40 ms is imported


def test_layouts_importlib_metadata_also_reads(tmp_path: Path) -> None:
    """Upper-case entries, a dist-info holding PKG-INFO only, duplicates of one name in one folder
    (directory order decides, as for importlib.metadata and pip), eggs as folders and zips."""
    import zipfile

    site = tmp_path / "site"
    _write(site / "UPPER-1.0.DIST-INFO" / "METADATA", "Name: upper\nVersion: 1.0\n")
    _write(site / "pkginfo_only-2.0.dist-info" / "PKG-INFO", "Name: pkginfo-only\nVersion: 2.0\n")
    for version in ("1.0", "10.0", "9.0", "2.0"):
        _write(site / f"dupx-{version}.dist-info" / "METADATA", f"Name: dupx\nVersion: {version}\n")
    egg = tmp_path / "eggp-1.2-py3.11.egg"
    _write(egg / "EGG-INFO" / "PKG-INFO", "Name: eggp\nVersion: 1.2\n")
    zipped = tmp_path / "zegg-1.3-py3.11.egg"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("EGG-INFO/PKG-INFO", "Name: zegg\nVersion: 1.3\n")
    search_path = [str(site), str(egg), str(zipped)]
    ours = {
        key: (name, version)
        for key, (name, version, _meta) in installed_distributions(search_path).items()
    }
    assert ours == _importlib_view(search_path)
    assert set(ours) == {"upper", "pkginfo-only", "dupx", "eggp", "zegg"}


def test_a_metadata_file_that_is_not_a_regular_file_is_skipped_not_waited_on(
    tmp_path: Path,
) -> None:
    import os

    folder = tmp_path / "fifo-1.0.dist-info"
    folder.mkdir()
    os.mkfifo(folder / "METADATA")
    assert installed_distributions([str(tmp_path)]) == {}


def test_the_scripts_it_is_put_before_compile_and_define_none_of_its_names() -> None:
    """Its helpers are looked up by name when called: a script defining one of those names would
    silently replace it. Each whole text compiles (a late ``from __future__`` would not)."""
    import ast

    from cuda_resolve.detect.target import _probe_source
    from cuda_resolve.install.journal import _LISTING_BODY
    from cuda_resolve.install.pip import _PROBE_BODY

    def top_level_names(text: str) -> set[str]:
        names: set[str] = set()
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        return names

    ours = top_level_names(source_text())
    assert {
        "installed_distributions",
        "name_and_version",
        "metadata_file",
        "normalized_name",
    } <= ours
    probe_text = _probe_source()[len(source_text()) :]
    for body in (_PROBE_BODY, _LISTING_BODY, probe_text):
        assert top_level_names(body) & ours <= {
            "MYPY"
        }  # the probe's own MYPY = False, the same value
        compile(source_text() + body, "<target script>", "exec")


def test_its_text_is_read_from_a_zipped_install_too(tmp_path: Path) -> None:
    import zipfile

    package = Path(__file__).resolve().parent.parent / "cuda_resolve"
    zipped = tmp_path / "cuda_resolve.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for path in package.rglob("*.py"):
            archive.write(path, str(path.relative_to(package.parent)))
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]);"
            "from cuda_resolve._dist_metadata import source_text; print(len(source_text()))",
            str(zipped),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(done.stdout) == len(source_text())


def test_the_pip_probe_does_not_count_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-c`` puts the working directory on the path: a source checkout's metadata there is not
    installed."""
    import os

    from cuda_resolve.install.pip import pip_facts_and_distributions

    _write(tmp_path / "torch-9.9.dist-info" / "METADATA", "Name: torch\nVersion: 9.9\n")
    monkeypatch.chdir(tmp_path)
    _facts, installed = pip_facts_and_distributions(sys.executable, dict(os.environ))
    assert installed.get("torch") != "9.9"
    assert "pip" in installed
