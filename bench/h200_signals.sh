#!/usr/bin/env bash
# Issue 15's signals on the H200: cuda-pip install pointnet2_ops is sent SIGTERM, then SIGHUP,
# while nvcc compiles. Each must exit 143 / 129 with one `error:` line, leave no nvcc, cicc,
# ptxas, ninja or pip running, no cuda-resolve-build-* folder and no wheel, and the target's
# `pip freeze --all` as before. Then one uninterrupted install, to show the next run is unharmed.
# Usage on the GPU machine, from the repo root: bench/h200_signals.sh SOURCE_DIR
# (SOURCE_DIR: the pointnet2_ops checkout, e.g. .upstream/Pointnet2_PyTorch; needs .wheels/ as
# bench/h200_plan_contract.sh does). Writes everything under $OUT.
set -u
src=$(realpath "$1"); out=${OUT:-/tmp/out}; mkdir -p "$out"
rm -rf /tmp/site /tmp/sig-target /tmp/sig-*
python3 -m pip install -q --no-index --find-links .wheels --target /tmp/site . >"$out/setup.log" 2>&1
export PYTHONPATH=/tmp/site PIP_FIND_LINKS=$PWD/.wheels PIP_NO_INDEX=1 PYTHONUNBUFFERED=1
cd /tmp  # not the checkout: its cuda_resolve/ would shadow the installed one
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m venv /tmp/sig-target && echo "$base" > /tmp/sig-target/lib/python3.12/site-packages/base.pth
T=/tmp/sig-target/bin/python
log="$out/signals.log"
$T -m pip freeze --all > "$out/freeze-before.txt"
for sig in TERM HUP; do
  export CUDA_RESOLVE_WHEELHOUSE=/tmp/sig-wh-$sig TMPDIR=/tmp/sig-tmp-$sig
  mkdir -p "$TMPDIR"
  echo "== SIG$sig" >>"$log"
  setsid python3 -m pip_plugin install pointnet2_ops --source "$src" --python "$T" >"$out/$sig.out" 2>"$out/$sig.err" &
  pid=$!
  for _ in $(seq 1200); do pgrep -x cicc >/dev/null || pgrep -x ptxas >/dev/null && break; sleep 0.1; done
  echo "compiling at the signal: $(pgrep -d ' ' -x 'nvcc|cicc|ptxas|ninja')" >>"$log"
  start=$(date +%s.%N); kill -"$sig" "$pid"; wait "$pid"; rc=$?; end=$(date +%s.%N)
  echo "exit $rc after $(python3 -c "print(round($end - $start, 2))") s" >>"$log"
  sleep 3
  echo "left 3 s later: $(pgrep -a -x 'nvcc|cicc|ptxas|ninja' ; pgrep -af 'pip wheel' | grep -v pgrep)" >>"$log"
  echo "build folders: $(ls "$TMPDIR")" >>"$log"
  echo "wheels: $(find "$CUDA_RESOLVE_WHEELHOUSE" -name '*.whl' 2>/dev/null)" >>"$log"
  $T -m pip freeze --all > "$out/freeze-after-$sig.txt"
  cmp -s "$out/freeze-before.txt" "$out/freeze-after-$sig.txt" && echo "pip freeze --all: equal" >>"$log" || echo "pip freeze --all: DIFFERENT" >>"$log"
  echo "stderr's error lines: $(grep -E '^(error|hint):' "$out/$sig.err")" >>"$log"
done
export CUDA_RESOLVE_WHEELHOUSE=/tmp/sig-wh-TERM TMPDIR=/tmp
echo "== uninterrupted" >>"$log"
{ time python3 -m pip_plugin install pointnet2_ops --source "$src" --python "$T" --smoke >"$out/after.out" 2>"$out/after.err"; } 2>>"$log"
echo "exit $? ; $(tail -2 "$out/after.err")" >>"$log"
cat "$log"
