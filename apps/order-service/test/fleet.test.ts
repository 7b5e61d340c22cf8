// Three order-service replicas behind HAProxy, sharing Redis and a scratch PostgreSQL database: every
// policy keeps its promise across replicas, and a replica killed under load loses no audited answer.
import { randomBytes } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { verifyAuditTable } from '@toolgate/audit';
import { expectFailure, parseResultText, reportMissingService } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Fleet, haproxyAvailable, startFleet } from '../src/fleet.js';
import {
  createScratchDatabase,
  fleetCaller,
  fleetClient,
  PAID,
  PENDING,
  type ScratchDatabase,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
} from './fleet-harness.js';

const WRITES_PER_MINUTE = 60;
const run = randomBytes(4).toString('hex');
const WRITE = ['orders:read', 'orders:write', 'docs:read'];
const reader = fleetCaller('reader', run, ['orders:read', 'docs:read']);
const refunder = fleetCaller('refunder', run, WRITE);
const limited = fleetCaller('limited', run, WRITE);
const confirmer = fleetCaller('confirmer', run, WRITE);
const loaders = [0, 1, 2, 3].map((n) => fleetCaller(`load${n}`, run, ['orders:read', 'docs:read']));
const ready = TEST_DATABASE_URL && TEST_REDIS_URL && haproxyAvailable();

const asResult = (value: unknown): CallToolResult => value as CallToolResult;

if (!TEST_DATABASE_URL) {
  reportMissingService(it, 'the fleet tests', 'TEST_DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/test');
}
if (!TEST_REDIS_URL) {
  reportMissingService(it, 'the fleet tests', 'TEST_REDIS_URL', 'redis://127.0.0.1:6379');
}
if (!haproxyAvailable()) {
  reportMissingService(it, 'the fleet tests', 'haproxy on PATH', 'apt-get install -y haproxy');
}

