"""A locked file's name is read from its URL by one function, net.pages.file_name, whether the
lock holds it as a wheel or an archive: percent-encoded (``%2B`` of a local version) decoded."""

from __future__ import annotations

from pathlib import Path

WHEEL_URL = (
    "https://wheels.example.invalid/quickext/"
    "quickext-0.1.0%2Bpt2141cu130.sm90-cp311-cp311-linux_x86_64.whl"
)
ARCHIVE_URL = "https://wheels.example.invalid/src/kaolin-0.18.0%2Bpt2141cu130.tar.gz"
LOCK = """lock-version = "1.0"
created-by = "test"
requires-python = ">=3.9"

[[packages]]
name = "quickext"
version = "0.1.0+pt2141cu130.sm90"
wheels = [{ url = "{wheel}", hashes = { sha256 = "{sha}" } }]

[[packages]]
name = "kaolin"
version = "0.18.0+pt2141cu130"
archive = { url = "{archive}", hashes = { sha256 = "{sha}" } }
"""


def test_a_locked_archive_and_wheel_are_named_as_net_pages_names_a_link(tmp_path: Path) -> None:
    from cuda_resolve.lock import files, make, read
    from cuda_resolve.net.pages import file_name

    lock = tmp_path / "pylock.toml"
    text = LOCK.replace("{wheel}", WHEEL_URL).replace("{archive}", ARCHIVE_URL)
    lock.write_text(text.replace("{sha}", "a" * 64), encoding="utf-8")
    names = {f.package: f.filename for f in read.read_locked_files(lock)}
    assert names == {
        "quickext": "quickext-0.1.0+pt2141cu130.sm90-cp311-cp311-linux_x86_64.whl",
        "kaolin": "kaolin-0.18.0+pt2141cu130.tar.gz",
    }
    # One implementation: the lock's modules use net.pages' own (read imports it where it is used).
    assert vars(files)["file_name"] is vars(make)["file_name"] is file_name
    assert "from ..net.pages import file_name" in Path(read.__file__).read_text(encoding="utf-8")
