#!/usr/bin/env bash
# Issue 28's speed goals measured on the H200 with the product as users install it: the wheel
# installed non-editable into a fresh tool venv (its dependencies from a local folder: no
# network there), every command run from / against a target venv that sees the image's real
# torch (through a .pth file naming the system site-packages), warm medians side by side
# (bench/installed_speed.py): python -c pass, detect --json, plan pointnet2_ops kaolin,
# doctor --json (15 runs each), python -m torch.utils.collect_env (3 runs). Needs no GPU: it
# records what it finds (GPUs, driver, torch). About a minute; well under 4.
# Usage, from the checkout's root:
#   bench/h200_speed.sh [WHEEL_DIR [DEPS_DIR]]      (default .device/dist .device/wheels)
# Environment: OUT (default /tmp/out) gets h200-speed.json, h200-speed.log, doctor.json,
# plan.txt; TARGET_PYTHON uses that interpreter as the target instead of making the .pth venv;
# RUNS (15), COLLECT_ENV_RUNS (3); PIP_NO_INDEX=0 lets pip use its configured index too;
# PROFILE=1 also writes importtime-{plan,doctor}.txt (-X importtime) and cprofile-{plan,doctor}.txt
# (cProfile by own time), each of one warm run.
set -u
repo=$PWD
dist=$(realpath "${1:-.device/dist}"); deps=$(realpath "${2:-.device/wheels}")
out=${OUT:-/tmp/out}; mkdir -p "$out"
log="$out/h200-speed.log"; : >"$log"
export PIP_FIND_LINKS=$deps PIP_NO_INDEX=${PIP_NO_INDEX:-1} PIP_DISABLE_PIP_VERSION_CHECK=1
started=$(date +%s)
step() { echo "== [$(( $(date +%s) - started )) s] $*" | tee -a "$log"; }
fail() { echo "FAILED: $*" | tee -a "$log"; exit 1; }
cd /tmp
work=$(mktemp -d /tmp/h200-speed-XXXXXX)
wheel=$(ls "$dist"/cuda_resolve-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || fail "no cuda_resolve-*.whl in $dist"
step "tool venv $work/tool: pip install $(basename "$wheel") (not editable), deps from $deps"
python3 -m venv "$work/tool" >>"$log" 2>&1 || fail "python3 -m venv"
"$work/tool/bin/python" -m pip install -q "$wheel" >>"$log" 2>&1 || fail "pip install the wheel"
B=$work/tool/bin
"$B/python" -c 'import cuda_resolve, sys; assert "site-packages" in cuda_resolve.__file__, \
  cuda_resolve.__file__; print("cuda_resolve from", cuda_resolve.__file__)' >>"$log" 2>&1 \
  || fail "cuda_resolve is not the installed copy"
if [ -n "${TARGET_PYTHON:-}" ]; then
  T=$TARGET_PYTHON
else
  base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
  python3 -m venv "$work/target" >>"$log" 2>&1 || fail "target venv"
  site=$("$work/target/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base" >"$site/base.pth"  # the image's torch, as many labs share one
  T=$work/target/bin/python
fi
step "machine"
{ nproc; uptime; python3 -VV
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1 | head -8
  nvcc --version 2>&1 | tail -1
  "$T" -c 'import importlib.metadata as m; print("target", __import__("sys").version.split()[0],
"torch", m.version("torch"))' 2>&1
  "$B/cuda-resolve" --version; } >>"$log" 2>&1
step "doctor --json and plan, once each (kept: every check doctor ran, the plan)"
"$B/cuda-resolve" doctor --json --python "$T" >"$out/doctor.json" 2>>"$log"
echo "doctor exit $? (1 = findings)" >>"$log"
"$B/cuda-resolve" plan pointnet2_ops kaolin --python "$T" >"$out/plan.txt" 2>>"$log" ||
  "$B/cuda-resolve" plan pointnet2_ops kaolin --python "$T" --arch-list 9.0 >"$out/plan.txt" 2>>"$log"
echo "plan exit $?" >>"$log"
step "warm medians: bench/installed_speed.py --runs ${RUNS:-15} --collect-env-runs ${COLLECT_ENV_RUNS:-3}"
timeout 200 "$B/python" "$repo/bench/installed_speed.py" --bin "$B" --python "$T" \
  --runs "${RUNS:-15}" --collect-env-runs "${COLLECT_ENV_RUNS:-3}" \
  --out "$out/h200-speed.json" 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
if [ "${PROFILE:-0}" = 1 ]; then
  step "profiles of one warm run each: -X importtime, cProfile by own time"
  for name in plan doctor; do
    if [ $name = plan ]; then args="plan pointnet2_ops kaolin"; else args="doctor --json"; fi
    # shellcheck disable=SC2086  # args is a word list
    "$B/python" -X importtime -m cuda_resolve $args --python "$T" >/dev/null 2>"$out/importtime-$name.txt"
    # shellcheck disable=SC2086
    "$B/python" -m cProfile -s tottime -m cuda_resolve $args --python "$T" >"$out/cprofile-$name.txt" 2>&1
  done
fi
step "done (exit $status)"
rm -rf "$work"
exit "$status"
