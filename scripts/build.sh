#!/usr/bin/env bash
# Sets up (scripts/setup.sh), configures once and builds everything: server, tests,
# benchmarks and the Python client stubs. Build directory: $PITLANE_BUILD_DIR or build/.
#
#   scripts/build.sh            everything
#   scripts/build.sh --server   the server alone (bin/pitlane-server; docker/Dockerfile)
set -euo pipefail
cd "$(dirname "$0")/.."
server_only=()
targets=()
case "${1:-}" in
  "") ;;
  --server)
    server_only=(-DPITLANE_BUILD_TESTS=OFF -DPITLANE_BUILD_BENCHMARKS=OFF)
    targets=(--target pitlane-server) ;;
  *) echo "build.sh: unknown argument $1 (--server, or none)" >&2; exit 2 ;;
esac
scripts/setup.sh "${1:-}"
build_dir=${PITLANE_BUILD_DIR:-build}
export CCACHE_BASEDIR=$PWD  # Paths relative to the checkout: cache hits across checkouts.
if [ ! -f "$build_dir/build.ninja" ]; then
  launcher=()
  # ccache (installed by setup) makes rebuilds of unchanged files, and other checkouts, cheap.
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    "${server_only[@]}"
fi
cmake --build "$build_dir" -j2 "${targets[@]}"
