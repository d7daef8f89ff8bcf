"""doctor's text report reads at 80 columns and in pipes: no line longer than the width except an
unbreakable token, no word, path or URL split, nothing wrapped to column 0, and a typical machine
fits on one screen and a half."""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import pytest

import cuda_resolve.cli.doctor
import cuda_resolve.doctor.network as network
import cuda_resolve.index
from cuda_resolve.cli import main
from cuda_resolve.doctor.findings import Finding
from cuda_resolve.doctor.render import environment_lines, finding_lines
from cuda_resolve.environment import Gpu
from cuda_resolve.index import default_index
from cuda_resolve.profile import load_profile
from cuda_resolve.versions import ComputeCapability

PROFILES = Path(__file__).parent / "data" / "profiles"
WIDTH = 80
STATUSES = ("ok", "info", "warn", "error")
SECTIONS = ("This machine", "Checks", "Network")
LONG_URL = (
    "https://mirror-with-a-long-name.example.edu/pypi/web/simple/torch-stack/very/long/path/torch/"
)

#: What ``doctor --network`` finds on an ordinary network: every index answers, no interception.
TYPICAL_NETWORK = [
    Finding(
        check="tls-store",
        status="ok",
        title="cuda-resolve's TLS trust",
        found="OpenSSL default verify paths: /etc/ssl/certs/ca-certificates.crt, /etc/ssl/certs",
    ),
    Finding(
        check="index:pypi",
        status="ok",
        title="reach pypi",
        found="https://pypi.org/simple/torch/: HTTP 200 in 84 ms, a page with 405+ file links",
    ),
    Finding(
        check="tls-interception",
        status="ok",
        title="TLS interception",
        found="pypi.org presents a certificate issued by 'CN=WE1,O=Google Trust Services,C=US', "
        "trusted by Mozilla's roots: no interception",
    ),
    Finding(
        check="index:pytorch",
        status="ok",
        title="reach pytorch",
        found="https://download.pytorch.org/whl/torch/: HTTP 200 in 131 ms, a page with "
        "1900+ file links",
    ),
    Finding(
        check="index:kaolin",
        status="ok",
        title="reach kaolin",
        found="https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-2.8.0_cu129.html: HTTP 200 "
        "in 212 ms, a page with 9 file links",
    ),
    Finding(
        check="pip-trust",
        status="ok",
        title="pip and the system trust store",
        found="pip 25.3 on Python 3.12 verifies with the system store and certifi",
    ),
]

#: An unlucky network: a long mirror URL that does not answer, a fix that is one long command.
BAD_NETWORK = [
    Finding(
        check="index:pypi",
        status="error",
        title="reach pypi",
        found="DNS lookup failed for host 'mirror-with-a-long-name.example.edu' fetching "
        f"{LONG_URL}; without it, PyPI cannot be used: cuda-resolve fails rather than fall back "
        "to another index",
        fix="check the host name; if this network only reaches the internet through a proxy, "
        "set HTTPS_PROXY",
    ),
    Finding(
        check="target-openssl",
        status="warn",
        title="target environment's OpenSSL",
        found="pip in /home/someone/miniconda3/envs/kaolin-build-environment verifies with "
        "conda's bundle /home/someone/miniconda3/envs/kaolin-build-environment/ssl/cacert.pem",
        fix="conda env config vars set -p /home/someone/miniconda3/envs/kaolin-build-environment "
        "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
    ),
]


def assert_readable(lines: list[str], width: int = WIDTH) -> None:
    """The 80-column properties of a rendered report (or a part of one)."""
    for line in lines:
        # only a token too long for any line (after its label, alone), or a command kept whole
        if len(line) > width and "export" not in line.split():
            words = line.split()
            assert len(words) <= 2 and len(words[-1]) > width - 12, (
                f"needlessly long line: {line!r}"
            )
        if line and not line[0].isspace():  # column 0: a title, an entry's label, the summary
            first = line.split()[0]
            assert (
                line in SECTIONS
                or line.startswith("Profile ")
                or first in STATUSES
                or re.fullmatch(r"\d+ error\(s\), \d+ warning\(s\)", line)
                or re.match(r"[a-z]+( \d+(-\d+)?)?  +\S", line)
            ), f"wrapped to column 0: {line!r}"


def words_of(finding: Finding) -> list[str]:
    return [
        finding.status,
        *f"{finding.title}: {finding.found}".split(),
        *(["fix:", *finding.fix.split()] if finding.fix else []),
    ]


