// Quick in-process comparison for development: bare SDK vs core with chosen policies (by name prefix).
// [OTEL_SDK=1] npx tsx benchmarks/quick-mw.ts [rounds] [concurrency] [policy,policy|full|each]
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BenchCase, compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import { registerOtelSdk } from '../src/otel-sdk.js';
import { bareServer, coreServer, echoCall, fullStack } from './middleware.bench.js';

// OTEL_SDK=1: a real SDK registered first, as in the bench's SDK tables.
if (process.env.OTEL_SDK === '1') registerOtelSdk();

const rounds = Number(process.argv[2] ?? 15);
const concurrency = Number(process.argv[3] ?? 1);
const which = process.argv[4] ?? 'each';
const dir = await mkdtemp(join(tmpdir(), 'toolgate-quick-'));
const bare = await bareServer();
const cases: BenchCase[] = [
  { name: 'bare', call: echoCall(bare) },
  { name: 'empty', call: echoCall(await coreServer([])) },
];
const stack = fullStack(join(dir, 'a.jsonl'));
if (which === 'full' || which === 'each') {
  cases.push({
    name: 'full',
    call: echoCall(await coreServer(fullStack(join(dir, 'b.jsonl')).map((e) => e.middleware))),
  });
}
for (const entry of stack) {
  if (which === 'full') break;
  if (which !== 'each' && !which.split(',').some((w) => entry.name.startsWith(w))) continue;
  cases.push({ name: entry.name, call: echoCall(await coreServer([entry.middleware])) });
}
const rows = await compareCalls(cases, { rounds, callsPerRound: 1000, warmup: 1000, concurrency });
process.stdout.write(`${formatBenchTable(rows)}\n`);
rmSync(dir, { recursive: true, force: true });
process.exit(0);
