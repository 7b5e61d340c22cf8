import { defineConfig } from 'vitest/config';

// The fault and load suite, as two projects run one after the other:
// - `faults`: the files that only need their own service, two at a time. Each starts its servers and
//   fault proxies on port 0, writes to its own temporary folder, and asserts bounds with wide margins;
//   the PostgreSQL schema they share is created once, before any file, by test/global-setup.ts.
// - `alone`: the files whose figures a neighbour would disturb, one at a time, after every `faults`
//   file has finished (vitest runs a project whose files may not run in parallel in a group of its
//   own, last). The load test measures event-loop delay and memory; the audit blip test needs a batch
//   write to meet its 300 ms blip, which a starved process can miss.
const ALONE = ['test/load.test.ts', 'test/audit-fault.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'faults',
          include: ['test/**/*.test.ts'],
          exclude: ALONE,
          globalSetup: ['test/global-setup.ts'],
          fileParallelism: true,
          maxWorkers: 2,
        },
      },
      {
        extends: true,
        test: { name: 'alone', include: ALONE, fileParallelism: false },
      },
    ],
  },
});
