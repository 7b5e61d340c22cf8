// Quick in-process comparison for development: bare SDK vs core with chosen policies (by name prefix),
// each case in a process of its own as in the bench's section 1.
// [OTEL_SDK=1] npx tsx benchmarks/quick-mw.ts [rounds] [concurrency] [policy,policy|full|each] [sets of processes]
import { compareInEpochs, formatBenchTable } from '@toolgate/bench-harness';
import { type CaseProcess, startCaseProcess } from '../src/case-process.js';
import { CALLS_THREAD_AUDIT, FULL_CALLS_THREAD, stackNames } from './middleware.bench.js';

const otelSdk = process.env.OTEL_SDK === '1';
const rounds = Number(process.argv[2] ?? 15);
const concurrency = Number(process.argv[3] ?? 1);
const which = process.argv[4] ?? 'each';
const wanted = ['bare', 'empty'];
if (which === 'full' || which === 'each') wanted.push('full');
if (which === 'full') wanted.push(FULL_CALLS_THREAD);
for (const name of [...(await stackNames()), CALLS_THREAD_AUDIT]) {
  if (which === 'full') break;
  if (which === 'each' || which.split(',').some((prefix) => name.startsWith(prefix))) wanted.push(name);
}
const epochs = Math.max(1, Number(process.argv[5] ?? 1));
// Each set of processes runs rounds / epochs rounds (see the bench's section 1).
const [rows] = await compareInEpochs(
  async () => {
    const children: CaseProcess[] = [];
    for (const name of wanted) children.push(await startCaseProcess(name, name, { otelSdk }));
    return {
      cases: children.map((child) => child.benchCase),
      close: async () => {
        await Promise.all(children.map((child) => child.close()));
      },
    };
  },
  epochs,
  [{ rounds: Math.max(1, Math.round(rounds / epochs)), callsPerRound: 1000, warmup: 5000, concurrency }],
);
process.stdout.write(`${formatBenchTable(rows!)}\n`);
