import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The files share a worker's modules: PGlite compiles its WebAssembly once per process, and
    // test/pglite.ts starts every PGlite after the first from the data directory initdb made once.
    // Each file still opens (and closes) its own databases, pools and clients; nothing in src/ or test/
    // keeps state between files but caches of derived text and a counter for unique names.
    isolate: false,
    // PGlite boots a WebAssembly PostgreSQL; on a busy 2-core machine that takes seconds.
    hookTimeout: 60_000,
    testTimeout: 30_000,
  },
});
