#!/usr/bin/env bash
# Where plan and doctor --json spend their time on the H200 (issue 28's absolute goals): each
# run warm, then under cProfile, the installed wheel (a tool venv, as bench/h200_speed.sh makes
# one) against a target venv that sees the image's torch. Writes $OUT/profile.txt: the 35
# costliest functions of each by cumulative time, and python -X importtime's 25 slowest imports.
# Usage: bench/h200_profile.sh TOOL_BIN   (e.g. /tmp/first-install/tool/bin)
set -u
B=$1; out=${OUT:-/tmp/out}; mkdir -p "$out"; report="$out/profile.txt"; : >"$report"
base=$(python3 -c 'import site; print(site.getsitepackages()[0])')
rm -rf /tmp/profile-target && python3 -m venv /tmp/profile-target
echo "$base" >/tmp/profile-target/lib/python3.12/site-packages/base.pth
T=/tmp/profile-target/bin/python
cd /
for words in "plan pointnet2_ops kaolin" "doctor --json" "detect --json"; do
  for _ in 1 2 3; do "$B/cuda-resolve" $words --python "$T" >/dev/null 2>&1; done  # warm
  name=${words%% *}
  "$B/python" -m cProfile -o "/tmp/$name.prof" -m cuda_resolve $words --python "$T" >/dev/null 2>&1
  { echo "===== cuda-resolve $words (cProfile, cumulative)"
    "$B/python" -c 'import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats("cumulative").print_stats(35)' \
      "/tmp/$name.prof" | tail -n +7 | cut -c1-160
    echo "===== cuda-resolve $words (python -X importtime, slowest 25 by cumulative us)"
    "$B/python" -X importtime -m cuda_resolve $words --python "$T" 2>&1 >/dev/null \
      | sort -t'|' -k2 -n -r | head -25
  } >>"$report"
done
