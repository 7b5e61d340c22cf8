import { defineConfig } from 'vitest/config';
import { testProjects } from '../../scripts/test-projects.mjs';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // `pnpm test` runs `standalone`, `pnpm test:services` the files that need PostgreSQL, Redis or CI.
    projects: testProjects(new URL('./test/', import.meta.url)),
  },
});
