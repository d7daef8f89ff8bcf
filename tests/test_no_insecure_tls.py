"""No code path in the shipped packages weakens TLS verification.

A plain grep over the source of ``cuda_resolve``, ``conda_plugin`` and ``pip_plugin``: any
occurrence of the strings below fails, in code, comments and docstrings alike (a hint that
suggests ``--trusted-host`` is as bad as code that passes it). The one exception list is for
lines that *mention* a string to refuse it; each entry is the exact line, so any edit to such a
line comes back here for review.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cuda_resolve", "conda_plugin", "pip_plugin")
SUFFIXES = {".py", ".toml", ".md", ".cfg", ".txt", ".json", ".yaml", ".yml", ".sh", ".ini"}
FORBIDDEN = {
    "verify=False": re.compile(r"verify\s*=\s*False"),
    "CERT_NONE": re.compile(r"CERT_NONE"),
    "check_hostname = False": re.compile(r"check_hostname\s*=\s*False"),
    "--trusted-host": re.compile(r"--trusted-host"),
    "inject_into_ssl": re.compile(r"inject_into_ssl"),
    "_create_unverified_context": re.compile(r"_create_unverified_context"),
}
#: (path, exact stripped line): mentions that refuse the insecure option, reviewed one by one.
REVIEWED_MENTIONS: set[tuple[str, str]] = set()


def _sources() -> list[Path]:
    files: list[Path] = []
    for package in PACKAGES:
        base = ROOT / package
        if base.is_dir():
            files.extend(p for p in base.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    return sorted(files)


def scan(text: str) -> list[tuple[int, str, str]]:
    """(line number, pattern label, stripped line) for each hit."""
    return [
        (number, label, line.strip())
        for number, line in enumerate(text.splitlines(), 1)
        for label, pattern in FORBIDDEN.items()
        if pattern.search(line)
    ]


def test_the_package_source_is_scanned() -> None:
    files = _sources()
    assert ROOT / "cuda_resolve" / "net" / "client.py" in files
    assert len(files) > 10


def test_no_source_weakens_tls_verification() -> None:
    found = []
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        for number, label, line in scan(path.read_text(encoding="utf-8", errors="replace")):
            if (relative, line) not in REVIEWED_MENTIONS:
                found.append(f"{relative}:{number}: {label}: {line}")
    assert found == [], "TLS verification must never be weakened:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "session.verify = False",
        "requests.get(url, verify=False)",
        "ctx.verify_mode = ssl.CERT_NONE",
        "ctx.check_hostname = False",
        "cmd += ['--trusted-host', host]",
        "truststore.inject_into_ssl()",
        "ctx = ssl._create_unverified_context()",
    ],
)
def test_the_scan_catches_each_pattern(line: str) -> None:
    assert scan(line), line


def test_the_scan_ignores_the_secure_forms() -> None:
    assert scan("ctx.verify_mode = ssl.CERT_REQUIRED\nctx.check_hostname = True\nverify=True") == []
