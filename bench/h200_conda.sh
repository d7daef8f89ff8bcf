#!/usr/bin/env bash
# Issue 17 on the H200 (docs/evidence/conda-2026-12-03.md): real conda (from the fetched conda
# source, carried in .conda-h200/site with its cp312 dependencies; never committed) installs
# pointnet2_ops through the plugin: the inactive-plugin hint, `conda cuda activate`, a build at 9.0
# against the image's torch 2.11.0+cu130 converted to a .conda package and installed by conda's
# transaction, the GPU smoke test, conda list/doctor/remove, and `conda info` with and without the
# plugin (15 runs each). Usage from the repo root: bench/h200_conda.sh   (writes $OUT/conda-h200.txt)
set -u; export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1 HOME=/tmp/h; mkdir -p $HOME $OUT; PY=/opt/torch/.venv/bin/python; [ -x $PY ] || PY=$(command -v python3); P=$($PY -c 'import sys;print(sys.prefix)')
$PY -m pip install -q --no-deps --no-index --target /tmp/cr .conda-h200/wheels/cuda_resolve-0.1.0-py3-none-any.whl
export PYTHONPATH=/tmp/cr:$PWD/.conda-h200/site
mkdir -p $P/conda-meta /tmp/ch/noarch /tmp/ch/linux-64; touch $P/conda-meta/history
for d in noarch linux-64; do echo "{\"info\":{\"subdir\":\"$d\"},\"packages\":{},\"packages.conda\":{}}" >/tmp/ch/$d/repodata.json; done
printf 'solver: classic\nchannels: [file:///tmp/ch]\npkgs_dirs: [/tmp/pkgs]\nplugins:\n  cuda_resolve_sources: {pointnet2_ops: %s}\n' $PWD/.upstream/Pointnet2_PyTorch > $HOME/.condarc
C="$PY -m conda"; L=$OUT/conda-h200.txt
r() { echo "\$ $*" >>$L; /usr/bin/time -f "wall %e s" "$@" >>$L 2>&1; echo "[exit $?]" >>$L; }
r $C --version; r $C info; r $C install -y -p $P pointnet2_ops; r $C cuda activate; r $C install -y -p $P pointnet2_ops
r $C list -p $P '^(pointnet2_ops|torch)$'; r $C env config vars list -p $P
r $PY -c "from cuda_resolve.index import default_index as d; exec(d().package('pointnet2_ops').recipes[-1].smoke.gpu_script)"
r $C doctor -p $P cuda-resolve
r $C remove -y -p $P pointnet2_ops; r $C env config vars list -p $P
export CONDA_OVERRIDE_CUDA=; EP=$(ls -d /tmp/cr/cuda_resolve-*.dist-info)/entry_points.txt
for i in $(seq 15); do for m in with without; do [ $m = without ] && mv $EP $EP.x; s=$(date +%s%N); $C info >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e-s)/1000000 )) >>$OUT/$m.txt; [ $m = without ] && mv $EP.x $EP; done; done
for m in with without; do echo "conda info $m the plugin: median $(sort -n $OUT/$m.txt | sed -n 8p) ms, min $(sort -n $OUT/$m.txt | head -1) ms" | tee -a $L; done
