// Development only: CPU profiles of the bare SDK's and toolgate's trivial-tool HTTP servers, each in a
// process of its own, loaded in alternating short slices so both see the same machine; prints the
// requests each served (to turn the profiles' times into µs per request). Profiles in /tmp/prof-pair.
// npx tsx benchmarks/profile-pair.ts [slices] [seconds] [none|sdk]
import { rmSync } from 'node:fs';
import { echoLoad, startTrivialServers } from '../src/trivial-load.js';

const slices = Number(process.argv[2] ?? 12);
const seconds = Number(process.argv[3] ?? 3);
const mode = process.argv[4] === 'sdk' ? 'sdk' : 'none';
const dir = '/tmp/prof-pair';
rmSync(dir, { recursive: true, force: true });
const start = async (only: 'bare' | 'toolgate') => {
  const { child, urls } = await startTrivialServers(mode, {
    nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}/${only}`],
    env: { BENCH_TRIVIAL_ONLY: only },
  });
  return { child, url: urls[only] };
};
const servers = { bare: await start('bare'), toolgate: await start('toolgate') };
const served = { bare: 0, toolgate: 0 };
for (let slice = 0; slice < slices; slice += 1) {
  for (const name of slice % 2 === 0 ? (['bare', 'toolgate'] as const) : (['toolgate', 'bare'] as const)) {
    served[name] += (await echoLoad(servers[name].url, seconds)).requests.total;
  }
}
for (const server of Object.values(servers)) server.child.kill('SIGTERM');
await new Promise((resolveWait) => setTimeout(resolveWait, 3000));
process.stdout.write(`${JSON.stringify(served)}\n`);
