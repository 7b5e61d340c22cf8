import { readFile } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import type { AuditQueryable } from '../src/index.js';

export interface Database {
  readonly name: string;
  readonly client: AuditQueryable;
  /** A connection string a child process can use, for real PostgreSQL only. */
  readonly url: string | undefined;
  end(): Promise<void>;
}

/** Schema of this package's test tables: other packages' tests share the database. */
export const TEST_SCHEMA = 'toolgate_audit_test';

const url = process.env.TEST_DATABASE_URL;
if (!url && process.env.CI === 'true') {
  throw new Error('TEST_DATABASE_URL must be set in CI: the PostgreSQL sink tests need a real server');
}

/**
 * A new in-memory PGlite, empty as `new PGlite()` makes it, started from the data directory the global
 * setup initialised once for the run: it skips initdb, most of what a PGlite costs to start. Each call
 * is a database of its own; nothing one file or test writes reaches another's.
 */
export async function createPGlite(): Promise<PGlite> {
  const tarball = await readFile(inject('pgliteDataDir'));
  return PGlite.create({ loadDataDir: new Blob([tarball]) });
}

/** PGlite always; real PostgreSQL too when TEST_DATABASE_URL is set. */
export const databases: { name: string; open: () => Promise<Database> }[] = [
  {
    name: 'PGlite',
    open: async () => {
      const db = await createPGlite();
      return { name: 'PGlite', client: db, url: undefined, end: () => db.close() };
    },
  },
  ...(url
    ? [
        {
          name: 'PostgreSQL',
          open: async (): Promise<Database> => {
            const pool = new pg.Pool({ connectionString: url, max: 4 });
            return { name: 'PostgreSQL', client: pool, url, end: () => pool.end() };
          },
        },
      ]
    : []),
];

export function uniqueTable(): string {
  return `${TEST_SCHEMA}.audit_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
}

export interface SuiteDatabase {
  /** The database, open while the suite's tests run. */
  readonly db: Database;
  /** A table name of the suite's own, dropped after the suite. */
  newTable(): string;
}

/** Opens the database before a suite's tests; after them drops every table handed out, then closes it. */
export function suiteDatabase(open: () => Promise<Database>): SuiteDatabase {
  let db: Database | undefined;
  const tables: string[] = [];
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => {
    if (db === undefined) return;
    for (const table of tables) await db.client.query(`DROP TABLE IF EXISTS ${table}`);
    await db.end();
  });
  return {
    get db(): Database {
      if (db === undefined) throw new Error('suiteDatabase: the database is open only while the tests run');
      return db;
    },
    newTable(): string {
      const table = uniqueTable();
      tables.push(table);
      return table;
    },
  };
}

/**
 * A client whose first INSERT runs and then has its reply "lost" as a reset connection (ECONNRESET),
 * as PGlite (which has no socket) can show a lost acknowledgement.
 */
export function losingFirstInsertReply(client: AuditQueryable): AuditQueryable {
  let lost = false;
  return {
    async query(text, params) {
      const result = await client.query(text, params);
      if (!lost && text.startsWith('INSERT')) {
        lost = true;
        throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
      }
      return result;
    },
  };
}
