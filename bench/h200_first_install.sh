#!/usr/bin/env bash
# Issue 28's first install on the H200, with the bytes downloaded counted: the product as users
# install it (the wheel, non-editable, in its own tool venv) installs torch and builds
# pointnet2_ops into a fresh venv that has no torch, from an index on loopback that counts every
# byte it sends (bench/local_index.py: the image's own torch 2.11.0+cu130 and every distribution
# it requires, CUDA's libraries included, repacked as wheels; nothing outside the machine can be
# reached there). Then a second fresh venv on the same machine installs the same again. Before
# the download folder, the first install fetched torch and its CUDA wheels twice (into the
# build's overlay, then into the target).
# Usage, from the checkout's root:
#   bench/h200_first_install.sh SOURCE_DIR [WHEEL_DIR [DEPS_DIR]]
#   (SOURCE_DIR: a Pointnet2_PyTorch checkout; default .device/dist .device/wheels)
# Environment: OUT (default /tmp/out) gets first-install.json (the summary), first-install.log,
# served.jsonl (one line per request the index answered), first.json and second.json
# (cuda-pip's --json); TORCH (default 2.11.0), ARCHS (default 9.0), PORT (8081); BUILD=0 installs
# torch alone (a machine with no GPU or nvcc: a rehearsal of the script).
set -u
repo=$PWD
src=$(realpath "$1"); dist=$(realpath "${2:-.device/dist}"); deps=$(realpath "${3:-.device/wheels}")
out=${OUT:-/tmp/out}; mkdir -p "$out"
log="$out/first-install.log"; : >"$log"
torch_version=${TORCH:-2.11.0}; archs=${ARCHS:-9.0}; port=${PORT:-8081}
build=(pointnet2_ops --source "$src" --arch-list "$archs"); [ "${BUILD:-1}" = 0 ] && build=()
export PYTHONUNBUFFERED=1
started=$(date +%s)
step() { echo "== [$(( $(date +%s) - started )) s] $*" | tee -a "$log"; }
fail() { echo "FAILED: $*" | tee -a "$log"; exit 1; }
work=/tmp/first-install; rm -rf "$work"; mkdir -p "$work"
cd /tmp
wheel=$(ls "$dist"/cuda_resolve-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || fail "no cuda_resolve-*.whl in $dist"
step "tool venv: pip install $(basename "$wheel") (not editable), its dependencies from $deps"
python3 -m venv "$work/tool" >>"$log" 2>&1 || fail "python3 -m venv"
PIP_FIND_LINKS=$deps PIP_NO_INDEX=1 "$work/tool/bin/python" -m pip install -q "$wheel" >>"$log" 2>&1 \
  || fail "pip install the wheel"
B=$work/tool/bin
{ date -u; nproc; python3 -VV
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1 | head -8
  nvcc --version 2>&1 | tail -1; python3 -m pip --version; "$B/cuda-resolve" --version; } >>"$log" 2>&1
step "repack the image's torch and what it requires (plus setuptools, wheel, ninja) as wheels"
python3 "$repo/bench/local_index.py" repack "$work/idx" torch setuptools wheel ninja --jobs 16 \
  >>"$log" 2>&1 || fail "repack"
tail -1 "$log"
python3 -c 'import json, sys; [print(" ", w["file"], w["size"]) for w in json.load(open(sys.argv[1]))]' \
  "$work/idx/wheels.json" >>"$log"
python3 "$repo/bench/local_index.py" serve "$work/idx" --port "$port" --log "$out/served.jsonl" \
  >>"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
sleep 1
# One machine: its own home, pip cache, cuda-resolve cache and wheelhouse, all empty at first.
export HOME=$work/home XDG_CACHE_HOME=$work/home/.cache CUDA_RESOLVE_CACHE_DIR=$work/cache \
  CUDA_RESOLVE_WHEELHOUSE=$work/wheelhouse CUDA_RESOLVE_CONFIG=$work/home/config.toml \
  PIP_INDEX_URL=http://127.0.0.1:$port/simple/ PIP_CONFIG_FILE=/dev/null \
  PIP_DISABLE_PIP_VERSION_CHECK=1 NO_PROXY=127.0.0.1,localhost
mkdir -p "$HOME"
# The PyTorch index's variants too, should the plan take torch from there and not from PyPI.
printf '[pytorch]\nlayout = "simple"\nurl = "http://127.0.0.1:%s/whl/"\n' "$port" >"$CUDA_RESOLVE_CONFIG"
install_into() {  # install_into NAME: a fresh venv with no torch, then cuda-pip install into it
  python3 -m venv "$work/$1" >>"$log" 2>&1 || fail "venv $1"
  local before; before=$(wc -l <"$out/served.jsonl")
  local t0; t0=$(date +%s.%N)
  "$B/cuda-pip" install "torch==$torch_version" "${build[@]}" --python "$work/$1/bin/python" \
    --json >"$out/$1.json" 2>>"$log"
  local rc=$?
  local t1; t1=$(date +%s.%N)
  echo "cuda-pip install into $1: exit $rc, $(python3 -c "print(round($t1 - $t0, 1))") s" | tee -a "$log"
  if [ "$rc" != 0 ]; then  # what failed: cuda-pip's error and the end of each log it wrote
    head -c 2000 "$out/$1.json" >>"$log"
    for f in "$CUDA_RESOLVE_CACHE_DIR"/logs/*; do echo "--- $f" && tail -25 "$f"; done >>"$log" 2>&1
  fi
  python3 "$repo/bench/local_index.py" count "$out/served.jsonl" --since "$before" >"$work/$1-count.json"
  echo "{\"exit\": $rc, \"wall_s\": $(python3 -c "print(round($t1 - $t0, 2))")}" >"$work/$1-run.json"
  [ ${#build[@]} = 0 ] && return
  "$work/$1/bin/python" -c 'import torch
from pointnet2_ops import pointnet2_utils as u
x = torch.rand(1, 4096, 3, device="cuda")
idx = u.furthest_point_sample(x, 64); torch.cuda.synchronize()
print("kernel ran:", torch.__version__, tuple(idx.shape), int(idx.max()) < 4096)' >>"$log" 2>&1
  echo "kernel check exit $?" | tee -a "$log"
}
step "first install: fresh venv first, torch==$torch_version pointnet2_ops (build for $archs)"
install_into first
step "second install: another fresh venv on the same machine, the same command"
install_into second
step "summary"
python3 - "$work" "$out/first-install.json" <<'EOF' | tee -a "$log"
import json, sys
from pathlib import Path
work, target = Path(sys.argv[1]), Path(sys.argv[2])
wheels = {w["file"]: w["size"] for w in json.loads((work / "idx/wheels.json").read_text())}
summary = {"served_wheels": len(wheels), "served_wheel_bytes": sum(wheels.values())}
for name in ("first", "second"):
    count = json.loads((work / f"{name}-count.json").read_text())
    run = json.loads((work / f"{name}-run.json").read_text())
    fetched = count["files"]
    summary[name] = {
        **run,
        "bytes_downloaded": count["file_bytes"],
        "files_downloaded": len(fetched),
        "files_downloaded_twice_or_more": count["files_requested_more_than_once"],
        "bytes_of_those_files_once": sum(wheels.get(f, 0) for f in fetched),
        "index_pages_requested": count["page_requests"],
        "largest": sorted(((e["bytes"], f) for f, e in fetched.items()), reverse=True)[:5],
    }
target.write_text(json.dumps(summary, indent=1) + "\n")
print(json.dumps(summary, indent=1))
EOF
step "done"
