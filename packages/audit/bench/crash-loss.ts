// Records lost to kill -9 per mode: a real stdio server child with audit, 64 calls in flight,
// SIGKILL after 400 answers; "lost" = answers the client received whose record the sink lacks.
// Run: npx tsx bench/crash-loss.ts [runs]   (PostgreSQL when TEST_DATABASE_URL is set, else PGlite on disk)
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { AuditQueryable } from '../src/index.js';
import { crashRun } from '../test/crash-run.js';

const RUNS = Number(process.argv[2] ?? 5);
const url = process.env.TEST_DATABASE_URL;
const dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-crash-bench-'));

async function storedNumbers(sink: 'file' | 'db', target: string, table: string): Promise<Set<number>> {
  let lines: string[];
  if (sink === 'file') {
    lines = (await readFile(target, 'utf8')).split('\n').filter((line) => line.startsWith('{'));
  } else {
    const pool = url ? new pg.Pool({ connectionString: url, max: 1 }) : undefined;
    const lite = pool ? undefined : new PGlite(target);
    const client: AuditQueryable = pool ?? lite!;
    const { rows } = await client.query(`SELECT record::text AS record FROM ${table}`);
    lines = (rows as { record: string }[]).map((row) => row.record);
    await lite?.close();
    if (pool) {
      await pool.query(`DROP TABLE ${table}`);
      await pool.end();
    }
  }
  const numbers = new Set<number>();
  for (const line of lines) {
    try {
      numbers.add((JSON.parse(line) as { args: { n: number } }).args.n);
    } catch {
      // A torn last line: not a record.
    }
  }
  return numbers;
}

console.log('| sink | mode | runs | answered (mean) | lost per run | max lost |');
console.log('|---|---|---:|---:|---|---:|');
for (const sink of ['file', 'db'] as const) {
  // Default mode with and without ready() awaited before serving, then durable mode.
  for (const [durable, ready] of [
    [false, false],
    [false, true],
    [true, false],
  ] as const) {
    const lost: number[] = [];
    let answered = 0;
    for (let run = 0; run < RUNS; run += 1) {
      const table = `crash_bench_${process.pid}_${run}_${durable ? 'd' : ready ? 'r' : 'n'}`;
      const target = sink === 'file' ? join(dir, `${table}.jsonl`) : (url ?? join(dir, table));
      const result = await crashRun({
        sink: sink === 'file' ? 'file' : url ? 'postgres' : 'pglite',
        target,
        durable,
        ready,
        table,
      });
      const stored = await storedNumbers(sink, target, table);
      answered += result.answered.size;
      lost.push([...result.answered].filter((n) => !stored.has(n)).length);
    }
    const name = sink === 'file' ? 'file' : url ? 'PostgreSQL' : 'PGlite on disk';
    console.log(
      `| ${name} | ${durable ? 'durable' : ready ? 'default, ready() awaited' : 'default'} | ${RUNS} | ${(answered / RUNS).toFixed(0)} | ${lost.join(', ')} | ${Math.max(...lost)} |`,
    );
  }
}
await rm(dir, { recursive: true, force: true });
