export {
  type BenchCase,
  type BenchOptions,
  type BenchRow,
  compareCalls,
  formatBenchTable,
  median,
  medianRatio,
} from './compare-calls.js';
