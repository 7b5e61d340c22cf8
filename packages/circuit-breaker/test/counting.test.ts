import { ok } from '@toolgate/core';
import { expectFailure, parseResultText } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { actions, closeAll, deferred, type Step, scriptedTool, serve, sleep, waitFor } from './harness.js';

afterEach(closeAll);

const MISTAKES: Step[] = [
  'invalid_argument',
  'not_found',
  'permission_denied',
  'repeated_call',
  'rate_limited',
];

describe("the model's own mistakes", () => {
  it("weighs raw throws by core's classifyFailure: a pg 42501 is ignored, a real refused connect counts", async () => {
    // A real refused connection: nothing listens on a port we just closed.
    const { createServer, connect } = await import('node:net');
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const refusedConnect = (): Promise<never> =>
      new Promise((_, reject) => connect(closed, '127.0.0.1').on('error', reject));
    const privilege = Object.assign(new Error('permission denied for table orders'), { code: '42501' });
    const steps: Step[] = [
      ...Array.from({ length: 6 }, (): Step => () => Promise.reject(privilege)),
      ...Array.from({ length: 2 }, (): Step => refusedConnect),
    ];
    const lookup = scriptedTool('lookup_order', steps);
    const h = await serve([lookup], { volumeThreshold: 3, consecutiveFailures: 2 });
    for (let i = 0; i < 6; i += 1) await h.client.callTool('lookup_order', {});
    expect(h.breakers.state('lookup_order')).toBe('closed');
    for (let i = 0; i < 2; i += 1) await h.client.callTool('lookup_order', {});
    expect(h.breakers.stats().lookup_order!.totals).toMatchObject({ ignored: 6, failures: 2, opened: 1 });
    expect(h.breakers.state('lookup_order')).toBe('open');
  });

  it('a raw pg data or constraint error (the values refused, the database healthy) is ignored, also as a cause', async () => {
    // What node-postgres throws, field for field as PostgreSQL 15 answers.
    const pgError = (code: string, message: string, detail?: string): Error =>
      Object.assign(new Error(message), {
        name: 'error',
        severity: 'ERROR',
        code,
        ...(detail && { detail }),
      });
    const refused = [
      pgError(
        '23505',
        'duplicate key value violates unique constraint "refunds_order_id_key"',
        'Key (order_id)=(A-1) already exists.',
      ),
      pgError(
        '23503',
        'insert or update on table "refunds" violates foreign key constraint "refunds_order_id_fkey"',
      ),
      pgError('22P02', 'invalid input syntax for type uuid: "A-1"'),
      pgError('22003', 'value "99999999999" is out of range for type integer'),
      // An ORM's wrapper around it.
      Object.assign(new Error('Query failed'), {
        cause: pgError('23514', 'new row for relation "refunds" violates check constraint "amount_positive"'),
      }),
    ];
    const steps: Step[] = [
      ...refused.map(
        (error): Step =>
          () =>
            Promise.reject(error),
      ),
      // A bug is not the input's fault: an undefined table still counts.
      () => Promise.reject(pgError('42P01', 'relation "refundz" does not exist')),
    ];
    const refund = scriptedTool('create_refund', steps);
    const h = await serve([refund], { volumeThreshold: 1, consecutiveFailures: 1 });
    for (let i = 0; i < refused.length; i += 1) {
      expect(expectFailure(await h.client.callTool('create_refund', {})).error).toBe('internal');
    }
    expect(h.breakers.state('create_refund')).toBe('closed');
    expect(h.breakers.stats().create_refund!.totals).toMatchObject({ ignored: refused.length, failures: 0 });
    await h.client.callTool('create_refund', {});
    expect(h.breakers.stats().create_refund!.totals).toMatchObject({ failures: 1, opened: 1 });
  });

  it("Node.js refusing to send the model's values (a URL, a path, a header) is ignored: nothing reached the dependency", async () => {
    const http = await import('node:http');
    const { createServer, connect } = await import('node:net');
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    // Handlers that put the model's id where a carrier API wants it, as real Node.js throws for each.
    const region: Step = (ctx) => fetch(`http://${String(ctx.args.id)}.carrier.example/eta`).then(() => ok());
    const path: Step = async (ctx) => {
      http.request({ host: '127.0.0.1', port: closed, path: `/track/${String(ctx.args.id)}` }).end();
      return ok();
    };
    const header: Step = async (ctx) => {
      http.request({ host: '127.0.0.1', port: closed, headers: { 'x-tracking': String(ctx.args.id) } }).end();
      return ok();
    };
    const headerName: Step = async (ctx) => {
      http.request({ host: '127.0.0.1', port: closed, headers: { [String(ctx.args.id)]: '1' } }).end();
      return ok();
    };
    const callback: Step = async (ctx) => ok({ host: new URL(String(ctx.args.id)).host });
    const refusedConnect: Step = () =>
      new Promise((_, reject) => connect(closed, '127.0.0.1').on('error', reject));
    const hostile: [Step, string][] = [
      [region, 'us east'],
      [path, 'A 1'],
      [header, 'A1\r\nX-Admin: 1'],
      [headerName, 'x tracking'],
      [callback, 'not a url'],
    ];
    const eta = scriptedTool('get_carrier_eta', [
      ...hostile.map(([step]) => step),
      ...hostile.map(([step]) => step),
      refusedConnect,
    ]);
    const h = await serve([eta], { volumeThreshold: 1, consecutiveFailures: 1 });
    for (const [, id] of [...hostile, ...hostile]) {
      expect(expectFailure(await h.client.callTool('get_carrier_eta', { id })).error).toBe('internal');
    }
    expect(h.breakers.state('get_carrier_eta')).toBe('closed');
    expect(h.breakers.stats().get_carrier_eta!.totals).toMatchObject({ ignored: 10, failures: 0 });
    // The dependency really failing still counts.
    await h.client.callTool('get_carrier_eta', { id: 'A1' });
    expect(h.breakers.stats().get_carrier_eta!.totals).toMatchObject({ failures: 1, opened: 1 });
    expect(h.breakers.state('get_carrier_eta')).toBe('open');
  });

  it("fetch refusing the model's values before it sends anything (a header, a method, credentials) is ignored; fetch failing is not", async () => {
    const http = await import('node:http');
    const { createServer } = await import('node:net');
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    // A carrier that sends half its body, then drops the connection.
    const carrier = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"status":');
      setImmediate(() => res.destroy());
    });
    await new Promise<void>((resolve) => carrier.listen(0, '127.0.0.1', resolve));
    const live = `http://127.0.0.1:${(carrier.address() as { port: number }).port}`;
    try {
      // Node's own fetch (undici) answers each of these with a bare TypeError that has no code and
      // no cause, before any request exists.
      const withHeader =
        (name: string, value: string): Step =>
        () =>
          fetch(`${live}/track`, { headers: { [name]: value } }).then(() => ok());
      const refusals: [Step, string][] = [
        [
          withHeader('x-tracking', 'A1\r\nX-Admin: 1'),
          'Headers.append: "A1\r\nX-Admin: 1" is an invalid header value.',
        ],
        [withHeader('x-tracking', 'A1\0'), 'Headers.append: "A1\0" is an invalid header value.'],
        [withHeader('x tracking', '1'), 'Headers.append: "x tracking" is an invalid header name.'],
        [
          withHeader('x-tracking', 'A€1'),
          'Cannot convert argument to a ByteString because the character at index 1 has a value of 8364 which is greater than 255.',
        ],
        [
          () => fetch(`http://carrier:secret@127.0.0.1:${closed}/track`).then(() => ok()),
          `Request cannot be constructed from a URL that includes credentials: http://carrier:secret@127.0.0.1:${closed}/track`,
        ],
        [
          () => fetch(`${live}/track`, { method: 'GE T' }).then(() => ok()),
          "'GE T' is not a valid HTTP method.",
        ],
        [
          () => fetch(`${live}/track`, { method: 'TRACE' }).then(() => ok()),
          "'TRACE' HTTP method is unsupported.",
        ],
        [
          () => fetch(`${live}/track`, { method: 'GET', body: 'A1' }).then(() => ok()),
          'Request with GET/HEAD method cannot have body.',
        ],
        // A wrapper (an HTTP client library) that keeps fetch's refusal as its cause.
        [
          () =>
            fetch(`${live}/track`, { headers: { 'x-tracking': 'A1\nB' } }).then(
              () => ok(),
              (error: unknown) => {
                throw new Error('carrier request failed', { cause: error });
              },
            ),
          'Headers.append: "A1\nB" is an invalid header value.',
        ],
      ];
      const seen: string[] = [];
      const recording =
        (step: Step): Step =>
        async (ctx) => {
          try {
            return await (step as Exclude<Step, string>)(ctx);
          } catch (error) {
            const cause = (error as Error).cause;
            const refusal = (cause instanceof TypeError ? cause : error) as Error & { code?: unknown };
            seen.push(`${refusal.constructor.name}|${String(refusal.code)}|${refusal.message}`);
            throw error;
          }
        };
      // Really failing: nothing listens (fetch failed, ECONNREFUSED), the body is cut (terminated), a bug.
      const realFailures: Step[] = [
        () => fetch(`http://127.0.0.1:${closed}/track`).then(() => ok()),
        () =>
          fetch(`${live}/track`)
            .then((response) => response.json())
            .then(() => ok()),
        (ctx) =>
          Promise.resolve(ok({ status: (ctx.args as { shipment?: { status: string } }).shipment!.status })),
      ];
      const track = scriptedTool('track_shipment', [
        ...refusals.map(([step]) => recording(step)),
        ...realFailures,
      ]);
      const h = await serve([track], { volumeThreshold: 100, consecutiveFailures: 3 });
      const codes: string[] = [];
      for (let i = 0; i < refusals.length; i += 1) {
        codes.push(expectFailure(await h.client.callTool('track_shipment', { id: 'A1' })).error);
      }
      expect(codes).toEqual(refusals.map(() => 'internal'));
      expect(seen).toEqual(refusals.map(([, message]) => `TypeError|undefined|${message}`));
      expect(h.breakers.state('track_shipment')).toBe('closed');
      expect(h.breakers.stats().track_shipment!.totals).toMatchObject({
        ignored: refusals.length,
        failures: 0,
      });
      for (let i = 0; i < realFailures.length; i += 1) {
        expect(expectFailure(await h.client.callTool('track_shipment', { id: 'A1' })).error).toBe('internal');
      }
      expect(h.breakers.stats().track_shipment!.totals).toMatchObject({ failures: 3, opened: 1 });
      expect(h.breakers.state('track_shipment')).toBe('open');
    } finally {
      carrier.closeAllConnections();
      await new Promise<void>((resolve) => carrier.close(() => resolve()));
    }
  });

  it('never open the breaker, however many and however strict the threshold', async () => {
    const lookup = scriptedTool(
      'lookup_order',
      Array.from({ length: 30 }, (_, i) => MISTAKES[i % MISTAKES.length]!),
    );
    const h = await serve([lookup], { volumeThreshold: 1, errorThresholdPercentage: 0 });
    const codes: string[] = [];
    for (let i = 0; i < 30; i += 1)
      codes.push(expectFailure(await h.client.callTool('lookup_order', {})).error);
    expect(codes.slice(0, 5)).toEqual([
      'invalid_argument',
      'not_found',
      'permission_denied',
      'repeated_call',
      'rate_limited',
    ]);
    expect(lookup.calls).toBe(30);
    const stats = h.breakers.stats().lookup_order!;
    expect(stats.state).toBe('closed');
    // Neither failures nor successes: the window holds none of them.
    expect(stats.window).toEqual({ calls: 0, successes: 0, failures: 0, errorPercentage: 0 });
    expect(stats.totals).toMatchObject({ ignored: 30, successes: 0, failures: 0, opened: 0 });
    expect(h.decisions.every((list) => list.length === 0)).toBe(true);
  });

  it('do not dilute the error rate: four real failures among ten mistakes still open it', async () => {
    const script: Step[] = [
      'unavailable',
      'not_found',
      'not_found',
      'invalid_argument',
      'unavailable',
      'permission_denied',
    ];
    script.push('not_found', 'repeated_call', 'throw', 'not_found', 'rate_limited', 'not_found', 'timeout');
    const lookup = scriptedTool('lookup_order', script);
    const h = await serve([lookup], { volumeThreshold: 4, errorThresholdPercentage: 50 });
    for (let i = 0; i < 13; i += 1) await h.client.callTool('lookup_order', {});
    // Had the 9 mistakes counted as successes (opossum's errorFilter), 4 of 13 = 31% would not open it.
    expect(h.breakers.stats().lookup_order!.state).toBe('open');
    expect(actions(h.decisions.at(-1))).toEqual(['open']);
    expect(h.decisions.at(-1)![0]!.reason).toBe('4 of 4 calls failed in the window');
  });

  it('do not close a half-open breaker: only a real success does', async () => {
    const track = scriptedTool('track_shipment', ['unavailable', 'not_found', 'permission_denied', 'ok']);
    const h = await serve([track], { volumeThreshold: 1, resetTimeout: 80 });
    await h.client.callTool('track_shipment', {});
    await sleep(120);
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('not_found');
    expect(actions(h.decisions.at(-1))).toEqual(['half-open']);
    expect(h.breakers.stats().track_shipment!.state).toBe('half-open');
    // The next call is the probe again and reaches the handler.
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('permission_denied');
    expect(h.breakers.stats().track_shipment!.state).toBe('half-open');
    expect(parseResultText(await h.client.callTool('track_shipment', {}))).toEqual({ ok: true, call: 4 });
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'close']);
    expect(h.breakers.stats().track_shipment!.state).toBe('closed');
  });
});

