#!/usr/bin/env bash
# Runs the official OpenAI and Anthropic Node.js SDKs (sdk_test.mjs) against a real `preface serve`.
# Usage: tests/clients/run.sh PREFACE_BINARY [WORK_DIR]
#   WORK_DIR (default: <binary dir>/clients-sdk, inside the git-ignored build tree) receives the npm install;
#   it is reused while package.json is unchanged. The server runs stories260K (../shared/models) on a free
#   loopback port and is stopped (SIGTERM) at the end; its log is WORK_DIR/server.log.
# Exit codes: 0 pass, 1 fail, 77 skipped (no node/npm, or the npm registry unreachable), for ctest's
# SKIP_RETURN_CODE.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
binary="$(realpath "${1:?usage: run.sh PREFACE_BINARY [WORK_DIR]}")"
work="${2:-$(dirname "$binary")/clients-sdk}"
model="$root/../shared/models/stories260K.gguf"

command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: node/npm not installed" >&2; exit 77; }
[ -f "$model" ] || { echo "fail: $model not found" >&2; exit 1; }
mkdir -p "$work"
cp "$here/package.json" "$here/sdk_test.mjs" "$work/"
if ! cmp -s "$here/package.json" "$work/.installed-package.json" || [ ! -d "$work/node_modules" ]; then
  if ! (cd "$work" && npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
    cat "$work/npm.log" >&2
    echo "skip: npm install failed (is the npm registry reachable?)" >&2
    exit 77
  fi
  cp "$here/package.json" "$work/.installed-package.json"
fi

log="$work/server.log"
: >"$log"  # exists before the backgrounded server opens it, so the polling below can read it at once
"$binary" serve -m "$model" --port 0 --kv-cache-mem 32MiB --threads 2 --alias stories >"$log" 2>&1 &
server_pid=$!
stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null
}
trap stop_server EXIT

port=""
for _ in $(seq 1 200); do
  port="$(sed -n 's|^preface: listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")"
  if [ -n "$port" ] && curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; echo "fail: the server exited" >&2; exit 1; }
  sleep 0.05
done
[ -n "$port" ] || { cat "$log" >&2; echo "fail: the server did not come up" >&2; exit 1; }

status=0
(cd "$work" && PREFACE_URL="http://127.0.0.1:$port" PREFACE_MODEL=stories node --test sdk_test.mjs) || status=1
trap - EXIT
kill -TERM "$server_pid"
server_status=0
wait "$server_pid" || server_status=$?
if [ "$server_status" -ne 0 ]; then
  echo "fail: the server exited with status $server_status after SIGTERM" >&2
  cat "$log" >&2
  status=1
fi
exit "$status"
