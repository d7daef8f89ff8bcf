#!/usr/bin/env bash
# The H200 evidence run for issue 7 (docs/evidence/h200-install-2026-12-02.md records what it printed).
# Usage on the GPU machine, from the repo root: bench/h200_run.sh STEP SOURCE_DIR
#   STEP: pointnet2 | kaolin. SOURCE_DIR: a copy of the recipe's repository (the machine has no network).
# Needs cuda-resolve's dependencies importable (PYTHONPATH) and writes logs under $OUT.
set -u
step=$1; src=$2; out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 CUDA_RESOLVE_WHEELHOUSE=${CUDA_RESOLVE_WHEELHOUSE:-/tmp/wheelhouse}
# A fresh target venv that sees the image's torch through a .pth file, so what cuda-pip installs
# lands in (and is measured by pip freeze of) the fresh venv alone.
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
if [ ! -x /tmp/target/bin/python ]; then
  python3 -m venv /tmp/target && echo "$base" > /tmp/target/lib/python3.12/site-packages/base.pth
fi
export VIRTUAL_ENV=/tmp/target
run() { echo "\$ $*" | tee -a "$out/$step.log"; /usr/bin/time -f "wall %e s" "$@" 2>&1 | tee -a "$out/$step.log"; }
/tmp/target/bin/python -m pip freeze --all > "$out/$step-freeze-before.txt"
case $step in
pointnet2)
  run python3 -m cuda_resolve plan pointnet2_ops
  run python3 -m pip_plugin install pointnet2_ops --source "$src" --smoke
  /tmp/target/bin/python -m pip freeze --all > "$out/$step-freeze-after.txt"
  run python3 -m pip_plugin install pointnet2_ops --source "$src"
  run python3 -m pip_plugin install pointnet2_ops --source "$src" --arch-list 3.7
  run python3 -m cuda_resolve wheelhouse list
  run python3 bench/install_speed.py pointnet2_ops --source "$src" --debug-variant --json "$out/install_speed.json" --log "$out/install_speed.log"
  ;;
kaolin)
  run python3 -m cuda_resolve plan kaolin
  # warp-lang and usd-core cannot travel here: pip gets --no-deps, the import check is skipped,
  # and the compiled ops are exercised through kaolin._C.
  run python3 -m pip_plugin install kaolin --source "$src" --no-deps --no-verify
  /tmp/target/bin/python -m pip freeze --all > "$out/$step-freeze-after.txt"
  run /tmp/target/bin/python bench/kaolin_c_check.py
  run python3 -m pip_plugin install kaolin --source "$src" --no-deps --no-verify
  ;;
esac
tar -czf "$out/$step-build-logs.tgz" -C "${CUDA_RESOLVE_CACHE_DIR:-$HOME/.cache/cuda-resolve}" logs 2>/dev/null || true
