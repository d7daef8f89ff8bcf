#!/usr/bin/env bash
# Issue 19, build times on the H200: what a source build of pointnet2_ops and kaolin costs through
# cuda-resolve, by hand, and as upstream documents it, and how pointnet2_ops' build time grows
# with the number of archs. bench/plot_build_times.py turns the TSV into a table and a PNG.
#
# Usage on the GPU machine, from the root of the checkout (needs .wheels/ as
# bench/h200_plan_contract.sh does, and the sources, which travel as ignored folders):
#   bench/h200_build_times.sh pointnet2 [--dry-run]   # .upstream/Pointnet2_PyTorch (POINTNET2_SRC)
#   bench/h200_build_times.sh kaolin [--dry-run]      # .kaolin-src (KAOLIN_SRC), kaolin master d52da9f
# Writes $OUT/build-times-PART.tsv (one row a step: the exact command, its wall time, exit
# status, outcome), $OUT/machine-PART.txt, and every log in $OUT/build-times-PART.tgz.
# A failed step never stops the others. The script stops starting steps when BUDGET_S
# (default 540 s, under the device's 600 s a command) would be exceeded, and records those
# steps as skipped; a running step is stopped at the budget's end (exit 124, "timed out").
# --dry-run prints each command and records it with status "dry", running nothing.
# ONLY=REGEX runs only the steps whose names match (e.g. ONLY='hand-tuned-[0-9]+' in a later
# session, when the budget cut the widest build). Overrides for trying it elsewhere: PY (the
# torch interpreter, default python3), CR_PY (the interpreter that runs cuda-resolve; set it and
# CR_SITE to skip installing cuda-resolve into /tmp/site), JOBS (default: the cores), GPU_ARCH.
set -u
part=${1:?usage: $0 pointnet2|kaolin [--dry-run]}
dry=0; [ "${2:-}" = --dry-run ] && dry=1
repo=$PWD; out=${OUT:-/tmp/out}; mkdir -p "$out/logs-$part"
PY=${PY:-python3}
JOBS=${JOBS:-$(nproc)}
BUDGET_S=${BUDGET_S:-540}
started=$(date +%s)
tsv=$out/build-times-$part.tsv
printf 'part\tstep\tn_archs\tarchs\trc\twall_s\toutcome\tcommand\n' >"$tsv"
W=/tmp/bt  # every scratch folder of this run
[ "$dry" = 1 ] || rm -rf "$W"
mkdir -p "$W"

pn2_src=$(realpath "${POINTNET2_SRC:-.upstream/Pointnet2_PyTorch}")
kaolin_src=$(realpath "${KAOLIN_SRC:-.kaolin-src}")

# cuda-resolve from the checkout, installed where the checkout's own cuda_resolve/ cannot shadow it.
if [ -n "${CR_SITE:-}" ]; then
  CR_PY=${CR_PY:-$PY}
else
  CR_PY=$PY; CR_SITE=/tmp/site
  if [ "$dry" = 0 ]; then
    rm -rf /tmp/site
    "$PY" -m pip install -q --no-index --find-links .wheels --target /tmp/site . >"$out/logs-$part/setup.log" 2>&1 \
      || echo "installing cuda-resolve failed: see logs-$part/setup.log" >>"$out/logs-$part/setup.log"
  fi
fi
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$repo/.wheels PIP_DISABLE_PIP_VERSION_CHECK=1
export CUDA_RESOLVE_CACHE_DIR=$W/cache  # cold: no probe cache, no build logs from earlier runs

# A target venv that sees the torch environment through a .pth file (what it gains is its own).
fresh_venv() {
  [ "$dry" = 1 ] && return 0
  "$PY" -m venv "$1" || return 1
  local base purelib
  base=$("$PY" -c 'import site; print(site.getsitepackages()[0])')
  purelib=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base" >"$purelib/base.pth"
}

