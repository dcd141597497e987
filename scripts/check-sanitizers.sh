#!/usr/bin/env bash
# CI's sanitizer stage (clang 14 from Debian): builds and runs
#   ASan + UBSan   sim_test, session_test, api_test, web_test, record_test (build-fuzz/)
#   TSan           session_test, record_test          (build-tsan/)
#   each fuzzer    for $PITLANE_FUZZ_SECONDS seconds (default 20) on a copy of its corpus
# and fails on any sanitizer report, test failure or fuzzer crash.
#   scripts/check-sanitizers.sh            all of it
#   scripts/check-sanitizers.sh configure  only configures build-fuzz/ and build-tsan/ (once)
# Debian's gRPC, protobuf and Abseil are not instrumented: ASan and UBSan do not need them to
# be; TSan would report races inside them, so it runs only session_test and record_test, whose
# threads are ours (pitlane_session, pitlane_sim, the recorder; Abseil's Mutex is understood by
# TSan; zstd runs on one writer thread).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=$PWD  # Cache hits across checkouts.
export PATH=/usr/lib/llvm-14/bin:$PATH  # llvm-symbolizer, for reports with file:line.

# -O1 with line tables: quick to build, readable stacks. No NDEBUG: DCHECKs are on.
configure() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then return; fi
  local launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DPITLANE_BUILD_BENCHMARKS=OFF \
    "${launcher[@]}" "$@" >/dev/null
}

scripts/setup.sh
configure build-fuzz -DPITLANE_FUZZ=ON
configure build-tsan -DPITLANE_SANITIZE=thread
if [ "${1:-}" = configure ]; then exit 0; fi

# Any report fails: UBSan aborts (-fno-sanitize-recover), ASan and TSan exit non-zero.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# Each suppression is explained in the file.
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp

timed() {
  local label=$1
  shift
  local start=$SECONDS
  "$@"
  echo "check-sanitizers: $label took $((SECONDS - start)) s"
}

asan_tests=(sim_test session_test api_test web_test record_test)
fuzzers=(request_fuzzer scenario_fuzzer command_fuzzer recording_fuzzer)
timed "ASan+UBSan build" cmake --build build-fuzz -j2 --target "${asan_tests[@]}" "${fuzzers[@]}"
timed "TSan build" cmake --build build-tsan -j2 --target session_test record_test
# ctest gives each test its own timeout and a pass/fail summary line.
regex="^($(IFS='|'; echo "${asan_tests[*]}"))\$"
timed "ASan+UBSan tests" ctest --test-dir build-fuzz --output-on-failure -j2 -R "$regex"
timed "TSan session_test, record_test" ctest --test-dir build-tsan --output-on-failure \
  -R '^(session_test|record_test)$'
for fuzzer in "${fuzzers[@]}"; do
  timed "$fuzzer" scripts/fuzz.sh "$fuzzer" "${PITLANE_FUZZ_SECONDS:-20}"
done
