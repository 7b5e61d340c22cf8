// A silent partition between the writer and PostgreSQL: packets stop, nothing resets the connection.
// Without a deadline the batch's COPY or INSERT waits for the kernel to give up on the connection
// (about 15 minutes on Linux; never, when only the reply is lost) while every later record piles up
// behind it. The sink must give up on the statement, drop that connection and retry the same batch
// on a new one: nothing lost, nothing stored twice, the chain intact.

import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
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
import { cli, closeConnections, serve } from './helpers.js';

/**
 * A loopback relay in front of PostgreSQL whose first COPY loses its end: the connection forwards
 * everything before the COPY's CopyDone (the rows are all there, read and inserted uncommitted) and
 * then goes silent for good both ways. When the client gives it up, the server is not told (no FIN,
 * no reset), as behind a NAT or firewall that lost the flow; core's fault proxy passes a client's close
 * on to the server. Other connections are relayed as they are.
 */
async function startCopyEndLosingRelay(target: URL): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let armed = true;
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    let silent = false;
    // The last bytes forwarded, so a CopyDone split over two reads is found too (its start is then
    // forwarded, and the server waits for the rest of it).
    let tail: Buffer = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      if (silent) return;
      const at = armed ? Buffer.concat([tail, chunk]).indexOf(COPY_DONE) : -1;
      if (at >= 0) {
        armed = false;
        silent = true;
        upstream.write(chunk.subarray(0, Math.max(0, at - tail.length)));
        return;
      }
      tail = chunk.subarray(Math.max(0, chunk.length - (COPY_DONE.length - 1)));
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!silent) client.write(chunk);
    });
    client
      .on('error', () => {})
      .on('close', () => {
        if (!silent) upstream.destroy();
      });
    upstream
      .on('error', () => {})
      .on('close', () => {
        if (!silent) client.destroy();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

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

    it('a COPY loses its end to a silent partition the server never hears of: the rows it holds uncommitted are released, the batch stored once', async () => {
      const table = suite.newTable();
      // The batch's rows reach the server, which inserts them (its primary key now holds their keys,
      // uncommitted) and waits for the end of the COPY, which never comes; nor does a reset.
      const relay = await startCopyEndLosingRelay(new URL(url!));
      const target = new URL(url!);
      target.host = `127.0.0.1:${relay.port}`;
      const pool = new pg.Pool({ connectionString: target.toString(), max: 2 });
      pool.on('error', () => {});
      // The first connection waits until every call is answered, so the first batch holds all 15
      // records of about 20 KB: more than the 64 KB the server buffers before it inserts rows.
      let open!: () => void;
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      const gated = new Proxy(pool, {
        get(target, key) {
          if (key === 'connect') return async () => gate.then(() => target.connect());
          const value = Reflect.get(target, key, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const audit = createAudit({
        sink: createPostgresSink({ client: gated, table, timeoutMs: 500 }),
        closeTimeoutMs: 8_000,
        logger: recordingLogger([]),
      });
      const served = await serve([audit]);
      for (let index = 0; index < 15; index += 1)
        await served.callTool('get_order', { id: `A-${index}`, note: 'n'.repeat(20_000) });
      open();
      await audit.close();
      await closeConnections();
      await pool.end();
      await relay.close();
      expect(audit.stats()).toMatchObject({ written: 15, dropped: 0, rejected: 0, pending: 0 });
      expect(await stored(table)).toEqual({ rows: 15, hashes: 15 });
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: true,
        records: 15,
      });
    });

    it('the connection drops while toolgate-audit verify --table reads: exit 2 with the error, never 1 (broken) from an unhandled error event', async () => {
      const table = suite.newTable();
      const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
      const served = await serve([audit]);
      for (let index = 1; index <= 3; index += 1) await served.callTool('get_order', { id: `A-${index}` });
      await audit.close();
      await closeConnections();
      const target = new URL(url!);
      const proxy = await startFaultProxy({ host: '127.0.0.1', port: Number(target.port || 5432) });
      target.host = `127.0.0.1:${proxy.port}`;
      // The verifier's first read reaches the server; its reply never comes back, and the connection
      // is reset while the CLI waits for it (the server restarted, a proxy in between dropped it).
      proxy.silenceAfter((chunk) => {
        const reads = chunk.includes('SELECT DISTINCT chain');
        if (reads) setImmediate(() => proxy.cut());
        return reads;
      });
      const result = await cli('verify', '--table', table, '--database-url', target.toString());
      await proxy.close();
      expect(result).toEqual({
        code: 2,
        stdout: '',
        stderr: 'toolgate-audit: Connection terminated unexpectedly\n',
      });
    });

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
