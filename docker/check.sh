#!/usr/bin/env bash
# Builds docker/Dockerfile and checks the image, without a Docker daemon or a registry: a
# Debian base made from the mirror with mmdebstrap, the image built with buildah, the
# container run with buildah. Checks: the Dockerfile lints clean (dockerfile-utils) and the
# scripts too (shellcheck); the image runs as 10001:10001 with a HEALTHCHECK and both ports;
# its size; the health check (the server's own binary) passes; a client outside the container
# creates a session and steps it; the viewer page and /metrics answer; the server runs as the
# non-root user; as PID 1 it drains on SIGTERM and exits 0.
#
#   docker/check.sh [--fresh | --reuse]   (root)
#     --fresh  makes the base again
#     --reuse  checks the image the previous run built, without building it again
#
# Work files (the base, buildah's storage) live in $PITLANE_DOCKER_WORK, default
# /var/tmp/pitlane-docker. The image is localhost/pitlane:check.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."
repo=$PWD

fresh=false
reuse=false
case "${1:-}" in
  "") ;;
  --fresh) fresh=true ;;
  --reuse) reuse=true ;;
  *) echo "check.sh: unknown argument $1 (--fresh, --reuse, or none)" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  # mmdebstrap and buildah's chroot isolation need root.
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    exec sudo -n --preserve-env=PITLANE_DOCKER_WORK "$self" "$@"
  fi
  echo "check.sh: run as root (mmdebstrap and buildah's chroot isolation need it)" >&2
  exit 2
fi

step() { printf '\n== %s\n' "$*"; }
fail() { echo "check.sh: FAILED: $*" >&2; exit 1; }

