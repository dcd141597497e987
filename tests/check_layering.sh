#!/usr/bin/env bash
# Fails if a layer includes a header from above it (DESIGN.md: dependencies point down):
#   server/sim      Abseil and the standard library only: no gRPC, protobuf, spdlog,
#                   threads, clocks or randomness (its tests may use seeded <random>
#                   engines, never clocks);
#   server/session  no gRPC or protobuf, nothing above it;
#   server/api      nothing above it (server/web beside it, server/app above both);
#   server/util     Abseil only.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
check() {  # check <dir> <extended regex of forbidden includes> <why> [grep file filters]
  local hits filters=("${@:4}")
  [ ${#filters[@]} -eq 0 ] && filters=(--include='*.h' --include='*.cc')
  hits=$(grep -rnE "^#include [<\"]($2)" "$root/$1" "${filters[@]}" || true)
  if [ -n "$hits" ]; then
    echo "layering: $1 must not include $3:"
    echo "$hits"
    status=1
  fi
}
check server/util 'grpc|google/protobuf|pitlane/v1|spdlog|server/(sim|session|api|web|app)' \
  'gRPC, protobuf, spdlog or higher layers'
sim_forbidden='grpc|google/protobuf|pitlane/v1|spdlog|thread|mutex|chrono|ctime|absl/synchronization|absl/time|server/(session|api|web|app)'
check server/sim "$sim_forbidden|random" \
  'gRPC, protobuf, spdlog, threads, clocks, randomness or higher layers' \
  --include='*.h' --include='*.cc' --exclude='*_test.cc'
check server/sim "$sim_forbidden" 'gRPC, protobuf, spdlog, threads, clocks or higher layers' \
  --include='*_test.cc'
check server/session 'grpc|google/protobuf|pitlane/v1|server/(api|web|app)' \
  'gRPC, protobuf or the layers above it'
check server/api 'server/(web|app)' 'the web endpoint or the app wiring' \
  --include='*.h' --include='*.cc' --exclude='*_test.cc'
if [ $status -eq 0 ]; then echo "layering: ok"; fi
exit $status
