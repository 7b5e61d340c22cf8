// Bytes allocated per call, per configuration: run with a young generation large enough that no GC
// happens while measuring, and read the heap's growth over N calls.
// node --expose-gc --max-semi-space-size=512 --import tsx benchmarks/alloc-per-call.ts [calls]
// ALLOC_LOOP=1: each call in an event-loop turn of its own (the bench's `echoCall`), so audit's writer
// seals and writes inside the measured window; by default calls run back to back, where it never does.
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestClient } from '@toolgate/core/testing';
import { bareServer, coreServer, echoCall, fullStack } from './middleware.bench.js';

const calls = Number(process.argv[2] ?? 2000);
const gc = (globalThis as { gc?: () => void }).gc!;
const dir = await mkdtemp(join(tmpdir(), 'toolgate-alloc-'));
const clients: [string, TestClient][] = [
  ['bare', await bareServer()],
  ['empty', await coreServer([])],
  ['full', await coreServer(fullStack(join(dir, 'f.jsonl')).map((e) => e.middleware))],
];
for (const entry of fullStack(join(dir, 'a.jsonl')))
  clients.push([entry.name, await coreServer([entry.middleware])]);
const loopTurns = process.env.ALLOC_LOOP === '1';
const callOf = (client: TestClient) =>
  loopTurns ? echoCall(client) : (i: number) => client.callTool('echo', { q: `v${i}` });
let k = 0;
const results: Record<string, number> = {};
for (const [name, client] of [...clients, ...clients]) {
  const call = callOf(client);
  for (let i = 0; i < 3000; i += 1) {
    k += 1;
    await call(k);
  }
  await new Promise((r) => setTimeout(r, 400));
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < calls; i += 1) {
    k += 1;
    await call(k);
  }
  const after = process.memoryUsage().heapUsed;
  results[name] = (after - before) / calls;
}
const base = results.bare!;
for (const [name, bytes] of Object.entries(results)) {
  process.stdout.write(
    `${name.padEnd(28)} ${bytes.toFixed(0).padStart(7)} B/call  ${(bytes - base >= 0 ? '+' : '') + (bytes - base).toFixed(0)}\n`,
  );
}
rmSync(dir, { recursive: true, force: true });
process.exit(0);
