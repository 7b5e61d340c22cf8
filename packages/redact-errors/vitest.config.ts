import { defineConfig } from 'vitest/config';
import { testProjects } from '../../scripts/test-projects.mjs';

export default defineConfig({
  test: {
    // Three files start an embedded PostgreSQL (PGlite) in beforeAll: seconds on a loaded CI machine.
    hookTimeout: 60_000,
    // The budget tests scrub 50,000-field failures: about a second alone, several on a loaded machine.
    testTimeout: 30_000,
    // `pnpm test` runs `standalone`, `pnpm test:services` the files that read TEST_DATABASE_URL or CI.
    projects: testProjects(new URL('./test/', import.meta.url)),
  },
});
