"""``mirror set`` round trips on real config files: kept content, backups, idempotence, dry runs,
and the written files as pip and conda read them (real ``pip config list``, YAML parsing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from cuda_resolve.cli import main
from cuda_resolve.config import load_config
from cuda_resolve.mirrors.presets import load_presets

PIP_CONF = """\
# lab pip settings: keep this comment
[global]
timeout = 60
index-url = https://old-mirror.example.edu/simple
    https://continuation.example.edu/simple

[install]
user = false
"""

CONDARC = """\
# conda settings for the lab
channels:
  - defaults  # the base channel
  - https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/conda-forge/
  - lab
auto_activate_base: false
custom_channels:
  lab: https://conda.lab.example.edu/channels
envs_dirs:
  - /data/envs
"""

OWN_CONFIG = """\
index_dirs = ["/srv/lab-index"]

[proxy]
https = "http://proxy.lab.example.edu:3128"

[[rewrite]]
canonical = "https://artifacts.example.com/"
mirror = "https://artifacts.lab.example.edu/"
"""


class Home:
    """An isolated HOME: the user's pip.conf, .condarc and cuda-resolve config live here."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pip = root / "xdg" / "pip" / "pip.conf"
        self.condarc = root / ".condarc"
        self.config = root / "cr" / "config.toml"

    def seed(self) -> None:
        self.pip.parent.mkdir(parents=True)
        self.pip.write_text(PIP_CONF, encoding="utf-8")
        self.condarc.write_text(CONDARC, encoding="utf-8")
        self.config.parent.mkdir(parents=True)
        self.config.write_text(OWN_CONFIG, encoding="utf-8")

    def snapshot(self) -> dict[str, bytes]:
        return {
            str(path.relative_to(self.root)): path.read_bytes()
            for path in sorted(self.root.rglob("*"))
            if path.is_file()
        }

    def backups(self) -> list[Path]:
        return sorted(self.root.rglob("*.bak"))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    root = tmp_path / "home"
    root.mkdir()
    for name in list(os.environ):
        if name.startswith(("PIP_", "CONDA_")) or name in ("VIRTUAL_ENV", "CONDARC"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "xdg"))
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(root / "cr" / "config.toml"))
    return Home(root)


def run(*argv: str) -> int:
    return main(["mirror", *argv])


