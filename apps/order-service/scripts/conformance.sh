#!/usr/bin/env bash
# Runs the MCP conformance suite against the built order-service over Streamable HTTP on 127.0.0.1.
# The generic scenarios must pass; conformance-baseline.yml lists the ones that need the suite's
# reference tools. Exit code: the suite's (0 = only expected failures); a server that does not come up
# (or exits) fails the run at once. On any failure the server's log is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
source ../../scripts/await-server.sh
# Below Linux's ephemeral range (32768-60999), so no client connection's source port can hold it.
PORT="${CONFORMANCE_PORT:-17170}"
require_free_port "$PORT"
OUT="$(mktemp -d)"
node dist/main.js --http --port "$PORT" --insecure-no-auth 2>"$OUT/server.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$OUT"' EXIT
await_server "$SERVER" "http://127.0.0.1:$PORT/mcp" "$OUT/server.log" order-service
status=0
npx -y pnpm@12.4.2 dlx @modelcontextprotocol/conformance@0.1.13 server \
  --url "http://127.0.0.1:$PORT/mcp" \
  --expected-failures "$PWD/conformance-baseline.yml" \
  -o "$OUT/results" || status=$?
if [ "$status" -ne 0 ]; then
  if ! kill -0 "$SERVER" 2>/dev/null; then echo "the order-service exited during the suite" >&2; fi
  show_server_log "$OUT/server.log" order-service
fi
exit "$status"
