"""The test venvs are copies of one template (tests/_torch_env.py): a copy must be a venv of its
own.

pip run by the copy's python installs into the copy (files and console scripts), the template
stays as it was, and nothing in the copy still names the template's folder.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import zipfile
from pathlib import Path

from _torch_env import copy_venv, template_venv


def _tree(root: Path) -> dict[str, int]:
    return {str(path.relative_to(root)): path.lstat().st_mtime_ns for path in root.rglob("*")}


def _wheel_with_a_script(folder: Path) -> Path:
    dist = "probe-1.0.dist-info"
    contents = {
        "probe.py": "def main() -> None:\n    print('probe ran')\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: probe\nVersion: 1.0\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{dist}/entry_points.txt": "[console_scripts]\nprobe = probe:main\n",
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},{len(text.encode())}"
        for name, text in contents.items()
    ]
    contents[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    path = folder / "probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in contents.items():
            archive.writestr(name, text)
    return path


def test_pip_in_a_copy_installs_into_the_copy_not_the_template(tmp_path: Path) -> None:
    template = template_venv()
    before = _tree(template)
    python = copy_venv(tmp_path / "copy")
    prefix = subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert prefix.stdout.strip() == str(tmp_path / "copy")

    wheel = _wheel_with_a_script(tmp_path)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)],
        check=True,
        timeout=120,
    )
    (site,) = (tmp_path / "copy").glob("lib/python3*/site-packages")
    assert (site / "probe.py").is_file()
    script = tmp_path / "copy" / "bin" / "probe"
    assert script.read_text().splitlines()[0] == f"#!{python}"
    assert (
        subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout
        == "probe ran\n"
    )
    assert _tree(template) == before  # nothing was added to or changed in the template


def test_a_copy_names_itself_not_the_template(tmp_path: Path) -> None:
    python = copy_venv(tmp_path / "copy")
    template = str(template_venv())
    for written in [tmp_path / "copy" / "pyvenv.cfg", *(tmp_path / "copy" / "bin").iterdir()]:
        if not written.is_symlink():
            assert template not in written.read_text(encoding="utf-8"), written
    pip = tmp_path / "copy" / "bin" / "pip"
    assert pip.read_text().splitlines()[0].startswith(f"#!{python.parent}/python")
    version = subprocess.run(
        [str(pip), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert str(tmp_path / "copy") in version  # "pip X from <copy>/lib/python3.11/site-packages/pip"
