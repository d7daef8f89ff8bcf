"""The "upgrade cuda-resolve" hint names the command for where this cuda-resolve came from.

``pip install -U cuda-resolve`` is right only where it came from an index; from a checkout, a Git
URL or a wheel file that command finds nothing or another project (walk B12). The texts below are
``direct_url.json`` as pip writes it for each way of installing (PEP 610).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_resolve._upgrade import upgrade_hint, upgrade_way
from cuda_resolve.cli import main
from cuda_resolve.install.apply import read_plan_file
from cuda_resolve.lock.read import LockFormatError, _lock_version
from cuda_resolve.plan import Plan, PlanFormatError
from cuda_resolve.profile import ProfileError, parse_profile

PY = "/opt/tools/bin/python"
PROFILE = Path(__file__).parent / "data" / "profiles" / "rtx3090-torch21cu121-nvcc118.toml"


@pytest.mark.parametrize(
    ("direct_url", "said"),
    [
        (None, f"{PY} -m pip install -U cuda-resolve"),
        (
            '{"dir_info": {}, "url": "file:///home/lab/cuda-resolve"}',
            f"update the checkout /home/lab/cuda-resolve, then {PY} -m pip install -U "
            "/home/lab/cuda-resolve",
        ),
        (
            '{"dir_info": {"editable": true}, "url": "file:///home/lab/my%20tools/cr"}',
            "it runs from the checkout '/home/lab/my tools/cr': update that checkout",
        ),
        (
            '{"url": "https://user:secret@git.lab.org/cr.git", "vcs_info": {"commit_id": '
            '"0123abcd", "requested_revision": "main", "vcs": "git"}}',
            f"{PY} -m pip install -U --force-reinstall git+https://user@git.lab.org/cr.git@main",
        ),
        (  # what a clone needs is kept: the git user of an SSH URL, a ${VARIABLE}, a subfolder
            '{"url": "ssh://git@github.com/o/r.git", "subdirectory": "tool", "vcs_info": '
            '{"commit_id": "0123abcd", "vcs": "git"}}',
            f"{PY} -m pip install -U --force-reinstall "
            "'git+ssh://git@github.com/o/r.git#subdirectory=tool'",
        ),
        (
            '{"url": "https://${TOKEN}@git.lab.org/cr.git", "vcs_info": {"commit_id": "0", '
            '"vcs": "git"}}',
            f"{PY} -m pip install -U --force-reinstall 'git+https://${{TOKEN}}@git.lab.org/cr.git'",
        ),
        (
            '{"archive_info": {"hashes": {"sha256": "00"}}, '
            '"url": "file:///srv/wheels/cuda_resolve-0.1.0-py3-none-any.whl"}',
            "it was installed from /srv/wheels/cuda_resolve-0.1.0-py3-none-any.whl: "
            f"{PY} -m pip install -U NEWER-FILE",
        ),
        ("{not json", f"{PY} -m pip install -U cuda-resolve"),
    ],
)
def test_the_way_follows_where_it_was_installed_from(direct_url: str | None, said: str) -> None:
    assert upgrade_way(direct_url, [PY, "-m", "pip", "install"]) == said
    assert "secret" not in said


def test_a_newer_plan_lock_and_profile_say_how_to_upgrade_this_one() -> None:
    here = upgrade_hint()  # this checkout: installed editable, or run from the tree
    assert here.startswith("upgrade cuda-resolve (") and (
        "pip install -U" in here or "checkout" in here
    )
    with pytest.raises(PlanFormatError) as plan:
        Plan.from_json({"format": 99, "command": ["cuda-pip", "install", "six"]}, origin="p.json")
    assert here in str(plan.value.hint)
    with pytest.raises(LockFormatError) as lock:
        _lock_version({"lock-version": "2.0"}, "pylock.toml")
    assert here in str(lock.value.hint)
    with pytest.raises(ProfileError) as newer:
        parse_profile('format = 9\n[python]\nversion = "3.11"\n', origin="p.toml")
    assert here in str(newer.value.hint) and "--save-profile" in str(newer.value.hint)
    with pytest.raises(ProfileError) as older:  # not from a newer cuda-resolve: no upgrade
        parse_profile('format = 0\n[python]\nversion = "3.11"\n', origin="p.toml")
    assert "upgrade" not in str(older.value.hint) and "--save-profile" in str(older.value.hint)


def test_the_installed_metadata_is_read_only_for_a_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import cuda_resolve._upgrade as upgrade

    asked: list[None] = []
    monkeypatch.setattr(upgrade, "_direct_url", lambda: asked.append(None))
    assert main(["plan", "six", "--profile", str(PROFILE), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    read_plan_file(path)
    assert asked == []  # importlib.metadata is not loaded to read a good plan (issue 28)
    path.write_text(json.dumps({**plan, "added_later": 1}))
    with pytest.raises(PlanFormatError) as refused:
        read_plan_file(path)
    assert "-m pip install -U cuda-resolve" in str(refused.value.hint) and len(asked) == 1


def test_an_environment_without_pip_installs_with_uvs_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `uv tool` (or any uv-made) environment has no pip: `PY -m pip` fails there."""
    import importlib.util
    import shutil

    from cuda_resolve._upgrade import install_words

    assert install_words("/t/bin/python") == ["/t/bin/python", "-m", "pip", "install"]
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pip" else real(name, *a)
    )
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/u/bin/{name}")
    assert install_words("/t/bin/python") == [
        "/u/bin/uv",
        "pip",
        "install",
        "--python",
        "/t/bin/python",
    ]
