#!/usr/bin/env bash
# Runs the MCP conformance suite against the built conformance server over Streamable HTTP on
# 127.0.0.1: first the active suite (the default, every scenario) with NO expected failures, then the
# pending scenarios against conformance-pending-baseline.yml (which says why each cannot pass yet).
# Exit code: 0 when both pass; otherwise the first failing run's (the server log is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${CONFORMANCE_PORT:-39171}"
SUITE=(npx -y pnpm@12.4.2 dlx @modelcontextprotocol/conformance@0.1.13 server --url "http://127.0.0.1:$PORT/mcp")
OUT="$(mktemp -d)"
node dist/main.js --port "$PORT" --audit-file "$OUT/audit.jsonl" 2>"$OUT/server.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$OUT"' EXIT
for _ in $(seq 1 120); do
  # Any HTTP answer (400 without a session) means the server is up.
  if curl -s -o /dev/null "http://127.0.0.1:$PORT/mcp"; then break; fi
  if ! kill -0 "$SERVER" 2>/dev/null; then cat "$OUT/server.log" >&2; exit 1; fi
  sleep 0.5
done
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
