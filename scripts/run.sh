#!/usr/bin/env bash
# Sets up, builds and starts the server in the foreground. Arguments go to pitlane-server,
# e.g. scripts/run.sh --listen=0.0.0.0:50051 (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
exec "${PITLANE_BUILD_DIR:-build}/bin/pitlane-server" "$@"
