#!/usr/bin/env bash
# The H200 evidence run for issue 20: doctor predicts "no kernel image" and "undefined symbol".
# Usage on the GPU machine, from the repo root: bench/h200_doctor_kernels.sh STEP SOURCE_DIR
#   STEP: sm90 | sm8086. SOURCE_DIR: a copy of pointnet2_ops's repository (no network there),
#   e.g. .upstream/Pointnet2_PyTorch. Writes everything under $OUT.
# sm90: doctor over the image's own interpreter and torch, then over a fresh venv (seeing the
#   image's torch through a .pth file) after `cuda-pip install pointnet2_ops` built it for the
#   H200 (sm_90): both must pass the extension-kernels and extension-symbols checks; doctor runs
#   twice there (cold, then warm: the scan's cache). The reader is compared with cuobjdump.
# sm8086: pointnet2_ops built for 8.0;8.6 (the GPUs given by CUDA_RESOLVE_CUDA_ARCH, as a build
#   for other machines must be), installed with plain pip into another fresh venv: doctor must
#   report an extension-kernels error for the H200, and the extension's kernel must then fail
#   with "no kernel image is available for execution on the device".
set -u
step=$1; src=$2; out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 CUDA_RESOLVE_WHEELHOUSE=${CUDA_RESOLVE_WHEELHOUSE:-/tmp/wh}
if [ ! -d /tmp/site/cuda_resolve ]; then
  python3 -m pip install -q --no-index --find-links .wheels --target /tmp/site . > "$out/setup.log" 2>&1
fi
export PYTHONPATH=/tmp/site
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
venv() { [ -x "/tmp/$1/bin/python" ] || { python3 -m venv "/tmp/$1" && echo "$base" > "/tmp/$1/lib/python3.12/site-packages/base.pth"; }; }
log() { echo "\$ $*" >> "$out/$step.log"; }
run() { log "$@"; /usr/bin/time -f "wall %e s, exit %x" "$@" >> "$out/$step.log" 2>&1; }
doctor() {  # doctor NAME PYTHON: text and JSON, timed
  log "cuda-resolve doctor --python $2 --json > $1.json"
  /usr/bin/time -f "$1: wall %e s, exit %x" -a -o "$out/$step.log" python3 -m cuda_resolve doctor --python "$2" --json > "$out/$1.json" 2>> "$out/$step.log"
  python3 -m cuda_resolve doctor --python "$2" > "$out/$1.txt" 2>&1
}
reader() {  # the fat binary reader vs cuobjdump, on each file given
  for f in "$@"; do
    log "read_kernel_images $f; cuobjdump --list-elf/--list-ptx $f"
    python3 -c 'import sys, pathlib; from cuda_resolve.fatbin import read_kernel_images as r; k = r(pathlib.Path(sys.argv[1])); print("reader:", k and k.names(), "entries:", k and k.entries)' "$f" >> "$out/$step.log" 2>&1
    { /usr/local/cuda/bin/cuobjdump --list-elf "$f"; /usr/local/cuda/bin/cuobjdump --list-ptx "$f"; } 2>&1 | sed -E 's/.*\.((sm|compute)_[0-9]+[af]?)\.(cubin|ptx)$/\1 \3/' | sort | uniq -c >> "$out/$step.log"
  done
}
date -u > "$out/$step-date.txt"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv >> "$out/$step-date.txt" 2>&1
case $step in
sm90)
  doctor doctor-image "$(command -v python3)"
  venv t90
  run env VIRTUAL_ENV=/tmp/t90 python3 -m pip_plugin install pointnet2_ops --source "$src" --smoke
  doctor doctor-t90-cold /tmp/t90/bin/python
  doctor doctor-t90-warm /tmp/t90/bin/python
  torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  reader /tmp/t90/lib/python3.12/site-packages/pointnet2_ops/_ext*.so "$torch_lib/libtorch_cuda.so"
  ;;
sm8086)
  venv t86
  run env VIRTUAL_ENV=/tmp/t86 CUDA_RESOLVE_CUDA_ARCH=8.0,8.6 python3 -m cuda_resolve build pointnet2_ops --source "$src" --arch-list '8.0;8.6'
  wheel=$(ls "$CUDA_RESOLVE_WHEELHOUSE"/wheels/pointnet2-ops/*/pointnet2_ops-*sm80.sm86*.whl | head -1)
  log "kernel_gaps $wheel (9.0)"
  python3 -c 'import sys, pathlib; from cuda_resolve.fatbin import kernel_gaps; from cuda_resolve.versions import ComputeCapability as C; print([g.describe() for g in kernel_gaps(pathlib.Path(sys.argv[1]), [C.parse("9.0")])])' "$wheel" >> "$out/$step.log" 2>&1
  run /tmp/t86/bin/python -m pip install --no-index --no-deps "$wheel"
  doctor doctor-t86 /tmp/t86/bin/python
  reader /tmp/t86/lib/python3.12/site-packages/pointnet2_ops/_ext*.so
  run /tmp/t86/bin/python -c 'import torch; from pointnet2_ops import pointnet2_utils as u; x = torch.rand(1, 128, 3, device="cuda"); print(u.furthest_point_sample(x, 16)); torch.cuda.synchronize()'
  ;;
esac
