#!/usr/bin/env bash
# Runs the MCP conformance suite against the built order-service over Streamable HTTP on 127.0.0.1.
# The generic scenarios must pass; conformance-baseline.yml lists the ones that need the suite's
# reference tools. Exit code: the suite's (0 = only expected failures); a server that does not come up
# (or exits) fails the run at once. On any failure the server's log is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Below Linux's ephemeral range (32768-60999), so no client connection's source port can hold it.
PORT="${CONFORMANCE_PORT:-17170}"
if curl -s -m 2 -o /dev/null "http://127.0.0.1:$PORT/"; then
  echo "something already answers on 127.0.0.1:$PORT; set CONFORMANCE_PORT to a free port" >&2
  exit 1
fi
OUT="$(mktemp -d)"
node dist/main.js --http --port "$PORT" --insecure-no-auth 2>"$OUT/server.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$OUT"' EXIT
show_log() {
  echo "--- order-service log (last 100 lines) ---" >&2
  tail -n 100 "$OUT/server.log" >&2
}
up=0
for _ in $(seq 1 240); do
  # Any HTTP answer (400 without a session) means the server is up.
  if curl -s -m 5 -o /dev/null "http://127.0.0.1:$PORT/mcp"; then up=1; break; fi
  if ! kill -0 "$SERVER" 2>/dev/null; then
    echo "the order-service exited before it listened on $PORT" >&2
    show_log
    exit 1
  fi
  sleep 0.5
done
if [ "$up" -ne 1 ]; then
  echo "the order-service did not answer on $PORT within 120 s" >&2
  show_log
  exit 1
fi
status=0
npx -y pnpm@12.4.2 dlx @modelcontextprotocol/conformance@0.1.13 server \
  --url "http://127.0.0.1:$PORT/mcp" \
  --expected-failures "$PWD/conformance-baseline.yml" \
  -o "$OUT/results" || status=$?
if [ "$status" -ne 0 ]; then
  if ! kill -0 "$SERVER" 2>/dev/null; then echo "the order-service exited during the suite" >&2; fi
  show_log
fi
exit "$status"