describe('capacity', () => {
  it('refuses the call over capacity with rate_limited and a hint, without reaching the handler', async () => {
    const gate = deferred();
    const slow = scriptedTool('slow_lookup', [
      async () => {
        await gate.promise;
        return parseOk();
      },
      async () => {
        await gate.promise;
        return parseOk();
      },
    ]);
    const h = await serve([slow], { capacity: 2, volumeThreshold: 1, errorThresholdPercentage: 0 });
    const running = [
      h.client.callTool('slow_lookup', { id: 'a' }),
      h.client.callTool('slow_lookup', { id: 'b' }),
    ];
    await waitFor(() => slow.calls === 2);
    for (let i = 0; i < 10; i += 1) {
      expect(expectFailure(await h.client.callTool('slow_lookup', { id: `c${i}` }))).toEqual({
        ok: false,
        error: 'rate_limited',
        message: 'The server is at capacity: 2 slow_lookup calls are already running.',
        hint: 'The server is at capacity. Retry after 1000 ms.',
        retryable: true,
        retryAfterMs: 1000,
      });
    }
    expect(slow.calls).toBe(2);
    expect(h.decisions.at(-1)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'reject-capacity',
        reason: '2 calls already in flight',
        detail: { breaker: 'slow_lookup', capacity: 2, retryAfterMs: 1000 },
      },
    ]);
    // opossum counts its own capacity refusals as failures; even with the strictest threshold these
    // ten refusals leave the breaker closed and the window empty.
    const stats = h.breakers.stats().slow_lookup!;
    expect(stats.state).toBe('closed');
    expect(stats.inFlight).toBe(2);
    expect(stats.window.calls).toBe(0);
    expect(stats.totals).toMatchObject({ capacityRejections: 10, failures: 0 });

    gate.resolve();
    await Promise.all(running);
    expect(parseResultText(await h.client.callTool('slow_lookup', {}))).toEqual({ ok: true, call: 3 });
    expect(h.breakers.stats().slow_lookup!.inFlight).toBe(0);
  });

  it('is shared by the tools of one dependency', async () => {
    const gate = deferred();
    const hold = async () => {
      await gate.promise;
      return parseOk();
    };
    const track = scriptedTool('track_shipment', [hold]);
    const eta = scriptedTool('get_carrier_eta');
    const h = await serve([track, eta], {
      tools: {
        track_shipment: { dependency: 'carrier-api' },
        get_carrier_eta: { dependency: 'carrier-api' },
      },
      dependencies: { 'carrier-api': { capacity: 1 } },
    });
    const running = h.client.callTool('track_shipment', {});
    await waitFor(() => track.calls === 1);
    expect(expectFailure(await h.client.callTool('get_carrier_eta', {})).error).toBe('rate_limited');
    expect(eta.calls).toBe(0);
    gate.resolve();
    await running;
    expect(parseResultText(await h.client.callTool('get_carrier_eta', {}))).toEqual({ ok: true, call: 1 });
  });
});

