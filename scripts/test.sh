#!/usr/bin/env bash
# Sets up, builds and runs every test: C++ unit and service tests, the layering check and
# the end-to-end pytest suite against the real server binary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir "${PITLANE_BUILD_DIR:-build}" --output-on-failure -j2 "$@"
