// Cost of check() per URL, and of the createUrlGuard middleware per tools/call against a bare chain.
// Run: npx tsx bench/url-allowlist.bench.ts. The resolver is a stub (no DNS, no network): this
// measures the policy's own work, not resolution.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import { createSilentLogger, defineTool, ok, registerTools, type ToolMiddleware } from '@toolgate/core';
import { connectTestClient } from '@toolgate/core/testing';
import * as z from 'zod';
import { createUrlGuard, createUrlPolicy } from '../src/index.js';

const answers = Promise.resolve(['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'] as const);
const policy = createUrlPolicy({
  allow: ['api.carrier.example', '*.example.org'],
  resolve: () => answers,
});
const swallow = (): undefined => undefined;

const checkRows = await compareCalls(
  [
    {
      name: 'baseline: new URL(url) only',
      call: async () => new URL('https://a.b.example.org/track/42?x=1'),
    },
    {
      name: 'check(): allowed name, 2 answers checked',
      call: () => policy.check('https://a.b.example.org/track/42?x=1'),
    },
    { name: 'check(): refused literal (0x7f.1)', call: () => policy.check('http://0x7f.1/').catch(swallow) },
    {
      name: 'check(): refused host (off the allowlist)',
      call: () => policy.check('https://evil.example/').catch(swallow),
    },
  ],
  { callsPerRound: 5000, rounds: 10 },
);

async function serverWith(middleware: ToolMiddleware[]) {
  const tool = defineTool({
    name: 'track',
    description: 'Track a shipment by URL.',
    input: { url: z.string() },
    handler: ({ url }) => ok({ url }),
  });
  const server = new McpServer({ name: 'bench', version: '1.0.0' });
  registerTools(server, [tool], { middleware, logger: createSilentLogger() });
  return connectTestClient(server);
}

const bare = await serverWith([]);
const guarded = await serverWith([createUrlGuard({ paths: 'url', policy })]);
const args = { url: 'https://api.carrier.example/track/42' };
const middlewareRows = await compareCalls(
  [
    { name: 'bare core chain', call: () => bare.callTool('track', args) },
    { name: "createUrlGuard({ paths: 'url', policy })", call: () => guarded.callTool('track', args) },
  ],
  { callsPerRound: 1000, rounds: 10 },
);
await bare.close();
await guarded.close();

console.log('## check() per URL\n');
console.log(formatBenchTable(checkRows));
console.log('\n## createUrlGuard per tools/call (in-memory transport, real SDK client)\n');
console.log(formatBenchTable(middlewareRows));
