// The stdio servers the tests start as real processes (test/fixtures/*-server.ts, define-run-as.ts)
// run src/ itself. Started through `node --import tsx`, each start cost about a CPU second of loader
// and transform work (more as nobody, whose tsx cache is empty) before the server did anything;
// server-death alone starts six. Transpiled here once per run instead, by the transformer tsx ran
// them through (esbuild, the catalog's version, the one tsx brings: type syntax removed, nothing else
// changed), into a directory laid out as the package is: each server starts as `node <file>.js`.
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** test/fixtures transpiled to JavaScript (`.mjs` fixtures linked), with src beside it. */
    compiledFixtures: string;
  }
}

const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
function transpileDirectory(from: string, to: string): void {
  // Readable and searchable by all: run-as starts a fixture as nobody.
  mkdirSync(to, { recursive: true, mode: 0o755 });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(from, entry.name);
    if (entry.name.endsWith('.ts')) {
      const { code } = transformSync(readFileSync(file, 'utf8'), {
        loader: 'ts',
        format: 'esm',
        target: 'node20',
        sourcefile: file,
        tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true } },
      });
      writeFileSync(path.join(to, entry.name.replace(/\.ts$/, '.js')), code, { mode: 0o644 });
    } else if (entry.name.endsWith('.mjs')) {
      // A link: a fixture that resolves behave.mjs (realpath) gets the file in test/fixtures itself.
      symlinkSync(file, path.join(to, entry.name));
    }
  }
}

export default function setup(project: TestProject): () => void {
  const out = realpathSync(mkdtempSync(path.join(tmpdir(), 'toolgate-exec-fixtures-')));
  chmodSync(out, 0o755);
  transpileDirectory(path.join(PACKAGE, 'src'), path.join(out, 'src'));
  transpileDirectory(path.join(PACKAGE, 'test', 'fixtures'), path.join(out, 'test', 'fixtures'));
  writeFileSync(path.join(out, 'package.json'), '{ "type": "module" }\n', { mode: 0o644 });
  // The packages the fixtures import resolve from the package's own node_modules.
  symlinkSync(path.join(PACKAGE, 'node_modules'), path.join(out, 'node_modules'));
  project.provide('compiledFixtures', path.join(out, 'test', 'fixtures'));
  return () => rmSync(out, { recursive: true, force: true });
}
