#!/usr/bin/env bash
# The H200 evidence run for issue 18 part 1: a lab's wheelhouse served by pypiserver on loopback.
# Usage on the GPU machine, from the repo root: bench/h200_wheelhouse_served.sh STEP SOURCE_DIR
#   STEP: build | serve (build first; each stays under 10 minutes). SOURCE_DIR: a copy of
#   pointnet2_ops's repository (no network there), e.g. .upstream/Pointnet2_PyTorch.
#   Carry: .wheels (cuda-resolve's dependencies, pypiserver, passlib and theirs, cp312/py3) and
#   .upstream. Writes everything under $OUT.
# build: machine A (its own venv, cache and wheelhouse) builds pointnet2_ops twice: for 8.0;8.9
#   (no kernels for the H200's 9.0) and for 8.0;9.0.
# serve: pypiserver with password auth on 127.0.0.1:8080; A publishes the 8.0;8.9 wheel
#   (first without credentials: refused), machine C (fresh venv, cache and wheelhouse, the
#   server configured) plans: a local build, nothing taken; A publishes again (8.0;9.0 goes up,
#   8.0;8.9 is already there); machine B (fresh) installs pointnet2_ops from the server with no
#   compile and runs its kernel; a tampered copy on the server is then refused by machine D.
set -u
step=$1; src=$2; out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 NO_PROXY=127.0.0.1,localhost
# Its own target folder: another run's /tmp/site may hold an older cuda-resolve.
if [ ! -f /tmp/site18/cuda_resolve/wheelhouse/served.py ]; then
  python3 -m pip install -q --no-index --find-links .wheels --target /tmp/site18 . > "$out/setup.log" 2>&1
fi
if [ ! -d /tmp/pypiserver-site/pypiserver ]; then
  python3 -m pip install -q --no-index --find-links .wheels --target /tmp/pypiserver-site pypiserver passlib >> "$out/setup.log" 2>&1
fi
export PYTHONPATH=/tmp/site18
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
venv() { [ -x "/tmp/$1/bin/python" ] || { python3 -m venv "/tmp/$1" && echo "$base" > "/tmp/$1/lib/python3.12/site-packages/base.pth"; }; }
log() { echo "\$ $*" >> "$out/$step.log"; }
run() { log "$@"; /usr/bin/time -f "wall %e s, exit %x" "$@" >> "$out/$step.log" 2>&1; }
machine() {  # machine NAME: the environment of one "machine" (its venv, cache, wheelhouse, home)
  venv "m$1"; mkdir -p "/tmp/$1-home"
  echo "VIRTUAL_ENV=/tmp/m$1 HOME=/tmp/$1-home CUDA_RESOLVE_CACHE_DIR=/tmp/$1-cache CUDA_RESOLVE_WHEELHOUSE=/tmp/$1-wh CUDA_RESOLVE_CONFIG=/tmp/$1-home/config.toml"
}
date -u > "$out/$step-date.txt"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv >> "$out/$step-date.txt" 2>&1
case $step in
build)
  A=$(machine a)
  run env $A python3 -m cuda_resolve build pointnet2_ops --source "$src" --arch-list '8.0;8.9'
  run env $A python3 -m cuda_resolve build pointnet2_ops --source "$src" --arch-list '8.0;9.0'
  run env $A python3 -m cuda_resolve wheelhouse list
  ;;
serve)
  A=$(machine a); B=$(machine b); C=$(machine c); D=$(machine d)
  mkdir -p /tmp/pkgs
  PYTHONPATH=/tmp/pypiserver-site python3 -c 'from passlib.apache import HtpasswdFile as H; f = H("/tmp/htpasswd", new=True); f.set_password("builder", "lab-pw-2026"); f.save()'
  PYTHONPATH=/tmp/pypiserver-site python3 -m pypiserver run -p 8080 -i 127.0.0.1 -a update -P /tmp/htpasswd /tmp/pkgs > "$out/pypiserver.log" 2>&1 &
  server=$!
  sleep 3
  url=http://127.0.0.1:8080
  # A: the 8.0;8.9 wheel only; no credentials first (refused, exit 2), then the URL's.
  mv /tmp/a-wh/wheels/pointnet2-ops /tmp/a-wh-all && mkdir -p /tmp/a-wh/wheels/pointnet2-ops
  mv "$(dirname "$(ls /tmp/a-wh-all/*/pointnet2_ops-*sm80.sm89.r*.whl)")" /tmp/a-wh/wheels/pointnet2-ops/
  run env $A python3 -m cuda_resolve wheelhouse publish --to "$url/"
  run env $A python3 -m cuda_resolve wheelhouse publish --to "http://builder:lab-pw-2026@127.0.0.1:8080/"
  # C: the server serves only 8.0;8.9: C plans a build (reused: null), takes nothing.
  run env $C CUDA_RESOLVE_WHEELHOUSE_URL="$url/simple/" python3 -m cuda_resolve plan pointnet2_ops --python /tmp/mc/bin/python --json
  run env $C python3 -m cuda_resolve wheelhouse list
  # A publishes everything: 8.0;9.0 uploaded, 8.0;8.9 already there.
  mv /tmp/a-wh-all/* /tmp/a-wh/wheels/pointnet2-ops/ 2>/dev/null
  printf '[distutils]\nindex-servers = lab\n[lab]\nrepository = %s/\nusername = builder\npassword = lab-pw-2026\n' "$url" > /tmp/a-home/.pypirc
  run env $A python3 -m cuda_resolve wheelhouse publish --to lab --json
  run curl -s "$url/simple/pointnet2-ops/"
  # B: fresh; the server in its config file; installs with no compile, then the kernel runs.
  echo "wheelhouse_url = \"$url/simple/\"" > /tmp/b-home/config.toml
  run env $B python3 -m cuda_resolve plan pointnet2_ops --python /tmp/mb/bin/python
  run env $B python3 -m pip_plugin install pointnet2_ops --python /tmp/mb/bin/python --smoke
  run env $B python3 -m cuda_resolve wheelhouse list
  run /tmp/mb/bin/python -m pip show pointnet2_ops
  run /tmp/mb/bin/python -c 'import torch; from pointnet2_ops import pointnet2_utils as u; x = torch.rand(1, 128, 3, device="cuda"); print(u.furthest_point_sample(x, 16)); torch.cuda.synchronize()'
  grep -c "nvcc" "$out/serve.log" > "$out/nvcc-mentions.txt"
  # D: the served 8.0;9.0 wheel's bytes changed on the server after its page was made: refused.
  run env $D CUDA_RESOLVE_WHEELHOUSE_URL="$url/simple/" python3 -c '
import os
from cuda_resolve.wheelhouse.served import ServedIndex
from cuda_resolve.wheelhouse.store import Wheelhouse
from cuda_resolve.wheelhouse.rewrite import read_wheel_key
import glob
served = ServedIndex(os.environ["CUDA_RESOLVE_WHEELHOUSE_URL"], origin="test")
wheel = glob.glob("/tmp/pkgs/pointnet2_ops-*sm80.sm90.r*.whl")[0]
key = read_wheel_key(__import__("pathlib").Path(wheel))
from cuda_resolve.wheelhouse import served as s
listed = s._links(s.project_files(served.client(), served.url, "pointnet2-ops", ttl=0))
with open(wheel, "r+b") as f: f.seek(200); f.write(b"tampered")
served.wheels = lambda package: listed  # the page as it was before the change
from cuda_resolve.versions import ComputeCapability
print(served.fetch_into(Wheelhouse.default(), key.query().with_arch_list("9.0"), [ComputeCapability(9, 0)]))'
  kill "$server"
  ;;
esac
