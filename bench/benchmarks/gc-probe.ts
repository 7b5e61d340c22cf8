// Development only: garbage-collector work per request over HTTP (trivial tool), bare SDK and toolgate
// each in a process of its own under --trace-gc. npx tsx benchmarks/gc-probe.ts [seconds] [none|sdk]
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { echoLoad } from '../src/trivial-load.js';

const seconds = Number(process.argv[2] ?? 10);
const mode = process.argv[3] ?? 'none';
const script = fileURLToPath(new URL('./http-trivial-servers.ts', import.meta.url));
for (const only of ['bare', 'toolgate', 'bare', 'toolgate']) {
  const child = spawn(process.execPath, ['--trace-gc', '--import', 'tsx', script, mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, BENCH_TRIVIAL_ONLY: only },
  });
  const gc: { kind: string; ms: number }[] = [];
  let counting = false;
  const url = await new Promise<string>((resolveUrl) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('{')) resolveUrl((JSON.parse(line) as Record<string, string>)[only]!);
      const match =
        /: (Scavenge|Mark-Compact|Mark-sweep|Minor Mark-Compact)[^,]*,\s*([\d.]+)\s*\/\s*([\d.]+)\s*ms/.exec(
          line,
        );
      if (match && counting) gc.push({ kind: match[1]!, ms: Number(match[2]) });
    });
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
