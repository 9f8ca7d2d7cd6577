#!/usr/bin/env bash
# Runs the official OpenAI and Anthropic Node.js SDKs (sdk_test.mjs, sdk_tools_test.mjs, sdk_responses_test.mjs),
# the AI SDK and LangChain (sdk_frameworks_test.mjs) and the `ollama` client (ollama_test.mjs) against a real
# `preface serve`.
# Usage: tests/clients/run.sh PREFACE_BINARY [WORK_DIR]
#   WORK_DIR (default: <binary dir>/clients-sdk, inside the git-ignored build tree) receives the npm install;
#   it is reused while package.json is unchanged. Two servers run stories260K (../shared/models) on free
#   loopback ports and are stopped (SIGTERM) at the end: the default one (log WORK_DIR/server.log) for
#   sdk_test.mjs, and one with Qwen3's tool-calling template for sdk_tools_test.mjs (WORK_DIR/server-tools.log).
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
cp "$here/package.json" "$here"/*.mjs "$work/"
if ! cmp -s "$here/package.json" "$work/.installed-package.json" || [ ! -d "$work/node_modules" ]; then
  if ! (cd "$work" && npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
    cat "$work/npm.log" >&2
    echo "skip: npm install failed (is the npm registry reachable?)" >&2
    exit 77
  fi
  cp "$here/package.json" "$work/.installed-package.json"
fi

# start_server LOG KV_MEM ARGS...: a server on a free port; sets server_pid and port.
start_server() {
  local log="$1" kv="$2"
  shift 2
  : >"$log"  # exists before the backgrounded server opens it, so the polling below can read it at once
  "$binary" serve -m "$model" --port 0 --kv-cache-mem "$kv" --threads 2 --alias stories "$@" >"$log" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 1 200); do
    port="$(sed -n 's|^preface: listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")"
    if [ -n "$port" ] && curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; echo "fail: the server exited" >&2; exit 1; }
    sleep 0.05
  done
  cat "$log" >&2
  echo "fail: the server did not come up" >&2
  exit 1
}
stop_servers() {
  for pid in ${main_pid:-} ${tools_pid:-} ${server_pid:-}; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in ${main_pid:-} ${tools_pid:-} ${server_pid:-}; do wait "$pid" 2>/dev/null || true; done
}
trap stop_servers EXIT

# The default server (built-in ChatML), and one with a tool-capable template (Qwen3's, from the shared corpus's
# .json form) and a larger KV pool for the agent loops.
start_server "$work/server.log" 32MiB
main_pid=$server_pid main_port=$port
start_server "$work/server-tools.log" 64MiB --chat-template "$root/../shared/templates/Qwen__Qwen3-1.7B.json"
tools_pid=$server_pid tools_port=$port

status=0
(cd "$work" && PREFACE_URL="http://127.0.0.1:$main_port" PREFACE_TOOLS_URL="http://127.0.0.1:$tools_port" \
  PREFACE_MODEL=stories node --test sdk_test.mjs sdk_tools_test.mjs sdk_responses_test.mjs sdk_frameworks_test.mjs ollama_test.mjs) || status=1
trap - EXIT
for pid in $main_pid $tools_pid; do
  kill -TERM "$pid"
  server_status=0
  wait "$pid" || server_status=$?
  if [ "$server_status" -ne 0 ]; then
    echo "fail: a server exited with status $server_status after SIGTERM" >&2
    cat "$work"/server*.log >&2
    status=1
  fi
done
exit "$status"
