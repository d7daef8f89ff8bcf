"""How fast is ``cuda-pip install`` of a source build, against building the same wheel by hand?

Run on a GPU machine, with the target environment active (VIRTUAL_ENV) and a copy of the
recipe's repository (no network needed):

    python bench/install_speed.py pointnet2_ops --source DIR [--five-archs '7.5;8.0;8.6;8.9;9.0']
    [--debug-variant] [--json OUT]

It measures, in this order:
1. hand-tuned: the recipe's source prepared by cuda-resolve (copy + patches), then a plain
   ``TORCH_CUDA_ARCH_LIST=<detected> MAX_JOBS=<cores> python -m pip wheel --no-build-isolation
   --no-deps``;
2. the same with a five-architecture list (what a generic build would compile);
3. ``cuda-pip install PKG --source DIR --rebuild`` into the target (detect, plan, pre-flight,
   build, publish, install, import check), the wheelhouse set to an empty temporary folder;
   cuda-pip's own per-phase times (``--json``) are kept next to the total;
4. the same again: a wheelhouse hit (no compile);
5. with --debug-variant, 3. again with ``CPPFLAGS=-g`` (debug info on, as a plain build has it);
6. an impossible request (``--arch-list 3.7``) refused before compiling.
The numbers are printed and, with --json, written; docs/ records them with the date.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(
    command: list[str], env: dict[str, str], log: Path, stdout: Path | None = None
) -> tuple[float, int]:
    started = time.monotonic()
    with open(log, "a", encoding="utf-8") as stream:
        stream.write(f"$ {' '.join(command)}\n")
        stream.flush()
        if stdout is None:
            status = subprocess.call(command, env=env, stdout=stream, stderr=subprocess.STDOUT)
        else:
            with open(stdout, "w", encoding="utf-8") as out:
                status = subprocess.call(command, env=env, stdout=out, stderr=stream)
    return time.monotonic() - started, status


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("package")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--five-archs", default="7.5;8.0;8.6;8.9;9.0")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--log", type=Path, default=Path("install_speed.log"))
    parser.add_argument(
        "--debug-variant",
        action="store_true",
        help="also time a fresh install with CPPFLAGS=-g (debug info on)",
    )
    args = parser.parse_args()

    from cuda_resolve.build.source import prepare_source
    from cuda_resolve.detect import detect_environment
    from cuda_resolve.index import default_index
    from cuda_resolve.install.target import choose_target

    target = choose_target(None)
    env_facts = detect_environment(python=target.python)
    archs = ";".join(str(c) for c in env_facts.capabilities)
    if not archs:
        raise SystemExit("no GPU detected: this benchmark builds for the detected architecture")
    torch = env_facts.torch
    if torch is None:
        raise SystemExit(f"{target.python} has no torch")
    package = default_index().package(args.package)
    assert package is not None and package.recipes, f"no recipe for {args.package}"
    recipe = package.recipes[0]
    cores = len(os.sched_getaffinity(0))
    results: dict[str, object] = {
        "target": target.python,
        "archs": archs,
        "cores": cores,
        "torch": torch.version,
    }
    base_env = dict(os.environ)

    for label, arch_list in (
        ("hand_tuned_detected_arch_s", archs),
        ("hand_tuned_five_archs_s", args.five_archs),
    ):
        with tempfile.TemporaryDirectory() as work:
            source = prepare_source(
                recipe, Path(work), torch_version=torch.base_version, source_dir=args.source
            )
            env = dict(
                base_env, TORCH_CUDA_ARCH_LIST=arch_list, MAX_JOBS=str(cores), FORCE_CUDA="1"
            )
            seconds, status = _timed(
                [
                    target.python,
                    "-m",
                    "pip",
                    "wheel",
                    "--no-build-isolation",
                    "--no-deps",
                    "--no-cache-dir",
                    "-w",
                    str(Path(work) / "dist"),
                    str(source.build_dir),
                ],
                env,
                args.log,
            )
            results[label] = round(seconds, 1) if status == 0 else f"failed ({status})"
            print(f"{label}: {results[label]}", flush=True)

    with tempfile.TemporaryDirectory() as wheelhouse:
        env = dict(base_env, CUDA_RESOLVE_WHEELHOUSE=wheelhouse)
        cuda_pip = [
            sys.executable,
            "-m",
            "pip_plugin",
            "install",
            args.package,
            "--source",
            str(args.source),
        ]
        # A fresh install (--rebuild) starts with the package absent from the target, else pip has
        # nothing to do.
        runs: list[tuple[str, list[str], dict[str, str]]] = [
            ("cuda_pip_fresh_s", ["--rebuild"], env),
            ("cuda_pip_cache_hit_s", [], env),
        ]
        if args.debug_variant:
            # The same fresh install with debug info asked for (CPPFLAGS=-g): what -g0 saves.
            runs.append(
                ("cuda_pip_fresh_with_debug_info_s", ["--rebuild"], dict(env, CPPFLAGS="-g"))
            )
        for label, extra, run_env in runs:
            report = Path(wheelhouse) / f"{label}.json"
            if extra:
                subprocess.call(
                    [target.python, "-m", "pip", "uninstall", "-y", args.package],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            seconds, status = _timed(
                [*cuda_pip, *extra, "--json"], run_env, args.log, stdout=report
            )
            results[label] = round(seconds, 2) if status == 0 else f"failed ({status})"
            if status == 0:
                # Where the time went, as cuda-pip itself measured it (detect, plan, build, pip
                # ...).
                results[label.replace("_s", "_phases")] = json.loads(report.read_text())["result"][
                    "timings"
                ]
            print(f"{label}: {results[label]}", flush=True)
        seconds, status = _timed([*cuda_pip, "--arch-list", "3.7"], env, args.log)
        results["impossible_refused_s"] = round(seconds, 2)
        results["impossible_exit"] = status
        print(
            f"impossible_refused_s: {results['impossible_refused_s']} (exit {status})", flush=True
        )
    fresh, tuned, five = (
        results["cuda_pip_fresh_s"],
        results["hand_tuned_detected_arch_s"],
        results["hand_tuned_five_archs_s"],
    )
    if isinstance(fresh, float) and isinstance(tuned, float) and isinstance(five, float):
        results["fresh_over_hand_tuned"] = round(fresh / tuned, 3)
        results["five_archs_over_fresh"] = round(five / fresh, 3)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(Path("build"), ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
