"""A PEP 517 backend that behaves like a long compile (tests/test_signals.py).

``SLEEPY_PIDS`` names a file where it appends its own pid and its child's. ``SLEEPY_MODE``:

- ``hang`` (default): start a child (``sleep 300``, which inherits the output pipe, as nvcc's
  cicc does), then sleep: only a signal ends the build.
- ``linger``: start a background child that keeps the output pipe open and ignores SIGINT and
  SIGHUP (as ``cmd &`` in a build script does), then build a small wheel and return at once.
"""

import base64
import hashlib
import os
import signal
import subprocess
import sys
import time
import zipfile


def _record(*pids):
    with open(os.environ["SLEEPY_PIDS"], "a", encoding="ascii") as stream:
        stream.write(" ".join(str(pid) for pid in pids) + "\n")


def _ignore_interrupts():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    mode = os.environ.get("SLEEPY_MODE", "hang")
    if mode == "linger":
        child = subprocess.Popen(["sleep", "300"], preexec_fn=_ignore_interrupts)
        _record(child.pid)
        return _write_wheel(wheel_directory)
    child = subprocess.Popen(["sleep", "300"])
    _record(os.getpid(), child.pid)
    # As nvcc does: intermediate files in TMPDIR (tmpxft_*), which a killed compile leaves behind.
    with open(
        os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tmpxft_{os.getpid():08x}.cpp"), "w"
    ) as scratch:
        scratch.write("// intermediate\n")
    print("compiling (this never ends by itself)", flush=True)
    time.sleep(300)
    raise SystemExit("the build was not stopped")


def _write_wheel(folder):
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    name = f"sleepext-0.1.0-{tag}-{tag}-linux_x86_64.whl"
    dist = "sleepext-0.1.0.dist-info"
    files = {
        "sleepext/__init__.py": "",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: sleepext\nVersion: 0.1.0\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: sleepy\nRoot-Is-Purelib: false\nTag: "
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
