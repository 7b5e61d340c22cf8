export {
  type BenchCase,
  type BenchOptions,
  type BenchRow,
  compareCalls,
  createCallTimer,
  formatBenchTable,
  median,
  medianDifference,
  medianRatio,
} from './compare-calls.js';
