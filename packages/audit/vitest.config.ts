import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The CLI and shutdown tests spawn the built dist/ in child processes.
    globalSetup: ['test/global-setup.ts'],
    // PGlite is PostgreSQL compiled to WebAssembly: V8 compiles it at once with its baseline compiler
    // (Liftoff), then recompiles what runs often with its optimising one (TurboFan) on background
    // threads, CPU that a test's few hundred queries never win back. Liftoff only (a V8 compiler tier,
    // the same semantics) saves about a third of the CPU each PGlite costs; the crash tests' children
    // and the global setup do the same (test/crash-run.ts, test/global-setup.ts).
    execArgv: ['--liftoff-only'],
    // PGlite start-up and 1,000-call runs share two cores with other packages' suites.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
