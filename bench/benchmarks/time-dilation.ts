// Slows the clocks of a process that valgrind runs (benchmarks/instructions.ts) to its speed natively.
// Under callgrind a call takes about 200 times as long, and every setting measured in wall time would
// fall at another number of calls than in the timed bench: audit's 1 ms batch window would hold one
// record instead of dozens, a repeat window of 60 s would start expiring entries after some 12,000
// calls instead of never. TOOLGATE_BENCH_TIME_DILATION=k makes Date.now and performance.now advance
// k times slower and stretches setTimeout and setInterval delays k times. Imported first, before any
// module reads a clock.
const factor = Number(process.env.TOOLGATE_BENCH_TIME_DILATION ?? 1);
if (!(factor >= 1)) throw new Error('TOOLGATE_BENCH_TIME_DILATION must be a number ≥ 1');
if (factor !== 1) {
  const realDateNow = Date.now;
  const dateOrigin = realDateNow();
  Date.now = () => dateOrigin + Math.floor((realDateNow() - dateOrigin) / factor);
  const realPerformanceNow = performance.now.bind(performance);
  const performanceOrigin = realPerformanceNow();
  performance.now = () => performanceOrigin + (realPerformanceNow() - performanceOrigin) / factor;
  const stretch = <T extends typeof setTimeout | typeof setInterval>(real: T): T =>
    ((callback: (...args: unknown[]) => void, delay?: number, ...args: unknown[]) =>
      real(callback, (delay ?? 0) * factor, ...args)) as T;
  globalThis.setTimeout = stretch(globalThis.setTimeout);
  globalThis.setInterval = stretch(globalThis.setInterval);
}

export {};
