// 1b. Instructions per call: each in-process case of section 1 counted by valgrind's callgrind instead
// of timed. A count is repeatable where a time is not (section 1's 95% intervals on this two-core VM
// are wider than a policy's bound): the same program, inputs and V8 flags execute nearly the same
// instructions whatever else the machine is doing. What a count leaves out: time in the kernel
// (system calls, page faults) and what an instruction costs (a cache miss counts as one).
//
// npx tsx benchmarks/instructions.ts [case,case|all] [concurrency]
import { execFile, type PromiseWithChild } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { CALLS_THREAD_AUDIT, stackNames, THREAD_AUDIT } from './middleware.bench.js';

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
 * Calls a case makes before it is counted, and calls counted. The JIT has finished with what runs once
 * a call by 11,000 calls (`--trace-opt`: 155 functions optimized by call 5,000, 169 by 9,000, 171 by
 * 11,000 and by 13,000; small functions run once a call, such as repeat-guard's middleware, reach V8's
 * tier-up budget late). What runs once a batch (audit's drain) can still reach TurboFan among the
 * counted calls: the compilers' instructions are counted beside a row, not in it (`steadyInstructions`).
 * 6000 calls are counted so that a case's work is spread over enough calls to repeat within a few k.
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
  /**
   * Of `total`, those in V8's optimizing compilers (TurboFan, Maglev: their functions by name). A
   * function run once a batch rather than once a call (audit's drain) can reach TurboFan among the
   * counted calls however long the warm-up: tens of millions of instructions, once in a process's life.
   */
  compiler: number;
  /** Real µs a call took under callgrind (the child's report). */
  realUsPerCall: number;
}

/**
 * What a count charges a call with: everything but the full collector and the optimizing compilers,
 * whose work falls among the counted calls or not by a process's history (one full collection moved a
 * case's count by 17-20 k a call; counting after 20,000 calls instead of 11,000 left both out, and the
 * empty chain's count fell by 20 k). Both are shown beside it.
 */
export function steadyInstructions(count: Pick<Count, 'total' | 'majorGc' | 'compiler'>): number {
  return count.total - count.majorGc - count.compiler;
}

/**
 * Counts the instructions of COUNTED_CALLS calls of case `which` under callgrind, after WARMUP_CALLS
 * (the child marks where they start and end; see instr-case-child.ts).
 */
