"""cuda_resolve._dist_metadata reads what importlib.metadata reads, without importing it."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

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
    ours = {key: (name, version) for key, (name, version, _meta) in installed_distributions(search_path).items()}
    assert len(ours) > 20  # pytest, packaging, resolvelib, ... : a real environment
    assert ours == _importlib_view(search_path)


def test_odd_metadata_layouts_read_as_importlib_metadata_reads_them(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    # Header names in any case, a folded header, a body after the blank line naming another version.
    _write(first / "Odd_Name-1.0.dist-info" / "METADATA",
           "Metadata-Version: 2.1\nname: Odd_Name\nSummary: one\n  folded: not a header\nVERSION: 1.0+cu130\n\nVersion: 9\n")
    _write(first / "legacy-2.0-py3.11.egg-info" / "PKG-INFO", "Metadata-Version: 1.1\nName: legacy\nVersion: 2.0\n")
    _write(first / "single_file-0.5-py3.11.egg-info", "Metadata-Version: 1.0\nName: single-file\nVersion: 0.5\n")
    _write(first / "no_metadata-1.0.dist-info" / "RECORD", "")
    # The first of a name on the path wins: the later folder's other version is not seen.
    _write(second / "odd_name-2.0.dist-info" / "METADATA", "Name: odd-name\nVersion: 2.0\n")
    _write(second / "other-3.0.dist-info" / "METADATA", "Name: other\r\nVersion: 3.0\r\n")
    search_path = [str(first), str(second)]
    ours = installed_distributions(search_path)
    assert {key: (name, version) for key, (name, version, _meta) in ours.items()} == _importlib_view(search_path) == {
        "odd-name": ("Odd_Name", "1.0+cu130"), "legacy": ("legacy", "2.0"), "single-file": ("single-file", "0.5"),
        "other": ("other", "3.0"),
    }
    assert ours["odd-name"][2] == str(first / "Odd_Name-1.0.dist-info")
    only = installed_distributions(search_path, wanted=lambda name: name == "legacy")
    assert list(only) == ["legacy"]
    assert name_and_version(str(tmp_path / "absent")) == (None, None)


def test_its_text_runs_in_a_target_interpreter_as_the_scripts_prepend_it(tmp_path: Path) -> None:
    _write(tmp_path / "tiny-1.0.dist-info" / "METADATA", "Name: tiny\nVersion: 1.0\n")
    script = source_text() + ("\nimport json, sys\nfound = installed_distributions(sys.argv[1:])\n"
                              "print(json.dumps([found, sorted(m for m in sys.modules if m.startswith(('importlib.metadata', 'email')))]))\n")
    done = subprocess.run([sys.executable, "-S", "-c", script, str(tmp_path)], capture_output=True, text=True, check=True)
    found, heavy = json.loads(done.stdout)
    assert found == {"tiny": ["tiny", "1.0", str(tmp_path / "tiny-1.0.dist-info")]}
    assert heavy == []  # the point: nothing that costs an interpreter start 40 ms is imported
