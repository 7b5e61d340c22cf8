// The verifier against a database that goes silent: no reset, no answer. Without a time limit the
// CLI (and verifyAuditTable) waits until the kernel gives up on the connection (about 15 minutes on
// Linux; never, when the partition also keeps the server's close from the client). It must give up
// after its limit with "could not verify" (exit 2), never "broken" (exit 1) nor a hang.

import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { withDeadline } from '@toolgate/core';
import { type FaultProxy, reportMissingService, startFaultProxy } from '@toolgate/core/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createAudit, createPostgresSink, verifyAuditTable } from '../src/index.js';
import { databases, suiteDatabase } from './database.js';
import { cli, closeConnections, serve } from './helpers.js';

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));

/**
 * Runs the built CLI like `cli`, but kills it if it is still waiting after `killAfterMs` (a verifier
 * with no time limit of its own would otherwise hang the suite): it then reports signal SIGTERM.
 */
function cliKilledAfter(
  killAfterMs: number,
  ...args: string[]
): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { timeout: killAfterMs }, (error, stdout, stderr) => {
      const failed = error as { code?: number; signal?: string | null } | null;
      resolve({
        code: failed === null ? 0 : typeof failed.code === 'number' ? failed.code : null,
        signal: failed?.signal ?? null,
        stdout,
        stderr,
      });
    });
  });
}

/** The frontend's Terminate message: the goodbye node-postgres' `end()` sends, then waits for the close. */
const isTerminate = (chunk: Buffer): boolean =>
  chunk.length === 5 && chunk[0] === 0x58 && chunk.readUInt32BE(1) === 4;

describe('toolgate-audit verify --timeout-ms (no database needed)', () => {
  it.each(['0', '-5', '1.5', 'soon', '9007199254740993'])(
    'refuses --timeout-ms %s: exit 2',
    async (value) => {
      await expect(
        cli(
          'verify',
          '--table',
          'toolgate_audit',
          '--database-url',
          'postgres://x@127.0.0.1:1/x',
          `--timeout-ms=${value}`,
        ),
      ).resolves.toEqual({
        code: 2,
        stdout: '',
        stderr: `toolgate-audit: --timeout-ms ${value}: expected a whole number of milliseconds from 1\n`,
      });
    },
  );

  it('refuses --timeout-ms with a FILE: a file is read without one', async () => {
    await expect(cli('verify', 'audit.jsonl', '--timeout-ms', '500')).resolves.toEqual({
      code: 2,
      stdout: '',
      stderr: 'toolgate-audit: --timeout-ms applies to --table only (a file is read without a time limit)\n',
    });
  });
});

