import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Three files start an embedded PostgreSQL (PGlite) in beforeAll: seconds on a loaded CI machine.
    hookTimeout: 60_000,
  },
});
