// Bytes allocated per stateless request's setup (an McpServer and its tools registered), bare SDK vs
// core with the full stack's middleware list. Run with a young generation too large to collect.
// node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 --import tsx benchmarks/alloc-register.ts
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, defineTool, ok, registerTools } from '@toolgate/core';
import * as z from 'zod';
import { fullStack } from './middleware.bench.js';

const gc = (globalThis as { gc?: () => void }).gc!;
const dir = await mkdtemp(join(tmpdir(), 'toolgate-alloc-register-'));
const input = { q: z.string().max(200) };
const echo = defineTool({ name: 'echo', description: 'Echo.', input, handler: ({ q }) => ok({ q }) });
const middleware = fullStack(join(dir, 'a.jsonl')).map((entry) => entry.middleware);
const logger = createSilentLogger();
const setups: [string, () => unknown][] = [
  [
    'bare: McpServer + registerTool',
    () => {
      const mcp = new McpServer({ name: 'bare', version: '1.0.0' });
      mcp.registerTool('echo', { description: 'Echo.', inputSchema: input }, async ({ q }) => ({
        content: [{ type: 'text', text: q }],
      }));
      return mcp;
    },
  ],
  [
    'toolgate: McpServer + registerTools',
    () => {
      const mcp = new McpServer({ name: 'toolgate', version: '1.0.0' });
      registerTools(mcp, [echo], { middleware, logger });
      return mcp;
    },
  ],
];
const N = 500;
for (const [name, setup] of [...setups, ...setups]) {
  for (let i = 0; i < 200; i += 1) setup();
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < N; i += 1) setup();
  process.stdout.write(
    `${name.padEnd(40)} ${((process.memoryUsage().heapUsed - before) / N).toFixed(0)} B\n`,
  );
}
process.exit(0);
