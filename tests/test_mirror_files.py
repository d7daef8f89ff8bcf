"""Editing pip.conf and .condarc in place: what is kept, what is replaced, what is refused."""

from __future__ import annotations

import pytest
from ruamel.yaml import YAML

from cuda_resolve.config import ConfigError
from cuda_resolve.mirrors.condarc import edit_condarc, read_conda_settings
from cuda_resolve.mirrors.pipconf import read_pip_settings, set_index_url
from cuda_resolve.mirrors.presets import custom_preset, get_preset, load_presets

URL = "https://mirror.example.edu/simple/"


def safe_load(text: str) -> dict[str, object]:
    data = YAML(typ="safe", pure=True).load(text)
    assert isinstance(data, dict)
    return data


# -- pip.conf ---------------------------------------------------------------------------


def test_index_url_is_added_to_an_existing_global_section() -> None:
    text = "[global]\ntimeout = 60\n"
    assert set_index_url(text, URL) == f"[global]\nindex-url = {URL}\ntimeout = 60\n"


def test_global_section_is_appended_when_missing() -> None:
    text = "; comment\n[install]\nuser = true"  # no final newline
    assert (
        set_index_url(text, URL)
        == f"; comment\n[install]\nuser = true\n\n[global]\nindex-url = {URL}\n"
    )


def test_windows_line_endings_are_kept() -> None:
    text = "[install]\r\nuser = true\r\n"
    assert (
        set_index_url(text, URL)
        == f"[install]\r\nuser = true\r\n\r\n[global]\r\nindex-url = {URL}\r\n"
    )
    assert set_index_url("[global]\r\n", URL) == f"[global]\r\nindex-url = {URL}\r\n"


def test_any_spelling_of_the_key_is_replaced_once() -> None:
    text = "[global]\nIndex_URL: https://old.example/simple\n# note\nextra-index-url = https://x.example/simple\n"
    result = set_index_url(text, URL)
    assert (
        result
        == f"[global]\nindex-url = {URL}\n# note\nextra-index-url = https://x.example/simple\n"
    )
    settings = read_pip_settings(result)
    assert settings.index_url == URL
    assert settings.extra_index_urls == ("https://x.example/simple",)


def test_command_section_index_url_follows_the_mirror() -> None:
    text = "[global]\nindex-url = https://a.example/simple\n[install]\nindex-url = https://b.example/simple\n"
    result = set_index_url(text, URL)
    assert result.count(URL) == 2
    assert "a.example" not in result and "b.example" not in result


def test_pip_conf_pip_cannot_read_is_refused() -> None:
    with pytest.raises(ConfigError, match="pip cannot read"):
        set_index_url("index-url = x\n", URL, origin="pip.conf")
    with pytest.raises(ConfigError):
        set_index_url("[global]\nindex-url = a\nindex-url = b\n", URL)  # duplicate key


def test_trusted_hosts_are_read_for_warnings() -> None:
    settings = read_pip_settings(
        "[global]\ntrusted-host = a.example\n    b.example\n[install]\ntrusted_host = c.example\n"
    )
    assert settings.trusted_hosts == ("a.example", "b.example", "c.example")


# -- .condarc ---------------------------------------------------------------------------


def edit(text: str, name: str) -> tuple[str, tuple[str, ...]]:
    return edit_condarc(text, get_preset(name), all_presets=load_presets().values())


def test_empty_condarc_keeps_condas_default_channels_and_gets_truststore() -> None:
    """No ``channels`` key means conda's implicit ``defaults``: a mirror serves those from its
    ``default_channels``, it does not switch the user to conda-forge."""
    text, notes = edit("", "bfsu")
    data = safe_load(text)
    assert "channels" not in data
    assert data["ssl_verify"] == "truststore"
    assert data["default_channels"][0] == "https://mirrors.bfsu.edu.cn/anaconda/pkgs/main"  # type: ignore[index]
    assert any("no channels list" in note for note in notes)


@pytest.mark.parametrize(
    "name", [name for name, preset in load_presets().items() if preset.conda is not None]
)
def test_a_preset_on_an_empty_condarc_sets_only_mirror_keys_and_truststore(name: str) -> None:
    data = safe_load(edit("", name)[0])
    assert set(data) <= {"default_channels", "custom_channels", "channel_alias", "ssl_verify"}
    assert data["ssl_verify"] == "truststore"


def test_an_empty_channels_list_is_left_as_it_is() -> None:
    assert safe_load(edit("channels: []\n", "tuna")[0])["channels"] == []


def test_channel_urls_become_names_and_duplicates_go() -> None:
    text = (
        "channels:\n"
        "  - https://conda.anaconda.org/conda-forge\n"
        "  - https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/conda-forge/\n"
        "  - https://mirrors.aliyun.com/anaconda/pkgs/main\n"
        "  - https://my.lab.example/conda/special\n"
        "  - nvidia\n"
    )
    result, _ = edit(text, "nju")
    assert safe_load(result)["channels"] == [
        "conda-forge",
        "defaults",
        "https://my.lab.example/conda/special",
        "nvidia",
    ]


def test_legacy_verify_ssl_key_is_replaced() -> None:
    result, notes = edit("verify_ssl: false\n", "tuna")
    data = safe_load(result)
    assert "verify_ssl" not in data and data["ssl_verify"] == "truststore"
    assert any("verify_ssl" in note for note in notes)


def test_legacy_verify_ssl_naming_a_ca_bundle_keeps_the_bundle() -> None:
    """A lab CA bundle under the old key is the user's trust setting: it moves, it is not lost."""
    result, notes = edit("verify_ssl: /etc/lab/ca-bundle.pem\n", "tuna")
    data = safe_load(result)
    assert "verify_ssl" not in data and data["ssl_verify"] == "/etc/lab/ca-bundle.pem"
    assert any("CA bundle" in note for note in notes)


def test_user_channel_alias_is_kept_a_mirror_alias_is_not() -> None:
    kept, _ = edit("channel_alias: https://conda.lab.example.edu\n", "official")
    assert safe_load(kept)["channel_alias"] == "https://conda.lab.example.edu"
    dropped, _ = edit("channel_alias: https://conda.anaconda.org/\n", "official")
    assert "channel_alias" not in safe_load(dropped)


def test_custom_conda_base() -> None:
    preset = custom_preset(conda="https://conda.lab.example.edu/anaconda")
    result, _ = edit_condarc("", preset, all_presets=load_presets().values())
    settings = read_conda_settings(result)
    assert settings.custom_channels == (
        ("conda-forge", "https://conda.lab.example.edu/anaconda/cloud"),
    )
    assert settings.default_channels[0] == "https://conda.lab.example.edu/anaconda/pkgs/main"


@pytest.mark.parametrize("text", ["channels: [a\n", "- just\n- a list\n"])
def test_condarc_that_is_not_a_settings_mapping_is_refused(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        edit(text, "tuna")
    assert info.value.exit_code == 2
