import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The large-input tests (200 KB texts, 50,000 keys, property runs) take about a second alone and
    // several on a loaded two-core CI machine: a bound on their input, not on their time.
    testTimeout: 30_000,
  },
});
