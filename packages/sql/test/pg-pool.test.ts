import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgQueryable } from '../src/index.js';
import { ENGINES, NEEDS_POSTGRES } from './engines.js';

// Pool behaviour under aborts and dying connections: only a real server has a pool. ENGINES holds
// the PostgreSQL engine when TEST_DATABASE_URL is set (and engines.ts throws in CI when it is not).
const url = process.env.TEST_DATABASE_URL;

// Without a server this file still reports itself (an empty file is a failed suite, and a silent
// pass would claim coverage that did not run): one test, marked skipped at run time with the reason.
if (url === undefined) {
  describe('pg Pool', () => {
    it(NEEDS_POSTGRES, (context) => {
      context.skip(NEEDS_POSTGRES);
    });
  });
}

describe.each(ENGINES.filter((engine) => engine.cancelsRunningStatements))('pg Pool on $name', () => {
  let pool: pg.Pool;
  let killer: pg.Client;
  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: url, max: 1 });
    killer = new pg.Client({ connectionString: url });
    await killer.connect();
  });
  afterAll(async () => {
    await killer.end();
    await pool.end();
  });

  it('a call aborted while waiting for a connection does not leak it when the pool hands it over', async () => {
    const db = pgQueryable(pool);
    const holding = db.readOnly({ timeoutMs: 5000 }, (runner) => runner.query('SELECT pg_sleep(0.3)', []));
    const controller = new AbortController();
    const waiting = db.readOnly({ timeoutMs: 5000, signal: controller.signal }, (runner) =>
      runner.query('SELECT 1', []),
    );
    controller.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    await holding;
    // With the connection leaked, this would wait forever for the pool's only client.
    const after = await db.readOnly({ timeoutMs: 2000 }, (runner) => runner.query('SELECT 1 AS one', []));
    expect(after.rows).toEqual([{ one: 1 }]);
    expect(pool.idleCount + pool.waitingCount).toBe(1);
  });

  it('a connection that dies between two statements of a call fails that call, not the process', async () => {
    const db = pgQueryable(pool);
    const call = db.readOnly({ timeoutMs: 5000 }, async (runner) => {
      const { rows } = await runner.query('SELECT pg_backend_pid() AS pid', []);
      await killer.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      // The client is idle between statements, so pg emits 'error' on it now.
      await new Promise((resolve) => setTimeout(resolve, 200));
      return runner.query('SELECT 1', []);
    });
    await expect(call).rejects.toThrow();
    const after = await db.readOnly({ timeoutMs: 2000 }, (runner) => runner.query('SELECT 2 AS two', []));
    expect(after.rows).toEqual([{ two: 2 }]);
  });
});
