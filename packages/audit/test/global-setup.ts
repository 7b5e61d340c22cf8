import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { PGlite } from '@electric-sql/pglite';
import type { TestProject } from 'vitest/node';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Every file under `directory`, recursively. */
async function filesUnder(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { withFileTypes: true, recursive: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

/**
 * Whether dist/ was built from the sources as they are: every src/ module has its .js and .d.ts in dist/,
 * each written after the last change to any source or tsconfig. (CI builds before it tests; a build
 * here would then be a second tsc run of the same sources, seconds of CPU per run.)
 */
async function distIsFresh(): Promise<boolean> {
  const sources = (await filesUnder(join(root, 'src'))).filter((file) => file.endsWith('.ts'));
  const inputs = [
    ...sources,
    join(root, 'tsconfig.build.json'),
    join(root, '..', '..', 'tsconfig.base.json'),
    join(root, 'package.json'),
  ];
  const outputs = sources.flatMap((file) => {
    const base = join(root, 'dist', relative(join(root, 'src'), file)).replace(/\.ts$/, '');
    return [`${base}.js`, `${base}.d.ts`];
  });
  try {
    const newestInput = Math.max(
      ...(await Promise.all(inputs.map(async (file) => (await stat(file)).mtimeMs))),
    );
    const oldestOutput = Math.min(
      ...(await Promise.all(outputs.map(async (file) => (await stat(file)).mtimeMs))),
    );
    return oldestOutput > newestInput;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

/** Builds dist/ unless it is fresh, so tests that spawn `node dist/cli.js` never run a stale build. */
async function buildDist(): Promise<void> {
  if (await distIsFresh()) return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root });
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string };
    throw new Error(`tsc -p tsconfig.build.json failed:\n${failed.stdout ?? ''}${failed.stderr ?? ''}`);
  }
}

/**
 * Every PGlite of the suite (in this process and in the crash tests' children) starts from one data
 * directory made here, once per run. A new PGlite runs initdb (a WebAssembly program) before it starts:
 * about two thirds of the CPU a PGlite costs, paid again by every file. Loading the directory initdb made
 * (`loadDataDir`) still gives each PGlite a database of its own, with nothing of any other's in it. This
 * plain `new PGlite()` is also the suite's check that a start without a data directory works.
 */
async function pgliteDataDir(file: string): Promise<void> {
  // As the test workers (vitest.config.ts): PGlite's WebAssembly compiled by V8's baseline tier only.
  setFlagsFromString('--liftoff-only');
  const pglite = new PGlite();
  try {
    const { rows } = await pglite.query<{ one: number }>('SELECT 1 AS one');
    if (rows[0]?.one !== 1) throw new Error('the PGlite made for the data directory does not answer');
    const dump = await pglite.dumpDataDir('gzip');
    await writeFile(file, new Uint8Array(await dump.arrayBuffer()));
  } finally {
    await pglite.close();
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const directory = await mkdtemp(join(tmpdir(), 'toolgate-audit-pglite-'));
  const file = join(directory, 'pgdata.tar.gz');
  try {
    await Promise.all([buildDist(), pgliteDataDir(file)]);
  } catch (error) {
    await rm(directory, { recursive: true, force: true });
    throw error;
  }
  project.provide('pgliteDataDir', file);
  return () => rm(directory, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** A gzipped tarball of a freshly initialised PGlite data directory (see test/global-setup.ts). */
    pgliteDataDir: string;
  }
}
