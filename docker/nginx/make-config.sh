#!/usr/bin/env bash
# Prints the nginx configuration (the http { } context's part: maps, upstreams, two servers)
# that puts several Pitlane servers behind one address: a gRPC port and an HTTP port (the
# viewer, its API, the Foxglove WebSocket). Every call about a session reaches the server that
# holds it; calls about no session go to any live one. See docs/deployment.md.
#
#   docker/nginx/make-config.sh [--grpc-listen ADDR] [--http-listen ADDR] [--access-log PATH]
#       [--error-log PATH] [--tls-cert FILE --tls-key FILE] NAME=GRPC_HOST:PORT,HTTP_HOST:PORT ...
#
# ADDR: nginx's listen address (default 50051 and 8080: every interface, for a container).
# --access-log: where requests are logged (default /var/log/nginx/access.log, the official
# image's stdout; "off" for none), without query strings, which may hold tokens.
# --error-log: the HTTP server's error log (default /var/log/nginx/error.log, the image's
# stderr), at level crit: nginx's error lines quote the request whole, query string and all.
# --tls-cert/--tls-key: both ports serve TLS (gRPC over HTTP/2 with TLS, HTTPS and WSS); the
# replicas behind stay plaintext on their private network.
#
# NAME is the server's --replica (its session ids end with ".NAME"). The routing keys:
#   gRPC: the header pitlane-session (a session id; Pitlane's clients send it on every call
#         about a session), else pitlane-replica (a NAME), else any server.
#   HTTP: a session id in the path (/api/sessions/<id>/...) or in ?session=, else ?replica=,
#         else any server.

# The nginx variables ('$uri') are single-quoted to be printed as they are.
# shellcheck disable=SC2016
set -euo pipefail

command_line="docker/nginx/make-config.sh $*"
grpc_listen=50051
http_listen=8080
access_log=/var/log/nginx/access.log
error_log=/var/log/nginx/error.log
tls_cert=
tls_key=
replicas=()
while [ $# -gt 0 ]; do
  case "$1" in
    --grpc-listen|--http-listen|--access-log|--error-log|--tls-cert|--tls-key)
      if [ $# -lt 2 ] || [ -z "$2" ]; then
        echo "make-config.sh: $1 needs a value" >&2
        exit 2
      fi ;;&
    --grpc-listen) grpc_listen="$2"; shift 2 ;;
    --http-listen) http_listen="$2"; shift 2 ;;
    --access-log) access_log="$2"; shift 2 ;;
    --error-log) error_log="$2"; shift 2 ;;
    --tls-cert) tls_cert="$2"; shift 2 ;;
    --tls-key) tls_key="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "make-config.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) replicas+=("$1"); shift ;;
  esac
done
if { [ -n "$tls_cert" ] && [ -z "$tls_key" ]; } || { [ -z "$tls_cert" ] && [ -n "$tls_key" ]; }; then
  echo "make-config.sh: --tls-cert and --tls-key go together" >&2
  exit 2
