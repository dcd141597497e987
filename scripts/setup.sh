#!/usr/bin/env bash
# Installs what Pitlane needs to build, test and run, from Debian 12's apt only.
# Idempotent and fast: when every package is present it only checks and returns.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev
  # The HTTP endpoint (server/web) and the check of its /metrics in the tests (promtool).
  libcivetweb-dev prometheus
  python3 python3-grpcio python3-protobuf python3-pytest
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
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}"
