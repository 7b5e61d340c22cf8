import { connect, createServer, type Server, type Socket } from 'node:net';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  type AuditSink,
  createAudit,
  createFunctionSink,
  createPostgresSink,
  verifyAuditTable,
} from '../src/index.js';
import { databases, losingFirstInsertReply, suiteDatabase } from './database.js';
import { closeConnections, serve } from './helpers.js';

/** The frontend's CopyDone message: the end of a COPY's data, after which the server commits it. */
const COPY_DONE = Buffer.from([0x63, 0, 0, 0, 4]);

/**
 * A loopback TCP proxy that, once armed, forwards the next client→server packet ending a write (an
 * INSERT, or a COPY's CopyDone) and then cuts both sockets as soon as the server's reply starts: the
 * write commits (autocommit), its acknowledgement never arrives. It counts the statements it saw.
 */
async function replyDroppingProxy(port: number): Promise<{
  port: number;
  arm: () => void;
  close: () => Promise<void>;
  seen: { copies: number; inserts: number };
}> {
  let armed = false;
  const seen = { copies: 0, inserts: 0 };
  const live = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    live.add(client).add(upstream);
    let dropNextReply = false;
    client.on('data', (chunk: Buffer) => {
      if (chunk.includes('FROM STDIN')) seen.copies += 1;
      if (chunk.includes('INSERT INTO')) seen.inserts += 1;
      if (armed && (chunk.includes('INSERT INTO') || chunk.includes(COPY_DONE))) {
        armed = false;
        dropNextReply = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (dropNextReply) {
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    const cut = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', cut).on('close', cut);
    upstream.on('error', cut).on('close', cut);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    seen,
    arm: () => {
      armed = true;
    },
    close: async () => {
      for (const socket of live) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.each(databases)('faults on $name', ({ name, open }) => {
  const suite = suiteDatabase(open);
  const newTable = suite.newTable;

  // node-postgres writes with COPY unless told not to; PGlite (and the wrapper around it) with INSERT.
  const writes = name === 'PostgreSQL' ? [{ copy: true }, { copy: false }] : [{ copy: false }];
  it.each(writes)(
    'a lost acknowledgement of a committed batch (copy: $copy): the retry recognises the batch, nothing lost, chain intact',
    async ({ copy }) => {
      const table = newTable();
      let client = losingFirstInsertReply(suite.db.client);
      let proxy: Awaited<ReturnType<typeof replyDroppingProxy>> | undefined;
      let pool: pg.Pool | undefined;
      if (name === 'PostgreSQL') {
        const target = new URL(suite.db.url!);
        proxy = await replyDroppingProxy(Number(target.port || 5432));
        target.host = `127.0.0.1:${proxy.port}`;
        pool = new pg.Pool({ connectionString: target.toString(), max: 2 });
        pool.on('error', () => {});
        client = pool;
      }
      const log: LogEntry[] = [];
      const audit = createAudit({
        sink: createPostgresSink({ client, table, copy }),
        logger: recordingLogger(log),
      });
      const served = await serve([audit]);
      await served.callTool('get_order', { id: 'warm-up' });
      await audit.flush();
      proxy?.arm();
      await Promise.all(
        Array.from({ length: 50 }, (_, index) => served.callTool('get_order', { id: `A-${index}` })),
      );
      await audit.close();
      await closeConnections();
      await pool?.end();
      await proxy?.close();
      expect(audit.stats()).toMatchObject({ written: 51, dropped: 0, rejected: 0, duplicateBatches: 1 });
      expect(audit.stats().retries).toBeGreaterThanOrEqual(1);
      const { rows } = await suite.db.client.query(`SELECT count(*)::int AS n FROM ${table}`);
      expect(rows[0]).toEqual({ n: 51 });
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: true,
        records: 51,
      });
      expect(log.map((entry) => entry.message)).toEqual([
        'audit sink failing (transient); retrying the same batch with backoff while records wait in the buffer',
        'audit sink recovered',
      ]);
      if (proxy && copy) {
        // Warm-up, the batch whose reply was lost, and its retry: COPY each time; the retry's COPY
        // found the rows there (a unique violation, nothing stored), and the stored hashes told the
        // batch was stored: no INSERT.
        expect(proxy.seen).toEqual({ copies: 3, inserts: 0 });
      } else if (proxy) {
        expect(proxy.seen.copies).toBe(0);
      }
    },
  );

  if (name === 'PostgreSQL') {
    it('a pg.Client (not a pool) writes with COPY too, through a proxy that sees it; 300 calls, chain intact', async () => {
      const table = newTable();
      const target = new URL(suite.db.url!);
      const proxy = await replyDroppingProxy(Number(target.port || 5432));
      target.host = `127.0.0.1:${proxy.port}`;
      const single = new pg.Client({ connectionString: target.toString() });
      await single.connect();
      const audit = createAudit({ sink: createPostgresSink({ client: single, table }), batchSize: 64 });
      const served = await serve([audit]);
      await Promise.all(
        Array.from({ length: 300 }, (_, index) => served.callTool('get_order', { id: `C-${index}` })),
      );
      await audit.close();
      await closeConnections();
      await single.end();
      await proxy.close();
      expect(audit.stats()).toMatchObject({ written: 300, dropped: 0, rejected: 0, retries: 0 });
      expect(proxy.seen.copies).toBeGreaterThanOrEqual(300 / 64);
      expect(proxy.seen.inserts).toBe(0);
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: true,
        records: 300,
      });
    });
  }

  it('two writers on one table never break each other; each chain verifies', async () => {
    const table = newTable();
    const one = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
    const two = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }) });
    const served = await serve([one, two]);
    await Promise.all(
      Array.from({ length: 40 }, (_, index) => served.callTool('get_order', { id: `A-${index}` })),
    );
    await one.close();
    await two.close();
    await closeConnections();
    expect(one.stats().chainId).not.toBe(two.stats().chainId);
    const result = await verifyAuditTable({ client: suite.db.client, table });
    expect(result).toMatchObject({ intact: true, records: 80 });
    expect(result.chains.map((chain) => [chain.chain, chain.intact, chain.records]).sort()).toEqual(
      [
        [one.stats().chainId, true, 40],
        [two.stats().chainId, true, 40],
      ].sort(),
    );
  });

  it('two writers forced onto one chain id: the second is refused loudly (permanent), the first chain stays intact', async () => {
    const table = newTable();
    const sink = createPostgresSink({ client: suite.db.client, table });
    // The first writer's second batch waits until the second writer stored its record, so both
    // link at seq 2 whatever the timing: the second read the head before the first wrote more.
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let writes = 0;
    const gatedSink: AuditSink = {
      head: (chainId) => sink.head!(chainId),
      write: async (batch) => {
        writes += 1;
        if (writes === 2) await gate;
        return sink.write(batch);
      },
    };
    const firstLog: LogEntry[] = [];
    const first = createAudit({ sink: gatedSink, chainId: 'same', logger: recordingLogger(firstLog) });
    await (await serve([first])).callTool('get_order', { id: 'first' });
    await first.flush();
    const log: LogEntry[] = [];
    const second = createAudit({
      sink: createPostgresSink({ client: suite.db.client, table }),
      chainId: 'same',
      logger: recordingLogger(log),
    });
    await (await serve([first, second])).callTool('get_order', { id: 'both' });
    await second.flush();
    release();
    await first.close();
    await second.close();
    await closeConnections();
    // Whichever wrote seq 2 second is refused: exactly one record refused, loudly, never retried.
    const stats = [first.stats(), second.stats()];
    expect(stats.map((each) => each.rejected).sort()).toEqual([0, 1]);
    expect(stats.reduce((sum, each) => sum + each.written, 0)).toBe(2);
    expect(stats.reduce((sum, each) => sum + each.retries, 0)).toBe(0);
    const refusals = [...firstLog, ...log];
    expect(refusals.map((entry) => entry.message)).toEqual([
      'audit sink refused a batch with a permanent error: its records are dropped, not retried',
    ]);
    expect((refusals[0]!.fields.err as Error).message).toMatch(/another writer uses this chain id/);
    await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
      intact: true,
      records: 2,
    });
  });

  it.each(writes)(
    'two writers on one chain id, the second with a batch of three (copy: $copy): its batch leaves no row; the first chain goes on and verifies',
    async ({ copy }) => {
      const table = newTable();
      const firstLog: LogEntry[] = [];
      const first = createAudit({
        sink: createPostgresSink({ client: suite.db.client, table, copy }),
        chainId: 'same',
        logger: recordingLogger(firstLog),
      });
      const firstClient = await serve([first]);
      await firstClient.callTool('get_order', { id: 'A1' });
      await first.flush();
      // The second starts now: it reads seq 1 as the head.
      const secondLog: LogEntry[] = [];
      const second = createAudit({
        sink: createPostgresSink({ client: suite.db.client, table, copy }),
        chainId: 'same',
        logger: recordingLogger(secondLog),
        batchDelayMs: 50,
      });
      await second.ready();
      const secondClient = await serve([second]);
      await firstClient.callTool('get_order', { id: 'A2' });
      await first.flush();
      // Seqs 2, 3 and 4 in one batch: 2 is the first writer's; 3 and 4 are free.
      await Promise.all(['B1', 'B2', 'B3'].map((id) => secondClient.callTool('get_order', { id })));
      await second.flush();
      await firstClient.callTool('get_order', { id: 'A3' });
      await first.close();
      await second.close();
      await closeConnections();
      expect(first.stats()).toMatchObject({ written: 3, rejected: 0, dropped: 0 });
      expect(second.stats()).toMatchObject({ written: 0, rejected: 3, retries: 0 });
      expect(firstLog).toEqual([]);
      expect(secondLog.map((entry) => entry.message)).toEqual([
        'audit sink refused a batch with a permanent error: its records are dropped, not retried',
      ]);
      expect((secondLog[0]!.fields.err as Error).message).toMatch(
        /seq 2 holds another record .*another writer uses this chain id/,
      );
      const { rows } = await suite.db.client.query(
        `SELECT seq::int AS seq, record::json->'args'->>'id' AS id FROM ${table} ORDER BY seq`,
      );
      expect(rows).toEqual([
        { seq: 1, id: 'A1' },
        { seq: 2, id: 'A2' },
        { seq: 3, id: 'A3' },
      ]);
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: true,
        records: 3,
      });
    },
  );

  it('a permanent error (undefined table) is counted and logged once per interval, never retried; calls go on', async () => {
    const table = newTable();
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createPostgresSink({ client: suite.db.client, table, createTable: false }),
      logger: recordingLogger(log),
      batchDelayMs: 0,
      batchSize: 1,
    });
    const served = await serve([audit]);
    for (let index = 0; index < 5; index += 1) {
      const result = await served.callTool('get_order', { id: `A-${index}` });
      expect(result.isError).toBeUndefined();
    }
    await audit.close();
    await closeConnections();
    expect(audit.stats()).toMatchObject({ written: 0, dropped: 5, rejected: 5, retries: 0 });
    // At most one line per interval (the first at once, the rest summed at close), with counts.
    expect(log.length).toBeLessThanOrEqual(2);
    expect(new Set(log.map((entry) => entry.message))).toEqual(
      new Set(['audit sink refused a batch with a permanent error: its records are dropped, not retried']),
    );
    expect(log.reduce((sum, entry) => sum + (entry.fields.records as number), 0)).toBe(5);
    expect((log[0]!.fields.err as { code?: string }).code).toBe('42P01');
  });

  it('the verifier reports an UPDATE of any copied column', async () => {
    const table = newTable();
    const audit = createAudit({ sink: createPostgresSink({ client: suite.db.client, table }), chainId: 'c' });
    const served = await serve([audit], undefined, { authInfo: { token: 't', clientId: 'c-1', scopes: [] } });
    for (let index = 1; index <= 3; index += 1) await served.callTool('get_order', { id: `A-${index}` });
    await audit.close();
    await closeConnections();
    for (const [column, value] of [
      ['principal', "'someone-else'"],
      ['caller', "'local'"],
      ['outcome', "'internal'"],
      ['tool', "'other_tool'"],
      ['incident_id', "'inc_forged'"],
      ['time', "time + interval '1 hour'"],
    ] as const) {
      await suite.db.client.query(`UPDATE ${table} SET ${column} = ${value} WHERE seq = 2`);
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: false,
        brokenAt: 2,
        reason: `record 2 (seq 2): column ${column} differs from the hashed record (the row was updated)`,
      });
      const restore =
        column === 'caller'
          ? "record->>'caller'"
          : column === 'time'
            ? "time - interval '1 hour'"
            : column === 'principal'
              ? "'c-1'"
              : column === 'outcome'
                ? "'ok'"
                : column === 'tool'
                  ? "'get_order'"
                  : 'NULL';
      await suite.db.client.query(`UPDATE ${table} SET ${column} = ${restore} WHERE seq = 2`);
      await expect(verifyAuditTable({ client: suite.db.client, table })).resolves.toMatchObject({
        intact: true,
        records: 3,
      });
    }
  });
});

describe('the byte bound', () => {
  it('records are held serialised (no result kept): 2,000 calls with 256 KB results stay under maxBufferBytes, the rest dropped and counted', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let stored = 0;
    const log: LogEntry[] = [];
    const audit = createAudit({
      sink: createFunctionSink(async (records) => {
        await gate;
        stored += records.length;
      }),
      logger: recordingLogger(log),
      maxBufferBytes: 64 * 1024,
      maxWaitMs: 0,
    });
    const served = await serve([audit]);
    const big = 'x'.repeat(256 * 1024);
    for (let index = 0; index < 20; index += 1) {
      const result = await served.callTool('echo', { value: index === 0 ? big : `small-${index}` });
      expect(result.isError).toBeUndefined();
    }
    // The 256 KB argument is cut to a marker; the 256 KB result is not held, only its size.
    const stats = audit.stats();
    expect(stats.pendingBytes).toBeLessThanOrEqual(64 * 1024);
    expect(stats.pending + stats.dropped).toBe(20);
    release();
    await audit.close();
    expect(stored + audit.stats().dropped).toBe(20);
  });
});
