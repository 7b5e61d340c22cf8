// A silent partition between the writer and PostgreSQL: packets stop, nothing resets the connection.
// Without a deadline the batch's COPY or INSERT waits for the kernel to give up on the connection
// (about 15 minutes on Linux; never, when only the reply is lost) while every later record piles up
// behind it. The sink must give up on the statement, drop that connection and retry the same batch
// on a new one: nothing lost, nothing stored twice, the chain intact.
import {
  type FaultProxy,
  type LogEntry,
  recordingLogger,
  reportMissingService,
  startFaultProxy,
} from '@toolgate/core/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createAudit, createPostgresSink, verifyAuditTable } from '../src/index.js';
import { databases, suiteDatabase } from './database.js';
import { closeConnections, serve } from './helpers.js';

/** The frontend's CopyDone message: the end of a COPY's data, after which the server commits it. */
const COPY_DONE = Buffer.from([0x63, 0, 0, 0, 4]);

/** A batch's write: an INSERT, or a COPY's end (the server commits on it). */
const batchWrite = (chunk: Buffer): boolean => chunk.includes('INSERT INTO') || chunk.includes(COPY_DONE);

describe('createPostgresSink timeoutMs', () => {
  it('refuses a time limit that is not a positive number', () => {
    const client = { query: async () => ({ rows: [] }) };
    for (const timeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => createPostgresSink({ client, timeoutMs })).toThrow(
        new RangeError('createPostgresSink: timeoutMs must be a positive number'),
      );
    }
  });
});

const url = process.env.TEST_DATABASE_URL;
if (url === undefined) {
  reportMissingService(
    it,
    'PostgreSQL behind a silent partition (a batch that never gets an answer)',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
} else {
  describe('a silent partition between the writer and PostgreSQL', () => {
    const suite = suiteDatabase(databases.find((database) => database.name === 'PostgreSQL')!.open);

    async function proxied(): Promise<{
      pool: pg.Pool;
      proxy: FaultProxy;
    }> {
      const target = new URL(url!);
      const proxy = await startFaultProxy({ host: '127.0.0.1', port: Number(target.port || 5432) });
      target.host = `127.0.0.1:${proxy.port}`;
      const pool = new pg.Pool({ connectionString: target.toString(), max: 2 });
      pool.on('error', () => {});
      return { pool, proxy };
    }

    async function stored(table: string): Promise<{ rows: number; hashes: number }> {
      const { rows } = await suite.db.client.query(
        `SELECT count(*)::int AS rows, count(DISTINCT hash)::int AS hashes FROM ${table}`,
      );
      return rows[0] as { rows: number; hashes: number };
    }

    it.each([{ copy: true }, { copy: false }])(
      'the connections in use go silent for good (copy: $copy): the batch times out and is stored once on a new connection',
      async ({ copy }) => {
        const table = suite.newTable();
        const { pool, proxy } = await proxied();
        const log: LogEntry[] = [];
        const audit = createAudit({
          sink: createPostgresSink({ client: pool, table, copy, timeoutMs: 500 }),
          // Long enough for the retries, short enough that a writer stuck on the silent connection
          // gives up within the test: then the records are counted as dropped.
          closeTimeoutMs: 8_000,
          logger: recordingLogger(log),
        });
        await audit.ready();
        const served = await serve([audit]);
        await served.callTool('get_order', { id: 'warm-up' });
        await audit.flush();
        proxy.silenceLive();
        await Promise.all(
          Array.from({ length: 30 }, (_, index) => served.callTool('get_order', { id: `A-${index}` })),
        );
        await audit.close();
        await closeConnections();
        await proxy.close();
        await pool.end();
        expect(audit.stats()).toMatchObject({ written: 31, dropped: 0, rejected: 0, pending: 0 });
        expect(await stored(table)).toEqual({ rows: 31, hashes: 31 });
        await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
          intact: true,
          records: 31,
        });
        expect(log.map((entry) => entry.message)).toEqual([
          'audit sink failing (transient); retrying the same batch with backoff while records wait in the buffer',
          'audit sink recovered',
        ]);
      },
    );

    it.each([{ copy: true }, { copy: false }])(
      'a batch commits and its connection goes silent before the reply (copy: $copy): the retry recognises it, nothing stored twice',
      async ({ copy }) => {
        const table = suite.newTable();
        const { pool, proxy } = await proxied();
        const audit = createAudit({
          sink: createPostgresSink({ client: pool, table, copy, timeoutMs: 500 }),
          closeTimeoutMs: 8_000,
          logger: recordingLogger([]),
        });
        await audit.ready();
        const served = await serve([audit]);
        await served.callTool('get_order', { id: 'warm-up' });
        await audit.flush();
        proxy.silenceAfter(batchWrite);
        await Promise.all(
          Array.from({ length: 30 }, (_, index) => served.callTool('get_order', { id: `A-${index}` })),
        );
        await audit.close();
        await closeConnections();
        await proxy.close();
        await pool.end();
        expect(audit.stats()).toMatchObject({
          written: 31,
          dropped: 0,
          rejected: 0,
          duplicateBatches: 1,
          pending: 0,
        });
        expect(await stored(table)).toEqual({ rows: 31, hashes: 31 });
        await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
          intact: true,
          records: 31,
        });
      },
    );

    it('the database goes silent while the writer starts: ready() times out and retries, then the head is read on a new connection', async () => {
      const table = suite.newTable();
      const { pool, proxy } = await proxied();
      // One connection opened and then silenced: the head read the writer starts with never returns.
      await pool.query('SELECT 1');
      proxy.silenceLive();
      const audit = createAudit({
        sink: createPostgresSink({ client: pool, table, timeoutMs: 500 }),
        logger: recordingLogger([]),
      });
      await audit.ready();
      const served = await serve([audit]);
      await served.callTool('get_order', { id: 'A-1' });
      await audit.close();
      await closeConnections();
      await proxy.close();
      await pool.end();
      expect(audit.stats()).toMatchObject({ written: 1, dropped: 0 });
      expect(audit.stats().retries).toBeGreaterThanOrEqual(1);
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: true,
        records: 1,
      });
    });
  });
}