def load_yaml(path: Path) -> dict[str, object]:
    data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_set_keeps_existing_content_and_writes_backups(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    home.seed()
    assert run("set", "tuna") == 0
    out = capsys.readouterr().out

    pip_text = home.pip.read_text(encoding="utf-8")
    assert pip_text == PIP_CONF.replace(
        "index-url = https://old-mirror.example.edu/simple\n    https://continuation.example.edu/simple\n",
        "index-url = https://pypi.tuna.tsinghua.edu.cn/simple/\n",
    )

    condarc = load_yaml(home.condarc)
    assert condarc["channels"] == ["defaults", "conda-forge", "lab"]
    assert condarc["auto_activate_base"] is False
    assert condarc["envs_dirs"] == ["/data/envs"]
    assert condarc["ssl_verify"] == "truststore"
    assert condarc["default_channels"] == [
        "https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/main",
        "https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/r",
        "https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/msys2",
    ]
    custom = condarc["custom_channels"]
    assert isinstance(custom, dict)
    assert custom["lab"] == "https://conda.lab.example.edu/channels"
    assert custom["conda-forge"] == "https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud"
    assert "nvidia" not in custom
    condarc_text = home.condarc.read_text(encoding="utf-8")
    assert "# conda settings for the lab" in condarc_text
    assert "# the base channel" in condarc_text

    config = load_config()
    assert config.preset == "tuna"
    assert config.index_dirs == (Path("/srv/lab-index"),)
    assert config.proxies.https == "http://proxy.lab.example.edu:3128"
    assert (
        config.rewrite("https://artifacts.example.com/x.whl")
        == "https://artifacts.lab.example.edu/x.whl"
    )
    assert (
        config.rewrite("https://pypi.org/simple/pip/")
        == "https://pypi.tuna.tsinghua.edu.cn/simple/pip/"
    )
    assert config.rewrite(
        "https://files.pythonhosted.org/packages/ab/cd/pip-24.0-py3-none-any.whl"
    ) == ("https://pypi.tuna.tsinghua.edu.cn/packages/ab/cd/pip-24.0-py3-none-any.whl")
    assert config.pytorch is None  # TUNA has no PyTorch wheel mirror

    backups = home.backups()
    assert len(backups) == 3
    originals = {PIP_CONF, CONDARC, OWN_CONFIG}
    assert {path.read_text(encoding="utf-8") for path in backups} == originals
    assert all(path.parent in (home.pip.parent, home.root, home.config.parent) for path in backups)
    assert "backup:" in out


def test_second_run_changes_nothing(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    home.seed()
    assert run("set", "nju") == 0
    before = home.snapshot()
    capsys.readouterr()
    assert run("set", "nju") == 0
    out = capsys.readouterr().out
    assert home.snapshot() == before
    assert out.count("unchanged") == 3


def test_dry_run_writes_nothing_and_prints_diffs(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    home.seed()
    before = home.snapshot()
    assert run("set", "aliyun", "--dry-run") == 0
    out = capsys.readouterr().out
    assert home.snapshot() == before
    assert f"--- {home.pip} (now)" in out
    assert "-index-url = https://old-mirror.example.edu/simple" in out
    assert "+index-url = https://mirrors.aliyun.com/pypi/simple/" in out
    assert "+  conda-forge: https://mirrors.aliyun.com/anaconda/cloud" in out
    assert '+url = "https://mirrors.aliyun.com/pytorch-wheels/"' in out
    assert "nothing written" in out


def test_dry_run_on_a_fresh_home_creates_no_folder(home: Home) -> None:
    assert run("set", "tuna", "--dry-run") == 0
    assert home.snapshot() == {}
    assert not home.pip.parent.exists()


def test_fresh_home_gets_new_files_without_backups(home: Home) -> None:
    assert run("set", "sjtu") == 0
    assert (
        home.pip.read_text(encoding="utf-8")
        == "[global]\nindex-url = https://mirror.sjtu.edu.cn/pypi/web/simple/\n"
    )
    condarc = load_yaml(home.condarc)
    assert (
        "channels" not in condarc
    )  # conda's implicit defaults, now from the mirror's default_channels
    assert condarc["default_channels"][0] == "https://mirror.sjtu.edu.cn/anaconda/pkgs/main"  # type: ignore[index]
    assert condarc["ssl_verify"] == "truststore"
    assert home.backups() == []
    config = load_config()
    assert config.pytorch is not None and config.pytorch.layout == "simple"
    wheel = (
        "https://download.pytorch.org/whl/cu121/torch-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl"
    )
    assert config.rewrite(wheel) == (
        "https://mirror.sjtu.edu.cn/pytorch-wheels/cu121/torch-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl"
    )


def test_switching_presets_leaves_no_trace_of_the_old_mirror(home: Home) -> None:
    home.seed()
    assert run("set", "tuna") == 0
    assert run("set", "nju") == 0
    text = home.condarc.read_text(encoding="utf-8")
    assert "tuna" not in text
    custom = load_yaml(home.condarc)["custom_channels"]
    assert isinstance(custom, dict)
    assert custom["lab"] == "https://conda.lab.example.edu/channels"
    assert set(custom) - {"lab"} == {
        "conda-forge",
        "msys2",
        "bioconda",
        "menpo",
        "pytorch",
        "simpleitk",
    }
    assert all(
        url == "https://mirror.nju.edu.cn/anaconda/cloud"
        for name, url in custom.items()
        if name != "lab"
    )
    config = load_config()
    assert all("tuna" not in rule.mirror for rule in config.rewrites)
    assert (
        config.rewrite("https://artifacts.example.com/x.whl")
        == "https://artifacts.lab.example.edu/x.whl"
    )


def test_official_returns_to_upstream(home: Home) -> None:
    home.seed()
    assert run("set", "aliyun") == 0
    assert run("set", "official") == 0
    condarc = load_yaml(home.condarc)
    assert "default_channels" not in condarc
    assert condarc["custom_channels"] == {"lab": "https://conda.lab.example.edu/channels"}
    assert condarc["channels"] == ["defaults", "conda-forge", "lab"]
    assert condarc["ssl_verify"] == "truststore"
    assert "index-url = https://pypi.org/simple/\n" in home.pip.read_text(encoding="utf-8")
    config = load_config()
    assert config.preset == "official"
    assert config.pytorch is None
    assert [rule.canonical for rule in config.rewrites] == ["https://artifacts.example.com/"]


def test_custom_preset_changes_only_what_was_given(home: Home) -> None:
    home.seed()
    assert run("set", "tuna") == 0
    pip_before = home.pip.read_bytes()
    condarc_before = home.condarc.read_bytes()
    assert (
        run(
            "set",
            "custom",
            "--pytorch",
            "https://wheels.lab.example.edu/whl",
            "--pytorch-layout",
            "flat",
        )
        == 0
    )
    assert home.pip.read_bytes() == pip_before
    assert home.condarc.read_bytes() == condarc_before
    config = load_config()
    assert config.preset == "custom"
    assert (
        config.pytorch is not None and config.pytorch.url == "https://wheels.lab.example.edu/whl/"
    )
    assert (
        config.rewrite("https://pypi.org/simple/x/")
        == "https://pypi.tuna.tsinghua.edu.cn/simple/x/"
    )
    assert config.rewrite(
        "https://download.pytorch.org/whl/cpu/torch-2.5.1-cp311-none-any.whl"
    ) == ("https://wheels.lab.example.edu/whl/cpu/torch-2.5.1-cp311-none-any.whl")


def test_ssl_verify_bundle_path_is_kept_and_false_is_replaced(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    home.condarc.write_text("ssl_verify: /etc/ssl/certs/lab-ca.pem\n", encoding="utf-8")
    assert run("set", "tuna") == 0
    assert load_yaml(home.condarc)["ssl_verify"] == "/etc/ssl/certs/lab-ca.pem"
    assert "CA bundle" in capsys.readouterr().out
    home.condarc.write_text("ssl_verify: false\n", encoding="utf-8")
    assert run("set", "tuna") == 0
    assert load_yaml(home.condarc)["ssl_verify"] == "truststore"


@pytest.mark.parametrize("name", sorted(load_presets()))
def test_no_preset_writes_anything_that_weakens_verification(home: Home, name: str) -> None:
    home.pip.parent.mkdir(parents=True)
    home.pip.write_text("[global]\ntrusted-host = old.example\n", encoding="utf-8")
    home.condarc.write_text("ssl_verify: false\n", encoding="utf-8")
    assert run("set", name) == 0
    written = "\n".join(
        path.read_text(encoding="utf-8") for path in (home.pip, home.condarc, home.config)
    )
    assert "ssl_verify: false" not in written
    assert "verify=False" not in written
    assert written.count("trusted-host") == 1  # the user's line is kept, never added to
    assert load_yaml(home.condarc)["ssl_verify"] == "truststore"


def _pip_env(home: Home) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(
        HOME=str(home.root),
        XDG_CONFIG_HOME=str(home.root / "xdg"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env


def test_user_pip_conf_is_honoured_by_real_pip(home: Home) -> None:
    home.seed()
    assert run("set", "bfsu") == 0
    for args in (["config", "--user", "list"], ["config", "list"]):
        result = subprocess.run(
            [sys.executable, "-m", "pip", *args],
            capture_output=True,
            text=True,
            env=_pip_env(home),
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert "global.index-url='https://mirrors.bfsu.edu.cn/pypi/web/simple/'" in result.stdout
        assert "global.timeout='60'" in result.stdout
        assert "install.user='false'" in result.stdout


def _venv_with_pip(tmp_path: Path) -> Path:
    """A venv without its own pip whose path reaches this interpreter's pip (fast, offline)."""
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    Path(purelib, "_outer_site.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8"
    )
    return python


@pytest.mark.skipif(sys.platform.startswith("win"), reason="POSIX venv layout")
def test_env_scope_writes_the_venv_site_file_read_by_its_pip(
    home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = _venv_with_pip(tmp_path)
    venv = python.parent.parent
    assert run("set", "nju", "--scope", "env", "--python", str(python)) == 0
    out = capsys.readouterr().out
    assert (venv / "pip.conf").read_text(
        encoding="utf-8"
    ) == "[global]\nindex-url = https://mirror.nju.edu.cn/pypi/web/simple/\n"
    assert not (venv / ".condarc").exists()
    assert "not a conda environment" in out
    assert not home.pip.exists()  # the user file is not touched by --scope env
    result = subprocess.run(
        [str(python), "-m", "pip", "config", "--site", "list"],
        capture_output=True,
        text=True,
        env=_pip_env(home),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "global.index-url='https://mirror.nju.edu.cn/pypi/web/simple/'"
        in result.stdout.splitlines()
    )


def test_env_scope_on_a_conda_prefix_writes_its_condarc(home: Home, tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "torch"
    (prefix / "conda-meta").mkdir(parents=True)
    assert run("set", "tuna", "--scope", "env", "--prefix", str(prefix)) == 0
    assert load_yaml(prefix / ".condarc")["ssl_verify"] == "truststore"
    assert "pypi.tuna.tsinghua.edu.cn" in (prefix / "pip.conf").read_text(encoding="utf-8")
    assert not home.condarc.exists()


def test_env_scope_without_an_environment_is_a_usage_error(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("set", "tuna", "--scope", "env") == 2
    err = capsys.readouterr().err
    assert "error: --scope env: no target environment" in err
    assert "Traceback" not in err


def test_unwritable_target_is_a_usage_error_naming_the_path(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    (home.root / "xdg").write_text("a file where a folder should be\n", encoding="utf-8")
    before = home.snapshot()
    assert run("set", "tuna") == 2
    err = capsys.readouterr().err
    assert f"error: {home.pip}: cannot be written" in err
    assert "hint:" in err and "Traceback" not in err
    assert home.snapshot() == before  # nothing written
    assert "nothing was changed" in err


def _unwritable_config(kind: str, tmp_path: Path) -> Path:
    """A config path that cannot be written, also for root (which os.access lets through)."""
    if kind == "proc":
        return Path("/proc/cuda-resolve-test/config.toml")  # a virtual file system: no new folders
    afile = tmp_path / "afile"
    afile.write_text("a file where a folder should be\n", encoding="utf-8")
    return afile / "config.toml"


@pytest.mark.parametrize("seeded", [True, False], ids=["existing-files", "fresh-home"])
@pytest.mark.parametrize("kind", ["proc", "under-a-file"])
def test_a_config_that_cannot_be_written_leaves_every_file_as_it_was(
    home: Home,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    seeded: bool,
) -> None:
    """pip.conf and .condarc come before the config in the plan: none of them is written (no
    backup, no temporary file, no folder) when the config cannot be."""
    if kind == "proc" and not Path("/proc/self").is_dir():
        pytest.skip("needs /proc")
    config = _unwritable_config(kind, tmp_path)
    monkeypatch.setenv("CUDA_RESOLVE_CONFIG", str(config))
    if seeded:
        home.seed()
    before = home.snapshot()
    folders_before = sorted(path for path in home.root.rglob("*") if path.is_dir())
    assert run("set", "tuna") == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1
    assert f"error: {config}: cannot be written" in err
    assert "hint: nothing was changed" in err and "CUDA_RESOLVE_CONFIG" in err
    assert "Traceback" not in err
    assert home.snapshot() == before
    assert sorted(path for path in home.root.rglob("*") if path.is_dir()) == folders_before
    assert not list(home.root.rglob("*.tmp"))


def test_bad_custom_url_is_a_usage_error(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("set", "custom", "--pypi", "http://mirror.example.edu/simple") == 2
    err = capsys.readouterr().err
    assert "--pypi 'http://mirror.example.edu/simple'" in err
    assert "Traceback" not in err
    assert run("set", "tuna", "--pypi", "https://x.example/simple") == 2
    assert "only taken with the preset 'custom'" in capsys.readouterr().err


def test_broken_pip_conf_is_reported_and_left_alone(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    home.pip.parent.mkdir(parents=True)
    home.pip.write_text("index-url = outside any section\n", encoding="utf-8")
    before = home.snapshot()
    assert run("set", "tuna") == 2
    assert "pip cannot read this file" in capsys.readouterr().err
    assert home.snapshot() == before


def test_set_json_reports_each_file(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    home.seed()
    assert run("set", "ustc", "--dry-run", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["preset"] == "ustc" and data["dry_run"] is True
    assert [item["tool"] for item in data["files"]] == ["pip", "conda", "cuda-resolve"]
    assert all(item["changed"] and not item["written"] for item in data["files"])
    assert "+index-url = https://mirrors.ustc.edu.cn/pypi/simple/" in data["files"][0]["diff"]


def test_show_reports_files_and_warnings(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    home.seed()
    with home.pip.open("a", encoding="utf-8") as stream:
        stream.write("\n[download]\ntrusted-host = old-mirror.example.edu\n")
    assert run("set", "tuna") == 0
    capsys.readouterr()
    assert run("show", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["preset"] == "tuna"
    by_role = {(item["tool"], item["role"]): item for item in data["files"]}
    user_pip = by_role[("pip", "user")]
    assert user_pip["index_url"] == "https://pypi.tuna.tsinghua.edu.cn/simple/"
    assert user_pip["trusted_hosts"] == ["old-mirror.example.edu"]
    assert any("trusted-host" in warning for warning in user_pip["warnings"])
    assert by_role[("conda", "user")]["ssl_verify"] == "truststore"
    assert run("show") == 0
    assert "warning: trusted-host old-mirror.example.edu" in capsys.readouterr().out


def test_list_and_show_preset(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [*load_presets(), "custom"]
    assert run("list", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert {item["name"] for item in data} == set(load_presets())
    assert run("show", "aliyun") == 0
    out = capsys.readouterr().out
    assert "layout: flat" in out and "UNVERIFIED" in out
    assert run("show", "nope") == 2


def test_a_symlinked_dotfile_is_edited_through_the_link(home: Home) -> None:
    """Dotfile managers (stow, chezmoi, a lab's shared config) keep ~/.condarc as a link: the
    file it points at is edited, the link stays a link."""
    home.seed()
    real = home.root / "dotfiles" / "condarc"
    real.parent.mkdir()
    home.condarc.rename(real)
    home.condarc.symlink_to(real)
    assert run("set", "tuna") == 0
    assert home.condarc.is_symlink()
    assert load_yaml(real)["ssl_verify"] == "truststore"
    backups = [path for path in home.backups() if path.name.startswith("condarc.")]
    assert [path.read_text(encoding="utf-8") for path in backups] == [CONDARC]


def test_show_with_a_broken_config_names_its_path(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    home.config.parent.mkdir(parents=True)
    home.config.write_text("preset = [\n", encoding="utf-8")
    assert run("show", "--json") == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert config["path"] == str(home.config)
    assert config["exists"] is True
    assert "not valid TOML" in config["error"]
    assert run("show") == 0
    out = capsys.readouterr().out
    assert f"cuda-resolve config: {home.config}\n" in out
    assert "not written yet" not in out
    assert "canonical URLs" not in out  # a file that cannot be read is not "no mirror"


def test_a_broken_config_hint_does_not_send_the_user_back_to_mirror_set(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mirror set` refuses a broken config (it never overwrites what it cannot read), so the
    hint must not suggest it as the way out."""
    home.config.parent.mkdir(parents=True)
    home.config.write_text("preset = [\n", encoding="utf-8")
    assert run("set", "tuna") == 2
    err = capsys.readouterr().err
    assert "not valid TOML" in err
    hint = next(line for line in err.splitlines() if line.startswith("hint:"))
    assert str(home.config) in hint or "by hand" in hint
    assert "rewrite it with `cuda-resolve mirror set" not in hint


def test_set_says_when_a_variable_overrides_the_file_it_writes(
    home: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PIP_INDEX_URL beats every pip.conf: writing the file alone changes nothing for pip."""
    monkeypatch.setenv("PIP_INDEX_URL", "https://old-mirror.example.edu/simple")
    monkeypatch.setenv("CONDARC", str(home.root / "lab-condarc"))
    assert run("set", "tuna") == 0
    out = capsys.readouterr().out
    assert "note: PIP_INDEX_URL is set" in out and str(home.pip) in out
    assert "note: CONDARC is set" in out
    assert run("set", "tuna", "--dry-run", "--json") == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(note.startswith("PIP_INDEX_URL is set") for note in notes)


SECRET = "S3cretTok"


def test_credentials_in_mirror_urls_are_written_but_never_shown(
    home: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lab mirror behind a login: the files keep the real URL (pip and conda need it); what
    `mirror set` and `mirror show` print, as text or --json, has ``user:***@``."""
    pypi = f"https://lab:{SECRET}@pypi.lab.example.edu/simple"
    conda = f"https://lab:{SECRET}@conda.lab.example.edu/anaconda"
    args = ("set", "custom", "--pypi", pypi, "--conda", conda)
    monkeypatch.setenv("PIP_INDEX_URL", f"https://other:{SECRET}@old.example.edu/simple")
    assert run(*args, "--dry-run") == 0
    assert run(*args, "--dry-run", "--json") == 0
    assert run(*args) == 0
    out = capsys.readouterr().out
    assert SECRET not in out
    assert "+index-url = https://lab:***@pypi.lab.example.edu/simple/" in out
    assert "PIP_INDEX_URL is set (https://other:***@old.example.edu/simple)" in out

    assert f"index-url = {pypi}/\n" in home.pip.read_text(encoding="utf-8")
    assert load_yaml(home.condarc)["custom_channels"] == {"conda-forge": f"{conda}/cloud"}
    assert load_config().rewrite("https://pypi.org/simple/pip/") == f"{pypi}/pip/"

    home.config.write_text(
        home.config.read_text(encoding="utf-8")
        + f'\n[proxy]\nhttps = "http://proxy-user:{SECRET}@proxy.lab:3128"\n',
        encoding="utf-8",
    )
    assert run("show") == 0
    assert run("show", "--json") == 0
    out = capsys.readouterr().out
    assert SECRET not in out
    assert "rewrite https://pypi.org/simple/ -> https://lab:***@pypi.lab.example.edu/simple/" in out
    assert "http://proxy-user:***@proxy.lab:3128" in out
    data = json.loads(out[out.index("\n{") + 1 :])
    user_pip = next(
        item for item in data["files"] if item["tool"] == "pip" and item["role"] == "user"
    )
    assert user_pip["index_url"] == "https://lab:***@pypi.lab.example.edu/simple/"
    assert data["variables"]["PIP_INDEX_URL"] == "https://other:***@old.example.edu/simple"


def test_an_error_naming_a_url_with_credentials_hides_them(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("set", "custom", "--pypi", f"http://lab:{SECRET}@pypi.lab.example.edu/simple") == 2
    assert (
        run("set", "custom", "--pypi", f"http://lab:{SECRET}@pypi.lab.example.edu/simple", "--json")
        == 2
    )
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    assert "--pypi 'http://lab:***@pypi.lab.example.edu/simple'" in captured.err
