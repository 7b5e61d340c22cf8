// Quick in-process comparison for development: bare SDK vs core with chosen policies (by name prefix),
// each case in a process of its own as in the bench's section 1.
// [OTEL_SDK=1] npx tsx benchmarks/quick-mw.ts [rounds] [concurrency] [policy,policy|full|each]
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import { type CaseProcess, startCaseProcess } from '../src/case-process.js';
import { stackNames } from './middleware.bench.js';

const otelSdk = process.env.OTEL_SDK === '1';
const rounds = Number(process.argv[2] ?? 15);
const concurrency = Number(process.argv[3] ?? 1);
const which = process.argv[4] ?? 'each';
const wanted = ['bare', 'empty'];
if (which === 'full' || which === 'each') wanted.push('full');
for (const name of await stackNames()) {
  if (which === 'full') break;
  if (which === 'each' || which.split(',').some((prefix) => name.startsWith(prefix))) wanted.push(name);
}
const children: CaseProcess[] = [];
for (const name of wanted) children.push(await startCaseProcess(name, name, { otelSdk }));
const rows = await compareCalls(
  children.map((child) => child.benchCase),
  { rounds, callsPerRound: 1000, warmup: 5000, concurrency },
);
process.stdout.write(`${formatBenchTable(rows)}\n`);
await Promise.all(children.map((child) => child.close()));
