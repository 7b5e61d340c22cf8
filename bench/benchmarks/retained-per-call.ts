// Bytes the heap keeps per call after a forced full GC: what a policy holds on to between calls (the
// repeat guard's remembered calls, a rate limiter's counters), which every later collection walks.
// Distinct arguments on every call, as in section 1; the empty chain's figure is the baseline (the
// SDK and the JIT keep a little too).
//   node --expose-gc --import tsx benchmarks/retained-per-call.ts [policy-prefix,...] [calls]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestClient } from '@toolgate/core/testing';
import { coreServer, fullStack } from './middleware.bench.js';

const names = (process.argv[2] ?? 'repeat-guard').split(',');
// Under the repeat guard's default 10,000 entries: every call it remembers is still held at the end.
const calls = Number(process.argv[3] ?? 4999);
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');
const dir = await mkdtemp(join(tmpdir(), 'toolgate-retained-'));

async function retainedPerCall(client: TestClient, tag: string): Promise<number> {
  for (let i = 0; i < 200; i += 1) await client.callTool('echo', { q: `${tag}-warm-${i}` });
  gc!();
  gc!();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < calls; i += 1) await client.callTool('echo', { q: `${tag}-${i}` });
  gc!();
  gc!();
  return (process.memoryUsage().heapUsed - before) / calls;
}

const rows: string[] = [];
const empty = await coreServer([]);
const base = await retainedPerCall(empty, 'empty');
await empty.close();
rows.push(`| core, empty chain (baseline) | ${base.toFixed(0)} | |`);
for (const name of names) {
  const entry = fullStack(join(dir, `${name}.jsonl`)).find((e) => e.name.startsWith(name));
  if (entry === undefined) throw new Error(`no policy named ${name}`);
  const client = await coreServer([entry.middleware]);
  const bytes = await retainedPerCall(client, name);
  rows.push(`| ${entry.name} | ${bytes.toFixed(0)} | ${(bytes - base).toFixed(0)} |`);
  await client.close();
  await entry.close();
}
await rm(dir, { recursive: true, force: true });
process.stdout.write(
  `${calls} calls\n\n| configuration | bytes kept per call | over the empty chain |\n|---|---:|---:|\n${rows.join('\n')}\n`,
);
process.exit(0);
