#!/usr/bin/env bash
# Runs the MCP conformance suite against the built order-service over Streamable HTTP on 127.0.0.1.
# The generic scenarios must pass; conformance-baseline.yml lists the ones that need the suite's
# reference tools. Exit code: the suite's (0 = only expected failures).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${CONFORMANCE_PORT:-39170}"
OUT="$(mktemp -d)"
node dist/main.js --http --port "$PORT" --insecure-no-auth 2>"$OUT/server.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$OUT"' EXIT
for _ in $(seq 1 120); do
  if curl -s -o /dev/null "http://127.0.0.1:$PORT/mcp"; then break; fi
  sleep 0.5
done
npx -y pnpm@12.4.2 dlx @modelcontextprotocol/conformance@0.1.13 server \
  --url "http://127.0.0.1:$PORT/mcp" \
  --expected-failures "$PWD/conformance-baseline.yml" \
  -o "$OUT/results"