fi
if [ ${#replicas[@]} -eq 0 ]; then
  echo "make-config.sh: name at least one replica: NAME=GRPC_HOST:PORT,HTTP_HOST:PORT" >&2
  exit 2
fi

names=()
grpc_addresses=()
http_addresses=()
for replica in "${replicas[@]}"; do
  name="${replica%%=*}"
  addresses="${replica#*=}"
  grpc_address="${addresses%%,*}"
  http_address="${addresses#*,}"
  # The server's own rule for --replica: a DNS label of a-z, 0-9 and '-'.
  if ! [[ "$name" =~ ^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$ ]]; then
    echo "make-config.sh: \"$name\" is not a replica name (1 to 32 of a-z, 0-9 and '-', beginning and ending with a letter or digit)" >&2
    exit 2
  fi
  if [ "$replica" = "$name" ] || [ "$addresses" = "$grpc_address" ] ||
     [ -z "$grpc_address" ] || [ -z "$http_address" ]; then
    echo "make-config.sh: \"$replica\" must be NAME=GRPC_HOST:PORT,HTTP_HOST:PORT" >&2
    exit 2
  fi
  # Words an nginx map reads as its own parameters.
  case "$name" in
    default|include|hostnames|volatile)
      echo "make-config.sh: \"$name\" is a word of nginx's map; name the replica otherwise" >&2
      exit 2 ;;
  esac
  for seen in "${names[@]+"${names[@]}"}"; do
    if [ "$seen" = "$name" ]; then
      echo "make-config.sh: replica \"$name\" is named twice" >&2
      exit 2
    fi
  done
  names+=("$name")
  grpc_addresses+=("$grpc_address")
  http_addresses+=("$http_address")
done

# A session id: "s-", 26 characters of base32, ".", the replica's name.
id='s-[a-z2-7]{26}'

# Upstreams are named by the replica's place in the list (pitlane_grpc_1, pitlane_http_1, ...),
# so that no name can clash with another's or with the shared ones (pitlane_grpc_any).
# map_block VARIABLE RESULT DEFAULT PATTERN KIND: a map block setting RESULT from VARIABLE, with
# one line per replica (PATTERN with NAME in place of its name) giving its upstream of KIND.
map_block() {
  local variable="$1" result="$2" default="$3" pattern="$4" kind="$5" i
  echo "map $variable \$$result {"
  echo "    default $default;"
  for i in "${!names[@]}"; do
    echo "    ${pattern//NAME/${names[$i]}} pitlane_${kind}_$((i + 1));"
  done
  echo "}"
}

echo "# Generated for ${#names[@]} Pitlane replicas (${names[*]}) by:"
echo "#   $command_line"
echo
echo "# gRPC: the upstream of a call, by the session it names, else by the replica it names."
map_block '$http_pitlane_replica' pitlane_grpc_by_replica pitlane_grpc_any NAME grpc
map_block '$http_pitlane_session' pitlane_grpc '$pitlane_grpc_by_replica' \
  "\"~^$id\\.NAME\$\"" grpc
echo
echo "# HTTP: by a session in ?session= or in the path, else by ?replica=."
map_block '$arg_replica' pitlane_http_by_replica pitlane_http_any NAME http
map_block '"$arg_session $uri"' pitlane_http '$pitlane_http_by_replica' \
  "\"~(^|[ /])$id\\.NAME([ /]|\$)\"" http
echo
cat <<'CONF'
map $http_upgrade $pitlane_connection_upgrade {
    default upgrade;
    "" close;
}

# Requests without their query strings, which may hold tokens (?token= of the viewer).
log_format pitlane '$remote_addr [$time_local] "$request_method $uri $server_protocol" '
                   '$status $body_bytes_sent $request_time "$upstream_addr"';

CONF
for i in "${!names[@]}"; do
  cat <<CONF
# ${names[$i]}
upstream pitlane_grpc_$((i + 1)) {
    server ${grpc_addresses[$i]};
    keepalive 16;
}
upstream pitlane_http_$((i + 1)) {
    server ${http_addresses[$i]};
}
CONF
done
echo "# Calls about no session (CreateSession, ListSessions): any live replica."
echo "upstream pitlane_grpc_any {"
echo "    least_conn;"
for address in "${grpc_addresses[@]}"; do echo "    server $address max_fails=1 fail_timeout=5s;"; done
echo "    keepalive 16;"
echo "}"
echo "# The viewer without a session in its address, Foxglove's apps: one replica per client"
echo "# address (while it lives), so that its session list and WebSocket stay on one replica."
echo "upstream pitlane_http_any {"
echo "    hash \$remote_addr consistent;"
for address in "${http_addresses[@]}"; do echo "    server $address max_fails=1 fail_timeout=5s;"; done
echo "}"

if [ "$access_log" = off ]; then
  log_line="access_log off;"
else
  log_line="access_log $access_log pitlane;"
fi
grpc_listen_line="listen $grpc_listen http2;"
http_listen_line="listen $http_listen;"
tls_lines=""
if [ -n "$tls_cert" ]; then
  grpc_listen_line="listen $grpc_listen ssl http2;"
  http_listen_line="listen $http_listen ssl;"
  tls_lines="ssl_certificate $tls_cert;
    ssl_certificate_key $tls_key;
    ssl_protocols TLSv1.2 TLSv1.3;"
fi
cat <<CONF

server {
    $grpc_listen_line
    ${tls_lines:+$tls_lines
    }$log_line
    # Streams (StreamStates, Drive) last as long as their clients want, a Drive stream may send
    # nothing for long (a paused clock), and one client may open many on one connection; the
    # servers bound what one message may hold, so the proxy bounds no body.
    client_max_body_size 0;
    client_body_timeout 1d;
    http2_max_concurrent_streams 1000;
    grpc_read_timeout 1d;
    grpc_send_timeout 1d;
    # A replica that cannot be reached fails fast: its sessions' calls with UNAVAILABLE, a new
    # session on the next replica.
    grpc_connect_timeout 2s;
    location / {
        grpc_pass grpc://\$pitlane_grpc;
        grpc_next_upstream error timeout;
    }
}

server {
    $http_listen_line
    ${tls_lines:+$tls_lines
    }$log_line
    error_log $error_log crit;
    client_max_body_size 1m;
    location / {
        proxy_pass http://\$pitlane_http;
        proxy_http_version 1.1;
        # The client's own Host, which the server checks the page's Origin against.
        proxy_set_header Host \$http_host;
        proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
        # The Foxglove WebSocket (/foxglove) and the viewer's stream of frames.
        proxy_set_header Upgrade \$http_upgrade;
        proxy_set_header Connection \$pitlane_connection_upgrade;
        proxy_connect_timeout 2s;
        proxy_read_timeout 1d;
        proxy_send_timeout 1d;
        proxy_buffering off;
    }
}
CONF
