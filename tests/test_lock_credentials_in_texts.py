"""A lock carries no credential anywhere in its text: not in index and wheel URLs (issue 26),
and not in the user's own requirement texts or the profiles' decisions either, where a direct
URL with a token (``pkg @ https://user:token@host/pkg.whl``) is written as the user typed it
(review finding after issue 26)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_lock_support import StaticIndex, make_wheel, serve, write_profile

from cuda_resolve.lock.document import CREDENTIALS_NOTE
from cuda_resolve.redaction import without_userinfo


def test_without_userinfo_leaves_every_url_of_a_text_without_its_user() -> None:
    text = "pkg @ https://user:tok@a.lab/p.whl; other git+https://tok@git.lab/x.git @ main"
    assert (
        without_userinfo(text)
        == "pkg @ https://a.lab/p.whl; other git+https://git.lab/x.git @ main"
    )
    assert without_userinfo("name @ file:///wheels/p.whl") == "name @ file:///wheels/p.whl"
    # An @ after the host is the URL's own: a VCS revision, a path.
    assert (
        without_userinfo("pkg @ git+https://tok@git.lab/x.git@main")
        == "pkg @ git+https://git.lab/x.git@main"
    )
    assert without_userinfo("see https://host/a@b") == "see https://host/a@b"


def test_a_direct_url_with_a_token_is_locked_without_it(tmp_path: Path) -> None:
    index = StaticIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path / "built", "tinyutil", "1.0"))
    profile = write_profile(tmp_path / "cpu-box.toml", name="cpu")
    lock = tmp_path / "pylock.toml"
    environ = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    with serve(tmp_path / "index") as url:
        secret_url = url.replace("http://", "http://lab:s3cr3t-token@")
        requirement = f"tinyutil @ {secret_url}/files/tinyutil-1.0-py3-none-any.whl"
        done = subprocess.run(
            [
                *(sys.executable, "-m", "cuda_resolve", "lock", requirement, "--no-build"),
                *("--index-url", f"{url}/simple", "--profile", str(profile), "-o", str(lock)),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=environ,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr
    text = lock.read_text()
    assert "s3cr3t-token" not in text and "lab:" not in text
    assert "tinyutil @ http://127.0.0.1:" in text  # the request, without its user
    assert CREDENTIALS_NOTE in text
