"""A warm ``doctor --json`` binds no OpenSSL and reads no fat binary it has no use for (issue 28:
doctor at most 100 ms on the H200). The cache keys of the probe cache and the parsed index are
BLAKE2b digests from the interpreter's built-in module (:mod:`cuda_resolve._digest`); hashlib's
import binds OpenSSL (``_hashlib``), a few milliseconds of every run."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
from test_doctor_startup import _imported_by_doctor

from cuda_resolve._digest import new_digest


def test_the_digest_is_blake2b_of_what_it_is_fed() -> None:
    digest = new_digest(b"cuda")
    digest.update(b"-resolve")
    assert digest.hexdigest() == hashlib.blake2b(b"cuda-resolve", digest_size=32).hexdigest()
    assert new_digest().hexdigest() != new_digest(b"x").hexdigest()


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG folders are read directly on Linux")
@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs a virtualenv (in-process target)")
def test_warm_doctor_loads_no_openssl_and_no_fat_binary_reader(tmp_path: Path) -> None:
    names = ("hashlib", "_hashlib", "cuda_resolve.fatbin", "cuda_resolve.elf")
    _imported_by_doctor(names, tmp_path)  # fills the caches
    imported = _imported_by_doctor(names, tmp_path)
    from cuda_resolve.detect import detect_environment

    env = detect_environment()
    if env.gpus and any(ext.sass or ext.ptx for ext in env.extensions):
        imported = [
            name for name in imported if name not in ("cuda_resolve.fatbin", "cuda_resolve.elf")
        ]
    assert imported == []
