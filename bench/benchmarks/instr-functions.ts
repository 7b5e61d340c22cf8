// Development only: where two in-process cases' instructions differ, by function. Each case runs under
// callgrind as section 1b counts it (same child, flags, warm-up and counted calls), with V8 writing a
// perf map (`--perf-basic-prof`) so that JIT code, which callgrind knows only by address, is named.
// Prints the functions whose self instructions per call differ most between the two cases. V8 can
// reuse a code address after flushing a function, and the perf map then names it after the first
// owner: a line naming a function the case never runs (a module's top level) is such a stale name.
// npx tsx benchmarks/instr-functions.ts [base case] [other case] [rows]
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bundleChild, COUNTED_CALLS, PER_THREAD, runCounted } from './instructions.js';

const execFileAsync = promisify(execFile);
const MAX_OUTPUT = 256 * 2 ** 20;

const base = process.argv[2] ?? 'empty';
const other = process.argv[3] ?? "audit (file on the calls' thread)";
const rows = Number(process.argv[4] ?? 40);

interface PerfSymbol {
  readonly start: bigint;
  readonly end: bigint;
  readonly name: string;
}

/** Self instructions per counted call, by function name (JIT code named from the perf map). */
async function profile(child: string, which: string): Promise<Map<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'toolgate-instr-fn-'));
  const out = join(dir, 'callgrind.out');
  try {
    const run = runCounted(out, child, which, 1, ['--perf-basic-prof']);
    const pid = run.child.pid;
    await run;
    const { stdout } = await execFileAsync(
      'callgrind_annotate',
      ['--inclusive=no', '--threshold=100', PER_THREAD ? `${out}.1-01` : `${out}.1`],
      { maxBuffer: MAX_OUTPUT },
    );
    const symbols = await perfMap(pid);
    const perCall = new Map<string, number>();
    for (const match of stdout.matchAll(/^\s*([\d,]+) \([^)]*\)\s+(.*)$/gm)) {
      const instructions = Number(match[1]!.replaceAll(',', '')) / COUNTED_CALLS;
      const name = jitName(match[2]!.trim(), symbols);
      perCall.set(name, (perCall.get(name) ?? 0) + instructions);
    }
    return perCall;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function perfMap(pid: number | undefined): Promise<PerfSymbol[]> {
  const file = (await readdir('/tmp')).find((name) => name === `perf-${pid}.map`);
  if (file === undefined) return [];
  const text = await readFile(join('/tmp', file), 'utf8');
  await rm(join('/tmp', file), { force: true });
  const symbols: PerfSymbol[] = [];
  for (const line of text.split('\n')) {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (!match) continue;
    const start = BigInt(`0x${match[1]}`);
    symbols.push({ start, end: start + BigInt(`0x${match[2]}`), name: match[3]! });
  }
  return symbols.sort((a, b) => (a.start < b.start ? -1 : 1));
}

/** callgrind names code it has no symbol for by its address (`0x...`): the perf map's name for it. */
function jitName(name: string, symbols: readonly PerfSymbol[]): string {
  const match = /0x([0-9a-f]+)/i.exec(name);
  if (!match || !/^(\?\?\?:)?0x[0-9a-f]+/i.test(name)) return name.replace(/^[^:]*:/, '');
  const address = BigInt(`0x${match[1]}`);
  let low = 0;
  let high = symbols.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const symbol = symbols[mid]!;
    if (address < symbol.start) high = mid - 1;
    else if (address >= symbol.end) low = mid + 1;
    else return `JIT ${symbol.name}`;
  }
  return `JIT (unnamed) ${name}`;
}

const child = await bundleChild();
const [a, b] = [await profile(child, base), await profile(child, other)];
const names = new Set([...a.keys(), ...b.keys()]);
const diffs = [...names].map((name) => ({ name, a: a.get(name) ?? 0, b: b.get(name) ?? 0 }));
diffs.sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a));
const total = (m: Map<string, number>) => [...m.values()].reduce((sum, v) => sum + v, 0);
process.stdout.write(
  `${base}: ${total(a).toFixed(0)} a call; ${other}: ${total(b).toFixed(0)} (+${(total(b) - total(a)).toFixed(0)})\n`,
);
// callgrind_annotate's listing starts with the program's total and the frames every instruction lies
// under (main, the event loop): not functions of their own.
const frames = (entry: { a: number; b: number }): boolean => entry.b > total(b) * 0.5;
for (const { name, a: x, b: y } of diffs.filter((entry) => !frames(entry)).slice(0, rows)) {
  process.stdout.write(
    `${(y - x).toFixed(0).padStart(8)} ${x.toFixed(0).padStart(8)} ${y.toFixed(0).padStart(8)}  ${name.slice(0, 150)}\n`,
  );
}
