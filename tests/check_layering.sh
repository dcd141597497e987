#!/usr/bin/env bash
# Fails if a layer includes a header from above it (DESIGN.md: dependencies point down):
#   server/sim      Abseil and the standard library only: no gRPC, protobuf, spdlog,
#                   threads, clocks or randomness (its tests may use seeded <random>
#                   engines, never clocks);
#   server/session  no gRPC or protobuf, nothing above it;
#   server/api      nothing above it (server/web beside it, server/app above both);
#   server/web      no gRPC or protobuf, not the gRPC layer beside it, nothing above it;
#   server/record   recordings (MCAP): no gRPC or protobuf, nothing above it;
#   server/auth     tokens and roles: util, Abseil and OpenSSL only;
#   server/util     Abseil only.
# And that no non-test file of server/sim calls a libm transcendental (World::StateHash is
# promised equal on every machine; libm's last bits are not): server/sim/math has its own.
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
check server/session 'grpc|google/protobuf|pitlane/v1|server/(api|web|app|auth)' \
  'gRPC, protobuf or the layers above it'
check server/record 'grpc|google/protobuf|pitlane/v1|server/(api|web|app)' \
  'gRPC, protobuf or the layers above it (recordings are files; the gRPC layer serves them)'
check server/auth 'grpc|google/protobuf|pitlane/v1|spdlog|server/(sim|session|api|web|app)' \
  'gRPC, protobuf, spdlog (tokens are never logged), the simulation or the layers above it'
check server/api 'server/(web|app)' 'the web endpoint or the app wiring' \
  --include='*.h' --include='*.cc' --exclude='*_test.cc'
check server/web 'grpc|google/protobuf|pitlane/v1|server/(api|app)' \
  'gRPC, protobuf, the gRPC layer beside it or the app wiring' \
  --include='*.h' --include='*.cc' --exclude='*_test.cc'

# The libm ban: exp, log, pow, the trig and hyperbolic functions and their kin, qualified
# (std::exp, ::exp), unqualified (exp( from <cmath>), with f/l suffixes or as builtins, outside
# comments. Tests may call them as oracles.
libm='exp|expm1|exp2|log|log1p|log2|log10|pow|sin|cos|tan|asin|acos|atan|atan2|sinh|cosh|tanh|asinh|acosh|atanh|hypot|cbrt|erf|erfc|tgamma|lgamma|sincos'
libm_hits=$(grep -rn --include='*.h' --include='*.cc' --exclude='*_test.cc' --exclude-dir=testing '' "$root/server/sim" |
  sed -E 's#//.*$##' |
  grep -E "std::($libm)[fl]?\b|__builtin_($libm)[fl]?\b|(^|[^A-Za-z0-9_.>])($libm)[fl]?[[:space:]]*\(" ||
  true)
if [ -n "$libm_hits" ]; then
  echo "libm ban: server/sim must not call libm's transcendental functions (their last bits"
  echo "differ between machines and libm versions, and World::StateHash must not); use"
  echo "server/sim/math/functions.h (Exp, Expm1, Log, Atan, Atan2, Asin, Tan) or trig.h (SinCos):"
  echo "$libm_hits"
  status=1
fi

if [ $status -eq 0 ]; then echo "layering: ok"; fi
exit $status
