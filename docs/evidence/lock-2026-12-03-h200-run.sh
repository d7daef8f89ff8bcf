#!/usr/bin/env bash
# On the H200, from the repo root, with .lock-h200 carried (made by lock-2026-12-03-h200-setup.py):
#   bash docs/evidence/lock-2026-12-03-h200-run.sh     (writes $OUT/lock-sync.log and lock-freeze-*.txt)
# A fresh venv sees the image's torch through a .pth file; the wheelhouse is served on loopback
# at the URL the lock names; sync --name auto must pick the h200 profile, count torch as installed
# and install pointnet2_ops from the locked wheel; then its kernels are checked against torch.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; log="$out/lock-sync.log"
export CUDA_RESOLVE_CACHE_DIR=/tmp/lockcache NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost PYTHONUNBUFFERED=1
python3 -c 'import sys, packaging; print("python", sys.version.split()[0], "packaging", packaging.__version__)' > "$log" 2>&1
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
[ -x /tmp/locktarget/bin/python ] || { python3 -m venv /tmp/locktarget && echo "$base" > /tmp/locktarget/lib/python3.12/site-packages/base.pth; }
T=/tmp/locktarget/bin/python; L=.lock-h200/pylock.toml
$T -m pip freeze --all > "$out/lock-freeze-before.txt" 2>&1
python3 -m http.server 8765 --bind 127.0.0.1 --directory .lock-h200/wheelhouse > /dev/null 2>&1 & server=$!
sleep 1
for words in "--check --json" "--dry-run" "" "--check --json"; do
  echo "\$ cuda-resolve sync $L --name auto --python $T $words" >> "$log"
  /usr/bin/time -f "wall %e s" python3 -m cuda_resolve sync "$L" --name auto --python "$T" $words >> "$log" 2>&1
  echo "exit $?" >> "$log"
done
echo "\$ $T docs/evidence/lock-2026-12-03-h200-kernels.py" >> "$log"
$T docs/evidence/lock-2026-12-03-h200-kernels.py >> "$log" 2>&1; echo "exit $?" >> "$log"
$T -m pip freeze --all > "$out/lock-freeze-after.txt" 2>&1
kill "$server"
cat "$log"