describe.runIf(ready)('a fleet of three replicas behind HAProxy', () => {
  let database: ScratchDatabase;
  let fleet: Fleet;
  beforeAll(async () => {
    database = await createScratchDatabase(TEST_DATABASE_URL!);
    fleet = await startFleet({
      replicas: 3,
      databaseUrl: database.url,
      redisUrl: TEST_REDIS_URL!,
      tokens: JSON.stringify({
        tokens: [reader, refunder, limited, confirmer, ...loaders].map((caller) => caller.entry),
      }),
      durableAudit: true,
      env: { TOOLGATE_WRITES_PER_MINUTE: String(WRITES_PER_MINUTE) },
    });
  }, 90_000);
  afterAll(async () => {
    await fleet?.stop();
    await database?.drop();
  }, 60_000);

  it('an identical call sent to replica 2 after replica 1 answered it is answered from the shared repeat cache', async () => {
    const one = await fleetClient(fleet.replicas[0]!.url, reader.token);
    const two = await fleetClient(fleet.replicas[1]!.url, reader.token);
    try {
      const args = { name: 'search_docs', arguments: { query: `refund days ${run}` } };
      const first = asResult(await one.client.callTool(args));
      const again = asResult(await two.client.callTool(args));
      const firstBody = parseResultText(first) as Record<string, unknown>;
      const againBody = parseResultText(again) as Record<string, unknown>;
      expect(firstBody.ok).toBe(true);
      expect(String(firstBody.note)).not.toContain('Repeated call');
      const { note: firstNote, ...firstRest } = firstBody;
      const { note, ...rest } = againBody;
      expect(rest).toEqual(firstRest);
      // The repeat note is appended after the note the result already had.
      expect(
        String(note).startsWith(
          `${String(firstNote)} Repeated call: this is the unchanged result of the identical call made `,
        ),
      ).toBe(true);
    } finally {
      await one.close();
      await two.close();
    }
  });

  it('a confirmed refund sent 50 times at once over all replicas is paid once; all 50 answers are equal', async () => {
    const desk = await fleetClient(fleet.url, refunder.token);
    try {
      const refund = { order_id: PAID, amount_cents: 500, reason: 'arrived damaged' };
      const first = asResult(await desk.client.callTool({ name: 'request_refund', arguments: refund }));
      expect(expectFailure(first).error).toBe('confirmation_required');
      const { confirmation } = first._meta!['toolgate/confirm'] as { confirmation: string };
      const confirmed = async (): Promise<CallToolResult> =>
        asResult(
          await desk.client.callTool({ name: 'request_refund', arguments: { ...refund, confirmation } }),
        );
      let deferred = 0;
      const answers = await Promise.all(
        Array.from({ length: 50 }, async () => {
          // On an overloaded host a claim can miss the store's 200 ms limit: idempotency then fails
          // closed ("nothing was done", retryable). The client follows the hint and retries (bounded).
          for (let attempt = 1; ; attempt++) {
            const answer = await confirmed();
            if (answer.isError !== true || expectFailure(answer).error !== 'unavailable' || attempt === 3)
              return answer;
            deferred += 1;
            await new Promise((done) => setTimeout(done, expectFailure(answer).retryAfterMs));
          }
        }),
      );
      expect(deferred).toBeLessThan(50);
      const bodies = answers.map((answer) => parseResultText(answer));
      expect(bodies[0]).toMatchObject({ ok: true, order_id: PAID, amount_cents: 500, refunded_cents: 500 });
      for (const body of bodies) expect(body).toEqual(bodies[0]);
      expect(new Set(desk.servedBy.slice(1))).toEqual(new Set(['replica-1', 'replica-2', 'replica-3']));
      const rows = await database.query<{ n: number }>(
        'SELECT count(*)::integer AS n FROM refunds WHERE order_id = $1',
        [PAID],
      );
      expect(rows[0]!.n).toBe(1);
    } finally {
      await desk.close();
    }
  });

  it(`a limit of ${WRITES_PER_MINUTE} writes per minute lets exactly ${WRITES_PER_MINUTE} of 75 through, across all replicas`, async () => {
    const caller = await fleetClient(fleet.url, limited.token);
    try {
      const codes: string[] = [];
      // Five waves of 15 at once: concurrent across replicas, without piling 75 calls on two cores.
      for (let wave = 0; wave < 5; wave++) {
        const answers = await Promise.all(
          Array.from({ length: 15 }, async (_, index) =>
            asResult(
              await caller.client.callTool({
                name: 'cancel_order',
                arguments: { order_id: PENDING, reason: `ordered twice ${run} ${wave * 15 + index}` },
              }),
            ),
          ),
        );
        codes.push(...answers.map((answer) => expectFailure(answer).error));
      }
      // Past the limiter a call meets confirm (confirmation_required) or, when a claim misses the
      // store's time limit on a busy host, idempotency failing closed (unavailable).
      expect(new Set(codes)).toEqual(
        new Set([
          'confirmation_required',
          'rate_limited',
          ...(codes.includes('unavailable') ? ['unavailable'] : []),
        ]),
      );
      const passed = codes.filter((code) => code !== 'rate_limited').length;
      // A Redis reply later than the limiter's 100 ms is judged by the in-process insurance limiter
      // (fail open, as documented) and the audit records it; with none, the bounds below are exact.
      const [counted] = await database.query<{ insured: number }>(
        `SELECT count(*)::integer AS insured FROM toolgate_audit
          WHERE tool = 'cancel_order' AND record->'args'->>'reason' LIKE $1
            AND record::jsonb->'decisions' @> '[{"detail":{"judgedBy":"insurance"}}]'`,
        [`ordered twice ${run} %`],
      );
      expect(passed).toBeGreaterThanOrEqual(WRITES_PER_MINUTE);
      expect(passed).toBeLessThanOrEqual(WRITES_PER_MINUTE + counted!.insured);
      expect(new Set(caller.servedBy)).toEqual(new Set(['replica-1', 'replica-2', 'replica-3']));
    } finally {
      await caller.close();
    }
  });

  it('a confirmation minted on replica 1 is accepted once on replica 2 and refused when used again on replica 3', async () => {
    const clients = await Promise.all(
      fleet.replicas.map((replica) => fleetClient(replica.url, confirmer.token)),
    );
    try {
      const cancel = { order_id: PENDING, reason: 'customer changed their mind' };
      // Explicit idempotency keys: the third call is a new request, so only confirm can stop it.
      const call = (index: number, key: string, confirmation?: string) =>
        clients[index]!.client.callTool({
          name: 'cancel_order',
          arguments: confirmation ? { ...cancel, confirmation } : cancel,
          _meta: { 'toolgate/idempotency-key': key },
        });
      const first = asResult(await call(0, `${run}-a`));
      expect(expectFailure(first).error).toBe('confirmation_required');
      const { confirmation } = first._meta!['toolgate/confirm'] as { confirmation: string };
      const accepted = asResult(await call(1, `${run}-a`, confirmation));
      expect(parseResultText(accepted)).toEqual({
        ok: true,
        order_id: PENDING,
        previous_status: 'pending',
        status: 'cancelled',
      });
      const reused = asResult(await call(2, `${run}-b`, confirmation));
      expect(expectFailure(reused)).toMatchObject({ error: 'permission_denied', retryable: false });
      expect(expectFailure(reused).message).toContain('already used');
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
  });

  it('one replica killed under load: HAProxy routes around it, every answer has its audit record, every chain verifies', async () => {
    const clients = await Promise.all(loaders.map((caller) => fleetClient(fleet.url, caller.token)));
    const answered = new Set<string>();
    let lost = 0;
    let sent = 0;
    let killedAt = Number.POSITIVE_INFINITY;
    let sentAfterKill = 0;
    const lostAfterKill: string[] = [];
    const refusals: string[] = [];
    const until = Date.now() + 4000;
    try {
      const worker = async (index: number): Promise<void> => {
        while (Date.now() < until) {
          const query = `load ${run} ${index} ${sent++}`;
          const afterKill = Date.now() > killedAt;
          if (afterKill) sentAfterKill += 1;
          try {
            // A call whose answer was being streamed when its replica died never completes: bounded.
            const result = asResult(
              await clients[index]!.client.callTool(
                { name: 'search_docs', arguments: { query } },
                undefined,
                {
                  timeout: 5000,
                },
              ),
            );
            answered.add(query);
            // A fast host can reach the 120-per-minute caller limit: that answer is audited like any other.
            if (result.isError === true) refusals.push(expectFailure(result).error);
          } catch (error) {
            lost += 1; // in flight on the killed replica: the connection drops, the tool never answered
            if (afterKill) lostAfterKill.push(String(error));
          }
        }
      };
      const load = Promise.all(clients.map((_, index) => worker(index)));
      await new Promise((done) => setTimeout(done, 1500));
      await fleet.kill(1);
      killedAt = Date.now();
      await load;
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
    // Only the calls in flight at the kill (at most one per client) are lost; every call sent after it
    // is answered, the ones HAProxy first sent to the dead replica retried on a live one.
    expect(lost).toBeLessThanOrEqual(clients.length);
    expect(sentAfterKill).toBeGreaterThan(0);
    expect(lostAfterKill).toEqual([]);
    expect(refusals.filter((code) => code !== 'rate_limited')).toEqual([]);
    expect(answered.size).toBeGreaterThan(refusals.length);
    const rows = await database.query<{ query: string }>(
      "SELECT record->'args'->>'query' AS query FROM toolgate_audit WHERE tool = 'search_docs'",
    );
    const audited = new Set(rows.map((row) => row.query));
    const missing = [...answered].filter((query) => !audited.has(query));
    expect(missing).toEqual([]);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const result = await verifyAuditTable({ client });
      expect(result.chains.map((chain) => [chain.chain, chain.intact])).toEqual([
        ['replica-1', true],
        ['replica-2', true],
        ['replica-3', true],
      ]);
    } finally {
      await client.end();
    }
  });
});
