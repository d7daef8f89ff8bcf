"""Every file cuda-resolve reads goes through one bounded reader, and no document breaks a parser.

FIFOs, devices and sockets are refused by name before they are opened (a FIFO would block the
open, /dev/zero would never end), files past the size cap are refused, and pathological TOML,
YAML and JSON (arrays nested thousands deep, numbers with thousands of digits) become one clear
error naming the file, never a RecursionError or Python's int-conversion ValueError.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuda_resolve._bounded import (
    DEFAULT_READ_LIMIT,
    FileTooLargeError,
    NotRegularFileError,
    read_bytes,
    read_head,
    read_user_text,
)
from cuda_resolve.cli import main
from cuda_resolve.config import ConfigError, load_config
from cuda_resolve.detect._cache import ProbeCache
from cuda_resolve.detect.toolkits import _version_from_files
from cuda_resolve.errors import IndexDataError, ProfileError, UsageError
from cuda_resolve.index._parse import Layer, parse_file
from cuda_resolve.index.load import load_index
from cuda_resolve.mirrors.condarc import read_conda_settings
from cuda_resolve.profile import load_profile, parse_profile
from cuda_resolve.versions import ComputeCapability, CudaVersion, DriverVersion

HUGE = "1" * 5000  # past Python's 4300-digit int conversion limit
DEEP = "[" * 5000 + "]" * 5000  # past the recursion limit of a recursive-descent parser


def _within(seconds: float, function: Callable[[], Any]) -> Any:
    """Run *function* in a thread; fail (instead of hanging the suite) if it blocks."""
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(function())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    return box[0]


def _fifo(tmp_path: Path, name: str = "profile.toml") -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


# -- the reader itself ---------------------------------------------------------------------


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    result = _within(5, lambda: read_user_text(fifo, error=ProfileError, what="a TOML file"))
    assert isinstance(result, ProfileError), result
    assert (
        str(fifo) in result.message
        and "FIFO" in result.message
        and "not a regular file" in result.message
    )


def test_a_symlink_to_a_fifo_is_refused_too(tmp_path: Path) -> None:
    link = tmp_path / "link.toml"
    link.symlink_to(_fifo(tmp_path, "real"))
    result = _within(5, lambda: read_bytes(link))
    assert isinstance(result, NotRegularFileError) and "FIFO" in str(result.strerror)


def test_a_device_is_refused_before_it_is_read() -> None:
    # /dev/zero never ends: reading it with a cap would still give 4 MiB of zeros as "content"
    with pytest.raises(NotRegularFileError, match="character device"):
        read_bytes("/dev/zero")
    with pytest.raises(NotRegularFileError):
        read_head("/dev/null", 10)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(NotRegularFileError, match="socket"):
            read_bytes(path)


def test_a_file_past_the_cap_is_refused_and_one_at_the_cap_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(FileTooLargeError, match="larger than 1000 bytes"):
        read_bytes(path, limit=1000)
    assert read_bytes(path, limit=1001) == b"x" * 1001
    assert read_head(path, 10) == b"x" * 10


def test_a_directory_and_a_missing_file_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"{tmp_path}: is a directory"):
        read_user_text(tmp_path)
    with pytest.raises(UsageError, match="no such file"):
        read_user_text(tmp_path / "absent")


# -- every reader goes through it ----------------------------------------------------------


@pytest.mark.parametrize("command", ["detect", "doctor", "plan"])
def test_a_device_as_profile_is_one_error_line(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "--profile", "/dev/zero"] + (["torch"] if command == "plan" else [])
    assert _within(20, lambda: main(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: /dev/zero: is a character device, not a regular file"), err
    assert "Traceback" not in err and len(err.splitlines()) == 2


def test_a_fifo_as_profile_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = _fifo(tmp_path)
    assert _within(20, lambda: main(["detect", "--profile", str(fifo)])) == 2
    assert f"error: {fifo}: is a FIFO" in capsys.readouterr().err


def test_an_oversized_profile_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b'[python]\nversion = "3.11"\n' + b"#" * DEFAULT_READ_LIMIT)
    with pytest.raises(ProfileError, match="larger than 4 MiB"):
        load_profile(path)


def test_a_fifo_as_config_file(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path, "config.toml")
    result = _within(5, lambda: load_config(fifo))
    assert (
        isinstance(result, ConfigError) and str(fifo) in result.message and "FIFO" in result.message
    )


def test_a_fifo_as_index_overlay_file(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path, "kaolin.toml")
    result = _within(10, lambda: parse_file("package", fifo, Layer()))
    assert isinstance(result, IndexDataError), result
    assert result.message.startswith(f"{fifo}: cannot be read: is a FIFO")


# -- pathological documents ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f'[python]\nversion = "3.11"\nnotes = {DEEP}\n', "nested too deeply"),
        (f'[python]\nversion = "3.11"\nformat = {HUGE}\n', "not valid TOML"),
    ],
    ids=["deep-array", "huge-integer"],
)
def test_pathological_toml_is_one_error_naming_the_file(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "evil.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.message.startswith(f"{path}: ") and expected in info.value.message
    assert len(info.value.message) < 400


PROFILE_FIELDS = {
    "driver.version": '[python]\nversion = "3.11"\n[driver]\nversion = "{v}"\n',
    "driver.cuda": '[python]\nversion = "3.11"\n[driver]\nversion = "550.54.14"\ncuda = "{v}"\n',
    "gpu[0].compute_capability": (
        '[python]\nversion = "3.11"\n[[gpu]]\ncompute_capability = "{v}"\n'
    ),
    "python.version": '[python]\nversion = "{v}"\n',
    "compiler.gcc": '[python]\nversion = "3.11"\n[compiler]\ngcc = "{v}"\n',
    "torch.version": '[python]\nversion = "3.11"\n[torch]\nversion = "{v}"\n',
    "torch.cuda": '[python]\nversion = "3.11"\n[torch]\nversion = "2.4.0"\ncuda = "{v}"\n',
}


@pytest.mark.parametrize("key", sorted(PROFILE_FIELDS))
@pytest.mark.parametrize(
    "value", [HUGE, f"{HUGE}.1", f"12.{HUGE}", f"sm_{HUGE}"], ids=["n", "n.1", "12.n", "sm_n"]
)
def test_versions_with_thousands_of_digits_are_clear_errors(key: str, value: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(PROFILE_FIELDS[key].format(v=value), origin="evil.toml")
    message = info.value.message
    assert message.startswith(f"evil.toml: {key}"), message
    assert "Exceeds the limit" not in message and "set_int_max_str_digits" not in message
    assert len(message) < 300  # the value is quoted, not echoed in full


@pytest.mark.parametrize("parse", [DriverVersion.parse, CudaVersion.parse, ComputeCapability.parse])
def test_version_types_refuse_thousands_of_digits_with_their_own_message(
    parse: Callable[[str], object],
) -> None:
    for text in (HUGE, f"{HUGE}.1", f"12.{HUGE}", f"sm_{HUGE}", f"5{HUGE}.1"):
        with pytest.raises(ValueError) as info:
            parse(text)
        assert "Exceeds the limit" not in str(info.value) and len(str(info.value)) < 200


def test_pathological_condarc_is_a_config_error() -> None:
    deep = (
        "[" * 400 + "]" * 400
    )  # ruamel recurses several frames a level (and slowly): 400 is enough
    for text in (f"channels: {deep}\n", f"ssl_verify: {HUGE}\n"):
        with pytest.raises(ConfigError, match=r"^\.condarc: not valid YAML"):
            read_conda_settings(text)


def test_pathological_overlay_names_the_file(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "torch.toml").write_text(f"format = 1\nx = {DEEP}\n", encoding="utf-8")
    with pytest.raises(
        IndexDataError, match=r"torch\.toml: not valid TOML: arrays or tables nested too deeply"
    ):
        load_index([overlay])


def test_a_deeply_nested_probe_cache_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "probes.json").write_text(DEEP, encoding="utf-8")
    cache = ProbeCache(tmp_path)
    assert cache.get("commands", "x") is None  # not a RecursionError


def test_a_pathological_version_json_falls_back_to_version_txt(tmp_path: Path) -> None:
    (tmp_path / "version.json").write_text(DEEP, encoding="utf-8")
    (tmp_path / "version.txt").write_text("CUDA Version 12.4.1\n", encoding="utf-8")
    assert _version_from_files(str(tmp_path)) == (CudaVersion(12, 4), "12.4.1")
    (tmp_path / "version.json").write_text(
        json.dumps({"cuda": {"version": HUGE}}), encoding="utf-8"
    )
    assert _version_from_files(str(tmp_path)) == (CudaVersion(12, 4), "12.4.1")
    (tmp_path / "version.txt").unlink()
    os.mkfifo(tmp_path / "version.txt")
    assert _within(5, lambda: _version_from_files(str(tmp_path))) is None
