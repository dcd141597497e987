#!/usr/bin/env bash
# Installs what Pitlane needs to build, test and run: Debian 12's apt packages, and the npm
# packages of the web tests (tests/web/package-lock.json, with npm ci). Idempotent and fast:
# when everything is present it only checks and returns.
#
#   scripts/setup.sh            everything: the server, tests, benchmarks, fuzzers
#   scripts/setup.sh --server   only what building the server takes (docker/Dockerfile)
set -euo pipefail

server_only=false
case "${1:-}" in
  "") ;;
  --server) server_only=true ;;
  *) echo "setup.sh: unknown argument $1 (--server, or none)" >&2; exit 2 ;;
esac

# What building the server takes. The HTTP endpoint (server/web) needs civetweb and JSON, and
# serves the Python client's wheel, which Python's own setuptools and wheel build.
server_packages=(
  cmake ninja-build g++ pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libspdlog-dev libssl-dev libcivetweb-dev nlohmann-json3-dev
  python3 python3-setuptools python3-wheel
  # Recordings (server/record): MCAP chunks compressed with zstd.
  libzstd-dev
)
packages=(
  "${server_packages[@]}" ccache libgtest-dev libgmock-dev libbenchmark-dev
  # The check of /metrics in the tests (promtool), and the independent clients of the web
  # tests: Node for Foxglove's own client, Debian's chromium for the viewer.
  prometheus nodejs chromium
  python3 python3-grpcio python3-protobuf python3-pytest python3-venv python3-pip python3-numpy
  python3-zstandard
  # The proxy of the scale-out test (tests/e2e/test_scale_out.py, docs/deployment.md), a YAML
  # reader and Compose's own validator (docker-compose config, no daemon needed) for its check
  # of the compose file and manifests, and the shell scripts' linter.
  nginx-light python3-yaml docker-compose shellcheck
  # Sanitizer builds and fuzzers (scripts/check-sanitizers.sh, scripts/fuzz.sh): clang 14,
  # its sanitizer and libFuzzer runtimes, llvm-symbolizer for readable reports.
  clang libclang-rt-14-dev llvm-14
)

if $server_only; then
  packages=("${server_packages[@]}")
fi
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
# Debian's npm comes apart from nodejs; a nodejs that brings its own npm needs none.
if ! $server_only && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
fi

if $server_only; then
  exit 0
fi

# The npm packages of the web tests and of the Node.js example client, exactly as locked; again
# only when a lockfile changed.
root="$(dirname "$0")/.."
for dir in tests/web client/node; do
  stamp="$root/$dir/node_modules/.pitlane-lock.sha256"
  lock_sha=$(sha256sum "$root/$dir/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sha" ]; then
    echo "setup: npm ci in $dir" >&2
    (cd "$root/$dir" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$lock_sha" >"$stamp"
  fi
done
