#!/usr/bin/env bash
# H200 evidence, second run of 2026-12-03 (docs/evidence/h200-plan-contract-2026-12-03.md):
# issue 20's doctor script (bench/h200_doctor_kernels.sh, both steps), then issue 14's installed
# build kept (no build, no pip) and a plan file whose installed-torch fact changed, refused.
# Usage on the GPU machine from the repo root: bench/h200_kept_and_facts.sh SOURCE_DIR
set -u
repo=$PWD; src=$(realpath "$1"); out=${OUT:-/tmp/out}; raw=$out/raw; mkdir -p "$raw"
rm -rf /tmp/site && python3 -m pip install -q --no-index --find-links .wheels --target /tmp/site . >"$raw/setup.log" 2>&1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PIP_FIND_LINKS=$repo/.wheels PIP_NO_INDEX=1 CUDA_RESOLVE_WHEELHOUSE=/tmp/wh
cd /tmp  # not the checkout: its cuda_resolve/ would shadow the installed one
OUT=$raw bash "$repo/bench/h200_doctor_kernels.sh" sm90 "$src"
OUT=$raw bash "$repo/bench/h200_doctor_kernels.sh" sm8086 "$src"
TIMEFORMAT='wall %R s'
step() { echo "\$ $*" >>"$raw/kept.log"; { time "$@" ; } >>"$raw/kept.log" 2>&1; echo "rc=$?" >>"$raw/kept.log"; }
# /tmp/t90 holds the sm_90 pointnet2_ops the doctor script installed: a second install keeps it.
step env VIRTUAL_ENV=/tmp/t90 python3 -m pip_plugin install pointnet2_ops --json
step python3 -m cuda_resolve plan pointnet2_ops --python /tmp/t90/bin/python --explain
step env CUDA_RESOLVE_CUDA_ARCH= CUDA_RESOLVE_DRIVER= python3 -m cuda_resolve plan pointnet2_ops --python /tmp/t90/bin/python --explain
step env VIRTUAL_ENV=/tmp/t90 python3 -m pip_plugin install pointnet2_ops --rebuild --dry-run --json
# A plan file made where torch 2.10 was installed is refused here, naming the fact.
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m venv /tmp/t3 && echo "$base" > /tmp/t3/lib/python3.12/site-packages/base.pth
python3 -m cuda_resolve plan pointnet2_ops --python /tmp/t3/bin/python --json > "$raw/t3-plan.json"
python3 - "$raw/t3-plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1])); plan["environment"]["torch"]["version"] = "2.10.0+cu130"
json.dump(plan, open(sys.argv[1].replace(".json", "-torch210.json"), "w"))
PY
step python3 -m cuda_resolve apply "$raw/t3-plan-torch210.json" --python /tmp/t3/bin/python --source "$src"
tar -czf /tmp/all.tgz -C "$raw" . && mv /tmp/all.tgz "$out/" && cp "$raw"/*.log "$out/" 2>/dev/null; rm -rf "$raw"
