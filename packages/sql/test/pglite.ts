import { PGlite, type PGliteOptions } from '@electric-sql/pglite';

// PGlite.create() runs initdb (a WebAssembly program) before it starts PostgreSQL: most of the CPU a
// PGlite costs once the WebAssembly is compiled. The first PGlite of a worker is made that way, and its
// data directory is dumped at once, before it runs anything: what initdb made, nothing more. Every later
// one starts from that directory (`loadDataDir`) instead, a database of its own with none of another's
// tables, rows or roles. The test files share a worker (`isolate: false` in vitest.config.ts), so one
// initdb and one WebAssembly compilation serve all of them.
let initialised: Promise<Blob> | undefined;

/** A new, empty PGlite, as `PGlite.create(options)` makes it. */
export async function createPGlite(
  options: Omit<PGliteOptions, 'dataDir' | 'loadDataDir'> = {},
): Promise<PGlite> {
  if (initialised === undefined) {
    const first = PGlite.create(options);
    initialised = first.then((pglite) => pglite.dumpDataDir('none'));
    initialised.catch(() => {
      initialised = undefined;
    });
    await initialised;
    return first;
  }
  return PGlite.create({ ...options, loadDataDir: await initialised });
}
