import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createSilentLogger } from '@toolgate/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenVerifier } from '../src/auth.js';
import { type RunningHttpServer, startHttpServer } from '../src/http.js';
import { type Running, startService } from './harness.js';

const READER = 'reader-token-0123456789abcdef';
const NO_SCOPE = 'noscope-token-0123456789abcdef';
let running: Running;
let http: RunningHttpServer;

beforeAll(async () => {
  running = await startService({ transport: 'tcp' });
  http = await startHttpServer({
    port: 0,
    verifier: createTokenVerifier({
      tokens: [
        { token: READER, clientId: 'support-desk', scopes: ['orders:read'], claims: { sub: 'agent-1' } },
        { token: NO_SCOPE, clientId: 'other-app', scopes: ['profile'] },
      ],
    }),
    allowedOrigins: ['https://desk.example'],
    maxBodyBytes: 64 * 1024,
    requestTimeoutMs: 1000,
    createServer: () => running.service.createServer(),
    logger: createSilentLogger(),
  });
});
afterAll(async () => {
  await http.close();
  await running.stop();
});

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A raw HTTP request (node:http lets a test set Host, which fetch forbids). */
function post(headers: Record<string, string>, body: string): Promise<RawResponse> {
  const url = new URL(http.url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

describe('Streamable HTTP with bearer auth', () => {
  it('a real client with a token lists and calls tools', async () => {
    const client = new Client({ name: 'desk', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(http.url), {
        requestInit: { headers: { authorization: `Bearer ${READER}` } },
      }),
    );
    try {
      expect((await client.listTools()).tools).toHaveLength(5);
      const result = await client.callTool({
        name: 'get_order_status',
        arguments: { order_id: '4000000000007919' },
      });
      expect(result.structuredContent).toMatchObject({ ok: true, items: [{ order_id: '4000000000007919' }] });
    } finally {
      await client.close();
    }
  });

  it('401 without a token or with a wrong one, with WWW-Authenticate', async () => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong-token-0123456789' },
      { authorization: `Basic ${READER}` },
    ];
    for (const headers of attempts) {
      const res = await post(headers, INITIALIZE);
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toContain('Bearer error="invalid_token"');
      expect(JSON.parse(res.body)).toMatchObject({ jsonrpc: '2.0', error: { code: -32001 } });
    }
  });

  it('403 for a token without the orders:read scope', async () => {
    const res = await post({ authorization: `Bearer ${NO_SCOPE}` }, INITIALIZE);
    expect(res.status).toBe(403);
    expect(res.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="orders:read"');
  });

  it('403 for a foreign Host header (DNS rebinding) or Origin, before auth is even looked at', async () => {
    expect((await post({ host: 'evil.example', authorization: `Bearer ${READER}` }, INITIALIZE)).status).toBe(
      403,
    );
    expect((await post({ host: `evil.example:${new URL(http.url).port}` }, INITIALIZE)).status).toBe(403);
    expect(
      (await post({ origin: 'https://evil.example', authorization: `Bearer ${READER}` }, INITIALIZE)).status,
    ).toBe(403);
    const allowed = await post(
      { origin: 'https://desk.example', authorization: `Bearer ${READER}` },
      INITIALIZE,
    );
    expect(allowed.status).toBe(200);
  });

  it('413 for a body over the limit, 400 for a body that is not JSON', async () => {
    const big = await post(
      { authorization: `Bearer ${READER}` },
      JSON.stringify({ pad: 'x'.repeat(70 * 1024) }),
    );
    expect(big.status).toBe(413);
    expect((await post({ authorization: `Bearer ${READER}` }, '{not json')).status).toBe(400);
  });

  it('408 and a closed connection for a client that sends its headers or its body too slowly (slowloris)', async () => {
    const port = Number(new URL(http.url).port);
    const headers =
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${READER}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n';
    // The server's own limits end both (Node's defaults would wait 60 s for headers and 300 s for the
    // request, past this test's 30 s timeout): the 408 is the server's, and it came in time.
    for (const sent of [headers.slice(0, 40), `${headers}{"jsonrpc":`]) {
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (chunk: string) => {
          text += chunk;
        });
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
        // The client never sends the rest; only the server can end this.
        socket.write(sent);
      });
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    }
  });

  it('400 for a request-target no URL can be made of (`//`, `http://[`), without a token: never a 500', async () => {
    const port = Number(new URL(http.url).port);
    for (const target of ['//', 'http://[']) {
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (chunk: string) => {
          text += chunk;
        });
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
        socket.end(`GET ${target} HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toContain('{"error":"bad request target"}');
    }
  });

  it('a token in the query string is not accepted; a client-chosen session id is not adopted; a batch of 400 calls runs none', async () => {
    const url = new URL(http.url);
    const viaQuery = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: `${url.pathname}?access_token=${READER}`,
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(INITIALIZE);
    });
    expect(viaQuery).toBe(401);
    const spoofed = await post(
      { authorization: `Bearer ${READER}`, 'mcp-session-id': 'attacker-chosen-session' },
      INITIALIZE,
    );
    expect(spoofed.status).toBe(200);
    expect(spoofed.headers['mcp-session-id']).toBeUndefined();
    const calls = Array.from({ length: 400 }, (_, index) => ({
      jsonrpc: '2.0',
      id: index,
      method: 'tools/call',
      params: { name: 'get_order_status', arguments: { order_id: '4000000000007919' } },
    }));
    await running.service.audit.flush();
    const recordsBefore = readFileSync(running.auditFile, 'utf8');
    const batch = await post({ authorization: `Bearer ${READER}` }, JSON.stringify(calls.slice(0, 400)));
    expect(batch.status).toBe(400);
    expect(JSON.parse(batch.body)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32600, message: 'Invalid Request: Batch must not exceed 100 messages' },
      id: null,
    });
    await running.service.audit.flush();
    expect(readFileSync(running.auditFile, 'utf8')).toBe(recordsBefore);
  });

  it('the audit record names the token’s subject as principal', async () => {
    await running.service.audit.flush();
    const { readFileSync } = await import('node:fs');
    const records = readFileSync(running.auditFile, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(records.find((record) => record.tool === 'get_order_status')).toMatchObject({
      principal: 'agent-1',
      outcome: 'ok',
    });
  });
});

/**
 * A request written byte for byte on a socket (Connection: close), so header lines repeat exactly as
 * a client or a proxy in front sends them; the status and the body of the answer.
 */
function rawPost(headerLines: readonly string[], body: string): Promise<{ status: number; body: string }> {
  const port = Number(new URL(http.url).port);
  const head = [
    'POST /mcp HTTP/1.1',
    `Host: 127.0.0.1:${port}`,
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...headerLines,
  ];
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0);
      const split = text.indexOf('\r\n\r\n');
      let rest = text.slice(split + 4);
      if (!/\r\ntransfer-encoding: chunked\r\n/i.test(text.slice(0, split + 2))) {
        resolve({ status, body: rest });
        return;
      }
      let body = '';
      for (;;) {
        const size = Number.parseInt(rest, 16);
        if (!(size > 0)) break;
        const start = rest.indexOf('\r\n') + 2;
        body += rest.slice(start, start + size);
        rest = rest.slice(start + size + 2);
      }
      resolve({ status, body });
    });
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  });
}

describe('Authorization that names more than one caller', () => {
  const AMBIGUOUS = {
    jsonrpc: '2.0',
    error: {
      code: -32600,
      message: 'Bad Request: send exactly one Authorization header with one credential',
    },
    id: null,
  };

  it('one Authorization header with one token is served (the raw request itself is sound)', async () => {
    const answer = await rawPost([`Authorization: Bearer ${READER}`], INITIALIZE);
    expect(answer.status).toBe(200);
  });

  it.each([
    [
      'a valid token first, another after it',
      [`Authorization: Bearer ${READER}`, `Authorization: Bearer ${NO_SCOPE}`],
    ],
    [
      'an unknown token first, a valid one last',
      ['Authorization: Bearer wrong-token-0123456789', `Authorization: Bearer ${READER}`],
    ],
    ['the same valid token twice', [`Authorization: Bearer ${READER}`, `Authorization: Bearer ${READER}`]],
    [
      'two header names differing in case',
      [`authorization: Bearer ${READER}`, `AUTHORIZATION: Bearer ${NO_SCOPE}`],
    ],
    ['two Bearer credentials joined with a comma', [`Authorization: Bearer ${READER}, Bearer ${NO_SCOPE}`]],
    ['two tokens joined with a comma', [`Authorization: Bearer ${READER},${NO_SCOPE}`]],
  ] as const)('400 with a JSON-RPC error, before auth, for %s', async (_, lines) => {
    const answer = await rawPost(lines, INITIALIZE);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toEqual(AMBIGUOUS);
  });

  it('a configured token cannot contain a comma or whitespace (no request could carry it as one credential)', () => {
    for (const token of ['desk-token-0123456789,abcdef', 'desk-token 0123456789abcdef']) {
      expect(() => createTokenVerifier({ tokens: [{ token, clientId: 'desk' }] })).toThrow(
        /tokens must not contain whitespace or commas/,
      );
    }
  });
});

describe('with protected resource metadata (RFC 9728)', () => {
  it('points the 403 for a missing scope to the metadata, as the 401 does', async () => {
    // Session 37's red team: in JWT mode the 403 came from the server's own check, without
    // `resource_metadata`, so a client could not find where to ask for the scope.
    const { createProtectedResource } = await import('@toolgate/authz');
    const protectedResource = createProtectedResource({
      resource: 'https://orders.example.com/mcp',
      authorizationServers: ['https://auth.example.com'],
    });
    const withMetadata = await startHttpServer({
      port: 0,
      verifier: createTokenVerifier({
        tokens: [{ token: NO_SCOPE, clientId: 'other-app', scopes: ['profile'] }],
      }),
      protectedResource,
      createServer: () => running.service.createServer(),
      logger: createSilentLogger(),
    });
    try {
      const send = (headers: Record<string, string>) =>
        fetch(withMetadata.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...headers,
          },
          body: INITIALIZE,
        });
      const missing = await send({});
      expect(missing.status).toBe(401);
      expect(missing.headers.get('www-authenticate')).toContain(
        `resource_metadata="${protectedResource.url}"`,
      );
      const lacking = await send({ authorization: `Bearer ${NO_SCOPE}` });
      expect(lacking.status).toBe(403);
      expect(lacking.headers.get('www-authenticate')).toBe(
        `Bearer error="insufficient_scope", scope="orders:read", resource_metadata="${protectedResource.url}"`,
      );
      expect(await lacking.json()).toMatchObject({ error: 'insufficient_scope' });
    } finally {
      await withMetadata.close();
    }
  });
});
