#!/usr/bin/env bash
# The H200 evidence run for issue 14 (docs/evidence/h200-plan-contract-2026-12-03.md records it):
# a plan written by `plan --json` applied as written, dry run == run, a plan whose facts changed
# refused, a cache hit, the compute_37 refusal, and reuse by coverage (a wheel built for 8.0;9.0
# installed on the H200 without compiling).
# Usage on the GPU machine, from the repo root: bench/h200_plan_contract.sh SOURCE_DIR
# Needs cuda-resolve's dependencies in .wheels/ (no network there); writes everything under $OUT.
set -u
src=$(realpath "$1"); out=${OUT:-/tmp/out}; mkdir -p "$out"
rm -rf /tmp/site /tmp/t1 /tmp/t2 /tmp/wh1 /tmp/wh2 /tmp/wh3
python3 -m pip install -q --no-index --find-links .wheels --target /tmp/site . >"$out/setup.log" 2>&1
export PYTHONPATH=/tmp/site PIP_FIND_LINKS=$PWD/.wheels PIP_NO_INDEX=1 PYTHONUNBUFFERED=1
cd /tmp  # not the checkout: its cuda_resolve/ would shadow the installed one
export CUDA_RESOLVE_WHEELHOUSE=/tmp/wh1
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
fresh() { python3 -m venv "$1" && echo "$base" > "$1/lib/python3.12/site-packages/base.pth"; }
TIMEFORMAT='wall %R s'
step() { echo "\$ $*" >>"$out/steps.log"; { time "$@" ; } 2>>"$out/steps.log"; echo "rc=$?" >>"$out/steps.log"; }
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv; nvcc --version | tail -2; python3 -c 'import torch; print(torch.__version__)'; git log --oneline -1; } >"$out/machine.txt" 2>&1
fresh /tmp/t1; export VIRTUAL_ENV=/tmp/t1
step python3 -m cuda_resolve plan pointnet2_ops --explain
step sh -c "python3 -m cuda_resolve plan pointnet2_ops --json > $out/plan.json"
step sh -c "python3 -m pip_plugin install pointnet2_ops --source $src --dry-run --json > $out/dry.json"
/tmp/t1/bin/python -m pip freeze --all >"$out/t1-freeze-before.txt"
step sh -c "python3 -m cuda_resolve apply $out/plan.json --source $src --smoke --json > $out/apply.json 2>$out/apply.err"
/tmp/t1/bin/python -m pip freeze --all >"$out/t1-freeze-after.txt"
python3 - "$out" >"$out/compare.txt" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
dry = json.load(open(f"{out}/dry.json"))["commands"]
ran = json.load(open(f"{out}/apply.json"))["result"]["pip_runs"]
print("dry-run commands == applied pip_runs:", dry == ran)
print(json.dumps({"dry": dry, "ran": ran}, indent=1))
PY
step sh -c "python3 -m pip_plugin install pointnet2_ops --source $src --smoke --json > $out/second.json"
python3 - "$out/plan.json" "$out/plan-other-driver.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1])); plan["environment"]["driver"]["version"] = "535.104.05"
json.dump(plan, open(sys.argv[2], "w"))
PY
step python3 -m cuda_resolve apply "$out/plan-other-driver.json" --source "$src"
step python3 -m pip_plugin install pointnet2_ops --source "$src" --arch-list 3.7
# Reuse by coverage: a wheel built for 8.0;9.0 (as for a lab with A100 and H200 nodes) serves the H200.
export CUDA_RESOLVE_WHEELHOUSE=/tmp/wh2
step sh -c "python3 -m cuda_resolve build pointnet2_ops --source $src --arch-list '8.0;9.0' --json > $out/build-80-90.json"
fresh /tmp/t2; export VIRTUAL_ENV=/tmp/t2
step python3 -m cuda_resolve plan pointnet2_ops --explain
step sh -c "python3 -m pip_plugin install pointnet2_ops --source $src --smoke --json > $out/reuse.json"
# For issue 20: a cross-built 8.0;8.6 wheel (no kernel for the H200) and cuobjdump's view of each.
export CUDA_RESOLVE_WHEELHOUSE=/tmp/wh3
step sh -c "python3 -m cuda_resolve build pointnet2_ops --source $src --arch-list '8.0;8.6' --json > $out/build-80-86.json"
mkdir -p "$out/wheels"; find /tmp/wh1 /tmp/wh2 /tmp/wh3 -name '*.whl' -exec cp {} "$out/wheels/" \;
for w in "$out"/wheels/*.whl; do d=$(mktemp -d); python3 -m zipfile -e "$w" "$d"; for so in $(find "$d" -name '*.so'); do
  echo "== $(basename "$w") $(basename "$so")"; cuobjdump --list-elf "$so"; cuobjdump --list-ptx "$so"; done; done >"$out/cuobjdump.txt" 2>&1
tar -czf "$out/logs.tgz" -C "${CUDA_RESOLVE_CACHE_DIR:-$HOME/.cache/cuda-resolve}" logs 2>/dev/null || true
# The device returns few files: everything but the summary travels in one archive.
tar -czf /tmp/all.tgz -C "$out" . && mv /tmp/all.tgz "$out/" && find "$out" -maxdepth 1 -type f ! -name '*.tgz' ! -name steps.log ! -name compare.txt -delete
rm -rf "$out/wheels"
