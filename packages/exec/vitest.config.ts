import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Transpiles the stdio server fixtures once per run (see the file).
    globalSetup: ['test/global-setup.ts'],
    // Most of this suite's wall time is waiting, not computing: for time limits and kill grace
    // periods to pass, for child processes to start and die. On a 2-core machine Vitest's default
    // (cores - 1) runs one file at a time and the waits add up; three files at once overlap them.
    // Each file still runs in a process of its own (the forks pool), its tests one after another.
    maxWorkers: 3,
    // Every test spawns real processes; on a loaded machine one node start can take a second.
    testTimeout: 30_000,
  },
});
