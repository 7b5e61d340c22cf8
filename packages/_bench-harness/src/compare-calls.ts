/** One measured variant: a function that performs one call (a full tools/call round trip). */
export interface BenchCase {
  name: string;
  call: (index: number) => Promise<unknown>;
}

export interface BenchOptions {
  /** Calls per round per case. @default 2000 */
  callsPerRound?: number;
  /**
   * Rounds; cases are interleaved round by round (in a fresh shuffled order each round, the same for
   * every run) so machine noise and the garbage one case leaves for the next hit all alike. @default 15
   */
  rounds?: number;
  /** Calls in flight at once (1 = sequential). @default 1 */
  concurrency?: number;
  /** Warm-up calls per case before measuring. @default 500 */
  warmup?: number;
}

export interface BenchRow {
  name: string;
  /** Median over rounds of the mean time per call, in microseconds. */
  usPerCall: number;
  /** Fastest round, in microseconds per call. */
  bestUsPerCall: number;
  /** usPerCall divided by the first case's (the baseline). */
  ratio: number;
  /** usPerCall minus the baseline's, in microseconds. */
  addedUs: number;
}

/**
 * Measures each case side by side: interleaved rounds, median per case, ratio to the first case.
 * For `pnpm bench` scripts only; never for timed tests.
 */
export async function compareCalls(
  cases: readonly BenchCase[],
  options: BenchOptions = {},
): Promise<BenchRow[]> {
  const callsPerRound = options.callsPerRound ?? 2000;
  const rounds = options.rounds ?? 15;
  const concurrency = Math.max(1, options.concurrency ?? 1);
  const warmup = options.warmup ?? 500;
  let counter = 0;
  const runBatch = async (bench: BenchCase, calls: number): Promise<number> => {
    const started = performance.now();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < calls) {
        next += 1;
        counter += 1;
        await bench.call(counter);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, worker));
    return ((performance.now() - started) * 1000) / calls;
  };
  for (const bench of cases) await runBatch(bench, warmup);
  const samples = cases.map(() => [] as number[]);
  // Each round runs the cases in a new order: a case that leaves garbage behind slows whichever case
  // runs next, and with a fixed order that cost would land on the same neighbour every round.
  const order = cases.map((_, index) => index);
  const random = seededRandom(0x5eed);
  for (let round = 0; round < rounds; round += 1) {
    shuffle(order, random);
    for (const index of order) samples[index]!.push(await runBatch(cases[index]!, callsPerRound));
  }
  const medians = samples.map((values) => median(values));
  const baseline = medians[0] ?? 1;
  return cases.map((bench, index) => ({
    name: bench.name,
    usPerCall: medians[index]!,
    bestUsPerCall: Math.min(...samples[index]!),
    ratio: medians[index]! / baseline,
    addedUs: medians[index]! - baseline,
  }));
}

/** A markdown table of bench rows. */
export function formatBenchTable(rows: readonly BenchRow[]): string {
  const lines = [
    '| case | µs/call (median) | best µs/call | added µs | ratio |',
    '|---|---:|---:|---:|---:|',
    ...rows.map(
      (row) =>
        `| ${row.name} | ${row.usPerCall.toFixed(2)} | ${row.bestUsPerCall.toFixed(2)} | ${row.addedUs >= 0 ? '+' : ''}${row.addedUs.toFixed(2)} | ${row.ratio.toFixed(3)}x |`,
    ),
  ];
  return lines.join('\n');
}

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 0 ? (sorted[middle - 1]! + sorted[middle]!) / 2 : sorted[middle]!;
}

/**
 * The median over rounds of `values[i] / baseline[i]`: each round's figure against the baseline's in
 * the same round, so noise that hits one round hits both.
 */
export function medianRatio(values: readonly number[], baseline: readonly number[]): number {
  return median(values.map((value, index) => value / baseline[index]!));
}

/** A small deterministic generator (mulberry32): the same orders on every run. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Fisher-Yates, in place. */
function shuffle(values: number[], random: () => number): void {
  for (let i = values.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [values[i], values[j]] = [values[j]!, values[i]!];
  }
}
