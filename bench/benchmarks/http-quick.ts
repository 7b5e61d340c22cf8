// Quick HTTP comparison for development: bare SDK vs toolgate over the trivial-tool servers (each in a
// process of its own), interleaved, ratio per round. BENCH_TRIVIAL_SKIP=<positions> leaves policies out of the stack.
// npx tsx benchmarks/http-quick.ts [rounds] [seconds] [none|sdk]
import { median } from '@toolgate/bench-harness';
import { echoLoad, startTrivialServers } from '../src/trivial-load.js';

const rounds = Number(process.argv[2] ?? 4);
const seconds = Number(process.argv[3] ?? 5);
const mode = process.argv[4] ?? 'none';
// Each server alone in a process of its own, as the bench runs them.
const started = await Promise.all(
  (['bare', 'toolgate'] as const).map((only) =>
    startTrivialServers(mode === 'sdk' ? 'sdk' : 'none', { env: { BENCH_TRIVIAL_ONLY: only } }),
  ),
);
const urls = { bare: started[0]!.urls.bare, toolgate: started[1]!.urls.toolgate };
const run = async (url: string, duration: number): Promise<number> =>
  (await echoLoad(url, duration)).requests.total / duration;
await run(urls.bare!, 2);
await run(urls.toolgate!, 2);
const ratios: number[] = [];
const lines: string[] = [];
for (let round = 0; round < rounds; round += 1) {
  const order: ('bare' | 'toolgate')[] = round % 2 === 0 ? ['bare', 'toolgate'] : ['toolgate', 'bare'];
  const got: Record<string, number> = {};
  for (const name of order) got[name] = await run(urls[name]!, seconds);
  ratios.push(got.toolgate! / got.bare!);
  lines.push(
    `bare ${got.bare!.toFixed(0)} toolgate ${got.toolgate!.toFixed(0)} ratio ${(got.toolgate! / got.bare!).toFixed(3)}`,
  );
}
process.stdout.write(
  `${lines.join('\n')}\nmedian ratio ${median(ratios).toFixed(3)} (skip=${process.env.BENCH_TRIVIAL_SKIP ?? ''})\n`,
);
for (const { child } of started) child.kill('SIGTERM');
process.exit(0);
