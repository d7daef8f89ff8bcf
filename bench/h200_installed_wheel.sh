#!/usr/bin/env bash
# The product as users install it, on the H200 (issue 25; docs/evidence/h200-installed-wheel-*.md
# records a run): the wheel built on the CPU box, installed non-editable into a fresh tool venv
# with its dependencies from a local folder (no network there), every command run from /tmp
# (never the checkout), into a target venv that sees the image's torch through a .pth file.
# Also times plan and doctor (issue 28) and a wheelhouse-hit install into a second fresh target.
# Usage on the GPU machine, from the repo root:
#   bench/h200_installed_wheel.sh WHEEL_DIR DEPS_DIR SOURCE_DIR
# WHEEL_DIR holds cuda_resolve-*.whl, DEPS_DIR its dependencies' wheels, SOURCE_DIR the
# Pointnet2_PyTorch checkout. Writes its logs under $OUT.
set -u
dist=$(realpath "$1"); deps=$(realpath "$2"); src=$(realpath "$3")
out=${OUT:-/tmp/out}; mkdir -p "$out"; repo=$PWD
log="$out/installed-wheel.log"
rm -rf /tmp/iw-*
export PIP_FIND_LINKS=$deps PIP_NO_INDEX=1 PYTHONUNBUFFERED=1 CUDA_RESOLVE_WHEELHOUSE=/tmp/iw-wh
cd /tmp
TIMEFORMAT='wall %R s'
step() { echo "== $*" >>"$log"; }
step "tool venv: python3 -m venv /tmp/iw-tool; pip install the wheel (not editable)"
python3 -m venv /tmp/iw-tool >>"$log" 2>&1
/tmp/iw-tool/bin/python -m pip install -q -U pip >>"$log" 2>&1
wheel=$(ls "$dist"/cuda_resolve-*.whl)
/tmp/iw-tool/bin/python -m pip install -q "$wheel[fast]" >>"$log" 2>&1
echo "exit $?" >>"$log"
B=/tmp/iw-tool/bin
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
target() {
  python3 -m venv "$1" && echo "$base" >"$1/lib/python3.12/site-packages/base.pth"
}
target /tmp/iw-target
T=/tmp/iw-target/bin/python
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  nvcc --version | tail -1; $T -c 'import torch; print("torch", torch.__version__)'
  $B/cuda-resolve --version; } >>"$log" 2>&1
step "every command's --help exits 0 (exit 70 would be a missing module)"
for words in "" detect doctor plan install apply undo build wheelhouse mirror index lock sync env \
  "wheelhouse list" "wheelhouse publish" "mirror set" "index show" "index refresh"; do
  $B/cuda-resolve $words --help >/dev/null 2>>"$log"; echo "cuda-resolve $words --help: exit $?" >>"$log"
done
$B/cuda-pip install --help >/dev/null 2>>"$log"; echo "cuda-pip install --help: exit $?" >>"$log"
step "detect --json"
$B/cuda-resolve detect --python "$T" --json >"$out/detect.json" 2>>"$log"; echo "exit $?" >>"$log"
step "doctor --json, 7 warm runs (issue 28)"
for i in 1 2 3 4 5 6 7; do
  { time $B/cuda-resolve doctor --python "$T" --json >"$out/doctor.json" 2>/dev/null; } 2>>"$log"
done
step "plan pointnet2_ops kaolin, 7 warm runs (issue 28)"
for i in 1 2 3 4 5 6 7; do
  { time $B/cuda-resolve plan pointnet2_ops kaolin --python "$T" >"$out/plan.txt" 2>/dev/null; } 2>>"$log"
done
step "cold: cuda-pip install pointnet2_ops --source SRC --python T --smoke --json"
{ time $B/cuda-pip install pointnet2_ops --source "$src" --python "$T" --smoke --json \
    >"$out/cold.json" 2>"$out/cold.err"; } 2>>"$log"
echo "exit $?; $(grep -E '^(error|hint):' "$out/cold.err")" >>"$log"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["result"]; print("smoke:", r.get("smoke")); print("changed:", r.get("changed"))' "$out/cold.json" >>"$log" 2>&1
for installer in uv pip uv; do
  step "wheelhouse hit (--installer $installer): the same into a fresh target"
  rm -rf /tmp/iw-target2; target /tmp/iw-target2
  { time $B/cuda-pip install pointnet2_ops --source "$src" --python /tmp/iw-target2/bin/python \
      --smoke --json --installer "$installer" >"$out/hit-$installer.json" 2>"$out/hit-$installer.err"; } 2>>"$log"
  echo "exit $?; $(grep -E '^(error|hint):' "$out/hit-$installer.err")" >>"$log"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["result"]; print("smoke:", r.get("smoke")); print("changed:", r.get("changed")); print("installers:", r.get("installers"))' "$out/hit-$installer.json" >>"$log" 2>&1
  grep -E '\[ *[0-9.]+ s\]' "$out/hit-$installer.err" | tail -12 >>"$log"
done
step "bench/plan_speed.py --python T (plan, detect --json, doctor --json medians)"
/tmp/iw-tool/bin/python "$repo/bench/plan_speed.py" --python "$T" --runs 11 --out "$out/plan-doctor-speed-h200.json" >>"$log" 2>&1
echo "exit $?" >>"$log"
step "doctor after (text)"
$B/cuda-resolve doctor --python "$T" >"$out/doctor-after.txt" 2>&1; echo "exit $?" >>"$log"
step "wheelhouse list, env --shell bash"
$B/cuda-resolve wheelhouse list >>"$log" 2>&1; echo "exit $?" >>"$log"
$B/cuda-resolve env --shell bash --python "$T" >>"$log" 2>&1; echo "exit $?" >>"$log"
echo "done" >>"$log"
