"""docs/profile-format.md's key tables match what ``detect --save-profile`` writes (issue 29).

Every key of a saved profile (each profile of tests/data/profiles read and saved again, and an
Environment with every optional fact filled, extensions' kernels and distribution included) is
in the doc's table for its section; every key a table lists is one the reader accepts.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from cuda_resolve.environment import ExtensionBinary, InstalledExtension
from cuda_resolve.errors import ProfileError
from cuda_resolve.profile import dump_profile, load_profile, parse_profile

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "profile-format.md"
if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

PROFILES = sorted((Path(__file__).parent / "data" / "profiles").glob("*.toml"))


def documented() -> dict[str, set[str]]:
    """Section ("" for the top level, "machine", "gpu", "torch.nvidia_wheels", ...) -> the keys
    its table's first column names."""
    sections: dict[str, set[str]] = {}
    section: str | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^###\s+(?:`\[\[?([\w.]+)\]?\]`|Top level)", line)
        if line.startswith("#"):
            section = (heading.group(1) or "") if heading else None
            continue
        nested = re.match(r"^`\[\[([\w.]+)\]\]`", line)
        if nested:
            section = nested.group(1)
            continue
        if section == "variables":  # prose: the variables, under their own names
            sections.setdefault(section, set()).update(re.findall(r"`([A-Z_]+)`", line))
            continue
        if section is None or not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        sections.setdefault(section, set()).update(re.findall(r"`(\w+)`", first))
    return sections


def saved_keys(text: str) -> dict[str, set[str]]:
    data = tomllib.loads(text)
    found: dict[str, set[str]] = {"": set()}

    def walk(prefix: str, table: dict[str, Any]) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                walk(f"{prefix}.{key}" if prefix else key, value)
            elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                for item in value:
                    walk(f"{prefix}.{key}" if prefix else key, item)
            else:
                found.setdefault(prefix, set()).add(key)

    walk("", data)
    return found


def _full_profile() -> str:
    """A saved profile with the facts the shipped profiles leave out: an extension whose kernels,
    symbols and distribution doctor read, and an installed curated build."""
    import dataclasses

    env = load_profile(next(p for p in PROFILES if p.name == "h200-detected-2026-12-02.toml"))
    extension = ExtensionBinary(
        path="/env/lib/python3.12/site-packages/pointnet2_ops/_ext.so",
        needed=("libc10.so", "libcudart.so.13"),
        missing=("libcudart.so.13",),
        sass=("sm_80", "sm_90"),
        ptx=("sm_90",),
        missing_symbols=("_ZN3c104cuda9SetDeviceEi",),
        demangled=("c10::cuda::SetDevice(int)",),
        distribution="pointnet2_ops 3.0.0+pt2141cu130.sm80.sm90ptx",
        notes=("a fat binary could not be read",),
    )
    installed = InstalledExtension(name="pointnet2_ops", version="3.0.0+pt2141cu130.sm80")
    assert env.torch is not None
    torch = dataclasses.replace(env.torch, pip_version="2.14.1", torchvision="0.29.1")
    full = dataclasses.replace(
        env, torch=torch, extensions=(extension,), installed_extensions=(installed,)
    )
    return dump_profile(full)


@pytest.mark.parametrize("name", ["full", *(p.stem for p in PROFILES)])
def test_every_key_a_saved_profile_has_is_documented(name: str) -> None:
    text = (
        _full_profile()
        if name == "full"
        else dump_profile(
            load_profile(Path(__file__).parent / "data" / "profiles" / f"{name}.toml")
        )
    )
    doc = documented()
    for section, keys in saved_keys(text).items():
        missing = keys - doc.get(section, set())
        assert not missing, f"docs/profile-format.md lacks {sorted(missing)} in [{section}]"


def test_the_full_profile_has_the_extension_facts_and_reads_back() -> None:
    text = _full_profile()
    keys = saved_keys(text)
    assert {"sass", "ptx", "distribution", "missing_symbols"} <= keys["extension"]
    assert parse_profile(text, origin="full.toml").extensions[0].sass == ("sm_80", "sm_90")


def test_every_documented_key_is_read() -> None:
    """A key the doc lists is one the strict reader knows (an unknown one is an error)."""
    for section, keys in documented().items():
        if section in ("", "variables"):
            continue
        for key in keys:
            required = dict(_REQUIRED.get(section, {}))
            required.pop(key, None)
            table = f"[[{section}]]" if section in _REPEATABLE else f"[{section}]"
            lines = [] if section == "python" else ['[python]\nversion = "3.11"']
            if section == "torch.nvidia_wheels":
                lines.append('[torch]\nversion = "2.1.0+cu121"')
            lines.append(table)
            lines += [f'{name} = "{value}"' for name, value in required.items()]
            lines.append(f'{key} = "x"')
            try:
                parse_profile("\n".join(lines) + "\n", origin="doc.toml")
            except ProfileError as error:
                assert "unknown key" not in error.message, (section, key, error.message)


_REPEATABLE = {"gpu", "toolkit", "extension", "installed_extension", "torch.nvidia_wheels"}
#: The keys each table requires, so that the one under test is the only one in question.
_REQUIRED = {
    "python": {"version": "3.11"},
    "driver": {"version": "535.104.05"},
    "gpu": {"compute_capability": "8.0"},
    "toolkit": {"version": "12.1"},
    "torch": {"version": "2.1.0+cu121"},
    "torch.nvidia_wheels": {"name": "nvidia-cusparse-cu12", "version": "12.1.0"},
    "extension": {"path": "/env/x.so"},
    "installed_extension": {"name": "pointnet2_ops", "version": "3.0.0"},
}
