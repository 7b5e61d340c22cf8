// Development only: bytes allocated per call with the event loop turning between calls (audit's writer
// seals and writes inside the measured window), for the cases named. Run with a young generation large
// enough that nothing is collected while measuring:
// node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 --import tsx benchmarks/alloc-loop.ts [calls] [case,case]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildCase, echoCall } from './middleware.bench.js';

const calls = Number(process.argv[2] ?? 4000);
const names = (process.argv[3] ?? 'empty,audit (file)').split(',');
const gc = (globalThis as { gc?: () => void }).gc!;
const dir = await mkdtemp(join(tmpdir(), 'toolgate-alloc-loop-'));
const cases = [];
for (const name of names) cases.push({ name, built: await buildCase(name, dir) });
let k = 0;
for (let pass = 0; pass < 3; pass += 1) {
  for (const { name, built } of cases) {
    const call = echoCall(built.client);
    for (let i = 0; i < 3000; i += 1) {
      k += 1;
      await call(k);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < calls; i += 1) {
      k += 1;
      await call(k);
    }
    const after = process.memoryUsage().heapUsed;
    if (pass > 0)
      process.stdout.write(`${name.padEnd(16)} ${((after - before) / calls).toFixed(0)} B/call\n`);
  }
}
for (const { built } of cases) await built.close();
await rm(dir, { recursive: true, force: true });
process.exit(0);
