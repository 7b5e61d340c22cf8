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
  /** Seeds the order of the cases in each round. @default 0x5eed */
  seed?: number;
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
  /** Which set of processes each round ran in (`compareInEpochs`), when there were several. */
  blocks?: readonly number[] | undefined;
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
  const random = seededRandom(options.seed ?? 0x5eed);
  for (let round = 0; round < rounds; round += 1) {
    shuffle(order, random);
    for (const index of order) samples[index]!.push(await runBatch(cases[index]!, callsPerRound));
  }
  return benchRows(
    cases.map((bench) => bench.name),
    samples,
  );
}

/**
 * Rows from each case's per-round µs (the first case is the baseline; every case's rounds in the same
 * passes). `blocks[r]`: which set of processes round r ran in (`compareInEpochs`); the interval then
 * resamples whole sets, so a process that was slow (or fast) throughout widens it as it should.
 */
export function benchRows(
  names: readonly string[],
  samples: readonly (readonly number[])[],
  blocks?: readonly number[],
): BenchRow[] {
  const baseline = samples[0] ?? [];
  return names.map((name, index) => ({
    name,
    usPerCall: median(samples[index]!),
    bestUsPerCall: Math.min(...samples[index]!),
    ratio: medianRatio(samples[index]!, baseline),
    addedUs: medianDifference(samples[index]!, baseline),
    addedUsInterval: medianDifferenceInterval(samples[index]!, baseline, blocks),
    rounds: samples[index]!,
    blocks,
  }));
}

/**
 * `compareCalls` over `epochs` sets of cases, each started fresh by `start` and closed after its
 * rounds: every plan (a concurrency, a number of rounds) runs in every set, and each case's rounds
 * are pooled across the sets. A case in a process of its own carries that process's luck (where its
 * heap landed, what the JIT made of it) through all its rounds: within one process a no-op policy
 * measured +10 µs over the bare SDK in every round (session 12). Several processes per case average
 * that out, and the interval (resampling whole sets) shows what is left. One table of rows per plan.
 */
export async function compareInEpochs(
  start: () => Promise<{ cases: readonly BenchCase[]; close(): Promise<void> }>,
  epochs: number,
  plans: readonly BenchOptions[],
): Promise<BenchRow[][]> {
  let names: string[] = [];
  const pooled = plans.map(() => [] as number[][]);
  const blocks = plans.map(() => [] as number[]);
  for (let epoch = 0; epoch < epochs; epoch += 1) {
    const { cases, close } = await start();
    try {
      names = cases.map((bench) => bench.name);
      for (const [plan, options] of plans.entries()) {
        const rows = await compareCalls(cases, { ...options, seed: (options.seed ?? 0x5eed) + epoch });
        rows.forEach((row, index) => {
          pooled[plan]![index] ??= [];
          pooled[plan]![index]!.push(...row.rounds);
        });
        for (let round = 0; round < rows[0]!.rounds.length; round += 1) blocks[plan]!.push(epoch);
      }
    } finally {
      await close();
    }
  }
  return plans.map((_, plan) => benchRows(names, pooled[plan]!, epochs > 1 ? blocks[plan] : undefined));
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
 * median over 2000 bootstrap resamples of the paired rounds (with replacement; a fixed seed, so the
 * same rounds give the same interval). On a machine whose single rounds vary by a factor of two it
 * says how far the median itself would move in another run of as many rounds: a bound inside the
 * interval is within the machine's noise. With `blocks` (round r ran in set `blocks[r]`), whole sets
 * are resampled, not single rounds: rounds of one set of processes are not independent.
 */
export function medianDifferenceInterval(
  values: readonly number[],
  baseline: readonly number[],
  blocks?: readonly number[],
): [number, number] {
  const differences = values.map((value, index) => value - baseline[index]!);
  if (differences.length === 0) return [Number.NaN, Number.NaN];
  // Each group: the differences of one block (without blocks, each round is a block of its own).
  const groups: number[][] = [];
  if (blocks === undefined) for (const difference of differences) groups.push([difference]);
  else {
    const byBlock = new Map<number, number[]>();
    differences.forEach((difference, index) => {
      const block = blocks[index]!;
      let group = byBlock.get(block);
      if (group === undefined) {
        group = [];
        byBlock.set(block, group);
        groups.push(group);
      }
      group.push(difference);
    });
  }
  const random = seededRandom(0xb007);
  const medians: number[] = [];
  const resample: number[] = [];
  for (let draw = 0; draw < BOOTSTRAP_RESAMPLES; draw += 1) {
    resample.length = 0;
    for (let i = 0; i < groups.length; i += 1) {
      resample.push(...groups[Math.floor(random() * groups.length)]!);
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
