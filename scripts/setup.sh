#!/usr/bin/env bash
# Installs what Pitlane needs to build, test and run: Debian 12's apt packages, and the npm
# packages of the web tests (tests/web/package-lock.json, with npm ci). Idempotent and fast:
# when everything is present it only checks and returns.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev
  # The HTTP endpoint (server/web), the check of its /metrics in the tests (promtool), and
  # the independent clients of its tests: Node for Foxglove's own client, Debian's chromium
  # for the viewer.
  libcivetweb-dev nlohmann-json3-dev prometheus nodejs chromium
  python3 python3-grpcio python3-protobuf python3-pytest
  # The proxy of the scale-out test (tests/e2e/test_scale_out.py, docs/deployment.md) and the
  # linter of the shell scripts.
  nginx-light shellcheck
  # Sanitizer builds and fuzzers (scripts/check-sanitizers.sh, scripts/fuzz.sh): clang 14,
  # its sanitizer and libFuzzer runtimes, llvm-symbolizer for readable reports.
  clang libclang-rt-14-dev llvm-14
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
# Debian's npm comes apart from nodejs; a nodejs that brings its own npm needs none.
if ! command -v npm >/dev/null 2>&1; then
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

# The web tests' npm packages, exactly as locked; again only when the lockfile changed.
web_tests="$(dirname "$0")/../tests/web"
stamp="$web_tests/node_modules/.pitlane-lock.sha256"
lock_sha=$(sha256sum "$web_tests/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sha" ]; then
  echo "setup: npm ci in tests/web" >&2
  (cd "$web_tests" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock_sha" >"$stamp"
fi
