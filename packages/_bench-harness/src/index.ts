export {
  type BenchCase,
  type BenchOptions,
  type BenchRow,
  compareCalls,
  formatBenchTable,
} from './compare-calls.js';
