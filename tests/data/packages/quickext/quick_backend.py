"""A PEP 517 backend standing in for a compile that takes a moment (tests/test_slurm_build.py).

``QUICKEXT_FILL`` set makes the build fill its disk, as a link step on a full disk does.
``QUICKEXT_FAIL`` set to a profile's arch list (the build's TORCH_CUDA_ARCH_LIST) makes that
build fail with a compiler-like error, as a task on a broken node would.
"""

import base64
import hashlib
import os
import sys
import zipfile


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    arch_list = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    print(f"compiling quickext for {arch_list or 'no arch list'}", flush=True)
    if os.environ.get("QUICKEXT_FILL"):  # a link step that fills the disk (tests/test_disk_full.py)
        try:
            with open("filler.o", "wb") as out:
                while True:
                    out.write(b"\0" * 65536)
                    out.flush()
        except OSError as exc:
            sys.stderr.write(f"/usr/bin/ld: final link failed: {exc.strerror}\n")
            raise SystemExit(1) from None
    if arch_list and arch_list == os.environ.get("QUICKEXT_FAIL"):
        sys.stderr.write('quickext/ops.cu(1): error: identifier "__nv_bfloat16" is undefined\n')
        raise SystemExit(1)
    return _write_wheel(wheel_directory)


def get_requires_for_build_wheel(config_settings=None):
    return []


def _write_wheel(folder):
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    name = f"quickext-0.1.0-{tag}-{tag}-linux_x86_64.whl"
    dist = "quickext-0.1.0.dist-info"
    files = {
        "quickext/__init__.py": "",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: quickext\nVersion: 0.1.0\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: quick\nRoot-Is-Purelib: false\nTag: "
            f"{tag}-{tag}-linux_x86_64\n"
        ),
    }
    record = []
    for path, text in files.items():
        digest = (
            base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        )
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(os.path.join(folder, name), "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return name
