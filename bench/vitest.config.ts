import { defineConfig } from 'vitest/config';

// The fault and load suite: each file starts its own service, so files run one at a time (the load
// test measures event-loop delay and memory, which a neighbour file would disturb).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