export async function countInstructions(child: string, which: string, concurrency: number): Promise<Count> {
  const dir = await mkdtemp(join(tmpdir(), 'toolgate-callgrind-'));
  const out = join(dir, 'callgrind.out');
  try {
    const { stderr } = await runCounted(out, child, which, concurrency);
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
    let compiler = 0;
    for (const match of annotated.matchAll(/^\s*([\d,]+) \([^)]*\)\s+(.*)$/gm)) {
      const instructions = Number(match[1]!.replaceAll(',', ''));
      if (match[2]!.includes('sha256_block_data_order')) sha256 += instructions;
      else if (MAJOR_GC.test(match[2]!)) majorGc += instructions;
      else if (COMPILER.test(match[2]!)) compiler += instructions;
    }
    return { total: Number(summary[1]), sha256, majorGc, compiler, realUsPerCall: Number(real[1]) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Runs case `which` of the bundled child under callgrind, its counted calls dumped to `${out}.1`
 * (`nodeFlags`: more V8 flags, such as `--perf-basic-prof`). The child process is `.child`.
 */
export const PER_THREAD = process.env.INSTR_PER_THREAD === '1';

export function runCounted(
  out: string,
  child: string,
  which: string,
  concurrency: number,
  nodeFlags: readonly string[] = [],
): PromiseWithChild<{ stdout: string; stderr: string }> {
  return execFileAsync(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      ...(PER_THREAD ? ['--separate-threads=yes'] : []),
      '--zero-before=node::CPUUsage(*',
      '--dump-before=node::ResourceUsage(*',
      process.execPath,
      ...V8_FLAGS,
      ...nodeFlags,
      child,
      which,
      String(WARMUP_CALLS),
      String(COUNTED_CALLS),
      String(concurrency),
    ],
    // The bundle's imports resolve from where it lies, in bench/node_modules.
    {
      env: {
        ...process.env,
        TOOLGATE_BENCH_TIME_DILATION: String(TIME_DILATION),
        // Audit's writer on the calls' thread (see instructionsSection), unless each thread is
        // counted on its own (INSTR_PER_THREAD=1, development: the calls' thread's share of a case
        // whose writer runs on a thread of its own).
        TOOLGATE_BENCH_AUDIT_THREAD: PER_THREAD ? '1' : '0',
      },
      maxBuffer: MAX_OUTPUT,
      encoding: 'utf8',
    },
  );
}

/** V8's mark-compact collector's own functions (the scavenger's are left out: they run every few calls). */
const MAJOR_GC =
  /v8::internal::(MarkCompactCollector|(Main|Concurrent)?MarkingVisitor|MarkingWorklist|IncrementalMarking|MarkingBarrier|Sweeper|EvacuateVisitorBase|EvacuateNewSpaceVisitor|EvacuateOldSpaceVisitor|LiveObjectRange|RememberedSetUpdatingItem|RecordMigratedSlotVisitor)/;

/** V8's optimizing compilers' own functions (TurboFan's graph, scheduler and register allocator; Maglev). */
const COMPILER = /v8::internal::(compiler|maglev)::/;

/** Runs a command to its end (rejecting on a non-zero exit, with its stderr in the message). */
const execFileAsync = promisify(execFile);
/** callgrind_annotate's listing of a run runs to megabytes. */
const MAX_OUTPUT = 64 * 2 ** 20;

export interface InstructionRow {
  name: string;
  /** Instructions per counted call, the mean of REPEATS processes, without the full collector's and the compilers' (see `steadyInstructions`). */
  perCall: number;
  /** Highest minus lowest of the processes' `perCall`s: how far a count repeats. */
  spread: number;
  /** Of `perCall`, SHA-256's (see `Count.sha256`). */
  sha256PerCall: number;
  /** Beside `perCall` (not in it): the full collector's instructions per call (see `Count.majorGc`). */
  majorGcPerCall: number;
  /** Beside `perCall` (not in it): the optimizing compilers' instructions per call (see `Count.compiler`). */
  compilerPerCall: number;
  /** Real µs a counted call took under callgrind (mean). */
  realUsPerCall: number;
}

/**
 * A child that times SHA-256 natively (node's OpenSSL, the one-shot `hash` audit calls) on a 560-byte
 * and a 5600-byte buffer, and prints the difference per 64-byte block in ns: the block function's
 * own cost, without the per-hash overhead (which the count keeps with the rest of the row).
 */
const SHA_TIMING = `
const { hash } = require('node:crypto');
const ns = (bytes) => {
  const data = Buffer.alloc(bytes, 97);
  const runs = [];
  for (let round = 0; round < 7; round += 1) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < 20000; i += 1) hash('sha256', data, 'hex');
    runs.push(Number(process.hrtime.bigint() - started) / 20000);
  }
  return runs.sort((a, b) => a - b)[3];
};
ns(560);
process.stdout.write(String(((ns(5600) - ns(560)) / (5040 / 64))));
`;

/**
 * OpenSSL's capability mask without the SHA extensions (CPUID leaf 7's EBX bit 29): with it, a
 * process takes the AVX2 SHA-256 code that valgrind's virtual CPU runs. Other CPUs ignore the bit.
 */
const WITHOUT_SHA_NI = ':~0x20000000';

/**
 * What SHA-256's block function costs natively on this CPU, as a share of what its AVX2 code (the
 * code counted under callgrind) costs: the time per block with the SHA extensions over the time
 * without, three processes each, alternated, medians. 1 where the CPU has none. A count's SHA-256
 * instructions times this share is what they stand for natively here: SHA-NI's instructions are
 * fewer but each costs more, so a count of them would understate it.
 */
export async function nativeShaShare(): Promise<number> {
  const withNi: number[] = [];
  const without: number[] = [];
  for (let round = 0; round < 3; round += 1) {
    for (const [mask, into] of [
      [undefined, withNi],
      [WITHOUT_SHA_NI, without],
    ] as const) {
      const env = { ...process.env };
      if (mask === undefined) delete env.OPENSSL_ia32cap;
      else env.OPENSSL_ia32cap = mask;
      const { stdout } = await execFileAsync(process.execPath, ['-e', SHA_TIMING], { env });
      into.push(Number(stdout));
    }
  }
  const median = (values: number[]): number => values.sort((a, b) => a - b)[1]!;
  const share = median(withNi) / median(without);
  // A timing that came out unreadable or not positive weighs nothing down: the AVX2 count as it is.
  return share > 0 ? Math.min(1, share) : 1;
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
    const perCall = own.map((count) => steadyInstructions(count) / COUNTED_CALLS);
    const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;
    return {
      name,
      perCall: mean(perCall),
      spread: Math.max(...perCall) - Math.min(...perCall),
      sha256PerCall: mean(own.map((count) => count.sha256 / COUNTED_CALLS)),
      majorGcPerCall: mean(own.map((count) => count.majorGc / COUNTED_CALLS)),
      compilerPerCall: mean(own.map((count) => count.compiler / COUNTED_CALLS)),
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
  const names = (await stackNames()).map((name) => (name === THREAD_AUDIT ? CALLS_THREAD_AUDIT : name));
  const rows = await instructionsPerCall(['bare', 'empty', 'full', ...names], 1);
  return instructionsSection(rows, await nativeShaShare());
}

const HEADING = '## 1b. Instructions per call, in process (callgrind)';

/**
 * Section 1b's text from its rows (`bare`, `empty`, `full`, then each policy alone, an audit row among
 * them) and `nativeShaShare()`'s share.
 */
export function instructionsSection(rows: readonly InstructionRow[], shaShare: number): string {
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
    return `| ${label} | ${k(row.perCall)} | ${k(row.spread)} | ${row.name === 'bare' ? '' : signedK(row.perCall - bare.perCall)} | ${overEmpty} | ${(row.perCall / bare.perCall).toFixed(3)}x | ${sha} | ${k(row.majorGcPerCall)} | ${k(row.compilerPerCall)} | ${row.realUsPerCall.toFixed(0)} |`;
  });
  /** `added` with its SHA-256 instructions weighed at their native cost (see `nativeShaShare`). */
  const native = (added: number, sha: number): number => added - sha * (1 - shaShare);
  const verdict = (what: string, share: number, added: number, sha = 0): string => {
    const bound = share * bare.perCall;
    const weighed = native(added, sha);
    const nativeCell = sha > 0 ? signedK(weighed) : '';
    return `| ${what} | ≤ ${signedK(bound)} (${share.toFixed(2)} of bare) | ${signedK(added)} | ${nativeCell} | ${(weighed / bare.perCall).toFixed(3)} | ${weighed <= bound ? 'met' : 'missed'} |`;
  };
  const auditRow = policies.find((row) => row.name.startsWith('audit'))!;
  const others = policies.filter((row) => row !== auditRow);
  const worst = others.reduce((a, b) => (a.perCall >= b.perCall ? a : b));
  return [
    HEADING,
    '',
    "Each case of section 1 (sequential, no OTel SDK) run under valgrind's callgrind, which counts the",
    `instructions a process executes instead of timing it: ${WARMUP_CALLS.toLocaleString('en')} calls warm the case up, then the`,
    `next ${COUNTED_CALLS} calls are counted alone (callgrind zeroes its counters and writes them out at two`,
    `marks in the process). Each case is counted in ${REPEATS} processes; *spread* is how far their counts`,
    'per call differ. V8 runs deterministically (`--predictable`, fixed hash and random seeds, a fixed',
    'young generation), the case is bundled with esbuild (loaded through tsx, two identical processes',
    "differed by 157 M instructions), and the process's clocks run slower by as much as valgrind slows",
    `it (${TIME_DILATION}x, \`benchmarks/time-dilation.ts\`), so that audit's 1 ms batch window holds about as many`,
    "records as natively. Audit's writer runs on the calls' thread here (`thread: true` in section 1",
    'moves the same work, and a copy of each record, to a thread of its own; valgrind runs one thread',
    "at a time, so a second thread's count is no measure of its cost natively). A count resolves what section 1's timings cannot on this machine; it leaves",
    "out time in the kernel (system calls: audit's write, the event loop's epoll) and what an",
    'instruction costs (a cache miss counts as one).',
    '',
    '*instructions/call* leaves out two kinds of work that fall among the counted calls by the',
    "process's history rather than by what a call does, shown beside it instead: *full GC*, V8's",
    'mark-compact collector (one collection costs tens of millions of instructions; whether one fell',
    "in the window moved a case by 17-20 k a call), and *compilers*, V8's TurboFan and Maglev (a",
    "function run once a batch, such as audit's drain, reaches TurboFan late, once in a process's",
    "life). Young-generation collections (every few calls) stay in. *SHA-256*: OpenSSL's SHA-256",
    "block function's instructions in the row (audit's hash chain). Valgrind's virtual CPU has no SHA",
    'extensions, so OpenSSL runs its AVX2 code here; timed natively on this CPU, a block with the SHA',
    `extensions costs ${shaShare.toFixed(2)} of the AVX2 code's time (\`nativeShaShare\`), and the targets below`,
    'weigh the SHA-256 instructions at that share (*natively*). *real µs*: what a call took under',
    'callgrind.',
    '',
    "Issue 18's in-process bounds, as shares of the bare round trip (set in µs where it took about",
    '25 µs: the stack may add 12/25 of it, one policy 3/25, audit 4/25):',
    '',
    '| target (issue 18) | bound | counted | natively (SHA-256 weighed) | of bare | |',
    '|---|---:|---:|---:|---:|---|',
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
      `${CALLS_THREAD_AUDIT} alone, over the empty chain`,
      SHARE_BOUNDS.audit,
      auditRow.perCall - empty.perCall,
      auditRow.sha256PerCall,
    ),
    `| empty chain ratio | ≤ 1.05x | ${(empty.perCall / bare.perCall).toFixed(3)}x | | | ${empty.perCall <= 1.05 * bare.perCall ? 'met' : 'missed'} |`,
    '',
    '| case | instructions/call | spread | over bare | over empty chain | ratio | SHA-256 (AVX2) | full GC (beside) | compilers (beside) | real µs |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...table,
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const wanted = process.argv[2] ?? 'all';
  const concurrency = Math.max(1, Number(process.argv[3] ?? 1));
  const names = (await stackNames()).map((name) => (name === THREAD_AUDIT ? CALLS_THREAD_AUDIT : name));
  const cases = wanted === 'all' ? ['bare', 'empty', 'full', ...names] : wanted.split(',');
  const rows = await instructionsPerCall(cases, concurrency);
  const bare = rows.find((row) => row.name === 'bare')?.perCall;
  for (const row of rows) {
    const ratio = bare ? ` ${(row.perCall / bare).toFixed(3)}x bare` : '';
    process.stdout.write(
      `${row.name.padEnd(28)} ${(row.perCall / 1000).toFixed(1).padStart(8)} k/call (spread ${(row.spread / 1000).toFixed(1)} k)${ratio}, SHA-256 ${(row.sha256PerCall / 1000).toFixed(1)} k, beside: full GC ${(row.majorGcPerCall / 1000).toFixed(1)} k, compilers ${(row.compilerPerCall / 1000).toFixed(1)} k, ${row.realUsPerCall.toFixed(0)} µs real\n`,
    );
  }
}
