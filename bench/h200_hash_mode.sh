#!/usr/bin/env bash
# Issue 15's hash-checking mode on the H200 (docs/evidence/h200-hash-mode-*.md records it):
# `PIP_REQUIRE_HASHES=1 cuda-pip install pointnet2_ops` into a venv that sees the image's torch.
# Where the target lacks a build tool the first run is refused before any build, naming it, and
# the tool is then installed from a hashed requirements file; either way the build
# runs, pip installs the wheel in --require-hashes mode as `name @ file://...#sha256=H`, H is the
# wheelhouse file's sha256, and the GPU smoke test passes.
# Usage on the GPU machine, from the repo root: bench/h200_hash_mode.sh SOURCE_DIR (the Pointnet2_PyTorch root)
# Needs cuda-resolve's dependencies and ninja in .wheels/ (no network there); writes under $OUT.
set -u
src=$(realpath "$1"); out=${OUT:-/tmp/out}; mkdir -p "$out"
wheels=$PWD/.wheels
rm -rf /tmp/site /tmp/hm-*
python3 -m pip install -q --no-index --find-links .wheels --target /tmp/site . >"$out/setup.log" 2>&1
export PYTHONPATH=/tmp/site PIP_FIND_LINKS=$wheels PIP_NO_INDEX=1 PYTHONUNBUFFERED=1
cd /tmp  # not the checkout: its cuda_resolve/ would shadow the installed one
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m venv /tmp/hm-target && echo "$base" > /tmp/hm-target/lib/python3.12/site-packages/base.pth
T=/tmp/hm-target/bin/python
log="$out/hash-mode.log"
export CUDA_RESOLVE_WHEELHOUSE=/tmp/hm-wh PIP_REQUIRE_HASHES=1
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; nvcc --version | tail -1;
  $T -c 'import torch; print("torch", torch.__version__)'; $T -m pip --version; } >>"$log" 2>&1
echo "== 1. PIP_REQUIRE_HASHES=1 cuda-pip install pointnet2_ops --source SRC --python T" >>"$log"
python3 -m pip_plugin install pointnet2_ops --source "$src" --python "$T" --smoke --json >"$out/first.json" 2>"$out/first.err"
echo "exit $?; $(grep -E '^(error|hint):' "$out/first.err")" >>"$log"
echo "wheels built: $(find /tmp/hm-wh -name '*.whl' 2>/dev/null | wc -l)" >>"$log"
echo "== 2. the build tools the refusal named, installed with hashes" >>"$log"
: >/tmp/hm-tools.txt
for name in setuptools wheel ninja; do
  $T -c "import importlib.metadata as m, sys; print('$name', m.version('$name'), 'is installed')" >>"$log" 2>/dev/null && continue
  file=$(ls "$wheels" | grep -i "^${name}-" | head -1)
  version=$(echo "$file" | cut -d- -f2)
  echo "$name==$version --hash=sha256:$(sha256sum "$wheels/$file" | cut -d' ' -f1)" >>/tmp/hm-tools.txt
done
cat /tmp/hm-tools.txt >>"$log"
$T -m pip install -q --no-index --find-links "$wheels" -r /tmp/hm-tools.txt >>"$log" 2>&1; echo "exit $?" >>"$log"
echo "== 3. the same command again, with --smoke" >>"$log"
TIMEFORMAT='wall %R s'
{ time python3 -m pip_plugin install pointnet2_ops --source "$src" --python "$T" --smoke --json >"$out/second.json" 2>"$out/second.err"; } 2>>"$log"
echo "exit $?; $(grep -E '^(error|hint):' "$out/second.err")" >>"$log"
for report in first second; do
echo "-- $report.json" >>"$log"
python3 - "$out/$report.json" >>"$log" 2>&1 <<'PY'
import hashlib, json, sys, urllib.parse
report = json.load(open(sys.argv[1]))
runs = report["result"]["pip_runs"]
print("pip runs:")
for run in runs:
    print("  ", " ".join(run))
refs = [w for run in runs for w in run if " @ file://" in w]
for ref in refs:
    url, _, sha = ref.split(" @ ", 1)[1].partition("#sha256=")
    path = urllib.parse.unquote(urllib.parse.urlparse(url).path)
    real = hashlib.sha256(open(path, "rb").read()).hexdigest()
    print(f"{ref.split(' @ ')[0]}: sha256 in the pip run {sha[:16]}..., of the file {real[:16]}...: {'equal' if real == sha else 'DIFFERENT'}")
print("--require-hashes in every run:", all("--require-hashes" in run for run in runs))
print("smoke:", report["result"].get("smoke"))
print("changed:", report["result"].get("changed"))
PY
done
cat "$log"
