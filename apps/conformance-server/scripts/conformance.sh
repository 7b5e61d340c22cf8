#!/usr/bin/env bash
# Runs the MCP conformance suite against the built conformance server over Streamable HTTP on
# 127.0.0.1: first the active suite (the default, every scenario) with NO expected failures, then the
# pending scenarios against conformance-pending-baseline.yml (which says why each cannot pass yet).
# Exit code: 0 when both pass; otherwise the first failing run's (the server log is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
# Below Linux's ephemeral range (32768-60999), so no client connection's source port can hold it.
PORT="${CONFORMANCE_PORT:-17171}"
if curl -s -m 2 -o /dev/null "http://127.0.0.1:$PORT/"; then
  echo "something already answers on 127.0.0.1:$PORT; set CONFORMANCE_PORT to a free port" >&2
  exit 1
fi
SUITE=(npx -y pnpm@12.4.2 dlx @modelcontextprotocol/conformance@0.1.13 server --url "http://127.0.0.1:$PORT/mcp")
OUT="$(mktemp -d)"
node dist/main.js --port "$PORT" --audit-file "$OUT/audit.jsonl" 2>"$OUT/server.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$OUT"' EXIT
up=0
for _ in $(seq 1 240); do
  # Any HTTP answer (400 without a session) means the server is up.
  if curl -s -m 5 -o /dev/null "http://127.0.0.1:$PORT/mcp"; then up=1; break; fi
  if ! kill -0 "$SERVER" 2>/dev/null; then
    echo "the conformance server exited before it listened on $PORT" >&2
    cat "$OUT/server.log" >&2
    exit 1
  fi
  sleep 0.5
done
if [ "$up" -ne 1 ]; then
  echo "the conformance server did not answer on $PORT within 120 s" >&2
  tail -n 100 "$OUT/server.log" >&2
  exit 1
fi
status=0
"${SUITE[@]}" -o "$OUT/active" || status=$?
if [ "$status" -eq 0 ]; then
  "${SUITE[@]}" --suite pending --expected-failures "$PWD/conformance-pending-baseline.yml" \
    -o "$OUT/pending" || status=$?
fi
if [ "$status" -ne 0 ]; then
  echo "--- server log (last 100 lines) ---" >&2
  tail -n 100 "$OUT/server.log" >&2
fi
exit "$status"
