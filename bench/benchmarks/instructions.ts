// 1c. Instructions per call: each in-process case of section 1 counted by valgrind's callgrind instead
// of timed. A count is repeatable where a time is not (section 1's 95% intervals on this two-core VM
// are wider than a policy's bound): the same program, inputs and V8 flags execute nearly the same
// instructions whatever else the machine is doing. What a count leaves out: time in the kernel
// (system calls, page faults) and what an instruction costs (a cache miss counts as one).
//
// npx tsx benchmarks/instructions.ts [case,case|all] [concurrency]
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { stackNames } from './middleware.bench.js';

/**
 * V8 made deterministic: `--predictable` runs the compiler and the garbage collector on the main
 * thread with no time-driven heuristics, fixed seeds fix hashing and Math.random, and a fixed young
 * generation makes every scavenge depend on bytes allocated alone. Loaded through tsx, two identical
 * runs differed by 157 M instructions (its loader thread); bundled first, by 0.4-2 M (whole runs).
 */
const V8_FLAGS = [
  '--predictable',
  '--hash-seed=1',
  '--random-seed=1',
  '--min-semi-space-size=16',
  '--max-semi-space-size=16',
];

/**
 * Calls a case makes before it is counted, and calls counted. The JIT has finished with the full stack
 * by 11,000 calls (`--trace-opt`: 155 functions optimized by call 5,000, 169 by 9,000, 171 by 11,000
 * and by 13,000; small functions run once a call, such as repeat-guard's middleware, reach V8's
 * tier-up budget late). Counted over calls 5,000-7,000, TurboFan's own work added about 10 k a call.
 * 6000 calls are counted so that V8's full collections (about 100 M instructions each) are spread over
 * enough calls: counting 2000, audit's two processes differed by 25 k a call, one full collection.
 */
export const WARMUP_CALLS = 11_000;
export const COUNTED_CALLS = 6000;
/** Processes counted per case: their spread shows how far a count repeats. */
export const REPEATS = 2;

/** Bundles `instr-case-child.ts` (packages stay external: the workspace's built `dist`). */
export async function bundleChild(): Promise<string> {
  const dir = fileURLToPath(new URL('../node_modules/.cache/toolgate-instructions/', import.meta.url));
  await mkdir(dir, { recursive: true });
  const outfile = `${dir}child.mjs`;
  await build({
    entryPoints: [fileURLToPath(new URL('./instr-case-child.ts', import.meta.url))],
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile,
    logLevel: 'error',
  });
  return outfile;
}

/**
 * How much slower than natively a process runs under callgrind, roughly (measured 3.9-5.2 ms a call
 * against 23-45 µs natively on this two-core VM): the counted process's clocks are slowed by as much
 * (see time-dilation.ts). It need not be exact: what it sets is chiefly how many records audit's 1 ms
 * window batches, and a batch's own work is about 8 k instructions (one record a batch, undilated,
 * counted 7 k more a call than about 50 a batch).
 */
export const TIME_DILATION = 200;

export interface Count {
  /** Every instruction the process executed (callgrind's `Collected`). */
  total: number;
  /**
   * Of `total`, those in OpenSSL's SHA-256 block function. Valgrind's virtual CPU lacks the SHA
   * extensions, so OpenSSL takes its AVX2 path here, several times the instructions of the SHA-NI
   * path it takes natively on this machine's CPU: counted apart so that a reader can discount them.
   */
  sha256: number;
  /**
   * Of `total`, those in V8's full (mark-compact) collector, about: its marking, evacuating and
   * sweeping functions by name. One collection costs tens of millions of instructions, so whether one
   * falls among the counted calls moves a count per call by several k; shown apart for that reason.
   */
  majorGc: number;
  /** Real µs a call took under callgrind (the child's report). */
  realUsPerCall: number;
}

/**
 * Counts the instructions of COUNTED_CALLS calls of case `which` under callgrind, after WARMUP_CALLS
 * (the child marks where they start and end; see instr-case-child.ts).
 */
