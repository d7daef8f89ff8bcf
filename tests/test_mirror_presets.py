"""The shipped mirror presets: they parse, every layout cites a source, and rewrites follow."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from cuda_resolve.config import ConfigError
from cuda_resolve.errors import IndexDataError, UsageError
from cuda_resolve.mirrors.presets import custom_preset, get_preset, load_presets, parse_presets

EXPECTED = {"official", "tuna", "bfsu", "ustc", "aliyun", "sjtu", "nju"}


def test_shipped_presets_parse_and_cite_sources() -> None:
    presets = load_presets()
    assert set(presets) == EXPECTED
    for preset in presets.values():
        assert preset.source and preset.title
        assert preset.pypi is not None, preset.name
        for section in (preset.pypi, preset.pytorch, preset.conda):
            if section is not None:
                assert section.source, f"{preset.name}: a section without a source"
        for rule in preset.rewrites():
            assert urlsplit(rule.mirror).scheme == "https"
            assert rule.canonical.endswith("/") and rule.mirror.endswith("/")


def test_official_rewrites_nothing() -> None:
    official = get_preset("official")
    assert official.rewrites() == ()
    assert official.torch_index() is None
    assert official.conda is None


def test_flat_pytorch_mirror_rewrites_files_only() -> None:
    aliyun = get_preset("aliyun")
    index = aliyun.torch_index()
    assert index is not None and index.layout == "flat"
    torch_rules = [rule for rule in aliyun.rewrites() if "pytorch.org" in rule.canonical]
    assert torch_rules and all(rule.artifacts_only for rule in torch_rules)
    nju = get_preset("nju")
    assert nju.torch_index() is not None
    assert all(not rule.artifacts_only for rule in nju.rewrites())


def test_presets_without_a_torch_mirror_keep_it_canonical() -> None:
    for name in ("tuna", "bfsu", "ustc"):
        preset = get_preset(name)
        assert preset.pytorch is not None and preset.pytorch.layout == "none"
        assert not any("pytorch.org" in rule.canonical for rule in preset.rewrites())


def test_nvidia_channel_is_never_sent_to_a_mirror() -> None:
    # TUNA declined to mirror it (licence); no preset claims it
    for preset in load_presets().values():
        if preset.conda is not None:
            assert "nvidia" not in dict(preset.conda.custom_channels)


def test_unknown_preset_names_the_choices() -> None:
    with pytest.raises(UsageError) as info:
        get_preset("tsinghua")
    assert "tsinghua" in info.value.message
    assert "tuna" in (info.value.hint or "")


def test_custom_preset_validates_urls() -> None:
    with pytest.raises(ConfigError) as info:
        custom_preset(pypi="http://mirror.example.edu/simple")
    assert "--pypi" in info.value.message and "mirror.example.edu" in info.value.message
    with pytest.raises(UsageError, match="no mirror URL"):
        custom_preset()
    with pytest.raises(UsageError, match="pytorch-layout"):
        custom_preset(pytorch="https://m.example/whl/", pytorch_layout="pep503")


def test_custom_preset_covers_only_what_was_given() -> None:
    preset = custom_preset(pytorch="https://m.example/whl", pytorch_layout="flat")
    assert preset.covers("pytorch")
    assert not preset.covers("pypi") and not preset.covers("conda")
    assert [rule.mirror for rule in preset.rewrites()] == [
        "https://m.example/whl/",
        "https://m.example/whl/",
    ]
    conda = custom_preset(conda="https://lab.example/anaconda")
    assert conda.conda is not None
    assert conda.conda.default_channels[0] == "https://lab.example/anaconda/pkgs/main/"
    assert dict(conda.conda.custom_channels) == {
        "conda-forge": "https://lab.example/anaconda/cloud/"
    }


def test_bad_preset_data_names_file_and_key() -> None:
    text = """
format = 1
[canonical]
pypi_simple = "https://pypi.org/simple/"
pypi_files = "https://files.pythonhosted.org/packages/"
pytorch = ["https://download.pytorch.org/whl/"]
kaolin = "https://k.example/"
conda_channel_alias = "https://conda.anaconda.org/"
conda_default_channels = []
[presets.x]
title = "x"
source = "s"
[presets.x.pytorch]
layout = "pep503"
url = "https://m.example/"
source = "s"
"""
    with pytest.raises(IndexDataError) as info:
        parse_presets(text, origin="presets.toml")
    assert "presets.toml: presets.x.pytorch.layout" in info.value.message