@pytest.fixture
def shipped_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile's own facts against the shipped index, parsed once."""
    index = default_index()
    monkeypatch.setattr(cuda_resolve.cli.doctor, "default_index", lambda: index)
    monkeypatch.setattr(cuda_resolve.index, "default_index", lambda: index)


def doctor_text(
    profile: Path,
    findings: list[Finding],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    monkeypatch.setattr(network, "network_findings", lambda env, index=None: list(findings))
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    main(["doctor", "--network", "--profile", str(profile)])
    out, err = capsys.readouterr()
    assert err == ""
    return out.splitlines()


@pytest.mark.parametrize("finding", [*TYPICAL_NETWORK, *BAD_NETWORK], ids=lambda f: f.check)
@pytest.mark.parametrize("width", [WIDTH, 60])
def test_a_finding_is_wrapped_at_spaces_only(finding: Finding, width: int) -> None:
    lines = finding_lines(finding, width)
    assert_readable(lines, width)
    assert " ".join(lines).split() == words_of(finding)  # every word whole, none lost, none added
    assert lines[0].startswith(finding.status) and all(
        line.startswith("       ") for line in lines[1:]
    )
    for line, after in itertools.pairwise(lines):  # "131 ms" stays on one line
        assert not (re.search(r"\d$", line) and re.match(r"\s*(ms|s|GiB|MiB)\b", after)), (
            line,
            after,
        )


@pytest.mark.parametrize("name", sorted(p.stem for p in PROFILES.glob("*.toml")))
def test_every_profile_reads_at_80_columns(
    name: str,
    shipped_index: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    profile = PROFILES / f"{name}.toml"
    lines = doctor_text(profile, BAD_NETWORK, monkeypatch, capsys)
    assert_readable(lines)
    text = "\n".join(lines)
    assert LONG_URL in text  # a URL is never split
    env = load_profile(profile)
    for path in [
        env.python.executable,
        *(t.root for t in env.toolkits),
        *(e.path for e in env.extensions if e.missing),
    ]:
        if path:
            assert re.search(rf"(^|\s){re.escape(path)}([\s,;:)]|$)", text, re.MULTILINE), path
    assert len(lines) <= 60, "\n".join(lines)


@pytest.mark.parametrize("name", ["h200-healthy-handwritten", "h200-detected-2026-12-02"])
def test_a_typical_machine_fits_the_line_budget(
    name: str,
    shipped_index: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One GPU, one toolkit, an ordinary network: 33-36 lines (the tables drew 51-54)."""
    lines = doctor_text(PROFILES / f"{name}.toml", TYPICAL_NETWORK, monkeypatch, capsys)
    assert_readable(lines)
    assert [line for line in lines if line in SECTIONS or line.startswith("Profile ")][1:] == [
        "Checks",
        "Network",
    ]
    assert len(lines) <= 40, "\n".join(lines)


def test_identical_gpus_share_one_row() -> None:
    """An 8-GPU node is one line; GPUs that differ, or whose indices jump, keep their own."""
    env = load_profile(PROFILES / "h200-healthy-handwritten.toml")
    h200 = env.gpus[0]
    other = Gpu(
        index=8,
        name="NVIDIA H100 80GB HBM3",
        compute_capability=ComputeCapability(9, 0),
        memory_mib=81559,
    )
    gpus = (
        *(dataclasses.replace(h200, index=i) for i in range(8)),
        other,
        *(dataclasses.replace(h200, index=i) for i in (10, 12)),
    )
    lines = environment_lines(dataclasses.replace(env, gpus=gpus), WIDTH)
    rows = [line for line in lines if line.startswith("gpu")]
    assert rows == [
        "gpu 0-7   8 x NVIDIA H200 (compute capability 9.0, 140 GiB)",
        "gpu 8     NVIDIA H100 80GB HBM3 (compute capability 9.0, 79 GiB)",
        "gpu 10    NVIDIA H200 (compute capability 9.0, 140 GiB)",
        "gpu 12    NVIDIA H200 (compute capability 9.0, 140 GiB)",
    ]


def test_a_long_value_continues_under_its_value(shipped_index: None) -> None:
    env = load_profile(PROFILES / "h200-detected-2026-12-02.toml")
    lines = environment_lines(env, WIDTH)
    torch_at = next(i for i, line in enumerate(lines) if line.startswith("torch"))
    value_column = re.compile(r"torch +").match(lines[torch_at]).end()  # type: ignore[union-attr]
    assert lines[torch_at + 1].startswith(" " * value_column) and env.torch is not None
    assert lines[torch_at + 1].strip() == env.torch.location
