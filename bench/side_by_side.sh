#!/usr/bin/env bash
# Runs a Google Benchmark binary from two builds side by side, alternating rounds so both see
# the same machine noise, and prints each benchmark's median CPU time in both and the ratio.
#
#   bench/side_by_side.sh BEFORE_BIN_DIR AFTER_BIN_DIR BENCH [ROUNDS] [FILTER]
#   e.g. bench/side_by_side.sh /tmp/before/bin build/bin sim_bench 4 'BM_ModelDynamics/.*/10000'
set -euo pipefail
before=$1 after=$2 bench=$3 rounds=${4:-3} filter=${5:-.}
out=$(mktemp -d)
for round in $(seq "$rounds"); do
  for side in before after; do
    dir=$before
    [ "$side" = after ] && dir=$after
    "$dir/$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true --benchmark_format=json \
      >"$out/$side.$round.json" 2>/dev/null
  done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
times = {"before": {}, "after": {}}
for side in times:
    for r in range(1, rounds + 1):
        for b in json.load(open(f"{out}/{side}.{r}.json"))["benchmarks"]:
            if b.get("aggregate_name") == "median":
                times[side].setdefault(b["run_name"], []).append(b["cpu_time"])
print(f"{'benchmark':56} {'before':>12} {'after':>12} {'after/before':>12}")
for name, before in times["before"].items():
    after = times["after"].get(name)
    if not after:
        continue
    b, a = statistics.median(before), statistics.median(after)
    print(f"{name:56} {b:12.0f} {a:12.0f} {a / b:12.3f}")
PY
rm -rf "$out"