describe('verifyAuditTable timeoutMs (no database needed)', () => {
  it('refuses a time limit that is not a positive number', async () => {
    const client = { query: async () => ({ rows: [] }) };
    for (const timeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(verifyAuditTable({ client, timeoutMs })).rejects.toThrow(
        new RangeError('verifyAuditTable: timeoutMs must be a positive number'),
      );
    }
  });

  it('a read that never settles: rejects with a TimeoutError after timeoutMs', async () => {
    const client = { query: () => new Promise<{ rows: unknown[] }>(() => {}) };
    const failure = await verifyAuditTable({ client, table: 'audit.log', timeoutMs: 50 }).catch(
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(DOMException);
    expect(failure).toMatchObject({
      name: 'TimeoutError',
      message: 'verifyAuditTable: a read of "audit"."log" did not finish within 50 ms',
    });
  });
});

const url = process.env.TEST_DATABASE_URL;
if (url === undefined) {
  reportMissingService(
    it,
    'toolgate-audit verify --table and verifyAuditTable against a PostgreSQL that goes silent',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
} else {
  describe('toolgate-audit verify --table against a PostgreSQL that goes silent', () => {
    const suite = suiteDatabase(databases.find((database) => database.name === 'PostgreSQL')!.open);

    /** A table of three records, and a proxy in front of the server whose partitions lose closes too. */
    async function tableBehindProxy(): Promise<{ table: string; proxy: FaultProxy; proxied: string }> {
      const table = suite.newTable();
      const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
      const served = await serve([audit]);
      for (let index = 1; index <= 3; index += 1) await served.callTool('get_order', { id: `A-${index}` });
      await audit.close();
      await closeConnections();
      const target = new URL(url!);
      const proxy = await startFaultProxy(
        { host: '127.0.0.1', port: Number(target.port || 5432) },
        { silentCloses: true },
      );
      target.host = `127.0.0.1:${proxy.port}`;
      return { table, proxy, proxied: target.toString() };
    }

    /** The CLI verifying `table` through the proxy with `--timeout-ms 500`, killed if still waiting at 20 s. */
    const verifyWithin500 = (table: string, proxied: string) =>
      cliKilledAfter(20_000, 'verify', '--table', table, '--database-url', proxied, '--timeout-ms', '500');

    /** A pool of one connection through the proxy, ended (bounded: a pool whose connection is stuck never ends). */
    async function withPool(proxied: string, proxy: FaultProxy, use: (pool: pg.Pool) => Promise<void>) {
      const pool = new pg.Pool({ connectionString: proxied, max: 1 });
      pool.on('error', () => {});
      try {
        await use(pool);
      } finally {
        await proxy.close();
        await withDeadline(() => pool.end(), { timeoutMs: 5_000 }).catch(() => undefined);
      }
    }

    it('the first read gets no answer: exit 2 (could not verify) after --timeout-ms, never a hang nor 1', async () => {
      const { table, proxy, proxied } = await tableBehindProxy();
      proxy.silenceAfter((chunk) => chunk.includes('SELECT DISTINCT chain'));
      const result = await verifyWithin500(table, proxied);
      // The server never heard the CLI leave: its session is still held open by the partition.
      const held = proxy.held;
      await proxy.close();
      expect(result).toEqual({
        code: 2,
        signal: null,
        stdout: '',
        stderr: `toolgate-audit: could not verify: the database did not answer a read of ${table
          .split('.')
          .map((part) => `"${part}"`)
          .join('.')} within 500 ms (--timeout-ms)\n`,
      });
      expect(held).toBe(1);
    });

    it('a page read gets no answer: exit 2, nothing printed of the chains read before', async () => {
      const { table, proxy, proxied } = await tableBehindProxy();
      proxy.silenceAfter((chunk) => chunk.includes('ORDER BY seq LIMIT'));
      const result = await verifyWithin500(table, proxied);
      await proxy.close();
      expect(result).toMatchObject({ code: 2, signal: null, stdout: '' });
      expect(result.stderr).toMatch(
        /^toolgate-audit: could not verify: the database did not answer a read of .* within 500 ms \(--timeout-ms\)\n$/,
      );
    });

    it('the database is silent from the start: connecting gives up after --timeout-ms, exit 2', async () => {
      const { table, proxy, proxied } = await tableBehindProxy();
      proxy.blackhole();
      const result = await verifyWithin500(table, proxied);
      await proxy.close();
      expect(result).toEqual({
        code: 2,
        signal: null,
        stdout: '',
        stderr:
          'toolgate-audit: could not verify: the database did not answer within 500 ms while connecting (--timeout-ms)\n',
      });
    });

    it('the goodbye gets no answer after every read did: the result stands (exit 0), the CLI does not wait for the close', async () => {
      const { table, proxy, proxied } = await tableBehindProxy();
      // The server gets the Terminate and ends its process; the partition keeps that close from the CLI.
      proxy.silenceAfter(isTerminate);
      const result = await verifyWithin500(table, proxied);
      await proxy.close();
      expect(result).toMatchObject({ code: 0, signal: null, stderr: '' });
      expect(result.stdout).toMatch(/\nintact: 3 records in 1 chains\n$/);
    });

    it('verifyAuditTable: a read with no answer rejects with a TimeoutError after timeoutMs', async () => {
      const { table, proxy, proxied } = await tableBehindProxy();
      const client = new pg.Client({ connectionString: proxied });
      client.on('error', () => {});
      await client.connect();
      proxy.silenceLive();
      const failure = await verifyAuditTable({ client, table, timeoutMs: 300 }).catch(
        (error: unknown) => error,
      );
      // A pg.Client with a query in flight: end() drops the connection at once.
      await client.end();
      await proxy.close();
      expect(failure).toBeInstanceOf(DOMException);
      expect(failure).toMatchObject({
        name: 'TimeoutError',
        message: `verifyAuditTable: a read of ${table
          .split('.')
          .map((part) => `"${part}"`)
          .join('.')} did not finish within 300 ms`,
      });
    });

    it('verifyAuditTable with a pg.Pool: the silent connection is destroyed, not handed back to starve the pool', async () => {
      const { table, proxy, proxied } = await tableBehindProxy();
      await withPool(proxied, proxy, async (pool) => {
        // The pool's one connection, made before the partition and idle in the pool.
        await pool.query('SELECT 1');
        expect(pool.totalCount).toBe(1);
        proxy.silenceLive();
        const failure = await verifyAuditTable({ client: pool, table, timeoutMs: 300 }).catch(
          (error: unknown) => error,
        );
        expect(failure).toMatchObject({ name: 'TimeoutError' });
        // Handed back, the connection would still wait for its lost answer, checked out for the
        // ~15 minutes the kernel takes: with max 1, every later query of the app would wait with it.
        expect({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }).toEqual({
          total: 0,
          idle: 0,
          waiting: 0,
        });
        const next = await withDeadline(() => pool.query('SELECT 2 AS two'), { timeoutMs: 5_000 });
        expect(next.rows).toEqual([{ two: 2 }]);
        // And a verification that succeeds hands its connection back for reuse.
        await expect(verifyAuditTable({ client: pool, table, timeoutMs: 5_000 })).resolves.toMatchObject({
          intact: true,
          records: 3,
        });
        expect({ total: pool.totalCount, idle: pool.idleCount }).toEqual({ total: 1, idle: 1 });
      });
    });

    it('verifyAuditTable with a pg.Pool whose checkout gets no answer: TimeoutError after timeoutMs, and the late connection is destroyed', async () => {
      const { table, proxy, proxied } = await tableBehindProxy();
      await withPool(proxied, proxy, async (pool) => {
        proxy.blackhole();
        const failure = await verifyAuditTable({ client: pool, table, timeoutMs: 300 }).catch(
          (error: unknown) => error,
        );
        expect(failure).toMatchObject({
          name: 'TimeoutError',
          message: 'verifyAuditTable: checking a connection out of the pool did not finish within 300 ms',
        });
        // The partition ends: the connection completes after the limit and is destroyed on arrival.
        proxy.heal();
        const next = await withDeadline(() => pool.query('SELECT 3 AS three'), { timeoutMs: 5_000 });
        expect(next.rows).toEqual([{ three: 3 }]);
      });
    });
  });
}
