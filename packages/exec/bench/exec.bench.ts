// Spawn cost dominates: safeExec vs child_process.execFile on /bin/true, and the full tools/call round trip.
import { execFile } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { promisify } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import { createSilentLogger, registerTools } from '@toolgate/core';
import { connectTestClient } from '@toolgate/core/testing';
import * as z from 'zod';
import { execTool, safeExec, value } from '../src/index.js';

const TRUE = '/bin/true';
const allow = [TRUE, realpathSync(TRUE)];
const execFileAsync = promisify(execFile);

const server = new McpServer({ name: 'bench', version: '1.0.0' });
registerTools(
  server,
  [
    execTool({
      name: 'run_true',
      description: 'Runs /bin/true.',
      input: { q: z.string() },
      command: TRUE,
      allow,
      args: (input) => [value(input.q)],
    }),
  ],
  { logger: createSilentLogger() },
);
const client = await connectTestClient(server);

for (const concurrency of [1, 8]) {
  const rows = await compareCalls(
    [
      { name: 'child_process.execFile(/bin/true)', call: (i) => execFileAsync(TRUE, [`v${i}`]) },
      { name: 'safeExec(/bin/true)', call: (i) => safeExec(TRUE, [value(`v${i}`)], { allow }) },
      { name: 'execTool tools/call round trip', call: (i) => client.callTool('run_true', { q: `v${i}` }) },
    ],
    { concurrency, callsPerRound: 100, rounds: 7, warmup: 20 },
  );
  console.log(`\n### @toolgate/exec: one run of /bin/true, concurrency ${concurrency}\n`);
  console.log(formatBenchTable(rows));
}
await client.close();