# Why a step failed, in one line: the first line that names the cause.
outcome_of() {
  local log=$1 rc=$2
  if [ "$rc" = 0 ]; then echo ok; return; fi
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "timed out at the budget"; return; fi
  local line="" pattern
  # Most telling first: pip's own "error: subprocess-exited-with-error" comes before the cause.
  for pattern in 'nvcc fatal' 'Unsupported gpu architecture' 'fatal error:' 'No module named' \
      'Unknown CUDA arch' 'ImportError|ModuleNotFoundError' '[^ ]+:[0-9]+:[0-9]+: error:' '^error: ' '^ERROR: ' 'rror'; do
    line=$(grep -m1 -E "$pattern" "$log" 2>/dev/null | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^[[:space:]]*//' | cut -c1-300)
    [ -n "$line" ] && break
  done
  echo "failed (exit $rc): ${line:-see the log}"
}

# step NAME N_ARCHS ARCHS COMMAND...: runs COMMAND (from /tmp, its output to logs-PART/NAME.log,
# its stdout alone to $STDOUT_TO when that is set), and appends one TSV row. The row's command is
# the exact one, env assignments and redirection included.
step() {
  local name=$1 narch=$2 archs=$3; shift 3
  local log=$out/logs-$part/$name.log shown left t0 t1 rc wall
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ ^($ONLY)$ ]]; then return 0; fi
  shown=$(printf '%q ' "$@"); shown=${shown% }
  [ -n "${STDOUT_TO:-}" ] && shown="$shown > $STDOUT_TO"
  left=$(( started + BUDGET_S - $(date +%s) ))
  if [ "$dry" = 1 ]; then
    echo "[$name] $shown"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$part" "$name" "$narch" "$archs" dry "" "dry run" "$shown" >>"$tsv"
    return 0
  fi
  if [ "$left" -lt 15 ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$part" "$name" "$narch" "$archs" "" "" "skipped: device budget spent" "$shown" >>"$tsv"
    return 0
  fi
  echo "\$ $shown" >"$log"
  t0=$(date +%s.%N)
  if [ -n "${STDOUT_TO:-}" ]; then
    (cd /tmp && timeout --signal=INT --kill-after=10 "$left" "$@") >"$STDOUT_TO" 2>>"$log" </dev/null
  else
    (cd /tmp && timeout --signal=INT --kill-after=10 "$left" "$@") >>"$log" 2>&1 </dev/null
  fi
  rc=$?
  t1=$(date +%s.%N)
  wall=$("$PY" -c "print(f'{$t1 - $t0:.2f}')")
  echo "rc=$rc wall=${wall}s" >>"$log"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$part" "$name" "$narch" "$archs" "$rc" "$wall" "$(outcome_of "$log" "$rc")" "$shown" >>"$tsv"
  echo "[$name] rc=$rc ${wall}s"
}

# The build phase cuda-pip measured itself (its --json "timings"), as a row of its own.
phase_row() {
  local name=$1 json=$2 narch=$3 archs=$4
  [ "$dry" = 1 ] && return 0
  "$PY" - "$json" "$part" "$name" "$narch" "$archs" >>"$tsv" 2>>"$out/logs-$part/$name.log" <<'PY'
import json, sys
path, part, name, narch, archs = sys.argv[1:]
try:
    doc = json.load(open(path))
except (OSError, ValueError) as exc:
    sys.exit(f"no JSON report: {exc}")
result = doc.get("result", doc)
timings = result.get("timings") or {}
builds = {k: v for k, v in timings.items() if k.startswith("build")}
for key, seconds in builds.items():
    print(f"{part}\t{name}\t{narch}\t{archs}\t0\t{float(seconds):.2f}\tcuda-resolve's own measure: {key}\t(from {path.rsplit('/', 1)[-1]} timings)")
PY
}

# The archs a build can name: nvcc's list, less those this torch's cpp_extension refuses.
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1
  nvcc --version | tail -2
  echo "nvcc --list-gpu-arch: $(nvcc --list-gpu-arch 2>&1 | tr '\n' ' ')"
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  "$PY" -c 'import setuptools, numpy; print("setuptools", setuptools.__version__, "numpy", numpy.__version__)' 2>&1 | tail -1
  echo "ninja on PATH: $(command -v ninja || echo none)"
  echo "cores: $(nproc), MAX_JOBS: $JOBS; memory: $(free -g | awk '/Mem:/{print $2 " GiB"}')"
  echo "checkout: $(git -C "$repo" log --oneline -1 2>/dev/null || echo 'not a git checkout')"
} >"$out/machine-$part.txt" 2>&1
nvcc_archs=$(nvcc --list-gpu-arch 2>/dev/null | sed -n 's/^compute_\([0-9]*\)\([0-9]\)$/\1.\2/p' | tr '\n' ' ')
torch_archs=$(TORCH_ARCHS="$nvcc_archs" "$PY" - <<'PY' 2>>"$out/machine-$part.txt"
import os
from torch.utils.cpp_extension import _get_cuda_arch_flags
ok = []
for arch in os.environ["TORCH_ARCHS"].split():
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    try:
        _get_cuda_arch_flags()
        ok.append(arch)
    except ValueError:
        pass
print(";".join(sorted(ok, key=lambda a: tuple(int(x) for x in a.split(".")))))
PY
)
echo "archs nvcc lists: $nvcc_archs; of them torch's cpp_extension accepts: $torch_archs" | tee -a "$out/machine-$part.txt"
if [ -z "$torch_archs" ]; then  # torch could not be asked: every arch nvcc lists
  torch_archs=$(echo "$nvcc_archs" | xargs | tr ' ' ';')
  echo "torch's cpp_extension could not be asked: the widest build names every arch nvcc lists" | tee -a "$out/machine-$part.txt"
