"""Makes the H200 lock of docs/evidence/lock-2026-12-03.md on the CPU machine (run from the repo root).

    .venv/bin/python docs/evidence/lock-2026-12-03-h200-setup.py .lock-h200

Three profiles of machines running torch 2.11.0+cu130 on driver 580 with Python 3.12: the H200
as detected there (tests/data/profiles/h200-detected-2026-12-02.toml), an A100 node and a node
with both. pointnet2_ops is source-built: the wheelhouse (OUT/wheelhouse, served on the H200 at
http://127.0.0.1:8765/) holds the two wheels cross-built here for that torch and Python
(.h200-wheels: sm_90, and sm_80+sm_90), published under the keys each profile's plan names.
The PyTorch index does not answer here: torch 2.11.0+cu130 comes from a loopback stand-in (a
small wheel; every profile has that torch installed, so sync counts it as satisfied and never
fetches it), locked under download.pytorch.org's canonical URL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from test_lock_support import StaticIndex, make_wheel, serve  # noqa: E402

H200 = REPO / "tests" / "data" / "profiles" / "h200-detected-2026-12-02.toml"
WHEELS = REPO / ".h200-wheels"


def profile(out: Path, name: str, gpus: list[tuple[str, str]]) -> Path:
    text = H200.read_text()
    head, _, rest = text.partition("[[gpu]]")
    rest = rest.split("\n[[toolkit]]", 1)[1]
    gpu_tables = "".join(
        f'[[gpu]]\nindex = {i}\nname = "{g}"\ncompute_capability = "{c}"\n\n'
        for i, (g, c) in enumerate(gpus)
    )
    path = out / f"{name}.toml"
    path.write_text(f'name = "{name}"\n' + head + gpu_tables + "[[toolkit]]" + rest)
    return path


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    shutil.copy(H200, out / "h200.toml")
    (out / "h200.toml").write_text('name = "h200"\n' + H200.read_text())
    a100 = profile(out, "a100", [("NVIDIA A100-SXM4-80GB", "8.0")])
    mixed = profile(out, "a100-h200", [("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA H200", "9.0")])
    stand_in = StaticIndex(out / "stand-in")
    stand_in.add(make_wheel(out / "built", "torch", "2.11.0+cu130"), variant="cu130")
    env = dict(
        os.environ,
        CUDA_RESOLVE_WHEELHOUSE=str(out / "wheelhouse"),
        CUDA_RESOLVE_CACHE_DIR=str(out / "cache"),
        CUDA_RESOLVE_CONFIG=str(out / "config.toml"),
    )
    env.pop("PIP_FIND_LINKS", None)
    os.environ.update(env)
    from cuda_resolve.config import load_config
    from cuda_resolve.index import default_index
    from cuda_resolve.lock.make import profile_plan
    from cuda_resolve.lock.profiles import load_lock_profile
    from cuda_resolve.resolve import Options
    from cuda_resolve.wheelhouse.store import Wheelhouse

    with serve(out / "stand-in") as url:
        (out / "config.toml").write_text(
            f'[pytorch]\nlayout = "simple"\nurl = "{url}/whl/"\n'
            f'[[rewrite]]\ncanonical = "https://download.pytorch.org/whl/"\nmirror = "{url}/whl/"\n'
        )
        house = Wheelhouse(out / "wheelhouse")
        for path, wheel in ((out / "h200.toml", "sm90"), (mixed, "sm80.sm90")):
            plan, _ = profile_plan(
                load_lock_profile(str(path)),
                ["torch", "pointnet2_ops"],
                default_index(),
                Options(),
                load_config(),
                house,
            )
            key = plan.builds[0].key
            source = (
                WHEELS / f"pointnet2_ops-3.0.0+pt2110cu130.{wheel}-cp312-cp312-linux_x86_64.whl"
            )
            assert f"cu130.{wheel}" in key.labelled_version, (key.labelled_version, wheel)
            house.publish(key, source, strip_debug=False)
        command = [
            sys.executable,
            "-m",
            "cuda_resolve",
            "lock",
            "torch",
            "pointnet2_ops",
            "--index-url",
            f"{url}/simple",
            "--wheelhouse-url",
            "http://127.0.0.1:8765",
            "-o",
            str(out / "pylock.toml"),
            "--profile",
            str(out / "h200.toml"),
            "--profile",
            str(a100),
            "--profile",
            str(mixed),
        ]
        subprocess.run(command, check=True, env=env)


if __name__ == "__main__":
    main()
