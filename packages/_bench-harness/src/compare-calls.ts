/**
 * One measured variant: either a function that performs one call (a full tools/call round trip), or
 * `round`, which times a whole round somewhere else (a case in a process of its own) and returns its
 * mean µs per call.
 */
export type BenchCase =
  | { name: string; call: (index: number) => Promise<unknown>; round?: undefined }
  | { name: string; round: (calls: number, concurrency: number) => Promise<number>; call?: undefined };

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
  /**
   * The median over rounds of this case's µs per call divided by the baseline's (the first case) in
   * the same round: paired, so a slow stretch of the machine that hits one round hits both.
   */
  ratio: number;
  /** The median over rounds of this case's µs per call minus the baseline's in the same round. */
  addedUs: number;
  /** A 95% bootstrap interval of `addedUs` (see `medianDifferenceInterval`). */
  addedUsInterval: readonly [number, number];
  /** Each round's mean µs per call, in round order (the same rounds as every other row's). */
  rounds: readonly number[];
}

/**
 * Measures each case side by side: interleaved rounds, median per case, and the ratio to and the µs
 * over the first case (the baseline) as the median of each round's paired figure.
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
  const timer = createCallTimer();
  const runBatch = (bench: BenchCase, calls: number): Promise<number> =>
    bench.round ? bench.round(calls, concurrency) : timer(bench.call, calls, concurrency);
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
  const baseline = samples[0] ?? [];
  return cases.map((bench, index) => ({
    name: bench.name,
    usPerCall: median(samples[index]!),
    bestUsPerCall: Math.min(...samples[index]!),
    ratio: medianRatio(samples[index]!, baseline),
    addedUs: medianDifference(samples[index]!, baseline),
    addedUsInterval: medianDifferenceInterval(samples[index]!, baseline),
    rounds: samples[index]!,
  }));
}

/**
 * Times `calls` calls of `call`, `concurrency` in flight at once: their mean µs per call. Each call
 * gets an index never used before by this timer (distinct arguments, so nothing repeats).
 */
export function createCallTimer(): (
  call: (index: number) => Promise<unknown>,
  calls: number,
  concurrency: number,
) => Promise<number> {
  let counter = 0;
  return async (call, calls, concurrency) => {
    const started = performance.now();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < calls) {
        next += 1;
        counter += 1;
        await call(counter);
      }
    };
    await Promise.all(Array.from({ length: Math.min(Math.max(1, concurrency), calls) }, worker));
    return ((performance.now() - started) * 1000) / calls;
  };
}

/** A markdown table of bench rows. */
export function formatBenchTable(rows: readonly BenchRow[]): string {
  const lines = [
    '| case | µs/call (median) | best µs/call | added µs | 95% interval | ratio |',
    '|---|---:|---:|---:|---:|---:|',
    ...rows.map(
      (row) =>
        `| ${row.name} | ${row.usPerCall.toFixed(2)} | ${row.bestUsPerCall.toFixed(2)} | ${signed(row.addedUs)} | ${formatInterval(row.addedUsInterval)} | ${row.ratio.toFixed(3)}x |`,
    ),
  ];
  return lines.join('\n');
}

/** µs with its sign, two decimals: `+1.25`, `-0.40`. */
export function signed(us: number): string {
  return `${us >= 0 ? '+' : ''}${us.toFixed(2)}`;
}

/** An interval of µs as `+1.10 to +2.35`. */
export function formatInterval([low, high]: readonly [number, number]): string {
  return `${signed(low)} to ${signed(high)}`;
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

/** The median over rounds of `values[i] - baseline[i]` (paired like `medianRatio`). */
export function medianDifference(values: readonly number[], baseline: readonly number[]): number {
  return median(values.map((value, index) => value - baseline[index]!));
}

/**
 * A 95% interval for `medianDifference(values, baseline)`: the 2.5th and 97.5th percentiles of the
 * median over 2000 resamples of the paired rounds (with replacement; a fixed seed, so the same rounds
 * give the same interval). On a machine whose single rounds vary by a factor of two it says how far
 * the median itself would move in another run of as many rounds: a bound inside the interval is
 * within the machine's noise.
 */
export function medianDifferenceInterval(
  values: readonly number[],
  baseline: readonly number[],
): [number, number] {
  const differences = values.map((value, index) => value - baseline[index]!);
  if (differences.length === 0) return [Number.NaN, Number.NaN];
  const random = seededRandom(0xb007);
  const medians: number[] = [];
  const resample = new Array<number>(differences.length);
  for (let draw = 0; draw < BOOTSTRAP_RESAMPLES; draw += 1) {
    for (let i = 0; i < differences.length; i += 1) {
      resample[i] = differences[Math.floor(random() * differences.length)]!;
    }
    medians.push(median(resample));
  }
  medians.sort((a, b) => a - b);
  const at = (fraction: number): number =>
    medians[Math.min(medians.length - 1, Math.floor(fraction * medians.length))]!;
  return [at(0.025), at(0.975)];
}

const BOOTSTRAP_RESAMPLES = 2000;

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
