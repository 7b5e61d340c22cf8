// Red team of the seams on real services: PostgreSQL (down behind a fault proxy, or reached with a role
// that may not write), two replicas sharing Redis, and the built server taking SIGTERM while refunds
// wait on PostgreSQL. Every call is a real Streamable HTTP round trip with the app's token verifier.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createSilentLogger, withDeadline } from '@toolgate/core';
import { type FaultProxy, reportMissingService, startFaultProxy } from '@toolgate/core/testing';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createTokenVerifier, type TokenConfig } from '../src/auth.js';
import { openDatabase } from '../src/db.js';
import { type RunningHttpServer, startHttpServer } from '../src/http.js';
import { createOrderService, type OrderService, type OrderServiceConfig } from '../src/service.js';
import { MAIN, waitFor } from './child-server.js';
import {
  createScratchDatabase,
  type ScratchDatabase,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
} from './fleet-harness.js';
import {
  type Caller,
  confirmationOf,
  confirmedWrite,
  connect,
  type Envelope,
  envelope,
} from './redteam-callers.js';

const ALL_SCOPES = ['orders:read', 'orders:write', 'docs:read'];
// Callers unique to this run: Redis outlives it (limits, claims, confirmations of an earlier run).
const RUN = randomBytes(4).toString('hex');

// Customer 42's seeded orders (see db.ts): a paid one, a delivered one with its tracking number.
const PAID_42 = '4000000003904067';
const DELIVERED_42 = '4000000000736467';

interface Replica {
  service: OrderService;
  http: RunningHttpServer;
  close(): Promise<void>;
}

async function startReplica(
  config: Partial<OrderServiceConfig>,
  tokens: TokenConfig,
  dir: string,
): Promise<Replica> {
  const service = await createOrderService(
    {
      databaseUrl: undefined,
      carrierUrl: 'http://127.0.0.1:9',
      auditFile: join(dir, `audit-${randomBytes(3).toString('hex')}.jsonl`),
      transport: 'tcp',
      breakerResetMs: 60_000,
      ...config,
    },
    createSilentLogger(),
  );
  const http = await startHttpServer({
    port: 0,
    verifier: createTokenVerifier(tokens),
    createServer: () => service.createServer(),
    logger: createSilentLogger(),
  });
  return {
    service,
    http,
    async close() {
      await http.close(1000);
      // Bounded: a pool whose server went away may wait on end().
      await withDeadline(() => service.close(), { timeoutMs: 10_000, what: 'service close' }).catch(
        () => undefined,
      );
    },
  };
}

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the red-team tests on PostgreSQL',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}
if (!TEST_REDIS_URL) {
  reportMissingService(it, 'the red-team tests on two replicas', 'TEST_REDIS_URL', 'redis://127.0.0.1:6379');
}

let database: ScratchDatabase | undefined;
let proxy: FaultProxy | undefined;
let dir: string | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  await proxy?.close();
  await database?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  database = proxy = dir = undefined;
});

async function scratchDatabase(): Promise<ScratchDatabase> {
  dir = mkdtempSync(join(tmpdir(), 'order-service-redteam-'));
  database = await createScratchDatabase(TEST_DATABASE_URL!);
  const direct = await openDatabase({ url: database.url, setup: true });
  await direct.close();
  return database;
}

/** Every string the model could read: content, structuredContent, _meta, and the log notifications. */
function everythingSeen(results: readonly CallToolResult[], callers: readonly Caller[]): string {
  return JSON.stringify([results, callers.map((caller) => caller.logs)]);
}

