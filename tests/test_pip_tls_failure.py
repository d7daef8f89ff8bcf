"""A pip that cannot verify the index's certificate is named as such, with the fix.

A fresh venv's pip 23.2.1 verifies TLS with its own CA bundle (certifi), not the system store.
On a network whose CA only the system store holds, cuda-resolve's own HTTPS reached the index,
pip retried five times on CERTIFICATE_VERIFY_FAILED (in the log only), and the user read
"pip install (...) failed: ERROR: Could not find a version that satisfies the requirement";
the trust note that explains it was printed only on success (user walk H7 F10).

Here the network's CA is the test CA in ``SSL_CERT_FILE`` (the system store's place for
OpenSSL, which truststore and cuda-resolve read; pip 23.2.1 does not)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _lab_stand_ins import lab_servers
from _torch_env import copy_venv
from test_lock_support import make_wheel


def _old_pip_venv(folder: Path) -> Path:
    python = copy_venv(folder)  # the template venv: ensurepip's pip, nothing else
    version = subprocess.run(
        [str(python), "-c", "import pip; print(pip.__version__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    if tuple(int(part) for part in version.split(".")[:2]) >= (24, 2):
        pytest.skip(f"this Python's bundled pip {version} uses the system trust store")
    return python


@pytest.mark.slow  # makes a venv with an old pip, then pip retries the failing handshake: 10 s
def test_pip_failing_tls_verification_is_named_with_the_fix(tmp_path: Path) -> None:
    python = _old_pip_venv(tmp_path / "venv")
    with lab_servers(tmp_path) as lab:
        lab.index.add(make_wheel(tmp_path / "built", "six", "1.15.0", files={"six.py": ""}))
        environ = lab.environ(os.environ)
        for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "VIRTUAL_ENV"):
            environ.pop(name, None)
        environ["CUDA_RESOLVE_CACHE_DIR"] = str(tmp_path / "cache")
        environ["COLUMNS"] = "400"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip_plugin",
                "install",
                "six==1.15.0",
                "--python",
                str(python),
                "--index-url",
                f"{lab.index_url}/simple/",
            ],
            env=environ,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    err = done.stderr
    assert done.returncode == 1, err
    assert "pip could not verify the TLS certificate of the index" in err, err
    assert "(CERTIFICATE_VERIFY_FAILED)" in err, err
    hint = err[err.index("\nhint: ") :]
    assert "own CA bundle" in hint and "PIP_CERT" in hint, err
    assert "the environment was restored as it was" in hint, err
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "six==" not in listed
