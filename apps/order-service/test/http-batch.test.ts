import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import type { Logger } from '@toolgate/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenVerifier } from '../src/auth.js';
import { type RunningHttpServer, startHttpServer } from '../src/http.js';
import { type Running, startService } from './harness.js';

// What the HTTP surface must hold against a client that writes its own requests: batches whose answers
// the SDK never sends, batches that run one id twice, two Host headers, absolute-form targets, and a
// browser's CORS preflight.

const READER = 'reader-token-0123456789abcdef';
const REASON = 'ALERT: database password rotated, page on-call';

interface Line {
  level: 'error' | 'warn' | 'info' | 'debug';
  message: string | undefined;
  fields: Record<string, unknown>;
}
const lines: Line[] = [];
const capture = (level: Line['level']) => (fields: Record<string, unknown>, message?: string) => {
  lines.push({ level, message, fields });
};
const logger: Logger = {
  error: capture('error'),
  warn: capture('warn'),
  info: capture('info'),
  debug: capture('debug'),
} as Logger;

let running: Running;
let http: RunningHttpServer;
let port: number;

beforeAll(async () => {
  running = await startService({ transport: 'tcp' }, logger);
  http = await startHttpServer({
    port: 0,
    verifier: createTokenVerifier({
      tokens: [{ token: READER, clientId: 'desk', scopes: ['orders:read'], claims: { sub: 'agent-1' } }],
    }),
    allowedOrigins: ['https://desk.example'],
    createServer: () => running.service.createServer(),
    logger,
  });
  port = Number(new URL(http.url).port);
});
afterAll(async () => {
  await http.close(100);
  await running.stop();
});

interface RawAnswer {
  status: number;
  head: string;
  body: string;
}

/**
 * One request written byte for byte (two Host headers, an absolute-form target: what fetch and
 * node:http will not send). Resolves once the whole response is in (its content-length, or chunked
 * encoding's last chunk); a response held open fails the test at `waitMs` with what arrived so far.
 */