describe.runIf(TEST_DATABASE_URL)('what the model reads when PostgreSQL fails', () => {
  it('PostgreSQL down: every tool answers without the password, address, database name or driver error', async () => {
    const db = await scratchDatabase();
    const target = new URL(db.url);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const password = `pw-${RUN}-Sup3rS3cret`;
    const viaProxy = new URL(db.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    viaProxy.password = password;
    const token = `rt-portal-42-${RUN}-0123456789`;
    const replica = await startReplica(
      { databaseUrl: viaProxy.href, customerScoped: true },
      { tokens: [{ token, clientId: 'portal', scopes: ALL_SCOPES, claims: { customerId: 42 } }] },
      dir!,
    );
    closers.push(() => replica.close());
    const caller = await connect(replica.http.url, token);
    closers.push(() => caller.close());
    // Reached once before the outage (an identical call during it may be answered from the repeat cache).
    expect(envelope(await caller.call('get_order_status', { order_id: DELIVERED_42 })).ok).toBe(true);

    await proxy.down();
    const results: CallToolResult[] = [];
    for (let round = 0; round < 3; round++) {
      results.push(await caller.call('search_orders', { days: 90 }));
      results.push(await caller.call('get_order_status', { order_id: PAID_42 }));
      results.push(await caller.call('render_invoice', { order_id: DELIVERED_42 }));
      results.push(await caller.call('track_shipment', { tracking_number: 'TRK00000093' }));
      results.push(
        await confirmedWrite(caller, 'cancel_order', { order_id: PAID_42, reason: `duplicate ${round}` }),
      );
      results.push(
        await confirmedWrite(caller, 'request_refund', {
          order_id: DELIVERED_42,
          amount_cents: 100,
          reason: `late ${round}`,
        }),
      );
    }
    for (const result of results) expect(result.isError, JSON.stringify(result)).toBe(true);
    const seen = everythingSeen(results, [caller]);
    for (const secret of [
      password,
      String(proxy.port),
      '127.0.0.1',
      new URL(db.url).pathname.slice(1),
      'ECONNREFUSED',
      'ECONNRESET',
      'connect',
      'pg_',
      'postgres',
    ]) {
      expect(seen, secret).not.toContain(secret);
    }
  });

  it('a role that may only read (README: order_reader): a refund is refused without the table, role or SQL', async () => {
    const db = await scratchDatabase();
    const role = `rt_reader_${RUN}`;
    await db.query(`CREATE ROLE ${role} LOGIN PASSWORD 'reader-${RUN}'`);
    // Roles belong to the cluster: dropped once the replica's connections are gone (closers run in reverse).
    closers.push(async () => {
      await db.query(`DROP OWNED BY ${role}`);
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await admin.connect();
      await admin.query(`DROP ROLE IF EXISTS ${role}`).finally(() => admin.end());
    });
    await db.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
    await db.query(`GRANT SELECT ON orders, customers, refunds, order_cancellations TO ${role}`);
    const asReader = new URL(db.url);
    asReader.username = role;
    asReader.password = `reader-${RUN}`;
    const token = `rt-desk-${RUN}-0123456789`;
    const replica = await startReplica(
      { databaseUrl: asReader.href },
      { tokens: [{ token, clientId: 'desk', scopes: ALL_SCOPES, claims: { sub: 'agent-1' } }] },
      dir!,
    );
    closers.push(() => replica.close());
    const caller = await connect(replica.http.url, token);
    closers.push(() => caller.close());
    const results = [
      await confirmedWrite(caller, 'request_refund', {
        order_id: DELIVERED_42,
        amount_cents: 100,
        reason: 'late',
      }),
      await confirmedWrite(caller, 'cancel_order', { order_id: PAID_42, reason: 'duplicate' }),
    ];
    for (const result of results) {
      expect(['permission_denied', 'internal']).toContain(envelope(result).error);
    }
    const seen = everythingSeen(results, [caller]);
    for (const secret of [
      role,
      'refunds',
      'order_cancellations',
      'INSERT',
      'UPDATE',
      'permission denied for',
    ]) {
      expect(seen, secret).not.toContain(secret);
    }
    expect((await db.query<{ n: number }>('SELECT count(*)::integer AS n FROM refunds'))[0]!.n).toBe(0);
  });
});

describe.runIf(TEST_DATABASE_URL)('a refund of an order another change holds', () => {
  it('gives up saying nothing was changed and to repeat the same call, never to narrow its arguments', async () => {
    const db = await scratchDatabase();
    const token = `rt-desk-${RUN}-0123456789`;
    const replica = await startReplica(
      { databaseUrl: db.url },
      { tokens: [{ token, clientId: 'desk', scopes: ALL_SCOPES, claims: { sub: 'agent-1' } }] },
      dir!,
    );
    closers.push(() => replica.close());
    const caller = await connect(replica.http.url, token);
    closers.push(() => caller.close());
    // Another session (a second replica's refund, an operator's psql) holds the order past the 2 s timeout.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    closers.push(() => holder.end());
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM orders WHERE order_id = $1 FOR UPDATE', [DELIVERED_42]);
    const refund = { order_id: DELIVERED_42, amount_cents: 700, reason: 'arrived late' };
    const busy = await confirmedWrite(caller, 'request_refund', refund);
    await holder.query('ROLLBACK');
    const answer = envelope(busy) as Envelope & { hint?: string; retryable?: boolean };
    expect(answer, JSON.stringify(busy)).toMatchObject({ error: 'unavailable', retryable: true });
    expect(answer.message).toContain('nothing was changed');
    expect(answer.hint).toContain('same arguments');
    expect(JSON.stringify(busy)).not.toMatch(/narrower|lower limit|shorter period/);
    expect((await db.query<{ n: number }>('SELECT count(*)::integer AS n FROM refunds'))[0]!.n).toBe(0);
    // The same call again, confirmed again, goes through once.
    expect(envelope(await confirmedWrite(caller, 'request_refund', refund))).toMatchObject({
      ok: true,
      amount_cents: 700,
    });
    expect((await db.query<{ n: number }>('SELECT count(*)::integer AS n FROM refunds'))[0]!.n).toBe(1);
  });
});

describe.runIf(TEST_DATABASE_URL && TEST_REDIS_URL)(
  'two replicas sharing Redis and PostgreSQL, two agents',
  () => {
    it('a confirmation, a replay or a write budget of agent 1 on replica A is nothing to agent 2 on replica B', async () => {
      const db = await scratchDatabase();
      const agent1Token = `rt-agent-1-${RUN}-0123456789`;
      const agent2Token = `rt-agent-2-${RUN}-0123456789`;
      const tokens = {
        tokens: [
          { token: agent1Token, clientId: 'desk', scopes: ALL_SCOPES, claims: { sub: `agent-1-${RUN}` } },
          { token: agent2Token, clientId: 'desk', scopes: ALL_SCOPES, claims: { sub: `agent-2-${RUN}` } },
        ],
      };
      const shared = {
        databaseUrl: db.url,
        redisUrl: TEST_REDIS_URL,
        confirmSecret: `secret-${RUN}-0123456789abcdef0123456789`,
        writesPerMinute: 4,
      };
      const a = await startReplica({ ...shared, replicaId: 'replica-a' }, tokens, dir!);
      closers.push(() => a.close());
      const b = await startReplica({ ...shared, replicaId: 'replica-b' }, tokens, dir!);
      closers.push(() => b.close());
      const agent1OnA = await connect(a.http.url, agent1Token);
      const agent2OnB = await connect(b.http.url, agent2Token);
      const agent1OnB = await connect(b.http.url, agent1Token);
      closers.push(async () => {
        await agent1OnA.close();
        await agent2OnB.close();
        await agent1OnB.close();
      });
      const refunds = async (): Promise<number> =>
        (
          await db.query<{ n: number }>('SELECT count(*)::integer AS n FROM refunds WHERE order_id = $1', [
            DELIVERED_42,
          ])
        )[0]!.n;

      const refund = { order_id: DELIVERED_42, amount_cents: 150, reason: 'arrived late' };
      const confirmation = confirmationOf(await agent1OnA.call('request_refund', refund));
      expect(envelope(await agent2OnB.call('request_refund', { ...refund, confirmation })).error).toBe(
        'permission_denied',
      );
      expect(await refunds()).toBe(0);
      const made = await agent1OnB.call('request_refund', { ...refund, confirmation });
      expect(envelope(made)).toMatchObject({ ok: true, amount_cents: 150 });
      // Agent 2 sends agent 1's confirmed call on the other replica: no replay of agent 1's answer.
      const copied = await agent2OnB.call('request_refund', { ...refund, confirmation });
      expect(copied._meta?.['toolgate/idempotency']).toBeUndefined();
      expect(envelope(copied).error).toBe('permission_denied');
      // Agent 1's retry on replica A is the replay.
      const retried = await agent1OnA.call('request_refund', { ...refund, confirmation });
      expect(retried._meta?.['toolgate/idempotency']).toMatchObject({ replayed: true });
      expect(await refunds()).toBe(1);

      // Agent 1 spends the rest of its refund budget (4 a minute) across both replicas; agent 2 keeps all of its own.
      let limited = false;
      for (let call = 0; call < 4 && !limited; call++) {
        const replica = call % 2 === 0 ? agent1OnA : agent1OnB;
        limited =
          envelope(await replica.call('request_refund', { ...refund, amount_cents: 10 + call })).error ===
          'rate_limited';
      }
      expect(limited).toBe(true);
      // Agent 2 made two refund calls so far: two of its four are left.
      for (let call = 0; call < 2; call++) {
        expect(
          envelope(await agent2OnB.call('request_refund', { ...refund, amount_cents: 20 + call })).error,
        ).toBe('confirmation_required');
      }
    });
  },
);

/** One raw Streamable HTTP tools/call with a bearer token; resolves with the JSON-RPC result. */
async function rawCall(url: string, token: string, id: number, name: string, args: Record<string, unknown>) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
  });
  const text = await response.text();
  const data = text
    .split('\n')
    .find((line) => line.startsWith('data: '))
    ?.slice('data: '.length);
  const message = JSON.parse(data ?? text) as { result?: CallToolResult };
  return { status: response.status, result: message.result! };
}

