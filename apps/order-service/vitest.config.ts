import { defineConfig } from 'vitest/config';
import { testProjects } from '../../scripts/test-projects.mjs';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two files at once even on 2 cores (vitest's default there is one): most of a file's time is spent
    // waiting on a child server, a deadline or a peer, not on this process. Files share nothing that
    // could collide: ports are 0, folders mkdtemp, databases a scratch one per test, Redis callers unique
    // to the run.
    maxWorkers: 2,
    // Each worker keeps its modules from one file to the next instead of importing the SDK, OpenTelemetry,
    // PGlite and the app again for every file (a large share of the suite's CPU): no file mocks a
    // module or changes a module's state for the files after it; each starts and stops its own
    // services, servers and children.
    isolate: false,
    // `pnpm test` runs `standalone`, `pnpm test:services` the files that need PostgreSQL, Redis or CI.
    projects: testProjects(new URL('./test/', import.meta.url)),
  },
});