fi
gpu_arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
gpu_arch=${GPU_ARCH:-${gpu_arch:-9.0}}

# A hand-tuned build uses ninja as cuda-resolve's builds do (torch compiles one file at a time
# without it, and MAX_JOBS means nothing): from .wheels when the image has none.
if ! command -v ninja >/dev/null && [ "$dry" = 0 ]; then
  "$PY" -m pip install -q --target "$W/tools" ninja >>"$out/machine-$part.txt" 2>&1
  export PATH=$W/tools/bin:$PATH
  echo "ninja for hand-tuned builds: $(command -v ninja || echo none)" >>"$out/machine-$part.txt"
fi
# The wheel builds hand-tuned by a user: the environment's own pip, no isolation, env vars only.
hand_wheel() {  # NAME N ARCHS SRC [VAR=VALUE...]
  local name=$1 n=$2 archs=$3 src=$4; shift 4
  step "$name" "$n" "$archs" env TORCH_CUDA_ARCH_LIST="$archs" MAX_JOBS="$JOBS" "$@" \
    "$PY" -m pip wheel --no-build-isolation --no-deps --no-cache-dir -w "$W/dist-$name" "$src"
}
# A fresh copy of a source folder for each build, so nothing is reused from an earlier one.
copy_src() { [ "$dry" = 1 ] || { rm -rf "$2"; cp -a "$1" "$2"; }; }