export async function countInstructions(child: string, which: string, concurrency: number): Promise<Count> {
  const dir = await mkdtemp(join(tmpdir(), 'toolgate-callgrind-'));
  const out = join(dir, 'callgrind.out');
  try {
    const { stderr } = await execFileAsync(
      'valgrind',
      [
        '--tool=callgrind',
        `--callgrind-out-file=${out}`,
        '--zero-before=node::CPUUsage(*',
        '--dump-before=node::ResourceUsage(*',
        process.execPath,
        ...V8_FLAGS,
        child,
        which,
        String(WARMUP_CALLS),
        String(COUNTED_CALLS),
        String(concurrency),
      ],
      // The bundle's imports resolve from where it lies, in bench/node_modules.
      { env: { ...process.env, TOOLGATE_BENCH_TIME_DILATION: String(TIME_DILATION) }, maxBuffer: MAX_OUTPUT },
    );
    // The counted calls' dump is part 1; the rest of the process (closing) is the final part.
    const files = (await readdir(dir)).filter((name) => name.startsWith('callgrind.out')).sort();
    if (files.length !== 2) {
      throw new Error(`callgrind on case ${JSON.stringify(which)}: ${files.length - 1} counted dumps, not 1`);
    }
    const counted = await readFile(`${out}.1`, 'utf8');
    const summary = /^summary: (\d+)$/m.exec(counted);
    const real = /instr-case-child: ([\d.]+) µs a call/.exec(stderr);
    if (!summary || !real || !counted.includes('Trigger: --dump-before=node::ResourceUsage')) {
      throw new Error(`callgrind on case ${JSON.stringify(which)}: no count in\n${stderr.slice(-2000)}`);
    }
    const { stdout: annotated } = await execFileAsync(
      'callgrind_annotate',
      ['--inclusive=no', '--threshold=100', `${out}.1`],
      { maxBuffer: MAX_OUTPUT },
    );
    let sha256 = 0;
    let majorGc = 0;
    for (const match of annotated.matchAll(/^\s*([\d,]+) \([^)]*\)\s+(.*)$/gm)) {
      const instructions = Number(match[1]!.replaceAll(',', ''));
      if (match[2]!.includes('sha256_block_data_order')) sha256 += instructions;
      else if (MAJOR_GC.test(match[2]!)) majorGc += instructions;
    }
    return { total: Number(summary[1]), sha256, majorGc, realUsPerCall: Number(real[1]) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** V8's mark-compact collector's own functions (the scavenger's are left out: they run every few calls). */
const MAJOR_GC =
  /v8::internal::(MarkCompactCollector|(Main|Concurrent)?MarkingVisitor|MarkingWorklist|IncrementalMarking|MarkingBarrier|Sweeper|EvacuateVisitorBase|EvacuateNewSpaceVisitor|EvacuateOldSpaceVisitor|LiveObjectRange|RememberedSetUpdatingItem|RecordMigratedSlotVisitor)/;

/** Runs a command to its end (rejecting on a non-zero exit, with its stderr in the message). */
const execFileAsync = promisify(execFile);
/** callgrind_annotate's listing of a run runs to megabytes. */
const MAX_OUTPUT = 64 * 2 ** 20;

export interface InstructionRow {
  name: string;
  /** Instructions per counted call, the mean of REPEATS processes. */
  perCall: number;
  /** Highest minus lowest of the processes' counts per call: how far a count repeats. */
  spread: number;
  /** Of `perCall`, SHA-256's (see `Count.sha256`). */
  sha256PerCall: number;
  /** Of `perCall`, the full collector's (see `Count.majorGc`). */
  majorGcPerCall: number;
  /** Real µs a counted call took under callgrind (mean). */
  realUsPerCall: number;
}

/** Runs `jobs` two at a time (the machine's two cores), in order of start. */
async function twoAtATime<T>(jobs: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < jobs.length) {
      const index = next++;
      results[index] = await jobs[index]!();
    }
  };
  await Promise.all([worker(), worker()]);
  return results;
}

/** Instructions per call of each case (`bare`, `empty`, `full` or a policy's name). */
export async function instructionsPerCall(
  cases: readonly string[],
  concurrency: number,
): Promise<InstructionRow[]> {
  const child = await bundleChild();
  const counts = await twoAtATime(
    cases.flatMap((which) =>
      Array.from({ length: REPEATS }, () => () => countInstructions(child, which, concurrency)),
    ),
  );
  return cases.map((name, index) => {
    const own = counts.slice(index * REPEATS, (index + 1) * REPEATS);
    const perCall = own.map((count) => count.total / COUNTED_CALLS);
    const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;
    return {
      name,
      perCall: mean(perCall),
      spread: Math.max(...perCall) - Math.min(...perCall),
      sha256PerCall: mean(own.map((count) => count.sha256 / COUNTED_CALLS)),
      majorGcPerCall: mean(own.map((count) => count.majorGc / COUNTED_CALLS)),
      realUsPerCall: mean(own.map((count) => count.realUsPerCall)),
    };
  });
}

/** Whether valgrind's callgrind can run here (Debian's valgrind package). */
async function haveValgrind(): Promise<boolean> {
  try {
    await execFileAsync('valgrind', ['--version']);
    return true;
  } catch {
    return false;
  }
}

const k = (instructions: number): string => `${(instructions / 1000).toFixed(1)} k`;
const signedK = (instructions: number): string =>
  `${instructions >= 0 ? '+' : '−'}${k(Math.abs(instructions))}`;

/**
 * Issue 18's in-process bounds as shares of the bare round trip: set in µs where that round trip took
 * about 25 µs (see middleware.bench.ts), so the stack may add 12/25 of it, one policy 3/25, audit 4/25.
 */
const SHARE_BOUNDS = { stack: 12 / 25, policy: 3 / 25, audit: 4 / 25 } as const;

/** Section 1b of RESULTS.md: the in-process cases counted in instructions, sequential calls. */
export async function instructionsBench(): Promise<string> {
  if (!(await haveValgrind())) return `${HEADING}\n\nNot measured: valgrind is not installed here.\n`;
  const names = await stackNames();
  return instructionsSection(await instructionsPerCall(['bare', 'empty', 'full', ...names], 1));
}

const HEADING = '## 1b. Instructions per call, in process (callgrind)';

/** Section 1b's text from its rows: `bare`, `empty`, `full`, then each policy alone (an audit row among them). */
export function instructionsSection(rows: readonly InstructionRow[]): string {
  const [bare, empty, full, ...policies] = rows as [
    InstructionRow,
    InstructionRow,
    InstructionRow,
    ...InstructionRow[],
  ];
  const table = rows.map((row) => {
    const label =
      row.name === 'bare'
        ? 'bare SDK handler (baseline)'
        : row.name === 'empty'
          ? 'core, empty chain'
          : row.name === 'full'
            ? 'core + full stack, no OTel SDK'
            : `core + ${row.name} alone`;
    const overEmpty = row.name === 'bare' || row.name === 'empty' ? '' : signedK(row.perCall - empty.perCall);
    const sha = row.sha256PerCall > 0 ? k(row.sha256PerCall) : '';
    return `| ${label} | ${k(row.perCall)} | ${k(row.spread)} | ${row.name === 'bare' ? '' : signedK(row.perCall - bare.perCall)} | ${overEmpty} | ${(row.perCall / bare.perCall).toFixed(3)}x | ${sha} | ${k(row.majorGcPerCall)} | ${row.realUsPerCall.toFixed(0)} |`;
  });
  const verdict = (what: string, share: number, added: number, sha = 0): string => {
    const bound = share * bare.perCall;
    const shaNote = sha > 0 ? ` (${signedK(added - sha)} without SHA-256)` : '';
    return `| ${what} | ≤ ${signedK(bound)} (${share.toFixed(2)} of bare) | ${signedK(added)}${shaNote} | ${(added / bare.perCall).toFixed(3)} | ${added <= bound ? 'met' : 'missed'} |`;
  };
  const auditRow = policies.find((row) => row.name.startsWith('audit'))!;
  const others = policies.filter((row) => row !== auditRow);
  const worst = others.reduce((a, b) => (a.perCall >= b.perCall ? a : b));
  return [
    HEADING,
    '',
    "Each case of section 1 (sequential, no OTel SDK) run under valgrind's callgrind, which counts the",
    `instructions a process executes instead of timing it: ${WARMUP_CALLS.toLocaleString('en')} calls warm the case up (the JIT is`,
    'done with the stack by then; between calls 5,000 and 9,000 it still compiled the small functions',
    `run once a call), then the next ${COUNTED_CALLS} calls are counted alone (callgrind zeroes its counters and`,
    `writes them out at two marks in the process). Each case is counted in ${REPEATS} processes; *spread* is`,
    'how far their counts per call differ. V8 runs deterministically (`--predictable`,',
    'fixed hash and random seeds, a fixed young generation), the case is bundled with esbuild (loaded',
    'through tsx, two identical processes differed by 157 M instructions), and the',
    "process's clocks run slower by as much as valgrind slows it",
    `(${TIME_DILATION}x, \`benchmarks/time-dilation.ts\`), so that audit's 1 ms batch window holds about as many records`,
    "as natively. A count resolves what section 1's timings cannot on this machine; it leaves out",
    "time in the kernel (system calls: audit's write, the event loop's epoll) and what an instruction",
    "costs (a cache miss counts as one). *SHA-256*: the instructions of OpenSSL's SHA-256 in the",
    "row (audit's hash chain): valgrind's virtual CPU has no SHA extensions, so OpenSSL runs its AVX2",
    'code here, several times the instructions of the SHA-NI code it runs natively on this CPU.',
    "*full GC*: about the instructions of V8's mark-compact collector (its functions by name): one",
    'collection costs tens of millions, so whether one falls among the counted calls moves a row by',
    'several k (it is what makes a spread wide).',
    '*real µs*: what a call took under callgrind.',
    '',
    "Issue 18's in-process bounds, as shares of the bare round trip (set in µs where it took about",
    '25 µs: the stack may add 12/25 of it, one policy 3/25, audit 4/25):',
    '',
    '| target (issue 18) | bound | measured | of bare | |',
    '|---|---:|---:|---:|---|',
    verdict(
      'full stack (no SDK), over the bare SDK',
      SHARE_BOUNDS.stack,
      full.perCall - bare.perCall,
      full.sha256PerCall,
    ),
    verdict(
      `costliest policy but audit (${worst.name}), over core's empty chain`,
      SHARE_BOUNDS.policy,
      worst.perCall - empty.perCall,
    ),
    verdict(
      'audit (file) alone, over the empty chain',
      SHARE_BOUNDS.audit,
      auditRow.perCall - empty.perCall,
      auditRow.sha256PerCall,
    ),
    `| empty chain ratio | ≤ 1.05x | ${(empty.perCall / bare.perCall).toFixed(3)}x | | ${empty.perCall <= 1.05 * bare.perCall ? 'met' : 'missed'} |`,
    '',
    '| case | instructions/call | spread | over bare | over empty chain | ratio | SHA-256 | full GC | real µs |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...table,
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const wanted = process.argv[2] ?? 'all';
  const concurrency = Math.max(1, Number(process.argv[3] ?? 1));
  const cases = wanted === 'all' ? ['bare', 'empty', 'full', ...(await stackNames())] : wanted.split(',');
  const rows = await instructionsPerCall(cases, concurrency);
  const bare = rows.find((row) => row.name === 'bare')?.perCall;
  for (const row of rows) {
    const ratio = bare ? ` ${(row.perCall / bare).toFixed(3)}x bare` : '';
    process.stdout.write(
      `${row.name.padEnd(28)} ${(row.perCall / 1000).toFixed(1).padStart(8)} k/call (spread ${(row.spread / 1000).toFixed(1)} k)${ratio}, SHA-256 ${(row.sha256PerCall / 1000).toFixed(1)} k, full GC ${(row.majorGcPerCall / 1000).toFixed(1)} k, ${row.realUsPerCall.toFixed(0)} µs real\n`,
    );
  }
}
