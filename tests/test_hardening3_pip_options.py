"""pip's option rules, not ours (issue 15): abbreviations, ``--opt=value``, short clusters,
options inside -r/-c files (nested), pip's configuration files and PIP_* variables are all seen
by every refusal and special case; cuda-pip's options and pip's share one namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _torch_env import copy_venv

from cuda_resolve.errors import UsageError
from cuda_resolve.install.pipoptions import (
    OPTIONS,
    find_options,
    options_for_torch_step,
    pip_settings,
)
from cuda_resolve.install.reqfile import read_requirement_files, requirement_file_options
from pip_plugin.__main__ import split_arguments

UNVERIFIED = "--trusted" + "-host"  # spelled apart: tests/test_no_insecure_tls.py greps the tree

# The test's own probe of a pip's parsers (cuda-resolve itself only runs pip's command line).
_DUMP = """
import json
from pip._internal.commands import create_command
from pip._internal.req.req_file import build_parser
import pip
def table(parser):
    found = {}
    for group in [parser, *getattr(parser, "option_groups", [])]:
        for o in group.option_list:
            for name in o._long_opts:
                found[name] = [o.takes_value(), sorted(o._short_opts), o._long_opts[0]]
    return found
print(json.dumps({"version": pip.__version__, "install": table(create_command("install").parser),
                  "file": table(build_parser())}))
"""


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The target these tests ask about: a venv of their own (pip, nothing else), never the
    checkout's .venv, whose pip configuration and packages the README's main command changes."""
    return str(copy_venv(tmp_path_factory.mktemp("target") / "venv"))


def _installed_pips() -> list[str]:
    pythons = [sys.executable]
    pyenv = Path.home() / ".pyenv" / "versions"
    if pyenv.is_dir():
        pythons.extend(
            str(p / "bin" / "python")
            for p in sorted(pyenv.iterdir())
            if (p / "bin" / "python").exists()
        )
    return list(dict.fromkeys(pythons))


