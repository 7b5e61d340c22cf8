// Development only: server CPU time per request over HTTP (trivial tool), bare SDK and toolgate each in
// a process of its own (no shared heap), loaded in alternation; CPU from /proc/<pid>/stat (all threads,
// the garbage collector's included). npx tsx benchmarks/http-cpu.ts [rounds] [seconds] [none|sdk]
import { readFileSync } from 'node:fs';
import { median } from '@toolgate/bench-harness';
import { echoLoad, startTrivialServers } from '../src/trivial-load.js';

const rounds = Number(process.argv[2] ?? 6);
const seconds = Number(process.argv[3] ?? 4);
const mode = process.argv[4] ?? 'none';
const TICK_US = 1e6 / 100; // USER_HZ

async function start(only: 'bare' | 'toolgate') {
  const { child, urls } = await startTrivialServers(mode === 'sdk' ? 'sdk' : 'none', {
    env: { BENCH_TRIVIAL_ONLY: only },
  });
  return { child, url: urls[only] };
}
const cpuUs = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_US;
};
const load = async (url: string, duration: number): Promise<number> =>
  (await echoLoad(url, duration)).requests.total;
const servers = { bare: await start('bare'), toolgate: await start('toolgate') };
for (const s of Object.values(servers)) await load(s.url, 3);
const per: Record<string, number[]> = { bare: [], toolgate: [] };
const rps: Record<string, number[]> = { bare: [], toolgate: [] };
for (let round = 0; round < rounds; round += 1) {
  const order = (round % 2 === 0 ? ['bare', 'toolgate'] : ['toolgate', 'bare']) as ('bare' | 'toolgate')[];
  for (const name of order) {
    const { child, url } = servers[name];
    const before = cpuUs(child.pid!);
    const requests = await load(url, seconds);
    per[name]!.push((cpuUs(child.pid!) - before) / requests);
    rps[name]!.push(requests / seconds);
  }
}
for (const name of ['bare', 'toolgate']) {
  process.stdout.write(
    `${name}: ${per[name]!.map((v) => v.toFixed(1)).join(' ')} median ${median(per[name]!).toFixed(1)} µs CPU/request\n`,
  );
}
for (const name of ['bare', 'toolgate']) {
  process.stdout.write(
    `${name}: ${rps[name]!.map((v) => v.toFixed(0)).join(' ')} median ${median(rps[name]!).toFixed(0)} req/s\n`,
  );
}
process.stdout.write(`req/s ratio ${(median(rps.toolgate!) / median(rps.bare!)).toFixed(3)}\n`);
process.stdout.write(
  `toolgate - bare: ${(median(per.toolgate!) - median(per.bare!)).toFixed(1)} µs (skip=${process.env.BENCH_TRIVIAL_SKIP ?? ''})\n`,
);
for (const s of Object.values(servers)) s.child.kill('SIGTERM');
process.exit(0);
