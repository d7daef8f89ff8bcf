#!/usr/bin/env bash
# Issue 28's plan/doctor speed, A/B on one device machine: bench/h200_speed.sh run for wheel A
# and wheel B alternately (A B A B), so both see the same machine, as it is then; B's second run
# also writes profiles (PROFILE=1). Everything lands in one archive, $OUT/speed-ab.tar.gz
# (a/1, b/1, a/2, b/2: each h200-speed.json, .log, doctor.json, plan.txt), plus $OUT/summary.txt.
# Usage, from the checkout's root: bench/h200_speed_ab.sh A_WHEEL_DIR B_WHEEL_DIR [DEPS_DIR]
set -u
a=$1; b=$2; deps=${3:-.device/wheels}
out=${OUT:-/tmp/out}; work=$(mktemp -d /tmp/speed-ab-XXXXXX)
for round in 1 2; do
  for side in a b; do
    dir=$a; [ $side = b ] && dir=$b
    profile=0; [ $side = b ] && [ $round = 2 ] && profile=1
    mkdir -p "$work/$side/$round"
    OUT=$work/$side/$round PROFILE=$profile COLLECT_ENV_RUNS=$([ $round = 1 ] && echo 3 || echo 1) \
      bash bench/h200_speed.sh "$dir" "$deps" >"$work/$side/$round/stdout.txt" 2>&1
    echo "$side round $round: exit $?" >>"$work/summary.txt"
  done
done
python3 - "$work" >>"$work/summary.txt" <<'PY'
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
names = ("python_startup", "detect_json", "plan", "doctor_json")
for path in sorted(root.glob("*/*/h200-speed.json")):
    data = json.loads(path.read_text())
    medians = " ".join(f"{n}={data[n]['median_s']:.3f}" for n in names)
    print(path.parent.relative_to(root), data["machine"].get("gpus"), medians,
          "collect_env", data["collect_env"].get("median_s"), "checks", len(data["doctor_checks"]))
PY
cp "$work/summary.txt" "$out/summary.txt"
tar czf "$out/speed-ab.tar.gz" -C "$work" .
