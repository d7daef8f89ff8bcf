#!/usr/bin/env bash
# The H200 run of the lock (docs/evidence/lock-2026-12-03.md). On the GPU machine, from the repo
# root, with .lock-h200 (made by lock-2026-12-03-h200-setup.py) and .wheels (cuda-resolve's
# dependencies; no network there) carried:  bash docs/evidence/lock-2026-12-03-h200-run.sh
# A fresh venv sees the image's torch through a .pth file; the wheelhouse is served on loopback at
# the URL the lock names; `sync --name auto` must pick the h200 profile out of three, count the
# installed torch 2.11.0+cu130 as satisfied and install pointnet2_ops from the locked wheel (no
# compile); then its kernels are checked against torch. Everything lands in $OUT/lock-sync.log.
set -u
repo=$PWD; out=${OUT:-/tmp/out}; mkdir -p "$out"; log="$out/lock-sync.log"
rm -rf /tmp/site /tmp/locktarget /tmp/lockcache
python3 -m pip install -q --no-index --find-links .wheels --target /tmp/site . > "$out/lock-setup.log" 2>&1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 CUDA_RESOLVE_CACHE_DIR=/tmp/lockcache NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
cd /tmp  # not the checkout: its cuda_resolve/ would shadow the installed one
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv; python3 -c 'import sys, torch, packaging; print(sys.version.split()[0], torch.__version__, "packaging", packaging.__version__)'; } > "$log" 2>&1
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m venv /tmp/locktarget && echo "$base" > /tmp/locktarget/lib/python3.12/site-packages/base.pth
T=/tmp/locktarget/bin/python; L=$repo/.lock-h200/pylock.toml
$T -m pip freeze --all > "$out/lock-freeze-before.txt" 2>&1
python3 -m http.server 8765 --bind 127.0.0.1 --directory "$repo/.lock-h200/wheelhouse" > /dev/null 2>&1 & server=$!
sleep 1
for words in "--check --json" "--dry-run" "" "--check --json"; do
  echo "\$ cuda-resolve sync $L --name auto --python $T $words" >> "$log"
  /usr/bin/time -f "wall %e s" python3 -m cuda_resolve sync "$L" --name auto --python "$T" $words >> "$log" 2>&1
  echo "exit $?" >> "$log"
done
echo "\$ $T lock-2026-12-03-h200-kernels.py" >> "$log"
$T "$repo/docs/evidence/lock-2026-12-03-h200-kernels.py" >> "$log" 2>&1; echo "exit $?" >> "$log"
$T -m pip freeze --all > "$out/lock-freeze-after.txt" 2>&1
kill "$server"
cat "$log"