case $part in
pointnet2)
  lib=pointnet2_ops_lib
  wh=$W/wheelhouse
  # 1. Upstream as its README says (pip install of the folder): pip's build isolation has no torch.
  fresh_venv "$W/t0"
  [ "$dry" = 1 ] || echo "README step's venv: $("$W/t0/bin/python" -m pip --version | cut -d' ' -f1-2); setuptools, wheel importable there: $("$W/t0/bin/python" -c 'import importlib.util as u; print([m for m in ("setuptools", "wheel") if u.find_spec(m)])')" >>"$out/machine-$part.txt"
  copy_src "$pn2_src/$lib" "$W/pn2-readme"
  step upstream-readme 7 "3.7+PTX;5.0;6.0;6.1;6.2;7.0;7.5" "$W/t0/bin/python" -m pip install "$W/pn2-readme"
  # 2. Upstream's setup.py unmodified, built the way issue #180 says (no isolation): it assigns
  # its own arch list over TORCH_CUDA_ARCH_LIST, which nvcc 13 cannot target.
  copy_src "$pn2_src/$lib" "$W/pn2-unmodified"
  step upstream-unmodified 7 "3.7+PTX;5.0;6.0;6.1;6.2;7.0;7.5" env TORCH_CUDA_ARCH_LIST="$gpu_arch" MAX_JOBS="$JOBS" \
    "$PY" -m pip wheel --no-build-isolation --no-deps --no-cache-dir -w "$W/dist-upstream-unmodified" "$W/pn2-unmodified"
  # 3. cuda-pip, cold: empty wheelhouse, empty cache, a fresh venv.
  fresh_venv "$W/t1"
  STDOUT_TO=$out/logs-$part/cuda-pip-cold.json step cuda-pip-cold 1 "$gpu_arch" \
    env PYTHONPATH="$CR_SITE" CUDA_RESOLVE_WHEELHOUSE="$wh" \
    "$CR_PY" -m pip_plugin install pointnet2_ops --source "$pn2_src" --python "$W/t1/bin/python" --json
  phase_row cuda-pip-cold-build "$out/logs-$part/cuda-pip-cold.json" 1 "$gpu_arch"
  # 4. Cache hits: the wheelhouse's wheel into another fresh venv; then the same venv again (kept).
  fresh_venv "$W/t2"
  step cuda-pip-cache-hit 1 "$gpu_arch" env PYTHONPATH="$CR_SITE" CUDA_RESOLVE_WHEELHOUSE="$wh" \
    "$CR_PY" -m pip_plugin install pointnet2_ops --source "$pn2_src" --python "$W/t2/bin/python"
  step cuda-pip-installed-again 1 "$gpu_arch" env PYTHONPATH="$CR_SITE" CUDA_RESOLVE_WHEELHOUSE="$wh" \
    "$CR_PY" -m pip_plugin install pointnet2_ops --source "$pn2_src" --python "$W/t2/bin/python"
  # The installed wheel runs: the recipe's GPU smoke test (kept, so no build or pip here).
  step cuda-pip-smoke 1 "$gpu_arch" env PYTHONPATH="$CR_SITE" CUDA_RESOLVE_WHEELHOUSE="$wh" \
    "$CR_PY" -m pip_plugin install pointnet2_ops --source "$pn2_src" --python "$W/t2/bin/python" --smoke
  # 5. Hand-tuned: the one line of setup.py that overrides TORCH_CUDA_ARCH_LIST made a default
  # (issue #180's fix), then pip wheel at 1, 2, 4 and every arch, each from a fresh copy.
  two="8.0;$gpu_arch"; four="8.0;8.6;8.9;$gpu_arch"
  [ "$gpu_arch" = 8.0 ] && two="8.0;9.0" && four="8.0;8.6;8.9;9.0"
  n_all=$(echo "$torch_archs" | tr ';' '\n' | grep -c .)
  for spec in "1 $gpu_arch" "2 $two" "4 $four" "$n_all $torch_archs"; do
    n=${spec%% *}; archs=${spec#* }
    copy_src "$pn2_src/$lib" "$W/pn2-hand-$n"
    [ "$dry" = 1 ] || sed -i 's/^os.environ\["TORCH_CUDA_ARCH_LIST"\] = \(.*\)$/os.environ.setdefault("TORCH_CUDA_ARCH_LIST", \1)/' "$W/pn2-hand-$n/setup.py"
    [ "$dry" = 1 ] || grep -q 'setdefault("TORCH_CUDA_ARCH_LIST"' "$W/pn2-hand-$n/setup.py" || echo "setup.py patch did not apply" >>"$out/machine-$part.txt"
    hand_wheel "hand-tuned-$n" "$n" "$archs" "$W/pn2-hand-$n"
  done
  ;;
kaolin)
  wh=$W/wheelhouse
  # 1. cuda-resolve build, cold (the recipe kaolin-master-d52da9f, detected arch).
  STDOUT_TO=$out/logs-$part/cuda-resolve-build.json step cuda-resolve-build 1 "$gpu_arch" \
    env PYTHONPATH="$CR_SITE" CUDA_RESOLVE_WHEELHOUSE="$wh" \
    "$CR_PY" -m cuda_resolve build kaolin --source "$kaolin_src" --python "$(command -v "$PY")" --json
  # 2. Hand-tuned pip wheel at the one arch, as kaolin's docs build it (FORCE_CUDA, no isolation).
  copy_src "$kaolin_src" "$W/kaolin-hand"
  hand_wheel hand-tuned-1 1 "$gpu_arch" "$W/kaolin-hand" FORCE_CUDA=1
  # 3. Cache hit: cuda-pip install from the wheelhouse (kaolin's runtime requirements, warp-lang
  # and usd-core, cannot travel: --no-deps, no import check); then kaolin._C runs on the GPU.
  fresh_venv "$W/t1"
  step cuda-pip-cache-hit 1 "$gpu_arch" env PYTHONPATH="$CR_SITE" CUDA_RESOLVE_WHEELHOUSE="$wh" \
    "$CR_PY" -m pip_plugin install kaolin --source "$kaolin_src" --python "$W/t1/bin/python" --no-deps --no-verify
  step kaolin-c-check 1 "$gpu_arch" "$W/t1/bin/python" "$repo/bench/kaolin_c_check.py"
  # 4. kaolin's setup.py left to its defaults (no FORCE_CUDA, no TORCH_CUDA_ARCH_LIST): on a GPU
  # machine torch picks the GPU's arch and adds PTX. Last, as the budget allows.
  copy_src "$kaolin_src" "$W/kaolin-defaults"
  step upstream-defaults 1 "$gpu_arch+PTX" env MAX_JOBS="$JOBS" \
    "$PY" -m pip wheel --no-build-isolation --no-deps --no-cache-dir -w "$W/dist-upstream-defaults" "$W/kaolin-defaults"
  ;;
*) echo "unknown part $part (pointnet2 or kaolin)" >&2; exit 2 ;;
esac

ls -l "$W"/dist-*/ "$wh"/wheels/*/*/ >"$out/logs-$part/wheels.txt" 2>&1
cp -r "$CUDA_RESOLVE_CACHE_DIR/logs" "$out/logs-$part/cuda-resolve-logs" 2>/dev/null
cat "$tsv"
# The device returns few files: the logs travel in one archive, the TSV and machine facts beside it.
if [ "$dry" = 0 ]; then
  tar -czf "$out/build-times-$part.tgz" -C "$out" "logs-$part" && rm -rf "${out:?}/logs-$part"
fi
