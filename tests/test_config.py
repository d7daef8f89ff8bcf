"""cuda-resolve's own config: reading, validation with key paths, and the URL rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_resolve.config import (
    CONFIG_ENV,
    Config,
    ConfigError,
    Proxies,
    Rewrite,
    TorchIndex,
    config_path,
    config_to_dict,
    load_config,
    parse_config,
    parse_mirror_url,
)
from cuda_resolve.errors import UsageError

FULL = """\
preset = "aliyun"
index_dirs = ["lab-index", "/abs/index"]

[proxy]
https = "http://proxy.example:3128"
no_proxy = ["localhost", ".example.edu"]

[pytorch]
layout = "flat"
url = "https://mirrors.aliyun.com/pytorch-wheels"

[[rewrite]]
canonical = "https://pypi.org/simple/"
mirror = "https://mirrors.aliyun.com/pypi/simple/"

[[rewrite]]
canonical = "https://download.pytorch.org/whl/"
mirror = "https://mirrors.aliyun.com/pytorch-wheels/"
artifacts_only = true

[[rewrite]]
canonical = "https://download.pytorch.org/whl/cu121/"
mirror = "https://lab.example.edu/cu121/"
"""


def test_missing_file_is_the_empty_configuration(tmp_path: Path) -> None:
    config = load_config(tmp_path / "absent.toml")
    assert config.rewrites == ()
    assert config.preset is None
    assert config.pytorch is None
    assert config.proxies == Proxies()
    assert config.rewrite("https://pypi.org/simple/torch/") == "https://pypi.org/simple/torch/"


def test_environment_variable_names_the_file(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.toml"
    target.write_text('preset = "tuna"\n', encoding="utf-8")
    assert config_path({CONFIG_ENV: str(target)}) == target
    assert load_config(environ={CONFIG_ENV: str(target)}).preset == "tuna"


def test_default_path_is_the_user_config_dir() -> None:
    path = config_path({})
    assert path.name == "config.toml"
    assert path.parent.name == "cuda-resolve"


def test_full_file_parses(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    target.write_text(FULL, encoding="utf-8")
    config = load_config(target)
    assert config.preset == "aliyun"
    assert config.index_dirs == (tmp_path / "lab-index", Path("/abs/index"))
    assert config.proxies.https == "http://proxy.example:3128"
    assert config.proxies.as_requests() == {
        "https": "http://proxy.example:3128",
        "no_proxy": "localhost,.example.edu",
    }
    assert config.pytorch == TorchIndex(
        layout="flat", url="https://mirrors.aliyun.com/pytorch-wheels/"
    )
    assert config.pytorch.for_variant("cu121") == "https://mirrors.aliyun.com/pytorch-wheels/cu121/"
    assert config.pytorch.pip_option == "--find-links"
    assert len(config.rewrites) == 3


def test_rewrite_takes_the_longest_prefix() -> None:
    config = parse_config(FULL)
    wheel = "https://download.pytorch.org/whl/cu121/torch-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl#sha256=ab"
    assert config.rewrite(wheel) == (
        "https://lab.example.edu/cu121/torch-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl#sha256=ab"
    )
    other = (
        "https://download.pytorch.org/whl/cu118/torch-2.1.0%2Bcu118-cp310-cp310-linux_x86_64.whl"
    )
    assert config.rewrite(other) == (
        "https://mirrors.aliyun.com/pytorch-wheels/cu118/torch-2.1.0%2Bcu118-cp310-cp310-linux_x86_64.whl"
    )
    assert (
        config.rewrite("https://pypi.org/simple/torch/")
        == "https://mirrors.aliyun.com/pypi/simple/torch/"
    )


def test_artifacts_only_leaves_index_pages_canonical() -> None:
    config = parse_config(FULL)
    page = "https://download.pytorch.org/whl/cu118/torch/"
    assert config.rewrite(page) == page
    metadata = (
        "https://download.pytorch.org/whl/cu118/torch-2.1.0-cp310-cp310-linux_x86_64.whl.metadata"
    )
    assert config.rewrite(metadata).startswith("https://mirrors.aliyun.com/pytorch-wheels/")


def test_prefix_match_stops_at_a_path_boundary() -> None:
    rule = Rewrite(canonical="https://pypi.org/simple/", mirror="https://m.example/simple/")
    config = Config(rewrites=(rule,))
    assert config.rewrite("https://pypi.org/simplex/") == "https://pypi.org/simplex/"
    # scheme and host compare case-insensitively; the path does not
    assert config.rewrite("HTTPS://PyPI.org/simple/Torch/") == "https://m.example/simple/Torch/"
    assert config.rewrite("https://pypi.org/Simple/torch/") == "https://pypi.org/Simple/torch/"


def test_unknown_key_names_its_path() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            '[[rewrite]]\ncanonical = "https://a.example/"\nmirror = '
            '"https://b.example/"\nmirrror = 1\n',
            origin="cfg.toml",
        )
    assert "cfg.toml: rewrite[0].mirrror" in info.value.message
    assert info.value.exit_code == 2


def test_bad_url_names_key_and_value() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            '[[rewrite]]\ncanonical = "https://a.example/"\nmirror = "ftp://b.example/"\n',
            origin="cfg.toml",
        )
    assert "rewrite[0].mirror" in info.value.message
    assert "ftp://b.example/" in info.value.message


def test_plain_http_only_on_loopback() -> None:
    assert parse_mirror_url("http://127.0.0.1:8080/simple") == "http://127.0.0.1:8080/simple/"
    assert parse_mirror_url("http://localhost/x/") == "http://localhost/x/"
    with pytest.raises(ValueError, match="plain http"):
        parse_mirror_url("http://mirrors.example.edu/simple")
    with pytest.raises(ValueError, match="no query"):
        parse_mirror_url("https://mirrors.example.edu/simple?x=1")


def test_duplicate_canonical_prefix_is_an_error() -> None:
    text = (
        '[[rewrite]]\ncanonical = "https://a.example/"\nmirror = "https://b.example/"\n'
        '[[rewrite]]\ncanonical = "https://a.example"\nmirror = "https://c.example/"\n'
    )
    with pytest.raises(ConfigError, match="already mapped"):
        parse_config(text)


def test_bad_layout_and_proxy() -> None:
    with pytest.raises(ConfigError, match=r"pytorch\.layout"):
        parse_config('[pytorch]\nlayout = "pep503"\nurl = "https://m.example/"\n')
    with pytest.raises(ConfigError, match=r"proxy\.https"):
        parse_config('[proxy]\nhttps = "proxy.example:3128"\n')


def test_not_toml_is_a_usage_error(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    target.write_text("preset = \n", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_config(target)


def test_round_trip_through_dict(tmp_path: Path) -> None:
    import tomli_w

    config = parse_config(FULL, base_dir=tmp_path)
    again = parse_config(tomli_w.dumps(config_to_dict(config)), base_dir=tmp_path)
    assert again.rewrites == config.rewrites
    assert again.pytorch == config.pytorch
    assert again.proxies == config.proxies
    assert again.preset == config.preset


def test_a_mirror_url_keeps_the_case_of_its_credentials() -> None:
    """The host is case-insensitive and lower-cased; a token is not (lower-casing it breaks the
    login)."""
    assert (
        parse_mirror_url("https://Lab:AbC@Mirror.Example.EDU/Simple")
        == "https://Lab:AbC@mirror.example.edu/Simple/"
    )
    config = parse_config(
        '[[rewrite]]\ncanonical = "https://pypi.org/simple/"\nmirror = "https://Lab:AbC@Mirror.Lab/simple"\n'
    )
    assert (
        config.rewrite("https://PyPI.org/simple/pip/") == "https://Lab:AbC@mirror.lab/simple/pip/"
    )


# -- URLs parsed with a real parser; secrets never echoed (issue 8) ----------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://mirror.example:99999/simple/", "port"),
        ("https://mirror.example:0/simple/", "port"),
        ("https://mirror.example:http/simple/", "port"),
        ("https://:8443/simple/", "no host"),
        ("https://mirror.example/sim ple/", "spaces"),
        ("https://mirror.example/\x00/", "control"),
        ("ftp://mirror.example/simple/", "https"),
    ],
)
def test_mirror_urls_are_parsed_and_checked(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_mirror_url(url)


def test_user_info_is_kept_verbatim_and_only_the_host_is_lower_cased() -> None:
    url = "https://Lab:Pa%2FsS@Mirror.EXAMPLE.edu:8443/Simple/"
    assert parse_mirror_url(url) == "https://Lab:Pa%2FsS@mirror.example.edu:8443/Simple/"


def test_a_password_with_a_raw_slash_is_refused_without_echoing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuda_resolve.cli import main

    config = tmp_path / "config.toml"
    config.write_text(
        '[[rewrite]]\ncanonical = "https://pypi.org/simple/"\nmirror = "https://lab:Se/cr3t@mirror.lab/simple/"\n'
    )
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    with pytest.raises(ConfigError) as info:
        load_config()
    assert "Se/cr3t" not in info.value.message and "cr3t" not in info.value.message
    assert "%2F" in info.value.message and "lab:***@" in info.value.message
    assert main(["mirror", "test"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "cr3t" not in err


def test_a_custom_mirror_with_a_bad_port_names_it_without_the_password(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_resolve.cli import main

    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(tmp_path / "config.toml"))
    code = main(
        [
            "mirror",
            "set",
            "custom",
            "--pypi",
            "https://lab:T0ken@mirror.lab:70000/simple/",
            "--dry-run",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "T0ken" not in err and "lab:***@mirror.lab:70000" in err and "port" in err


def test_proxy_urls_with_a_bad_port_are_refused_without_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('[proxy]\nhttps = "http://u:pw0rd@proxy.lab:99999"\n')
    assert "pw0rd" not in info.value.message and "port" in info.value.message
