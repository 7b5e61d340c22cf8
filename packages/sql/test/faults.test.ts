// Network faults between the pg adapter and a real PostgreSQL server, through core's loopback fault
// proxy: a connection that goes silent after the server took a statement (a NAT or firewall that lost
// the flow, a reply lost on the way back) must neither hang the call nor keep its pool connection for
// good. Only a real server has a network; PGlite runs in process.
import { connect, createServer, type Server } from 'node:net';
import {
  classifyFailure,
  createSilentLogger,
  defineTool,
  fail,
  ok,
  type ToolDefinition,
} from '@toolgate/core';
import {
  expectFailure,
  type FaultProxy,
  serveTools,
  startFaultProxy,
  type TestClient,
} from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type PgQueryableOptions, pgQueryable, type Queryable, sqlTool } from '../src/index.js';
import { NEEDS_POSTGRES } from './engines.js';

const url = process.env.TEST_DATABASE_URL;
const SCHEMA = 'toolgate_sql_faults';

if (url === undefined) {
  describe('network faults', () => {
    it(NEEDS_POSTGRES, (context) => {
      context.skip(NEEDS_POSTGRES);
    });
  });
} else {
  describe('network faults between the pool and PostgreSQL', () => {
    let admin: pg.Pool;
    let proxy: FaultProxy;
    let proxiedUrl: string;
    const pools: pg.Pool[] = [];
    const clients: TestClient[] = [];

    beforeAll(async () => {
      admin = new pg.Pool({ connectionString: url, max: 1 });
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA};
        CREATE TABLE ${SCHEMA}.orders (id integer PRIMARY KEY, customer_id integer NOT NULL);
        INSERT INTO ${SCHEMA}.orders VALUES (1, 1), (2, 1), (3, 2)`);
      proxy = await startFaultProxy(proxyTarget());
      proxiedUrl = proxiedThrough(proxy);
    });
    afterEach(async () => {
      await Promise.all(clients.splice(0).map((client) => client.close()));
    });
    afterAll(async () => {
      await proxy.close();
      await Promise.all(pools.splice(0).map((pool) => pool.end()));
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      await admin.end();
    });

    /** The server the proxies relay to. */
    function proxyTarget(): { host: string; port: number } {
      const target = new URL(url as string);
      return { host: target.hostname, port: Number(target.port || 5432) };
    }

    /** The test database's URL, reached through `through`. */
    function proxiedThrough(through: FaultProxy): string {
      const target = new URL(url as string);
      target.hostname = '127.0.0.1';
      target.port = String(through.port);
      return target.toString();
    }

    /** A pool of ONE connection through the proxy: a connection kept by a lost call starves the next. */
    function poolOfOne(): pg.Pool {
      // Named after the schema: pg_stat_activity then finds its backend, not one of a file run alongside.
      const pool = new pg.Pool({ connectionString: proxiedUrl, max: 1, application_name: SCHEMA });
      pool.on('error', () => undefined);
      pools.push(pool);
      return pool;
    }

    async function serveOrders(db: Queryable, timeoutMs = 300): Promise<TestClient> {
      const tool = sqlTool({
        from: { schema: SCHEMA, table: 'orders' },
        columns: ['id'],
        filters: {
          customer: {
            kind: 'equals',
            type: 'integer',
            column: 'customer_id',
            min: 1,
            max: 1000,
            description: 'The customer.',
          },
        },
        sort: { keys: ['id'], default: 'id_asc' },
        limit: { default: 10, max: 10 },
        name: 'customer_orders',
        description: "A customer's orders.",
        db,
        timeoutMs,
      }) as ToolDefinition;
      const client = await serveTools([tool], { logger: createSilentLogger() });
      clients.push(client);
      return client;
    }

    async function untilIdleInTransaction(): Promise<void> {
      for (let i = 0; i < 500; i += 1) {
        const { rows } = await admin.query(
          `SELECT 1 FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE '%_toolgate_total%' AND application_name = $1`,
          [SCHEMA],
        );
        if (rows.length > 0) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error('the statement never reached the server');
    }

    const itemIds = (result: { structuredContent?: unknown }): number[] =>
      (result.structuredContent as { items: { id: number }[] }).items.map((item) => item.id);

    // The tool's statement (its text holds the count's alias `_toolgate_total`; once prepared, only its
    // name `toolgate_<digest>` is sent), and the COMMIT that ends its transaction.
    const STATEMENT = (chunk: Buffer): boolean => chunk.includes('toolgate_');
    const COMMIT = (chunk: Buffer): boolean => chunk.includes('COMMIT');

    const cases: [string, PgQueryableOptions, (chunk: Buffer) => boolean][] = [
      ['the statement’s reply', {}, STATEMENT],
      ['the COMMIT’s acknowledgement', {}, COMMIT],
      [
        'the reply of a statement sent alone (readOnlySession, prepared)',
        { readOnlySession: { timeoutMs: 300 }, preparedStatements: true },
        STATEMENT,
      ],
    ];

    it.each(cases)(
      'a connection that goes silent after the server took the call (%s lost) answers unavailable, and its pool connection is replaced: the next caller is served',
      async (_what, options, match) => {
        const pool = poolOfOne();
        const c = await serveOrders(pgQueryable(pool, options));
        expect(itemIds(await c.callTool('customer_orders', { customer: 1 }))).toEqual([1, 2]);
        // The server runs the statement (or commits); its answer never comes back and nothing resets.
        proxy.silenceAfter(match);
        const lost = expectFailure(await c.callTool('customer_orders', { customer: 1 }));
        expect([lost.error, lost.message, lost.retryable]).toEqual([
          'unavailable',
          'The database is unavailable.',
          true,
        ]);
        // The silent connection was dropped, not kept checked out: the pool's only slot serves again.
        const next = await c.callTool('customer_orders', { customer: 2 });
        expect([next.isError, itemIds(next)]).toEqual([undefined, [3]]);
        expect([pool.totalCount, pool.idleCount]).toEqual([1, 1]);
      },
    );

    it('a partition that also loses the close leaves no transaction holding the table on the server: a migration’s lock is granted, not queued behind it for hours', async () => {
      // The far side never hears the client close either: PostgreSQL keeps the session until TCP
      // gives up on it, and its transaction keeps the table's lock while it lasts.
      const partition = await startFaultProxy(proxyTarget(), { silentCloses: true });
      try {
        const pool = new pg.Pool({ connectionString: proxiedThrough(partition), max: 1 });
        pool.on('error', () => undefined);
        pools.push(pool);
        const c = await serveOrders(pgQueryable(pool));
        expect(itemIds(await c.callTool('customer_orders', { customer: 1 }))).toEqual([1, 2]);
        partition.silenceAfter(STATEMENT);
        const lost = expectFailure(await c.callTool('customer_orders', { customer: 1 }));
        expect([lost.error, lost.retryable]).toEqual(['unavailable', true]);
        // ALTER TABLE, DROP, TRUNCATE: what a migration takes. Every later reader would queue behind it.
        const migration = await admin.connect();
        try {
          await migration.query(`BEGIN; SET LOCAL lock_timeout = '15s'`);
          await expect(
            migration.query(`LOCK TABLE ${SCHEMA}.orders IN ACCESS EXCLUSIVE MODE`).then(() => 'granted'),
          ).resolves.toBe('granted');
        } finally {
          await migration.query('ROLLBACK');
          migration.release();
        }
      } finally {
        await partition.close();
      }
    });

    it('a call its caller abandoned while the reply was lost never keeps the connection: the next caller is served', async () => {
      const pool = poolOfOne();
      const c = await serveOrders(pgQueryable(pool));
      expect(itemIds(await c.callTool('customer_orders', { customer: 1 }))).toEqual([1, 2]);
      proxy.silenceAfter(STATEMENT);
      const controller = new AbortController();
      const call = c.callTool('customer_orders', { customer: 1 }, { signal: controller.signal });
      // The server ran the statement and waits for the next one; its reply is lost on the way back.
      await untilIdleInTransaction();
      // The caller gives up (a deadline, a closed connection): the cancel finds nothing to stop.
      controller.abort();
      await expect(call).rejects.toThrow(/abort/i);
      // With the connection kept for good, this call would wait for the pool's only slot forever.
      const next = await c.callTool('customer_orders', { customer: 2 });
      expect([next.isError, itemIds(next)]).toEqual([undefined, [3]]);
    });

    it('a single pg.Client whose connection goes silent answers unavailable instead of hanging every call behind it', async () => {
      const client = new pg.Client({ connectionString: proxiedUrl });
      client.on('error', () => undefined);
      await client.connect();
      const c = await serveOrders(pgQueryable(client));
      expect(itemIds(await c.callTool('customer_orders', { customer: 1 }))).toEqual([1, 2]);
      proxy.silenceAfter(STATEMENT);
      const [lost, queued] = await Promise.all([
        c.callTool('customer_orders', { customer: 1 }),
        c.callTool('customer_orders', { customer: 2 }),
      ]);
      for (const result of [lost, queued]) {
        expect([expectFailure(result).error, expectFailure(result).retryable]).toEqual(['unavailable', true]);
      }
    });

    it('statements a work function sends together each keep the reply deadline: the lost reply of the one pg queued answers unavailable', async () => {
      const pool = poolOfOne();
      const db = pgQueryable(pool);
      // pg queues the second statement until the first is answered; each waits through replyOf.
      const pair = defineTool({
        name: 'order_pair',
        description: 'Two orders, read in one snapshot.',
        input: {},
        handler: async (_args, ctx) => {
          try {
            const [first, second] = await db.readOnly({ timeoutMs: 300, signal: ctx.signal }, (runner) =>
              Promise.all([
                runner.query(`SELECT id FROM ${SCHEMA}.orders WHERE id = 1`, []),
                runner.query(`SELECT id FROM ${SCHEMA}.orders WHERE id = 3 /* second */`, []),
              ]),
            );
            return ok({ ids: [first.rows[0]!.id, second.rows[0]!.id] });
          } catch (error) {
            // What a handler of its own does with a database failure: core's one classifier.
            const known = classifyFailure(error);
            if (known === undefined) throw error;
            return fail(known.code, known.message, { retryable: known.retryable });
          }
        },
      }) as ToolDefinition;
      const c = await serveTools([pair], { logger: createSilentLogger() });
      clients.push(c);
      expect((await c.callTool('order_pair', {})).structuredContent).toEqual({ ok: true, ids: [1, 3] });
      // The first reply comes back; the server runs the second and its reply is lost.
      proxy.silenceAfter((chunk) => chunk.includes('/* second */'));
      const lost = expectFailure(await c.callTool('order_pair', {}));
      expect([lost.error, lost.retryable]).toEqual(['unavailable', true]);
      // The silent connection was dropped: the pool's only slot serves again.
      expect((await c.callTool('order_pair', {})).structuredContent).toEqual({ ok: true, ids: [1, 3] });
    });

    /**
     * A loopback relay in front of the server that reports each connection the SERVER ended, with the
     * bytes it had forwarded to it. PostgreSQL ends a cancel request's connection once it has signalled
     * the backend: the moment a cancel took effect, observed without a clock.
     */
    async function startEndRelay(target: { host: string; port: number }) {
      const ended: number[] = [];
      let wake: (() => void) | undefined;
      const server: Server = createServer({ allowHalfOpen: true }, (socket) => {
        const upstream = connect(target.port, target.host);
        let forwarded = 0;
        socket.on('data', (chunk: Buffer) => {
          forwarded += chunk.length;
          upstream.write(chunk);
        });
        socket.on('end', () => upstream.end());
        upstream.on('data', (chunk: Buffer) => socket.write(chunk));
        upstream.on('end', () => {
          ended.push(forwarded);
          wake?.();
          socket.end();
        });
        socket.on('error', () => upstream.destroy());
        upstream.on('error', () => socket.destroy());
      });
      await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
      return {
        port: (server.address() as { port: number }).port,
        /** The bytes the next connection the server ended had been sent. */
        async nextEnded(): Promise<number> {
          while (ended.length === 0) await new Promise<void>((woken) => (wake = woken));
          return ended.shift() as number;
        },
        close: () => new Promise<void>((closed) => server.close(() => closed())),
      };
    }

    it('a cancel request a partition holds past its wait counts as not delivered: the aborted call’s connection is dropped, so the cancel landing after the partition heals never stops the next caller’s statement', async () => {
      const target = new URL(url);
      const relay = await startEndRelay({ host: target.hostname, port: Number(target.port || 5432) });
      // The path a cancel request takes (a connection of its own to the client's host and port): the
      // partition holds it, as unacknowledged segments wait for retransmission, and delivers it on heal.
      const cancelPath = await startFaultProxy({ host: '127.0.0.1', port: relay.port });
      const locker = new pg.Client({ connectionString: url });
      await locker.connect();
      const APP = 'toolgate_sql_cancel_path';
      const waitingOnLock = async (): Promise<number> => {
        for (let i = 0; i < 500; i += 1) {
          const { rows } = await admin.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
            [APP],
          );
          if (rows.length === 1) return rows[0]!.pid;
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        throw new Error('no statement of the pool waits on the lock');
      };
      try {
        // The pool's connections reach the server directly; their cancel requests take the faulty path.
        const pool = new pg.Pool({ connectionString: url, max: 1, application_name: APP });
        pool.on('error', () => undefined);
        pool.on('connect', (client) => {
          Object.assign(client, { host: '127.0.0.1', port: cancelPath.port });
        });
        pools.push(pool);
        const c = await serveOrders(pgQueryable(pool), 30_000);
        expect(itemIds(await c.callTool('customer_orders', { customer: 1 }))).toEqual([1, 2]);
        const lock = `BEGIN; LOCK TABLE ${SCHEMA}.orders IN ACCESS EXCLUSIVE MODE`;
        await locker.query(lock);
        cancelPath.blackhole();
        // Caller A's statement runs (waits on the lock) when A gives up: the cancel request goes out
        // into the partition.
        const controller = new AbortController();
        const aborted = c.callTool('customer_orders', { customer: 1 }, { signal: controller.signal });
        const abortedPid = await waitingOnLock();
        controller.abort();
        await expect(aborted).rejects.toThrow(/abort/i);
        // A's statement ends and its transaction commits; the adapter then waits for the cancel's fate.
        await locker.query('COMMIT');
        // Granted once A's transaction is over.
        await locker.query(lock);
        // Caller B gets the pool's only slot: A's connection if it went back, a new one if dropped.
        const next = c.callTool('customer_orders', { customer: 2 });
        const nextPid = await waitingOnLock();
        // The partition heals while B's statement runs: the held cancel request reaches the server.
        cancelPath.heal();
        expect(await relay.nextEnded()).toBe(16);
        await locker.query('COMMIT');
        const result = await next;
        expect([result.isError, result.isError ? expectFailure(result) : itemIds(result)]).toEqual([
          undefined,
          [3],
        ]);
        expect(nextPid).not.toBe(abortedPid);
      } finally {
        await locker.end();
        await cancelPath.close();
        await relay.close();
      }
    });
  });
}
