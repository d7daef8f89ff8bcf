"""doctor --network on the bench: reachability through mirrors and proxies, interception named,
pip and conda judged from their files, conda's bundle shadowing the OS store."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version
from test_net_support import BenchServer, Cas, ClientFactory, ProxyFactory, SystemTrust, closed_port

from cuda_resolve.doctor.findings import Finding
from cuda_resolve.doctor.network import (
    IndexTarget,
    conda_ssl_verify,
    network_findings,
    pip_trust_finding,
    read_dist_version,
)
from cuda_resolve.environment import Environment, Machine, PythonInfo
from cuda_resolve.net import HttpClient

pytest_plugins = ["test_net_support"]

PYPI = "https://pypi.org/simple/torch/"
PYTORCH = "https://download.pytorch.org/whl/torch/"
KAOLIN = "https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-2.5.1_cu124.html"
TARGETS = (
    IndexTarget("pypi", PYPI, required=True, what="PyPI"),
    IndexTarget("pytorch", PYTORCH, required=False, what="the PyTorch wheel index"),
    IndexTarget("kaolin", KAOLIN, required=False, what="kaolin's pages"),
)


SIMPLE_PAGE = (
    b'<a href="/files/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl#sha256=00">torch-2.5.1</a>\n'
)


def dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def environment(
    site: Path, *, python: str = "3.11.7", prefix: Path | None = None, conda: bool = False
) -> Environment:
    return Environment(
        machine=Machine(),
        python=PythonInfo(
            version=python,
            site_packages=(str(site),),
            prefix=str(prefix) if prefix else None,
            is_conda=conda,
        ),
    )


def by_check(findings: list[Finding]) -> dict[str, Finding]:
    return {f.check: f for f in findings}


@pytest.fixture
def intercepted_network(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_proxy: ProxyFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> BenchServer:
    """PyPI answers through an intercepting proxy whose CA only the OS store has; the PyTorch
    index's mirror answers directly; kaolin's host refuses connections."""
    origin.routes["/simple/torch/"] = lambda h: h.reply(200, SIMPLE_PAGE, content_type="text/html")
    origin.routes["/mirror/whl/torch/"] = lambda h: h.reply(
        200, SIMPLE_PAGE, content_type="text/html"
    )
    proxy = make_proxy("intercept", routes={"pypi.invalid": origin.port}, origin=origin)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    system_trust(cas.intercept, cas.origin)
    return origin


def bench_client(make_client: ClientFactory, origin: BenchServer) -> HttpClient:
    dead = f"https://127.0.0.1:{closed_port()}/"

    def rewrite(url: str) -> str:
        return (
            url.replace("https://pypi.org/", "https://pypi.invalid/")
            .replace("https://download.pytorch.org/", origin.url("/mirror/"))
            .replace("https://nvidia-kaolin.s3.us-east-2.amazonaws.com/", dead)
        )

    return make_client(rewrite=rewrite)


def test_network_findings_on_an_intercepted_network(
    intercepted_network: BenchServer, make_client: ClientFactory, tmp_path: Path
) -> None:
    site = tmp_path / "site-packages"
    dist(site, "pip", "23.2.1")
    condarc = tmp_path / ".condarc"
    condarc.write_text("channels:\n  - conda-forge\nssl_verify: true  # default\n")
    findings = by_check(
        network_findings(
            environment(site),
            client_factory=lambda: bench_client(make_client, intercepted_network),
            targets=TARGETS,
            environ={"CONDA_EXE": str(tmp_path / "bin" / "conda"), "HOME": str(tmp_path)},
            condarc_files=[condarc],
        )
    )
    pypi = findings["index:pypi"]
    assert (
        pypi.status == "ok"
        and "https://pypi.invalid/simple/torch/ (mirror of https://pypi.org/simple/torch/)"
        in pypi.found
    )
    assert "through proxy http://127.0.0.1:" in pypi.found and "HTTP 200 in" in pypi.found
    assert findings["index:pytorch"].status == "ok"
    kaolin = findings["index:kaolin"]
    assert kaolin.status == "warn" and "refused" in kaolin.found and "placeholder" in kaolin.found
    interception = findings["tls-interception"]
    assert "Bench Campus Intercept CA" in interception.found and "pip < 24.2" in interception.found
    pip = findings["pip-trust"]
    assert (
        pip.status == "error"
    )  # 23.2.1 needs the flag and the truststore package, which is missing
    assert (
        "--use-feature=truststore" in pip.found
        and "truststore package" in pip.found
        and pip.fix is not None
    )
    conda = findings["conda-trust"]
    assert conda.status == "warn" and "ssl_verify truststore" in (conda.fix or "")


def test_network_findings_read_at_80_columns(
    intercepted_network: BenchServer, make_client: ClientFactory, tmp_path: Path
) -> None:
    """What the bench's network really produces (a mirror, a proxy URL, a refused host) wraps at
    spaces only, with a hanging indent."""
    from test_doctor_render import assert_readable, words_of

    from cuda_resolve.doctor.render import finding_lines

    site = tmp_path / "site-packages"
    dist(site, "pip", "23.2.1")
    findings = network_findings(
        environment(site),
        client_factory=lambda: bench_client(make_client, intercepted_network),
        targets=TARGETS,
        environ={"CONDA_EXE": str(tmp_path / "bin" / "conda"), "HOME": str(tmp_path)},
        condarc_files=[],
    )
    assert {f.check for f in findings} >= {
        "index:pypi",
        "index:kaolin",
        "tls-interception",
        "pip-trust",
    }
    for finding in findings:
        lines = finding_lines(finding, 80)
        assert_readable(lines)
        assert " ".join(lines).split() == words_of(finding)


def test_pypi_unreachable_is_an_error_and_the_rest_is_still_judged(
    clean_env: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    dead = f"https://127.0.0.1:{closed_port()}/"
    site = tmp_path / "site-packages"
    dist(site, "pip", "26.3")
    findings = by_check(
        network_findings(
            environment(site),
            targets=TARGETS[:1],
            environ={},
            condarc_files=[],
            client_factory=lambda: make_client(
                rewrite=lambda u: u.replace("https://pypi.org/", dead)
            ),
        )
    )
    pypi = findings["index:pypi"]
    assert (
        pypi.status == "error"
        and dead in pypi.found
        and "(mirror of https://pypi.org/simple/torch/)" in pypi.found
    )
    assert "tls-interception" not in findings
    assert findings["pip-trust"].status == "ok"
    assert "conda-trust" not in findings  # no conda here


def test_pip_rules() -> None:
    system = pip_trust_finding(
        Version("24.2"), (3, 10), intercepted=True, truststore_installed=False
    )
    assert system.status == "ok"
    old_python = pip_trust_finding(
        Version("25.0"), (3, 9), intercepted=True, truststore_installed=False
    )
    assert old_python.status == "error" and "Python >= 3.10" in old_python.found
    flag = pip_trust_finding(
        Version("22.3"), (3, 11), intercepted=False, truststore_installed=False
    )
    assert flag.status == "warn" and "truststore package" in flag.found
    vendored = pip_trust_finding(
        Version("24.1.2"), (3, 11), intercepted=False, truststore_installed=False
    )
    assert vendored.status == "info" and "--use-feature=truststore" in vendored.found
    ancient = pip_trust_finding(
        Version("21.3"), (3, 11), intercepted=True, truststore_installed=True
    )
    assert (
        ancient.status == "error"
        and "cannot" in ancient.found
        and "PIP_CERT=" in (ancient.fix or "")
    )
    ip = pip_trust_finding(
        Version("25.1"),
        (3, 12),
        intercepted=False,
        truststore_installed=False,
        ip_literal_index="https://10.0.0.5/simple/",
    )
    assert ip.status == "warn" and "26.1" in (ip.fix or "")
    assert (
        pip_trust_finding(None, (3, 12), intercepted=None, truststore_installed=False).status
        == "info"
    )


def test_dist_versions_are_read_from_metadata(tmp_path: Path) -> None:
    dist(tmp_path, "pip", "24.0")
    dist(tmp_path, "truststore", "0.10.5")
    assert read_dist_version([str(tmp_path)], "pip") == Version("24.0")
    assert read_dist_version([str(tmp_path), "/nonexistent"], "truststore") == Version("0.10.5")
    assert read_dist_version([str(tmp_path)], "pi") is None


def test_conda_ssl_verify_precedence(tmp_path: Path) -> None:
    user, env = tmp_path / "user.condarc", tmp_path / "env.condarc"
    user.write_text("ssl_verify: false\n")
    env.write_text("channels: [conda-forge]\nssl_verify: 'truststore'   # system store\n")
    assert conda_ssl_verify({}, [user, env]) == ("truststore", str(env))
    assert conda_ssl_verify({}, [env, user]) == ("false", str(user))
    assert conda_ssl_verify({"CONDA_SSL_VERIFY": "truststore"}, [user]) == (
        "truststore",
        "CONDA_SSL_VERIFY",
    )
    assert conda_ssl_verify({}, [tmp_path / "missing"]) == (None, None)


def test_conda_verification_off_is_an_error(
    clean_env: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    condarc = tmp_path / ".condarc"
    condarc.write_text("ssl_verify: false\n")
    findings = by_check(
        network_findings(
            environment(tmp_path),
            targets=(),
            environ={},
            condarc_files=[condarc],
            client_factory=make_client,
        )
    )
    assert findings["conda-trust"].status == "error" and "off" in findings["conda-trust"].found


def test_target_conda_env_openssl_shadowing_is_reported(
    clean_env: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    prefix = tmp_path / "envs" / "lab"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "ssl").mkdir()
    (prefix / "ssl" / "cacert.pem").write_text("# conda's Mozilla bundle\n")
    findings = by_check(
        network_findings(
            environment(tmp_path / "site", prefix=prefix, conda=True),
            targets=(),
            environ={},
            condarc_files=[],
            client_factory=make_client,
        )
    )
    if not any(
        Path(p).is_file()
        for p in (
            "/etc/ssl/certs/ca-certificates.crt",
            "/etc/pki/tls/certs/ca-bundle.crt",
            "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
            "/etc/ssl/ca-bundle.pem",
            "/etc/ssl/cert.pem",
            "/etc/pki/tls/cert.pem",
        )
    ):
        assert "target-openssl" not in findings  # no OS bundle to prefer
        return
    shadow = findings["target-openssl"]
    assert shadow.status == "warn" and str(prefix / "ssl" / "cacert.pem") in shadow.found
    assert "SSL_CERT_FILE=" in (shadow.fix or "")
    overridden = by_check(
        network_findings(
            environment(tmp_path / "site", prefix=prefix, conda=True),
            targets=(),
            environ={"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"},
            condarc_files=[],
            client_factory=make_client,
        )
    )
    assert overridden["target-openssl"].status == "ok"


def test_ca_bundle_variables_are_reported(
    clean_env: None, make_client: ClientFactory, tmp_path: Path
) -> None:
    findings = by_check(
        network_findings(
            environment(tmp_path),
            targets=(),
            environ={"REQUESTS_CA_BUNDLE": "/corp/bundle.pem"},
            condarc_files=[],
            client_factory=make_client,
        )
    )
    assert "REQUESTS_CA_BUNDLE=/corp/bundle.pem" in findings["tls-ca-variables"].found
    assert findings["tls-store"].status == "ok"


def test_kaolin_target_comes_from_the_index_pattern() -> None:
    from cuda_resolve.doctor.network import targets_from_index
    from cuda_resolve.index.load import load_index

    index = load_index(include_user=False)
    kaolin = next(t for t in targets_from_index(index) if t.name == "kaolin")
    package = index.package("kaolin")
    assert package is not None and package.find_links is not None
    newest = max(package.wheels, key=lambda w: w.version)
    torch, variants = newest.torch[-1]
    assert kaolin.url == package.find_links.format(
        torch=torch, cuda="", cuda_nodot=variants[-1][2:], variant=variants[-1]
    )
    assert kaolin.url.startswith("https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-")


# -- the answer must be an index, not just "HTTP 200" (issue 8) --------------------------------


def _one_target(origin: BenchServer, make_client: ClientFactory, tmp_path: Path) -> Finding:
    site = tmp_path / "site"
    site.mkdir()
    findings = by_check(
        network_findings(
            environment(site),
            client_factory=lambda: make_client(),
            environ={"HOME": str(tmp_path)},
            targets=(
                IndexTarget("pypi", origin.url("/simple/torch/"), required=True, what="PyPI"),
            ),
            condarc_files=[],
        )
    )
    return findings["index:pypi"]


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (
            b"<html><form action='/login'>Welcome to CampusNet, please log in</form></html>",
            "text/html",
        ),
        (b"<html><a href='/help.html'>help</a></html>", "text/html"),
        (b"", "text/html"),
        (b'{"error": "log in first"}', "application/json"),
    ],
)
def test_an_answer_that_is_not_an_index_is_an_error(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_client: ClientFactory,
    tmp_path: Path,
    body: bytes,
    content_type: str,
) -> None:
    system_trust(cas.origin)
    origin.routes["/simple/torch/"] = lambda h: h.reply(200, body, content_type=content_type)
    finding = _one_target(origin, make_client, tmp_path)
    assert finding.status == "error" and "not an index" in finding.found
    assert (
        origin.url("/simple/torch/") in finding.found
        and finding.fix
        and "captive portal" in finding.fix
    )


@pytest.mark.parametrize(
    ("body", "content_type", "shown"),
    [
        (SIMPLE_PAGE, "text/html", "a page with 1 file link"),
        (
            b'{"meta": {"api-version": "1.1"}, "name": "torch", "files": []}',
            "application/vnd.pypi.simple.v1+json",
            "PEP 691 JSON",
        ),
    ],
)
def test_a_real_index_answer_is_ok(
    origin: BenchServer,
    cas: Cas,
    system_trust: SystemTrust,
    make_client: ClientFactory,
    tmp_path: Path,
    body: bytes,
    content_type: str,
    shown: str,
) -> None:
    system_trust(cas.origin)
    origin.routes["/simple/torch/"] = lambda h: h.reply(200, body, content_type=content_type)
    finding = _one_target(origin, make_client, tmp_path)
    assert finding.status == "ok" and shown in finding.found
