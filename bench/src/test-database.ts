import { setupDatabase } from '@toolgate/order-service/db';
import pg from 'pg';

/** The schema the suite's PostgreSQL tables live in: its own, so concurrent package tests never meet it. */
export const TEST_SCHEMA = 'toolgate_bench_test';

/** Where the suite's order database is: a PostgreSQL URL (scoped to TEST_SCHEMA) or embedded PGlite. */
export type TestDatabase = { kind: 'postgres'; url: string } | { kind: 'pglite'; url: undefined };

/**
 * `TEST_DATABASE_URL` when set (the order-service schema and seed are applied in TEST_SCHEMA and the
 * returned URL selects it through `search_path`); a loud failure when CI=true and it is unset; else
 * embedded PGlite, which the order-service opens and seeds itself.
 */
export async function testDatabase(): Promise<TestDatabase> {
  const base = process.env.TEST_DATABASE_URL;
  if (!base) {
    if (process.env.CI === 'true') throw new Error('TEST_DATABASE_URL must be set when CI=true');
    return { kind: 'pglite', url: undefined };
  }
  const url = await prepareTestSchema(base);
  return { kind: 'postgres', url };
}

/** Creates TEST_SCHEMA on the server of `base` with the order-service tables and seed; returns the scoped URL. */
export async function prepareTestSchema(base: string): Promise<string> {
  const pool = new pg.Pool({ connectionString: base, max: 1 });
  try {
    await pool.query(`CREATE SCHEMA IF NOT EXISTS ${TEST_SCHEMA}`);
  } finally {
    await pool.end();
  }
  const url = scopedUrl(base);
  const scoped = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await setupDatabase({ runScript: async (sql: string) => void (await scoped.query(sql)) });
  } finally {
    await scoped.end();
  }
  return url;
}

/** `url` with `search_path` set to TEST_SCHEMA for every connection (the server applies it at startup). */
export function scopedUrl(url: string): string {
  const scoped = new URL(url);
  scoped.searchParams.set('options', `-c search_path=${TEST_SCHEMA}`);
  return scoped.href;
}

/**
 * The URL of the PostgreSQL server to take down in the database-down test: `TEST_DATABASE_URL`, a loud
 * failure when CI=true and it is unset, else the local server. A network outage has no PGlite
 * equivalent (PGlite runs inside the process), so this one test always needs a server.
 */
export function outageDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url && process.env.CI === 'true') throw new Error('TEST_DATABASE_URL must be set when CI=true');
  return url ?? 'postgres://postgres@127.0.0.1:5432/test';
}