step "tools"
scripts/setup.sh  # Protoc and Python for the client, Node packages for the linter.
missing=()
for package in buildah mmdebstrap uidmap; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if ((${#missing[@]} > 0)); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
buildah --version
mmdebstrap --version

step "lint"
node tests/web/dockerfile_lint.mjs docker/Dockerfile
shellcheck docker/*.sh docker/nginx/*.sh scripts/*.sh
echo "shellcheck: no problems"

work=${PITLANE_DOCKER_WORK:-/var/tmp/pitlane-docker}
mkdir -p "$work"
bh() {
  buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"
}

# Containers a failed run left (vfs keeps a full copy of each).
bh rm --all >/dev/null 2>&1 || true

step "base image (mmdebstrap from Debian's mirror, like debian:bookworm-slim)"
if $fresh || [ ! -f "$work/base.tar" ]; then
  # This machine's apt sources (and proxy, if any): the base, and the image's build, fetch
  # from where this machine does.
  sources=()
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
              /etc/apt/sources.list.d/*.sources; do
    if [ -s "$file" ]; then sources+=("$file"); fi
  done
  proxy_options=()
  proxy=$(apt-config dump | sed -n 's/^Acquire::http::Proxy "\(.*\)";$/\1/p' | head -n 1)
  if [ -n "$proxy" ]; then proxy_options=(--aptopt="Acquire::http::Proxy \"$proxy\""); fi
  rm -rf "$work/base-new.tar"
  # Like the official slim image: no manuals, documentation (but copyrights) or translations.
  # shellcheck disable=SC2016  # "$1" is the hook's argument, for mmdebstrap's shell.
  mmdebstrap --mode=root --variant=apt --format=tar --quiet "${proxy_options[@]}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    bookworm "$work/base-new.tar" "${sources[@]}"
  mv -f "$work/base-new.tar" "$work/base.tar"
  bh rmi -f localhost/pitlane-base:bookworm >/dev/null 2>&1 || true
fi
if ! bh inspect --type image localhost/pitlane-base:bookworm >/dev/null 2>&1; then
  printf 'FROM scratch\nADD base.tar /\n' > "$work/Containerfile.base"
  bh bud --quiet --format docker -f "$work/Containerfile.base" -t localhost/pitlane-base:bookworm \
    "$work"
fi
ls -l "$work/base.tar"

step "build docker/Dockerfile"
start=$(date +%s)
if $reuse && bh inspect --type image localhost/pitlane:check >/dev/null 2>&1; then
  echo "reusing localhost/pitlane:check"
else
  bh bud --isolation chroot --format docker --pull=never --layers=false --force-rm \
    --build-arg BUILD_BASE=localhost/pitlane-base:bookworm \
    --build-arg RUNTIME_BASE=localhost/pitlane-base:bookworm \
    -f docker/Dockerfile -t localhost/pitlane:check "$repo"
  echo "built in $(($(date +%s) - start)) s"
  bh rmi --prune >/dev/null 2>&1 || true  # The previous runs' images, now untagged.
fi

step "image configuration"
config=$(bh inspect --type image --format \
  '{{.Docker.Config.User}}|{{.Docker.Config.Healthcheck.Test}}|{{.Docker.Config.ExposedPorts}}|{{.Docker.Config.Entrypoint}}' \
  localhost/pitlane:check)
echo "$config"
IFS='|' read -r user healthcheck ports entrypoint <<<"$config"
[ "$user" = "10001:10001" ] || fail "the image's user is \"$user\", not 10001:10001"
[[ "$healthcheck" == *"--healthcheck"* ]] || fail "no HEALTHCHECK by the server's binary"
[[ "$ports" == *50051* && "$ports" == *8080* ]] || fail "ports $ports"
[[ "$entrypoint" == *pitlane-server* ]] || fail "entrypoint $entrypoint"

step "size"
container=$(bh from --pull=never localhost/pitlane:check)
cleanup() {
  # The servers themselves (they run as another user, so a dying parent does not end them),
  # then the processes that started them.
  for pid in "${server:-}" "${inner:-}" "${server_pid:-}" "${pid1:-}"; do
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  done
  bh umount "$container" >/dev/null 2>&1 || true
  bh rm "$container" >/dev/null 2>&1 || true
  rm -rf "${scratch:-/nonexistent-pitlane}"
}
trap cleanup EXIT
rootfs=$(bh mount "$container")
size_mb=$(( $(du -sxb "$rootfs" | cut -f1) / 1000000 ))
echo "image: $size_mb MB unpacked (aim: at most 150 MB)"
((size_mb <= 150)) || fail "the image is $size_mb MB, above 150 MB"

# Two free ports on loopback for this run (a chroot-isolated container shares the host's
# network), both held while they are chosen so that they differ.
read -r grpc_port http_port < <(/usr/bin/python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')

# Waits up to SECONDS for process PID to end and sets $code to its exit code; fails (after
# killing it) if it does not.
wait_for_exit() {
  local pid=$1 seconds=$2 what=$3
  local deadline=$((SECONDS + seconds))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      kill -KILL "$pid" 2>/dev/null
      fail "$what did not exit within $seconds s"
    fi
    sleep 0.1
  done
  code=0
  wait "$pid" || code=$?
}
scratch=$(mktemp -d)
"$rootfs/usr/local/bin/pitlane-server" --new_token > "$scratch/admin.token" 2>/dev/null ||
  bh run --isolation chroot "$container" -- /usr/local/bin/pitlane-server --new_token \
    > "$scratch/admin.token"
chmod 644 "$scratch/admin.token"
env_args=(--env "PITLANE_LISTEN=127.0.0.1:$grpc_port" --env "PITLANE_HTTP_LISTEN=127.0.0.1:$http_port"
          --env PITLANE_AUTH=token --env PITLANE_ADMIN_TOKEN_FILE=/run/secrets/admin.token)

step "run the container (buildah run, the image's user and environment)"
bh run --isolation chroot "${env_args[@]}" \
  --volume "$scratch/admin.token:/run/secrets/admin.token:ro" "$container" -- \
  /usr/local/bin/pitlane-server > "$scratch/server.out" 2> "$scratch/server.err" &
server_pid=$!
healthy=false
for _ in $(seq 1 100); do
  if bh run --isolation chroot "${env_args[@]}" "$container" -- \
       /usr/local/bin/pitlane-server --healthcheck > "$scratch/health.out" 2>&1; then
    healthy=true
    break
  fi
  sleep 0.2
done
cat "$scratch/health.out"
$healthy || { cat "$scratch/server.err"; fail "the health check did not pass within 20 s"; }
echo "health check: passed"
tail -n 3 "$scratch/server.err"
grep -q '"level":"info"' "$scratch/server.err" || fail "the log is not JSON lines"

server=$(pgrep -f -n "^/usr/local/bin/pitlane-server$" || true)
[ -n "$server" ] || fail "no server process"
uid=$(awk '/^Uid:/ {print $2}' "/proc/$server/status")
echo "server process $server runs as uid $uid"
[ "$uid" = 10001 ] || fail "the server runs as uid $uid, not 10001"

step "a client outside the container"
py=$scratch/py
mkdir -p "$py"
cp -r client/python/pitlane "$py/"
rm -rf "$py/pitlane/v1"
protoc -Iproto --python_out="$py" --grpc_out="$py" \
  --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin proto/pitlane/v1/simulator.proto
touch "$py/pitlane/v1/__init__.py"
PYTHONPATH=$py /usr/bin/python3 docker/check_client.py "127.0.0.1:$grpc_port" \
  "127.0.0.1:$http_port" "$scratch/admin.token"

step "SIGTERM drains and exits 0"
kill -TERM "$server"
start=$(date +%s%N)
wait_for_exit "$server_pid" 10 "the server, after SIGTERM,"
server_pid=
server=
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "exit code $code after $elapsed_ms ms"
[ "$code" = 0 ] || fail "exit code $code after SIGTERM"
((elapsed_ms < 3000)) || fail "took $elapsed_ms ms to stop"

step "as PID 1 of its own PID namespace (as in a container), SIGTERM still drains"
unshare --pid --fork --kill-child --mount --mount-proc="$rootfs/proc" \
  env -i "PITLANE_LISTEN=127.0.0.1:$grpc_port" "PITLANE_HTTP_LISTEN=127.0.0.1:$http_port" \
  PITLANE_AUTH=none PITLANE_LOG_FORMAT=json \
  /usr/sbin/chroot --userspec=10001:10001 "$rootfs" /usr/local/bin/pitlane-server \
  > "$scratch/pid1.out" 2> "$scratch/pid1.err" &
pid1=$!
for _ in $(seq 1 100); do
  grep -q "listening on" "$scratch/pid1.out" 2>/dev/null && break
  sleep 0.1
done
inner=$(pgrep -P "$pid1" -n || true)
[ -n "$inner" ] || { cat "$scratch/pid1.err"; fail "the PID 1 server did not start"; }
nspid=$(awk '/^NSpid:/ {print $NF}' "/proc/$inner/status")
echo "server: pid $inner here, pid $nspid in its namespace"
[ "$nspid" = 1 ] || fail "the server is pid $nspid in its namespace, not 1"
kill -TERM "$inner"
wait_for_exit "$pid1" 10 "the PID 1 server, after SIGTERM,"
pid1=
inner=
[ "$code" = 0 ] || { cat "$scratch/pid1.err"; fail "PID 1 exit code $code after SIGTERM"; }
grep -q "server stopped" "$scratch/pid1.err" || fail "PID 1 did not drain"
echo "PID 1: drained and exited 0"

step "docker/check.sh: all checks passed"
