#!/usr/bin/env bash
# Runs the MCP conformance suite against the built conformance server over Streamable HTTP on
# 127.0.0.1: first the active suite (the default, every scenario) with NO expected failures, then the
# pending scenarios against conformance-pending-baseline.yml (which says why each cannot pass yet).
# Exit code: 0 when both pass; otherwise the first failing run's (the server log is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
source ../../scripts/await-server.sh
# Below Linux's ephemeral range (32768-60999), so no client connection's source port can hold it.
PORT="${CONFORMANCE_PORT:-17171}"
require_free_port "$PORT"
SUITE=(npx -y pnpm@12.4.2 dlx @modelcontextprotocol/conformance@0.1.13 server --url "http://127.0.0.1:$PORT/mcp")
OUT="$(mktemp -d)"
node dist/main.js --port "$PORT" --audit-file "$OUT/audit.jsonl" 2>"$OUT/server.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$OUT"' EXIT
await_server "$SERVER" "http://127.0.0.1:$PORT/mcp" "$OUT/server.log" "conformance server"
status=0
"${SUITE[@]}" -o "$OUT/active" || status=$?
if [ "$status" -eq 0 ]; then
  "${SUITE[@]}" --suite pending --expected-failures "$PWD/conformance-pending-baseline.yml" \
    -o "$OUT/pending" || status=$?
fi
if [ "$status" -ne 0 ]; then show_server_log "$OUT/server.log" "conformance server"; fi
exit "$status"
