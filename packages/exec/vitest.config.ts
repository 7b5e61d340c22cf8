import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Every test spawns real processes; on a loaded machine one node start can take a second.
    testTimeout: 30_000,
  },
});
