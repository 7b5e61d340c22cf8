// Development only: does sharing one process change a server's throughput? Starts the three trivial
// servers in one process (as the one-process bench did) and each of bare and toolgate alone in a process
// of its own, then loads them in alternation (the shared process's three servers each round, so its JIT
// feedback and heap stay mixed): req/s of each server shared and alone, and toolgate/bare in each setting.
// npx tsx benchmarks/process-effect.ts [rounds] [seconds] [none|sdk]
import { median, medianRatio } from '@toolgate/bench-harness';
import { echoLoad, startTrivialServers } from '../src/trivial-load.js';

const rounds = Number(process.argv[2] ?? 10);
const seconds = Number(process.argv[3] ?? 2);
const mode = process.argv[4] === 'sdk' ? 'sdk' : 'none';
const shared = await startTrivialServers(mode);
const alone = {
  bare: await startTrivialServers(mode, { env: { BENCH_TRIVIAL_ONLY: 'bare' } }),
  toolgate: await startTrivialServers(mode, { env: { BENCH_TRIVIAL_ONLY: 'toolgate' } }),
};
const targets = {
  'shared bare': shared.urls.bare,
  'shared toolgate': shared.urls.toolgate,
  'shared fastmcp': shared.urls.fastmcp,
  'alone bare': alone.bare.urls.bare,
  'alone toolgate': alone.toolgate.urls.toolgate,
} as const;
type Name = keyof typeof targets;
const names = Object.keys(targets) as Name[];
const got = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<Name, number[]>;
const rate = async (url: string, duration: number) =>
  (await echoLoad(url, duration)).requests.total / duration;
for (const name of names) await rate(targets[name], 2);
for (let round = 0; round < rounds; round += 1) {
  const order = round % 2 === 0 ? names : [...names].reverse();
  for (const name of order) got[name].push(await rate(targets[name], seconds));
}
for (const name of names)
  process.stdout.write(`${name.padEnd(16)} median ${median(got[name]).toFixed(0)} req/s\n`);
process.stdout.write(
  `toolgate/bare shared ${medianRatio(got['shared toolgate'], got['shared bare']).toFixed(3)}, alone ${medianRatio(got['alone toolgate'], got['alone bare']).toFixed(3)}\n` +
    `alone/shared: bare ${medianRatio(got['alone bare'], got['shared bare']).toFixed(3)}, toolgate ${medianRatio(got['alone toolgate'], got['shared toolgate']).toFixed(3)}\n`,
);
for (const server of [shared, alone.bare, alone.toolgate]) server.child.kill('SIGTERM');
process.exit(0);