interface LockedRefunds {
  db: ScratchDatabase;
  auditFile: string;
  orders: string[];
  /** The confirmed refunds, sent while the test holds their orders' row locks. */
  calls: Promise<{ status: number; result: CallToolResult } | { failed: string }>[];
  holder: pg.Client;
  stderr(): string;
  exited: Promise<number | null>;
}

describe.runIf(TEST_DATABASE_URL)('SIGTERM while confirmed refunds wait on PostgreSQL', () => {
  let child: ChildProcessWithoutNullStreams | undefined;
  afterEach(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    child = undefined;
  });

  /**
   * The built server over HTTP on a scratch database with `graceMs` of drain; three paid orders (the
   * write pool has four connections) locked by the test, and a confirmed refund of each waiting on its
   * lock (each confirmed first, two-step). A statement waits at most 2 s for a lock.
   */
  async function lockedRefunds(graceMs: number): Promise<LockedRefunds> {
    const db = await scratchDatabase();
    const auditFile = join(dir!, 'audit.jsonl');
    const token = `rt-desk-${RUN}-0123456789`;
    const started = spawn(process.execPath, [MAIN, '--http', '--port', '0'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        DATABASE_URL: db.url,
        AUDIT_FILE: auditFile,
        CARRIER_URL: 'http://127.0.0.1:9',
        TOOLGATE_SHUTDOWN_GRACE_MS: String(graceMs),
        TOOLGATE_WRITES_PER_MINUTE: '100',
        TOOLGATE_TOKENS: JSON.stringify({
          tokens: [{ token, clientId: 'desk', scopes: ALL_SCOPES, claims: { sub: 'agent-1' } }],
        }),
      },
    });
    child = started;
    let stderr = '';
    started.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((done) => started.once('exit', (code) => done(code)));
    await waitFor('the listening line', () => stderr.includes('"listening"'));
    const url = /"url":"([^"]+)"/.exec(stderr)![1]!;
    const orders = (
      await db.query<{ order_id: string }>(
        `SELECT order_id FROM orders WHERE status = 'paid' ORDER BY order_id LIMIT 3`,
      )
    ).map((row) => row.order_id);
    const confirmed: Record<string, unknown>[] = [];
    for (const [index, order] of orders.entries()) {
      const args = { order_id: order, amount_cents: 100, reason: 'shutdown test' };
      const asked = await rawCall(url, token, index + 1, 'request_refund', args);
      confirmed.push({ ...args, confirmation: confirmationOf(asked.result) });
    }
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    closers.push(() => holder.end());
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM orders WHERE order_id = ANY($1) FOR UPDATE', [orders]);
    const calls = confirmed.map((args, index) =>
      rawCall(url, token, 100 + index, 'request_refund', args).catch((error: unknown) => ({
        failed: String(error),
      })),
    );
    const waiting = async (): Promise<number> =>
      (
        await db.query<{ n: number }>(
          `SELECT count(*)::integer AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        )
      )[0]!.n;
    for (let poll = 0; (await waiting()) < orders.length; poll++) {
      if (poll > 200) throw new Error('the refunds never waited on the lock');
      await new Promise((done) => setTimeout(done, 5));
    }
    return { db, auditFile, orders, calls, holder, stderr: () => stderr, exited };
  }

  const auditOf = (auditFile: string) =>
    readFileSync(auditFile, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map(
        (line) =>
          JSON.parse(line) as {
            tool: string;
            outcome: string;
            requestId: number;
            decisions?: { by: string; action: string }[];
          },
      );
  /** Audit's second record of a call, for what its handler came to after the call was answered. */
  const isLateOutcome = (record: ReturnType<typeof auditOf>[number]): boolean =>
    record.decisions?.some((decision) => decision.by === 'audit' && decision.action === 'late-outcome') ===
    true;

  it('every refund in flight is answered, made once, and audited before the process exits 0', async () => {
    const { db, auditFile, orders, calls, holder, stderr, exited } = await lockedRefunds(20_000);
    child!.kill('SIGTERM');
    await waitFor('shutdown to start', () => stderr().includes('shutdown: stop accepting new calls'));
    await holder.query('COMMIT');

    const answers = await Promise.all(calls);
    expect(await exited).toBe(0);
    for (const answer of answers) {
      if (!('result' in answer)) throw new Error(`no answer: ${answer.failed}`);
      expect(answer.status).toBe(200);
      expect(envelope(answer.result), JSON.stringify(answer.result)).toMatchObject({
        ok: true,
        amount_cents: 100,
      });
    }
    const made = await db.query<{ order_id: string }>('SELECT order_id FROM refunds ORDER BY order_id');
    expect(made.map((row) => row.order_id)).toEqual([...orders].sort());
    const records = auditOf(auditFile);
    const confirmedRecords = records.filter((record) => record.requestId >= 100);
    expect(confirmedRecords.map((record) => record.outcome)).toEqual(Array(orders.length).fill('ok'));
    expect(records).toHaveLength(orders.length * 2);
    expect(stderr()).toContain('shutdown: done');
  }, 120_000);

  it('refunds still waiting when the grace runs out: none is made without an answer and an audit record', async () => {
    const { db, auditFile, orders, calls, holder, stderr, exited } = await lockedRefunds(200);
    child!.kill('SIGTERM');
    await waitFor('the drain to give up', () => stderr().includes('shutdown: in-flight calls drained'));
    // The lock goes while the abandoned refunds still wait on it (well within their 2 s statement timeout).
    await holder.query('COMMIT');
    const answers = await Promise.all(calls);
    await exited;
    const made = (await db.query<{ order_id: string }>('SELECT order_id FROM refunds')).map(
      (row) => row.order_id,
    );
    const audited = auditOf(auditFile).filter(
      (record) => record.requestId >= 100 && record.outcome === 'ok' && !isLateOutcome(record),
    );
    const answeredOk = answers.filter((answer) => 'result' in answer && envelope(answer.result).ok === true);
    expect(orders).toHaveLength(3);
    // Each refund made was answered to its caller and recorded; an abandoned one was rolled back.
    expect(made.length, JSON.stringify({ made, answers, audited: audited.length })).toBe(answeredOk.length);
    expect(audited).toHaveLength(made.length);
    // And every refund the server took has its record, the abandoned ones too (aborted, not ok).
    const taken = auditOf(auditFile).filter((record) => record.requestId >= 100);
    expect(
      taken
        .filter((record) => !isLateOutcome(record))
        .map((record) => record.requestId)
        .sort(),
    ).toEqual([100, 101, 102]);
    // An aborted refund's handler came to its end before the exit (the transaction rolled back): since
    // session 36 the app waits for it, and audit keeps that as a second record of the call, never an ok.
    for (const late of taken.filter(isLateOutcome)) {
      expect([100, 101, 102]).toContain(late.requestId);
      expect(late.outcome).not.toBe('ok');
    }
  }, 120_000);
});
