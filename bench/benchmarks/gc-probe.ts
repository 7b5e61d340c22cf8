// Development only: garbage-collector work per request over HTTP (trivial tool), bare SDK and toolgate
// each in a process of its own under --trace-gc. npx tsx benchmarks/gc-probe.ts [seconds] [none|sdk]
import { createInterface } from 'node:readline';
import { echoLoad, startTrivialServers } from '../src/trivial-load.js';

const seconds = Number(process.argv[2] ?? 10);
const mode = process.argv[3] === 'sdk' ? 'sdk' : 'none';
for (const only of ['bare', 'toolgate', 'bare', 'toolgate'] as const) {
  const { child, urls } = await startTrivialServers(mode, {
    nodeArgs: ['--trace-gc'],
    env: { BENCH_TRIVIAL_ONLY: only },
  });
  const url = urls[only];
  const gc: { kind: string; ms: number }[] = [];
  let counting = false;
  // --trace-gc writes to stdout: a second reader of the same lines, after the one that found the URLs.
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const match =
      /: (Scavenge|Mark-Compact|Mark-sweep|Minor Mark-Compact)[^,]*,\s*([\d.]+)\s*\/\s*([\d.]+)\s*ms/.exec(
        line,
      );
    if (match && counting) gc.push({ kind: match[1]!, ms: Number(match[2]) });
  });
  await echoLoad(url, 3);
  counting = true;
  const result = await echoLoad(url, seconds);
  counting = false;
  const requests = result.requests.total;
  const by = new Map<string, { n: number; ms: number }>();
  for (const { kind, ms } of gc) {
    const entry = by.get(kind) ?? { n: 0, ms: 0 };
    entry.n += 1;
    entry.ms += ms;
    by.set(kind, entry);
  }
  const total = gc.reduce((sum, { ms }) => sum + ms, 0);
  process.stdout.write(
    `${only}: ${requests} requests, GC ${((total * 1000) / requests).toFixed(1)} µs/request ${[...by]
      .map(([kind, { n, ms }]) => `${kind} ${n}× ${((ms * 1000) / requests).toFixed(1)} µs/req`)
      .join(', ')}\n`,
  );
  child.kill('SIGTERM');
  await new Promise((resolveExit) => child.once('exit', resolveExit));
}
