// The audit middleware's per-call path and its writer's batch path under a CPU profile, no transport:
//   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/profile-call.ts [calls]
// then `node /tmp/prof/top.cjs 40 packages/audit/src`. Same call shape as audit.bench.ts (a secret
// among the args, a context per call), file sink on a temp file, a flush every 256 calls.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compose, createSilentLogger, defineTool, ok, type ToolDefinition } from '@toolgate/core';
import { createTestContext } from '@toolgate/core/testing';
import * as z from 'zod';
import { createAudit, createFileSink } from '../src/index.js';

const CALLS = Number(process.argv[2] ?? 500_000);
const logger = createSilentLogger();
const echo = defineTool({
  name: 'echo',
  description: 'Echo.',
  input: { q: z.string(), token: z.string().optional() },
  handler: ({ q }) => ok({ q }),
});
const dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-prof-'));
const audit = createAudit({ sink: createFileSink(join(dir, 'audit.jsonl')), logger });
const chain = compose([audit]);
const answer = ok({ q: 'v' });
const handler = (): Promise<typeof answer> => Promise.resolve(answer);
const signal = new AbortController().signal;
const started = performance.now();
const cpu = process.cpuUsage();
for (let i = 0; i < CALLS; i += 1) {
  await chain(
    createTestContext({
      tool: echo as ToolDefinition,
      args: { q: `v${i}`, token: 'Bearer abc.def' },
      request: { id: i, signal },
      logger,
    }),
    handler,
  );
  if (i % 256 === 0) await audit.flush();
}
await audit.close();
const us = ((performance.now() - started) * 1000) / CALLS;
const used = process.cpuUsage(cpu);
const cpuUs = (used.user + used.system) / CALLS;
process.stderr.write(
  `${CALLS} calls, ${us.toFixed(2)} µs per call, ${cpuUs.toFixed(2)} µs CPU (context + chain + audit)\n`,
);
await rm(dir, { recursive: true, force: true });
