import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // PGlite boots a WebAssembly PostgreSQL; on a busy 2-core machine that takes seconds.
    hookTimeout: 60_000,
    testTimeout: 30_000,
  },
});
