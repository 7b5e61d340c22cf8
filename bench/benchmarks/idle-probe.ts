// Development only: what idling before a round costs one case. Section 1 parks a case's process about
// 350 ms between its rounds while the other cases run theirs; a loaded server never idles so. This runs
// ROUNDS rounds of 1000 calls in one process, alternating a round right after the last (no idling) with
// a round after SLEEP_MS of idling, and prints each kind's median µs a call (add --trace-gc to see the
// collections). Run it for `bare` and another case: the difference of the two cases' medians is that
// case's added µs, warm and woken.
// node --import tsx benchmarks/idle-probe.ts CASE [SLEEP_MS] [ROUNDS]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildCase, echoCall } from './middleware.bench.js';

const which = process.argv[2] ?? 'full';
const sleepMs = Number(process.argv[3] ?? 350);
const rounds = Number(process.argv[4] ?? 40);
const dir = await mkdtemp(join(tmpdir(), 'toolgate-idle-'));
const built = await buildCase(which, dir);
const call = echoCall(built.client);
let i = 0;
for (; i < 5000; i += 1) await call(i);
const warm: number[] = [];
const woken: number[] = [];
for (let round = 0; round < rounds; round += 1) {
  const idle = round % 2 === 1;
  if (idle) await new Promise((resolve) => setTimeout(resolve, sleepMs));
  const started = process.hrtime.bigint();
  for (let n = 0; n < 1000; n += 1, i += 1) await call(i);
  (idle ? woken : warm).push(Number(process.hrtime.bigint() - started) / 1e6);
}
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
};
process.stderr.write(
  `${which}: ${median(warm).toFixed(2)} µs a call back to back, ${median(woken).toFixed(2)} after ${sleepMs} ms idle\n`,
);
await built.close();
await rm(dir, { recursive: true, force: true });
process.exit(0);
