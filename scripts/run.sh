#!/usr/bin/env bash
# Sets up, builds and starts the server in the foreground, with the "demo" scenario running
# unless --scenario says otherwise (--scenario= for none). Arguments go to pitlane-server,
# e.g. scripts/run.sh --listen=0.0.0.0:50051 (see --helpfull).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
scenario=(--scenario=demo)
for arg in "$@"; do
  case "$arg" in --scenario=*|--scenario) scenario=() ;; esac
done
exec "${PITLANE_BUILD_DIR:-build}/bin/pitlane-server" "${scenario[@]}" "$@"