function parseOk() {
  return { content: [{ type: 'text' as const, text: '{"ok":true}' }], structuredContent: { ok: true } };
}

describe('the rolling window', () => {
  it('counts successes into the current bucket after the window rolls and after the breaker closes', async () => {
    const lookup = scriptedTool('lookup', ['ok', 'ok', 'ok', 'ok', 'unavailable']);
    const h = await serve([lookup], {
      rollingCountTimeout: 200,
      rollingCountBuckets: 2,
      volumeThreshold: 1,
      errorThresholdPercentage: 40,
      consecutiveFailures: false,
      resetTimeout: 100,
    });
    for (let i = 0; i < 3; i += 1) await h.client.callTool('lookup', {});
    expect(h.breakers.stats().lookup!.window).toEqual({
      calls: 3,
      successes: 3,
      failures: 0,
      errorPercentage: 0,
    });
    // Every bucket that held them rotates out; new successes land in the bucket that is current now.
    await waitFor(() => h.breakers.stats().lookup!.window.calls === 0);
    await h.client.callTool('lookup', {});
    expect(h.breakers.stats().lookup!.window).toEqual({
      calls: 1,
      successes: 1,
      failures: 0,
      errorPercentage: 0,
    });
    // One failure opens it (1 of 2); the probe succeeds and closes it with an empty window.
    await h.client.callTool('lookup', {});
    expect(h.breakers.state('lookup')).toBe('open');
    await waitFor(() => h.breakers.state('lookup') === 'half-open');
    await h.client.callTool('lookup', {});
    expect(h.breakers.state('lookup')).toBe('closed');
    await h.client.callTool('lookup', {});
    await h.client.callTool('lookup', {});
    expect(h.breakers.stats().lookup!.window).toEqual({
      calls: 2,
      successes: 2,
      failures: 0,
      errorPercentage: 0,
    });
  });
});
