export {
  type BenchCase,
  type BenchOptions,
  type BenchRow,
  compareCalls,
  createCallTimer,
  formatBenchTable,
  formatInterval,
  median,
  medianDifference,
  medianDifferenceInterval,
  medianRatio,
  signed,
} from './compare-calls.js';
