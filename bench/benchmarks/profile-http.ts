// Drives one of the trivial-tool HTTP servers under autocannon while the server process runs with
// `--cpu-prof`, for where the per-request time goes over HTTP.
// npx tsx benchmarks/profile-http.ts [bare|toolgate|fastmcp] [seconds] [none|sdk] [warm-first] (profile in /tmp/prof)
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { distinctEchoRequest, MCP_POST_HEADERS } from '../src/mcp-http.js';

const which = (process.argv[2] ?? 'toolgate') as 'bare' | 'toolgate' | 'fastmcp';
const seconds = Number(process.argv[3] ?? 10);
const mode = process.argv[4] ?? 'none';
// A server to load briefly first, in the same process (e.g. toolgate, so that a real OTel SDK's
// context manager is active for the profiled server too, as in the interleaved bench).
const warmFirst = process.argv[5] as 'bare' | 'toolgate' | 'fastmcp' | undefined;
const child = spawn(
  process.execPath,
  [
    '--cpu-prof',
    '--cpu-prof-dir=/tmp/prof',
    '--import',
    'tsx',
    fileURLToPath(new URL('./http-trivial-servers.ts', import.meta.url)),
    mode,
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const urls = await new Promise<Record<string, string>>((resolveLine) => {
  createInterface({ input: child.stdout! }).on('line', (text) => {
    if (text.startsWith('{')) resolveLine(JSON.parse(text) as Record<string, string>);
  });
});
if (warmFirst !== undefined) {
  await autocannon({
    url: urls[warmFirst]!,
    connections: 32,
    duration: 2,
    method: 'POST',
    headers: { ...MCP_POST_HEADERS },
    requests: [distinctEchoRequest()],
  });
}
const result = await autocannon({
  url: urls[which]!,
  connections: 32,
  duration: seconds,
  method: 'POST',
  headers: { ...MCP_POST_HEADERS },
  requests: [distinctEchoRequest()],
});
process.stderr.write(`${which}: ${result.requests.average} req/s\n`);
child.kill('SIGTERM');
