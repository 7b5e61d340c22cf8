import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Every test file runs behind a socket guard that refuses any destination but loopback.
    setupFiles: ['test/support/loopback-guard.ts'],
  },
});