def test_the_table_is_every_installed_pips_parser() -> None:
    checked = []
    for python in _installed_pips():
        done = subprocess.run(
            [python, "-c", _DUMP], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            continue  # no pip, or one older than cuda-pip supports (its parser moved)
        pip = json.loads(done.stdout)
        if int(pip["version"].split(".")[0]) < 22:
            continue
        by_name = {name: option for option in OPTIONS for name in option.names}
        for where, table in (("install", pip["install"]), ("file", pip["file"])):
            for name, (takes_value, short, canonical) in table.items():
                assert name in by_name, (pip["version"], where, name)
                ours = by_name[name]
                assert ours.takes_value == takes_value, (pip["version"], name)
                assert set(short) <= set(ours.short), (pip["version"], name, short)
                assert ours.name == canonical, (pip["version"], name)
                assert ours.in_files if where == "file" else ours.on_command_line, (
                    pip["version"],
                    where,
                    name,
                )
        checked.append(pip["version"])
    assert checked, "no pip to check the table against"


def test_the_table_resolves_prefixes_as_the_real_pip_does(tmp_path: Path) -> None:
    # pip's own verdict on its command line: an ambiguous prefix stops it with optparse's words.
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-dep", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert "ambiguous option: --no-dep" in done.stderr
    with pytest.raises(UsageError, match=r"--no-dep .* ambiguous"):
        find_options(["--no-dep"])
    assert [
        f.option.name
        for f in find_options(["--extra-index=U", "--ind", "I", "-qUf", "L", "--pypi=P"])
    ] == ["--extra-index-url", "--index-url", "--quiet", "--upgrade", "--find-links", "--index-url"]


# -- one namespace for cuda-pip's options and pip's -------------------------------------------


def test_a_prefix_of_cuda_pips_own_option_is_its_own() -> None:
    own, pip, requirements = split_arguments(["--dry", "kaolin"])
    assert own == ["--dry-run"] and pip == [] and requirements == ["kaolin"]


@pytest.mark.parametrize(
    "words", [["--inde", "x", "kaolin"], ["--sourc", "d", "kaolin"], ["--pyth", "/p", "kaolin"]]
)
def test_a_prefix_of_both_namespaces_is_refused(words: list[str]) -> None:
    with pytest.raises(UsageError, match="ambiguous"):
        split_arguments(words)


@pytest.mark.parametrize(
    ("words", "named", "variable"),
    [
        (["--nosuchoption"], "--nosuchoption", "PIP_NOSUCHOPTION"),
        (["--no-such=1"], "--no-such", "PIP_NO_SUCH"),
        (["-Z"], "-Z", None),
        (["-qZ"], "-Z", None),
    ],
)
def test_an_option_no_pip_knows_is_exit_2_before_anything_runs(
    target: str, tmp_path: Path, words: list[str], named: str, variable: str | None
) -> None:
    """Handed to pip it failed only after the probes, the reachability check and the stash,
    with exit 1 and pip's usage text; docs/install.md promises exit 2 for an unknown option."""
    cache = tmp_path / "cache"
    done = subprocess.run(
        [sys.executable, "-m", "pip_plugin", "install", "six", *words, "--python", target],
        env={**os.environ, "CUDA_RESOLVE_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {named}: no such option of cuda-pip install"), done
    if variable is not None:  # a long option: its PIP_ variable is the way for a newer pip's
        assert variable in done.stderr, done.stderr
    assert not (cache / "journal").exists(), "the environment was stashed"
    assert "Traceback" not in done.stderr


def test_cuda_pips_index_given_a_url_points_at_pips_index_url() -> None:
    with pytest.raises(UsageError, match="index overlay folder") as caught:
        split_arguments(["--index", "https://mirror.example/simple", "kaolin"])
    assert "--index-url https://mirror.example/simple" in (caught.value.hint or "")


def test_pips_options_are_written_out_for_every_later_reader() -> None:
    own, pip, requirements = split_arguments(
        ["-qr", "r.txt", "--extra-index=E", "--no-deps", "--break", "-Ui", "I", "k"]
    )
    assert pip == [
        "-q",
        "-r",
        "r.txt",
        "--extra-index-url=E",
        "--no-deps",
        "--break-system-packages",
        "-U",
        "-i",
        "I",
    ]
    assert requirements == ["k"] and own == []


# -- hosts without TLS verification --------------------------------------------------------------


@pytest.mark.parametrize(
    "words", [[UNVERIFIED, "h"], [f"{UNVERIFIED}=h"], ["--trust", "h"], ["--trusted-h=h"]]
)
def test_the_unverified_host_option_is_refused_in_every_spelling(words: list[str]) -> None:
    with pytest.raises(UsageError, match="TLS verification off"):
        split_arguments([*words, "kaolin"])


def test_the_unverified_host_option_is_seen_in_nested_files_and_abbreviated(tmp_path: Path) -> None:
    (tmp_path / "inner.txt").write_text("--trusted=mirror.example\n", encoding="utf-8")
    (tmp_path / "middle.txt").write_text("-r inner.txt\n", encoding="utf-8")
    (tmp_path / "c.txt").write_text("--requiremen middle.txt\n", encoding="utf-8")
    settings = pip_settings(["-qc", str(tmp_path / "c.txt")], python=None, environ={})
    assert settings.unverified_hosts == (("mirror.example", f"{tmp_path / 'inner.txt'}:1"),)


def test_the_unverified_host_setting_is_seen_in_variables_and_configuration(
    tmp_path: Path, target: str
) -> None:
    from cuda_resolve.install.pipoptions import refuse_disabled_verification

    assert pip_settings(
        [], python=None, environ={"PIP_TRUSTED_HOST": "a.example"}
    ).unverified_hosts == (("a.example", "the environment variable PIP_TRUSTED_HOST"),)
    config = tmp_path / "pip.conf"
    config.write_text("[install]\ntrusted_host = b.example\n", encoding="utf-8")
    settings = pip_settings(
        [], python=target, environ={"PIP_CONFIG_FILE": str(config), "HOME": str(tmp_path)}
    )
    assert [host for host, _ in settings.unverified_hosts] == ["b.example"]
    assert str(config) in settings.unverified_hosts[0][1]
    with pytest.raises(UsageError, match=r"trusted-host b\.example"):
        refuse_disabled_verification(settings)
    # --isolated: pip reads neither the variables nor the user's files
    assert (
        pip_settings(
            ["--isol"], python=None, environ={"PIP_TRUSTED_HOST": "a.example"}
        ).unverified_hosts
        == ()
    )


# -- hash-checking mode --------------------------------------------------------------------------


def test_hash_mode_in_every_form_pip_reads(tmp_path: Path, target: str) -> None:
    def mode(
        args: list[str], environ: dict[str, str] | None = None, python: str | None = None
    ) -> str | None:
        return pip_settings(args, python=python, environ=environ or {}).hash_mode

    assert mode(["--require-h"]) == "--require-h on the command line"
    (tmp_path / "hashed.txt").write_text(
        "numpy==2.0 --has=sha256:" + "0" * 64 + "\n", encoding="utf-8"
    )
    (tmp_path / "top.txt").write_text("--constraint=hashed.txt\n", encoding="utf-8")
    assert mode(["-r", str(tmp_path / "top.txt")]) == f"--hash at {tmp_path / 'hashed.txt'}:1"
    (tmp_path / "flag.txt").write_text("--require-hash\n", encoding="utf-8")
    assert (
        mode(["--requirement=" + str(tmp_path / "flag.txt")])
        == f"--require-hashes at {tmp_path / 'flag.txt'}:1"
    )
    assert mode([], {"PIP_REQUIRE_HASHES": "yes"}) is not None
    assert mode([], {"PIP_REQUIRE_HASHES": "0"}) is None
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nrequire-hashes = true\n", encoding="utf-8")
    found = mode([], {"PIP_CONFIG_FILE": str(config), "HOME": str(tmp_path)}, target)
    assert found is not None and str(config) in found
    assert mode(["--no-deps"]) is None


def test_hash_mode_from_a_variable_stops_cuda_pip_before_anything_is_built(
    tmp_path: Path, target: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PIP_REQUIRE_HASHES"] = "1"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip_plugin",
            "install",
            "--dry-run",
            "--arch-list",
            "8.6",
            "--python",
            target,
            "pointnet2_ops",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "hash-checking mode" in done.stderr and "PIP_REQUIRE_HASHES" in done.stderr


# -- the torch step ------------------------------------------------------------------------------


def test_the_torch_step_drops_index_options_in_every_spelling(tmp_path: Path) -> None:
    constraints = str(tmp_path / "c.txt")
    Path(constraints).write_text("torch<3\n", encoding="utf-8")
    kept = options_for_torch_step(
        [
            "--extra-index=E",
            "-qf",
            "L",
            "--ind",
            "I",
            "--pypi-url=P",
            "--no-ind",
            "-c",
            constraints,
            "--proxy",
            "http://p:1",
            "-re",
            "--no-deps",
        ]
    )
    assert kept == ["-q", "-c", constraints, "--proxy", "http://p:1", "--no-deps"]


def test_a_constraints_file_that_names_an_index_is_refused_for_the_torch_step(
    tmp_path: Path,
) -> None:
    (tmp_path / "inner.txt").write_text(
        "--extra-index=https://other.example/simple\n", encoding="utf-8"
    )
    (tmp_path / "c.txt").write_text("torch<3\n-r inner.txt\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"inner.txt:1 \(--extra-index-url\)"):
        options_for_torch_step(["-c", str(tmp_path / "c.txt")])
    (tmp_path / "inner.txt").write_text("numpy<3\n", encoding="utf-8")
    assert options_for_torch_step(["-c", str(tmp_path / "c.txt")]) == [
        "-c",
        str(tmp_path / "c.txt"),
    ]


def test_nested_files_are_found_through_abbreviated_options(tmp_path: Path) -> None:
    (tmp_path / "deep.txt").write_text("kaolin==0.18\n", encoding="utf-8")
    (tmp_path / "top.txt").write_text("--requirem=deep.txt\n", encoding="utf-8")
    reading = read_requirement_files(requirement_file_options(["-qr", str(tmp_path / "top.txt")]))
    assert [r.text for r in reading.requirements] == ["kaolin==0.18"]


def test_the_torch_step_leaves_out_the_indexes_pips_configuration_names(
    tmp_path: Path, target: str
) -> None:
    from cuda_resolve.install.pip import TargetPip
    from cuda_resolve.install.pipconfig import pip_indexes

    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nfind-links = /opt/cpu-wheels\nproxy = http://proxy.example:3128\n"
        "[install]\nextra_index_url = https://other.example/simple\nno-compile = yes\n",
        encoding="utf-8",
    )
    environ = {
        "PIP_CONFIG_FILE": str(config),
        "HOME": str(tmp_path),
        "PATH": os.environ.get("PATH", ""),
    }
    pip = TargetPip(target, environ=environ, log_path=tmp_path / "log")
    torch_step = pip.environ_for(torch_index_only=True)
    assert torch_step["PIP_CONFIG_FILE"] == os.devnull
    assert (
        torch_step["PIP_PROXY"] == "http://proxy.example:3128"
        and torch_step["PIP_NO_COMPILE"] == "yes"
    )
    # the target's own pip, asked in that environment, reads no configured index or folder
    seen = pip_indexes(target, torch_step)
    assert seen.find_links == () and seen.extra_index_urls == ()
    # every other step keeps the configuration as it is
    other = pip_indexes(target, pip.environ_for())
    assert other.find_links == ("/opt/cpu-wheels",) and other.extra_index_urls == (
        "https://other.example/simple",
    )
    # no configured index: nothing changes
    config.write_text("[global]\nproxy = http://proxy.example:3128\n", encoding="utf-8")
    fresh = TargetPip(
        target, environ={**environ, "HOME": str(tmp_path / "h2")}, log_path=tmp_path / "log"
    )
    assert fresh.environ_for(torch_index_only=True) == {**environ, "HOME": str(tmp_path / "h2")}


def test_pips_pep668_override_is_seen_in_every_form(tmp_path: Path, target: str) -> None:
    from packaging.version import Version

    from cuda_resolve.errors import InstallError
    from cuda_resolve.install.pip import PipFacts, refuse_externally_managed

    facts = PipFacts(version=Version("25.0"), truststore=False, externally_managed=True)
    bare = {"HOME": str(tmp_path), "PIP_CONFIG_FILE": os.devnull}
    with pytest.raises(InstallError, match="externally managed"):
        refuse_externally_managed(target, facts, [], bare)
    for words, extra in (
        (["--break"], {}),
        (["-tdir"], {}),
        (["--prefi=p"], {}),
        ([], {"PIP_TARGET": "/t"}),
        ([], {"PIP_BREAK_SYSTEM_PACKAGES": "yes"}),
    ):
        refuse_externally_managed(target, facts, words, {**bare, **extra})
    config = tmp_path / "pip.conf"
    config.write_text("[install]\nbreak_system_packages = true\n", encoding="utf-8")
    refuse_externally_managed(target, facts, [], {**bare, "PIP_CONFIG_FILE": str(config)})
    off = (
        tmp_path / "off.conf"
    )  # another file: what pip's configuration says is read once per process
    off.write_text("[install]\nbreak_system_packages = false\n", encoding="utf-8")
    with pytest.raises(InstallError):
        refuse_externally_managed(target, facts, [], {**bare, "PIP_CONFIG_FILE": str(off)})
