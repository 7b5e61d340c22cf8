import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pgQueryable } from '../src/index.js';

// Cancellation needs a real server: PGlite cannot interrupt a running statement.
const url = process.env.TEST_DATABASE_URL;
const NEEDS = 'needs TEST_DATABASE_URL (a real PostgreSQL server); not set, so the cancel tests did not run';
if (url === undefined && process.env.CI === 'true') {
  throw new Error('TEST_DATABASE_URL must be set in CI: the pg cancel tests must run on a real server');
}

if (url === undefined) {
  describe('pg cancellation', () => {
    it(NEEDS, (context) => {
      context.skip(NEEDS);
    });
  });
} else {
  describe('pg cancellation on PostgreSQL', () => {
    let pool: pg.Pool;
    let observer: pg.Client;
    /** Connections the test's pool opened. */
    let connects = 0;
    beforeAll(async () => {
      observer = new pg.Client({ connectionString: url });
      await observer.connect();
    });
    afterAll(async () => {
      await observer.end();
    });
    // A pool of two per test, new: what each test counts is its own connections.
    beforeEach(() => {
      connects = 0;
      pool = new pg.Pool({ connectionString: url, max: 2 });
      pool.on('connect', () => {
        connects += 1;
      });
    });
    afterEach(async () => {
      await pool.end();
    });

    const running = async (pid: number): Promise<string | null> => {
      const { rows } = await observer.query<{ state: string | null; query: string }>(
        'SELECT state, query FROM pg_stat_activity WHERE pid = $1',
        [pid],
      );
      return rows[0]?.state === 'active' ? rows[0].query : null;
    };

    it('stops a running pg_sleep(3) at once though the pool is exhausted, and the connection is reused', async () => {
      const db = pgQueryable(pool);
      // Which call reaches the server first is up to the pool: record each call's own backend.
      const pids = new Map<'cancelled' | 'other', number>();
      const sleeper = (signal: AbortSignal | undefined, label: 'cancelled' | 'other') =>
        db.readOnly({ timeoutMs: 10_000, signal }, async (runner) => {
          const { rows } = await runner.query('SELECT pg_backend_pid() AS pid', []);
          pids.set(label, (rows[0] as { pid: number }).pid);
          return runner.query('SELECT pg_sleep(3)', []);
        });
      const controller = new AbortController();
      const cancelled = sleeper(controller.signal, 'cancelled');
      const other = sleeper(undefined, 'other');
      // Both connections of the pool now run pg_sleep(3): the pool is exhausted.
      for (let i = 0; i < 200 && pids.size < 2; i += 1) await new Promise((r) => setTimeout(r, 10));
      expect(pids.size).toBe(2);
      const cancelledPid = pids.get('cancelled')!;
      const otherPid = pids.get('other')!;
      for (let i = 0; i < 200 && (await running(cancelledPid)) === null; i += 1) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const startedAt = performance.now();
      controller.abort(new DOMException('client went away', 'AbortError'));
      await expect(cancelled).rejects.toThrow('client went away');
      // A call queued for the pool gets the cancelled call's connection while the other sleep runs.
      const next = await db.readOnly({ timeoutMs: 5000 }, (runner) =>
        runner.query('SELECT pg_backend_pid() AS pid', []),
      );
      const waitedMs = performance.now() - startedAt;
      expect((next.rows[0] as { pid: number }).pid).toBe(cancelledPid);
      expect(await running(otherPid)).toBe('SELECT pg_sleep(3)');
      expect(await running(cancelledPid)).toBeNull();
      process.stderr.write(
        `sql pg-cancel: next call got the cancelled connection after ${Math.round(waitedMs)} ms (pg_sleep(3) cut short)\n`,
      );
      await other;
      // Two connections for the whole test: the aborted one went back to the pool clean.
      expect(connects).toBe(2);
    });

    it('five aborted calls in a row reuse the same connections: no reconnect storm', async () => {
      const db = pgQueryable(pool);
      // The pool's two connections open first, as after earlier calls: while an aborted call's connection
      // finishes its cancel, the next call takes the other one. Neither is replaced below.
      const opened = await Promise.all([pool.connect(), pool.connect()]);
      for (const connection of opened) connection.release();
      const before = connects;
      expect(before).toBe(2);
      for (let i = 0; i < 5; i += 1) {
        const controller = new AbortController();
        const call = db.readOnly({ timeoutMs: 10_000, signal: controller.signal }, (runner) =>
          runner.query('SELECT pg_sleep(3)', []),
        );
        await new Promise((r) => setTimeout(r, 50));
        controller.abort(new Error(`abort ${i}`));
        await expect(call).rejects.toThrow(`abort ${i}`);
      }
      const after = await db.readOnly({ timeoutMs: 5000 }, (runner) => runner.query('SELECT 1 AS one', []));
      expect(after.rows).toEqual([{ one: 1 }]);
      expect(connects).toBe(before);
      // No cancel landed late on a reused connection: every later statement ran to its end.
      const all = await Promise.all(
        Array.from({ length: 10 }, () =>
          db.readOnly({ timeoutMs: 5000 }, (runner) => runner.query('SELECT pg_sleep(0.02), 1 AS one', [])),
        ),
      );
      expect(all.map((result) => (result.rows[0] as { one: number }).one)).toEqual(Array(10).fill(1));
    });
  });
}
