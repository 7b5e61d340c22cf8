#!/usr/bin/env bash
# Packs every published package with `pnpm pack` (its prepack builds it; catalog: and workspace:^
# become real versions), checks what the tarballs would publish, installs them with npm into a
# scratch ESM project in a temp dir (their registry dependencies come from the registry) and runs
# scripts/consumer.mjs there: it imports every package and calls a tool through core/testing.
# Usage: bash scripts/pack-and-consume.sh   (KEEP=1 keeps the temp dir for a look)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PNPM=(npx -y pnpm@12.4.2)
export TURBO_TELEMETRY_DISABLED=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-pack-XXXXXX")
if [ "${KEEP:-}" != "1" ]; then trap 'rm -rf "$WORK"' EXIT; else echo "keeping $WORK"; fi
mkdir -p "$WORK/tarballs" "$WORK/consumer"

# Published = every packages/* whose package.json is not private.
PACKAGES=()
for manifest in packages/*/package.json; do
  if node -e 'process.exit(require(process.argv[1]).private ? 1 : 0)' "$ROOT/$manifest"; then
    PACKAGES+=("$(dirname "$manifest")")
  fi
done
echo "published packages: ${PACKAGES[*]}"

# prepack compiles each package alone, so the packages it imports must be built first.
"${PNPM[@]}" exec turbo run build --filter='./packages/*' --output-logs=errors-only

# turbo has just built every package from its sources, so each pack skips its prepack (the same tsc
# again, about 4 s a package on CI's two cores); the tarballs are the same file for file.
for dir in "${PACKAGES[@]}"; do
  (cd "$dir" && pnpm_config_ignore_scripts=true "${PNPM[@]}" pack --pack-destination "$WORK/tarballs" >/dev/null)
done
ls "$WORK/tarballs"

# What would be published: real ranges only, runtime deps not exact, a LICENSE, ESM exports.
node "$ROOT/scripts/check-tarballs.mjs" "$WORK/tarballs"

cd "$WORK/consumer"
node -e '
const fs = require("node:fs");
const tarballs = fs.readdirSync(process.argv[1]).filter((f) => f.endsWith(".tgz"));
const dependencies = {};
for (const file of tarballs) {
  const name = "@toolgate/" + file.replace(/^toolgate-/, "").replace(/-\d+\.\d+\.\d+.*\.tgz$/, "");
  dependencies[name] = "file:" + process.argv[1] + "/" + file;
}
// The peers a server installs itself (npm would add required ones, but say it as a README does).
Object.assign(dependencies, {
  "@modelcontextprotocol/sdk": "^1.32.2",
  zod: "^4.0.0",
  "@opentelemetry/api": "^1.9.0",
  pg: "^8.11.0",
  "@electric-sql/pglite": "^0.5.0",
});
fs.writeFileSync("package.json", JSON.stringify({ name: "toolgate-consumer", private: true, type: "module", dependencies }, null, 2));
' "$WORK/tarballs"
cp "$ROOT/scripts/consumer.mjs" .
npm install --no-audit --no-fund --loglevel=error
node consumer.mjs
echo "pack-and-consume: ok"
