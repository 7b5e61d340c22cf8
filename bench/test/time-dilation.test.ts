// The clocks of a process counted under callgrind (benchmarks/time-dilation.ts): slowed by the factor
// given, timers stretched by as much, so settings in wall time fall at native call counts.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const shim = fileURLToPath(new URL('../benchmarks/time-dilation.ts', import.meta.url));

/** Imports the shim in a fresh process, arms a 5 ms timer and an interval, reports what each clock saw. */
async function observe(
  factor: string | undefined,
): Promise<{ real: number; date: number; perf: number; ticks: number }> {
  const script = `
    import ${JSON.stringify(shim)};
    // Each clock is read in the same order at both ends, so each pair spans the same stretch (read in
    // another order, a loaded machine could pause between two start reads and the clocks disagree).
    performance.now();
    const started = process.hrtime.bigint();
    const perf0 = performance.now();
    const date0 = Date.now();
    let ticks = 0;
    const interval = setInterval(() => { ticks += 1; }, 2);
    setTimeout(() => {
      clearInterval(interval);
      const ended = process.hrtime.bigint();
      const perf = performance.now() - perf0;
      const date = Date.now() - date0;
      const real = Number(ended - started) / 1e6;
      process.stderr.write(JSON.stringify({ real, date, perf, ticks }));
    }, 5);
  `;
  const env = { ...process.env };
  if (factor === undefined) delete env.TOOLGATE_BENCH_TIME_DILATION;
  else env.TOOLGATE_BENCH_TIME_DILATION = factor;
  const { stderr } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    { env },
  );
  return JSON.parse(stderr);
}

describe('time dilation for counted processes', () => {
  it('slows Date.now and performance.now and stretches timers by the factor', async () => {
    const seen = await observe('40');
    // The 5 ms timer fired after 200 ms of real time, and the clocks saw about 5 ms of it.
    expect(seen.real).toBeGreaterThanOrEqual(195);
    expect(seen.perf).toBeGreaterThanOrEqual(4.8);
    expect(seen.perf).toBeCloseTo(seen.real / 40, 0);
    expect(Math.abs(seen.date - seen.real / 40)).toBeLessThanOrEqual(2);
    // The 2 ms interval ran every 80 ms: twice before the timer, not a hundred times.
    expect(seen.ticks).toBeGreaterThanOrEqual(1);
    expect(seen.ticks).toBeLessThanOrEqual(3);
  });

  it('leaves the clocks alone without a factor, and refuses a factor below 1', async () => {
    const seen = await observe(undefined);
    expect(seen.real).toBeLessThan(150);
    expect(seen.perf).toBeCloseTo(seen.real, -1);
    await expect(observe('0.5')).rejects.toThrow(/TOOLGATE_BENCH_TIME_DILATION must be a number ≥ 1/);
  });
});