function raw(lines: string[], body = '', waitMs = 5000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the response was still open after ${waitMs} ms; so far: ${JSON.stringify(text)}`));
    }, waitMs);
    const finish = (answer: RawAnswer): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      const complete = completeResponse(text);
      if (complete !== undefined) finish(complete);
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    const headers = [...lines, `content-length: ${Buffer.byteLength(body)}`];
    socket.write(`${headers.join('\r\n')}\r\n\r\n${body}`);
  });
}

/** The response in `text`, once all of it has arrived (ASCII bodies: lengths count characters). */
function completeResponse(text: string): RawAnswer | undefined {
  const split = text.indexOf('\r\n\r\n');
  if (split === -1) return undefined;
  const head = text.slice(0, split).toLowerCase();
  const rest = text.slice(split + 4);
  const status = Number(head.split(' ')[1]);
  const length = /\r\ncontent-length: (\d+)/.exec(head);
  if (length) return rest.length >= Number(length[1]) ? { status, head, body: rest } : undefined;
  if (!head.includes('transfer-encoding: chunked'))
    return status === 204 ? { status, head, body: '' } : undefined;
  let body = '';
  let at = 0;
  for (;;) {
    const end = rest.indexOf('\r\n', at);
    if (end === -1) return undefined;
    const size = Number.parseInt(rest.slice(at, end), 16);
    if (size === 0) return { status, head, body };
    if (rest.length < end + 2 + size + 2) return undefined;
    body += rest.slice(end + 2, end + 2 + size);
    at = end + 2 + size + 2;
  }
}

const post = (messages: unknown, extra: string[] = []): Promise<RawAnswer> =>
  raw(
    [
      'POST /mcp HTTP/1.1',
      `host: 127.0.0.1:${port}`,
      `authorization: Bearer ${READER}`,
      'content-type: application/json',
      'accept: application/json, text/event-stream',
      ...extra,
    ],
    JSON.stringify(messages),
  );

const ping = (id: number | string) => ({ jsonrpc: '2.0', id, method: 'ping' });
const cancel = (requestId: number | string, reason?: string) => ({
  jsonrpc: '2.0',
  method: 'notifications/cancelled',
  params: { requestId, ...(reason !== undefined && { reason }) },
});

/** The JSON-RPC messages of an SSE body (`data:` lines; chunked framing lines are skipped). */
function answers(body: string): { id?: unknown; result?: unknown; error?: unknown }[] {
  return body
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)));
}

const auditRecords = async (): Promise<Record<string, unknown>[]> => {
  await running.service.audit.flush();
  return readFileSync(running.auditFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
};

describe('a batch whose requests are cancelled in it', () => {
  it('ends its response at once when every request was cancelled (the SDK sends no answer to one)', async () => {
    const answer = await post([ping(1), cancel(1)]);
    expect(answer.status).toBe(200);
    expect(answers(answer.body)).toEqual([]);
    expect(http.inFlight).toBe(0);
  });

  it('ends its response once the requests not cancelled are answered, with their answers', async () => {
    const answer = await post([ping('a'), ping('b'), cancel('b'), ping('c')]);
    expect(answer.status).toBe(200);
    const ids = answers(answer.body).map((message) => message.id);
    expect(ids.sort()).toEqual(['a', 'c']);
  });

  it('a message the SDK does not act on as a cancel ends nothing: every request is answered', async () => {
    // A "cancel" with an id is a request (the SDK answers it -32601); a reason that is not a string
    // fails the SDK's schema; a falsy request id (0, "") the SDK skips.
    const asRequest = await post([ping(1), { ...cancel(1), id: 9 }]);
    const byId = answers(asRequest.body).sort((a, b) => Number(a.id) - Number(b.id));
    expect(byId.map((message) => [message.id, message.error === undefined])).toEqual([
      [1, true],
      [9, false],
    ]);
    const badReason = await post([ping(1), { ...cancel(1), params: { requestId: 1, reason: 5 } }]);
    expect(answers(badReason.body)).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }]);
    for (const id of [0, '']) {
      const falsy = await post([ping(id), cancel(id)]);
      expect(answers(falsy.body)).toEqual([{ jsonrpc: '2.0', id, result: {} }]);
    }
  });

  it('a cancel naming a request outside the batch changes nothing', async () => {
    const answer = await post([ping(1), cancel(2)]);
    expect(answers(answer.body)).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }]);
  });

  it('many held batches leave nothing open and shutdown does not wait for them', async () => {
    const held = await Promise.all(
      Array.from({ length: 50 }, (_, index) => post([ping(index), cancel(index)])),
    );
    expect(held.every((answer) => answer.status === 200)).toBe(true);
    expect(http.inFlight).toBe(0);
  });

  it('a tool call the client cancels with a reason of its own: timeout, audited, no incident, no reason in the log', async () => {
    running.carrier.mode = 'stall';
    try {
      const before = lines.length;
      const { rows } = await running.service.db.pglite!.query<{ tracking_number: string }>(
        'SELECT tracking_number FROM orders WHERE tracking_number IS NOT NULL ORDER BY order_id LIMIT 1',
      );
      const call = {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'track_shipment', arguments: { tracking_number: rows[0]!.tracking_number } },
      };
      const answer = await post([call, cancel(7, REASON)]);
      expect(answer.status).toBe(200);
      expect(answers(answer.body)).toEqual([]);
      await expect.poll(async () => (await auditRecords()).filter((r) => r.requestId === 7).length).toBe(1);
      const record = (await auditRecords()).find((r) => r.requestId === 7)!;
      expect(record).toMatchObject({ tool: 'track_shipment', outcome: 'timeout', aborted: true });
      expect(record.incidentId).toBeUndefined();
      const logged = lines.slice(before);
      expect(logged.filter((line) => line.level === 'error')).toEqual([]);
      expect(JSON.stringify(logged)).not.toContain('ALERT');
      expect(logged.some((line) => line.message === 'tool call cancelled by the client')).toBe(true);
    } finally {
      running.carrier.mode = 'ok';
    }
  });
});

describe('a batch running one id twice', () => {
  it('is refused whole with 400: neither request runs', async () => {
    const before = (await auditRecords()).length;
    const call = (id: number) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'get_order_status', arguments: { order_id: '4000000000007919' } },
    });
    const answer = await post([call(5), call(5)]);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: -32600 } });
    expect((await auditRecords()).length).toBe(before);
    // One id each: both run and both are answered.
    const fine = await post([call(5), call(6)]);
    expect(answers(fine.body).map((message) => message.id)).toEqual([5, 6]);
  });
});

describe('the request line and Host', () => {
  it('two Host headers are refused with 400 (a proxy may route by the other)', async () => {
    const answer = await raw(
      [
        'POST /mcp HTTP/1.1',
        `host: 127.0.0.1:${port}`,
        'host: evil.example',
        `authorization: Bearer ${READER}`,
        'content-type: application/json',
        'accept: application/json, text/event-stream',
      ],
      JSON.stringify(ping(1)),
    );
    expect(answer.status).toBe(400);
    expect(answer.body).toContain('exactly one Host header');
  });

  it('an absolute-form target passes the Host check with its own authority', async () => {
    const headers = [
      `host: 127.0.0.1:${port}`,
      `authorization: Bearer ${READER}`,
      'content-type: application/json',
      'accept: application/json, text/event-stream',
    ];
    const foreign = await raw(['POST http://evil.example/mcp HTTP/1.1', ...headers], JSON.stringify(ping(1)));
    expect(foreign.status).toBe(403);
    expect(foreign.body).toContain('request target host not allowed');
    const own = await raw(
      [`POST http://127.0.0.1:${port}/mcp HTTP/1.1`, ...headers],
      JSON.stringify(ping(1)),
    );
    expect(own.status).toBe(200);
    expect(answers(own.body)).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }]);
  });
});

describe('a browser on an allowed origin', () => {
  const preflight = (origin: string) =>
    raw([
      'OPTIONS /mcp HTTP/1.1',
      `host: 127.0.0.1:${port}`,
      `origin: ${origin}`,
      'access-control-request-method: POST',
      'access-control-request-headers: authorization, content-type',
    ]);

  it('gets its preflight answered (no token needed) and may read the answers', async () => {
    const answer = await preflight('https://desk.example');
    expect(answer.status).toBe(204);
    expect(answer.head).toContain('access-control-allow-origin: https://desk.example');
    expect(answer.head).toContain('access-control-allow-methods: post');
    expect(answer.head).toMatch(/access-control-allow-headers: [^\r\n]*authorization/);
    const call = await post(ping(3), ['origin: https://desk.example']);
    expect(call.status).toBe(200);
    expect(call.head).toContain('access-control-allow-origin: https://desk.example');
    expect(call.head).toContain('vary: origin');
  });

  it('a loopback page not listed may post (DNS rebinding is what the check stops) but gets no CORS answer', async () => {
    const answer = await preflight('http://localhost:31337');
    expect(answer.status).not.toBe(204);
    expect(answer.head).not.toContain('access-control-allow-origin');
    const call = await post(ping(4), ['origin: http://localhost:31337']);
    expect(call.status).toBe(200);
    expect(call.head).not.toContain('access-control-allow-origin');
  });

  it('another origin gets 403 and no CORS header', async () => {
    const answer = await preflight('https://evil.example');
    expect(answer.status).toBe(403);
    expect(answer.head).not.toContain('access-control-allow-origin');
  });
});
