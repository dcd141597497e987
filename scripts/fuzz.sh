#!/usr/bin/env bash
# Builds (in build-fuzz/, clang, libFuzzer + ASan + UBSan) and runs one fuzzer for SECONDS
# seconds on a copy of its seed corpus, then prints how many inputs it ran.
#   scripts/fuzz.sh request_fuzzer|scenario_fuzzer|command_fuzzer|recording_fuzzer SECONDS
#                   [libFuzzer flags]
# The copy lives in build-fuzz/corpus/TARGET/ and grows between runs; the repo's corpus
# (fuzz/corpus/TARGET/, plus scenarios/*.textproto for scenario_fuzzer) is only read, unless
# PITLANE_FUZZ_MERGE=1, which merges the new interesting inputs back into it (minimized).
# A crash leaves its reproducer in build-fuzz/artifacts/; rerun it with
#   build-fuzz/bin/TARGET build-fuzz/artifacts/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: $0 request_fuzzer|scenario_fuzzer|command_fuzzer|recording_fuzzer SECONDS" \
    "[libFuzzer flags]" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
case "$target" in
  request_fuzzer|scenario_fuzzer|command_fuzzer|recording_fuzzer) ;;
  *) echo "fuzz.sh: unknown target $target" >&2; exit 2 ;;
esac

export CCACHE_BASEDIR=$PWD  # Cache hits across checkouts.
export PATH=/usr/lib/llvm-14/bin:$PATH  # llvm-symbolizer, for reports with file:line.
build_dir=build-fuzz
scripts/check-sanitizers.sh configure  # Sets up too.
cmake --build "$build_dir" -j2 --target "$target"

corpus=$build_dir/corpus/$target
artifacts=$build_dir/artifacts
mkdir -p "$corpus" "$artifacts"
seeds=("fuzz/corpus/$target")
if [ "$target" = scenario_fuzzer ]; then seeds+=(scenarios); fi
for dir in "${seeds[@]}"; do
  find "$dir" -maxdepth 1 -type f -exec cp -n -t "$corpus" {} +
done

# Scenario text needs room (the shipped scenarios run to 16 KB, highway's 190 KB is cut
# there); binary requests and command sequences stay small.
max_len=4096
if [ "$target" = scenario_fuzzer ]; then max_len=16384; fi
# A recording's seeds are whole small files.
if [ "$target" = recording_fuzzer ]; then max_len=65536; fi
extra=()
# command_fuzzer's inputs reach tens of thousands of coverage features, and libFuzzer's
# entropic scheduler then spends most of its time re-weighting them (57 % of the run under
# perf): without it the target runs 3-4x the inputs per second.
if [ "$target" = command_fuzzer ]; then extra+=(-entropic=0); fi
log=$build_dir/$target.log
status=0
"$build_dir/bin/$target" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts/" "${extra[@]}" "$@" "$corpus" \
  >"$log" 2>&1 || status=$?
# The progress lines and any report, without libFuzzer's dictionary.
grep -E '^#[0-9]+[[:space:]]|==[0-9]+==.*ERROR|SUMMARY|Test unit written|fuzz check failed' "$log" | tail -n 12 || true
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
echo "fuzz.sh: $target ran ${executions:-?} inputs (at most ${seconds} s; status $status; log $log)"
if [ "${PITLANE_FUZZ_MERGE:-0}" = 1 ] && [ "$status" = 0 ]; then
  "$build_dir/bin/$target" -merge=1 -max_len="$max_len" "fuzz/corpus/$target" "$corpus" \
    >>"$log" 2>&1
  echo "fuzz.sh: merged into fuzz/corpus/$target"
fi
exit "$status"
