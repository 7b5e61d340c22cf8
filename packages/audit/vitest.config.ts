import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The CLI and shutdown tests spawn the built dist/ in child processes.
    globalSetup: ['test/global-setup.ts'],
    // PGlite start-up and 1,000-call runs share two cores with other packages' suites.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
