#!/usr/bin/env bash
# Makes the shipped front-door configurations again with make-config.sh, each for the command
# its first lines name: docker/nginx/compose.conf and the ConfigMap in
# docker/kubernetes/pitlane.yaml. Run after changing make-config.sh
# (tests/e2e/test_scale_out.py checks that they match).
set -euo pipefail
cd "$(dirname "$0")/../.."
make_config=docker/nginx/make-config.sh

# The arguments a configuration was made with: its second line, after the script's name.
arguments_of() {
  sed -n '2s|^ *#   docker/nginx/make-config.sh ||p'
}

read -r -a args < <(arguments_of < docker/nginx/compose.conf)
"$make_config" "${args[@]}" > docker/nginx/compose.conf.new
mv docker/nginx/compose.conf.new docker/nginx/compose.conf

manifest=docker/kubernetes/pitlane.yaml
read -r -a args < <(sed -n '/^  default.conf: |$/,/^---$/p' "$manifest" | sed -n '2,3p' |
                    sed 's/^    //' | arguments_of)
config=$("$make_config" "${args[@]}")
/usr/bin/python3 - "$manifest" "$config" <<'PY'
import sys
path, config = sys.argv[1], sys.argv[2]
text = open(path).read()
start = text.index("  default.conf: |\n") + len("  default.conf: |\n")
end = text.index("\n---", start)
block = "\n".join(("    " + line) if line else "" for line in config.splitlines())
open(path, "w").write(text[:start] + block + text[end:])
PY
echo "updated docker/nginx/compose.conf and the ConfigMap of $manifest"
