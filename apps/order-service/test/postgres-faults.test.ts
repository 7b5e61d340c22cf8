import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createSilentLogger, withDeadline } from '@toolgate/core';
import {
  connectTestClient,
  expectFailure,
  type FaultProxy,
  parseResultText,
  reportMissingService,
  startFaultProxy,
  type TestClient,
} from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db.js';
import { createOrderService, type OrderService } from '../src/service.js';
import { createScratchDatabase, PAID, type ScratchDatabase, TEST_DATABASE_URL } from './fleet-harness.js';

// Faults between the order-service and PostgreSQL, through a loopback proxy that drops what it is told
// to: a COMMIT whose acknowledgement is lost, connections that go silent for good (a partition, a NAT
// that forgot their flows). Every call goes through a real tools/call round trip.

const desk: AuthInfo = {
  token: 'desk-token-0123456789abcdef',
  clientId: 'support-desk',
  scopes: ['orders:read', 'orders:write', 'docs:read'],
  extra: { sub: 'agent-1' },
};

const isCommit = (chunk: Buffer): boolean => chunk.includes('COMMIT');
const isOrderLock = (chunk: Buffer): boolean => chunk.includes('FOR UPDATE OF o');

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the PostgreSQL fault tests',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}

describe.runIf(TEST_DATABASE_URL)('order-service with PostgreSQL behind a faulty network', () => {
  let database: ScratchDatabase | undefined;
  let proxy: FaultProxy | undefined;
  let service: OrderService | undefined;
  let client: TestClient | undefined;
  let scratch: string | undefined;
  let partition: Partition | undefined;
  afterEach(async () => {
    await client?.close();
    // Bounded: a pool whose connection went silent waits for it on end().
    await withDeadline(() => service!.close(), { timeoutMs: 10_000, what: 'service close' }).catch(
      () => undefined,
    );
    await proxy?.close();
    partition?.close();
    await database?.drop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    client = service = proxy = database = scratch = partition = undefined;
  });

  /** The service on a scratch database reached through the proxy, and a desk client that accepts every confirmation. */
  async function start(through: 'fault-proxy' | 'partition' = 'fault-proxy'): Promise<TestClient> {
    scratch = mkdtempSync(join(tmpdir(), 'order-service-pg-faults-'));
    database = await createScratchDatabase(TEST_DATABASE_URL!);
    const direct = await openDatabase({ url: database.url, setup: true });
    await direct.close();
    const target = new URL(database.url);
    const upstream = { host: target.hostname, port: Number(target.port || 5432) };
    if (through === 'partition') partition = await startPartition(upstream);
    else proxy = await startFaultProxy(upstream);
    const viaProxy = new URL(database.url);
    viaProxy.host = `127.0.0.1:${(partition ?? proxy)!.port}`;
    service = await createOrderService(
      {
        databaseUrl: viaProxy.href,
        carrierUrl: 'http://127.0.0.1:9',
        auditFile: join(scratch!, 'audit.jsonl'),
        transport: 'tcp',
        breakerResetMs: 300,
      },
      createSilentLogger(),
    );
    client = await connectTestClient(service.createServer(), {
      authInfo: desk,
      onElicit: () => ({ action: 'accept' }),
    });
    return client;
  }

  const refunds = async (): Promise<{ refund_id: string; amount_cents: number }[]> =>
    database!.query('SELECT refund_id::text, amount_cents FROM refunds WHERE order_id = $1', [PAID]);

  /** Polls until `check` holds (at most 10 s); the proxy's fault then happens between two known points. */
  async function until(what: string, check: () => Promise<boolean>): Promise<void> {
    for (let poll = 0; poll < 500; poll += 1) {
      if (await check()) return;
      await new Promise((done) => setTimeout(done, 20));
    }
    throw new Error(`timed out waiting for ${what}`);
  }

  it('a refund committed whose acknowledgement is lost (connection reset) says it may have been made; its retry answers with that refund and pays nothing more', async () => {
    const desk = await start();
    const refund = { order_id: PAID, amount_cents: 500, reason: 'arrived damaged' };
    proxy!.silenceAfter(isCommit);
    const first = desk.callTool('request_refund', refund);
    await until('the refund to be committed', async () => (await refunds()).length === 1);
    proxy!.cut();
    const envelope = expectFailure(await first);
    expect(envelope).toEqual({
      ok: false,
      error: 'unavailable',
      message:
        'The connection to the database was lost while the change was being saved; it may have been made.',
      hint: 'Do not make a different change. Repeat this exact call in a few seconds: if the change was made, it answers with it instead of making it again.',
      retryable: true,
      retryAfterMs: 2000,
      incidentId: expect.stringMatching(/^inc_/),
    });
    const [made] = await refunds();
    const retried = await desk.callTool('request_refund', refund);
    expect(parseResultText(retried)).toEqual({
      ok: true,
      refund_id: made!.refund_id,
      order_id: PAID,
      amount_cents: 500,
      refunded_cents: 500,
      currency: 'USD',
      status: 'paid',
    });
    expect(await refunds()).toEqual([made]);
    // A different refund of the same order is a change of its own.
    const other = await desk.callTool('request_refund', { ...refund, amount_cents: 700 });
    expect(parseResultText(other)).toMatchObject({ ok: true, amount_cents: 700, refunded_cents: 1200 });
    expect(await refunds()).toHaveLength(2);
  }, 60_000);

  it('a COMMIT whose answer never comes (the connection went silent) is answered within the deadline, and the retry replays it', async () => {
    const desk = await start();
    const refund = { order_id: PAID, amount_cents: 300, reason: 'late delivery' };
    proxy!.silenceAfter(isCommit);
    const first = await desk.callTool('request_refund', refund);
    expect(expectFailure(first)).toMatchObject({
      error: 'unavailable',
      message:
        'The connection to the database was lost while the change was being saved; it may have been made.',
    });
    const [made] = await refunds();
    expect(made).toMatchObject({ amount_cents: 300 });
    const retried = await desk.callTool('request_refund', refund);
    expect(parseResultText(retried)).toMatchObject({
      ok: true,
      refund_id: made!.refund_id,
      refunded_cents: 300,
    });
    expect(await refunds()).toHaveLength(1);
  }, 60_000);

  it('a refund whose order cannot be read for its confirmation sentence is refused before anyone is asked: nothing changes', async () => {
    const desk = await start();
    await proxy!.down();
    const refused = await desk.callTool('request_refund', {
      order_id: PAID,
      amount_cents: 300,
      reason: 'arrived damaged',
    });
    expect(expectFailure(refused)).toMatchObject({
      error: 'unavailable',
      message: 'The order could not be read to ask for confirmation; nothing was changed.',
      retryable: true,
    });
    expect(JSON.stringify(refused)).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|postgres/);
    await proxy!.up();
    expect(await refunds()).toEqual([]);
  }, 60_000);

  it('a write cut off by a partition while it holds the order’s lock does not lock the order for good: the next change of it goes through', async () => {
    const desk = await start('partition');
    partition!.after(isOrderLock);
    const stuck = await desk.callTool('request_refund', {
      order_id: PAID,
      amount_cents: 100,
      reason: 'lost in transit',
    });
    expect(expectFailure(stuck)).toMatchObject({
      error: 'unavailable',
      message: 'The database stopped answering; nothing was changed.',
    });
    // PostgreSQL never heard the server drop that connection: its transaction, and the lock, stay
    // until the server's own idle-in-transaction limit ends them.
    const next = await desk.callTool('request_refund', {
      order_id: PAID,
      amount_cents: 200,
      reason: 'lost in transit',
    });
    expect(parseResultText(next)).toMatchObject({ ok: true, amount_cents: 200, refunded_cents: 200 });
    expect((await refunds()).map((row) => row.amount_cents)).toEqual([200]);
  }, 60_000);

  it('reads recover once connections that went silent for good have failed: the pool does not stay lent to them', async () => {
    const desk = await start();
    const search = (days: number): Promise<CallToolResult> => desk.callTool('search_orders', { days });
    // Ten reads at once: the read pool holds its ten connections.
    const warm = await Promise.all(Array.from({ length: 10 }, (_, index) => search(1 + index)));
    expect(warm.every((result) => result.isError !== true)).toBe(true);
    expect(service!.db.readPool!.totalCount).toBe(10);
    proxy!.silenceLive();
    const during = await Promise.all(Array.from({ length: 10 }, (_, index) => search(20 + index)));
    // Each is answered within the orders-db deadline; no reply within the statement timeout and a
    // grace is a lost connection (@toolgate/sql), dropped from the pool.
    expect(during.map((result) => expectFailure(result).error)).toEqual(Array(10).fill('unavailable'));
    // New connections reach PostgreSQL again; the silent ones must not hold the pool.
    let answer: CallToolResult | undefined;
    for (let attempt = 0; attempt < 40 && (answer === undefined || answer.isError === true); attempt += 1) {
      await new Promise((done) => setTimeout(done, 250));
      answer = await search(40 + attempt);
    }
    expect(parseResultText(answer!)).toMatchObject({ ok: true });
  }, 90_000);
});

interface Partition {
  readonly port: number;
  /**
   * The next chunk a client sends that `match` accepts is forwarded; from then on nothing passes
   * between that client and the server either way, and when the client closes its end the server is
   * not told (a partition drops the FIN as it drops everything else).
   */
  after(match: (chunk: Buffer) => boolean): void;
  close(): void;
}

/** A loopback relay to `target` that can cut one connection off as a partition does. */
async function startPartition(target: { host: string; port: number }): Promise<Partition> {
  const sockets = new Set<Socket>();
  let match: ((chunk: Buffer) => boolean) | undefined;
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client).add(upstream);
    let cutOff = false;
    client.on('data', (chunk: Buffer) => {
      if (cutOff) return;
      if (match?.(chunk)) {
        match = undefined;
        cutOff = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!cutOff) client.write(chunk);
    });
    client
      .on('error', () => undefined)
      .on('close', () => {
        if (!cutOff) upstream.destroy();
      });
    upstream.on('error', () => undefined).on('close', () => client.destroy());
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    port: (server.address() as AddressInfo).port,
    after(next) {
      match = next;
    },
    close() {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}
