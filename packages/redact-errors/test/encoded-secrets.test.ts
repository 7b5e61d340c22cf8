// Secrets that reach an error in an encoded form: an upstream's JSON body quoted into a JSON string, a
// URL-encoded callback or query, and provider keys only their prefix identifies. Each is carried by a
// real loopback HTTP exchange or a real returned failure, and must appear nowhere the model can read
// (content, the `_meta` envelope, structured content), while the log keeps it under the incident id.
import { createServer, type Server } from 'node:http';
import { defineTool, ERROR_META_KEY, fail } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closeAll, INCIDENT_ID, seenEnvelope, serve } from './helpers.js';

const PASSWORD = 'hunter2-Zq8';
const CLIENT_SECRET = 'cs-77aa-Secret';
const DO_TOKEN = `dop_v1_${'9c'.repeat(32)}`;
const VAULT_TOKEN = 'hvs.CAESIJlWh0aTrCa7WZ6lXQ1ZrXk3';
const PLANTED = [PASSWORD, CLIENT_SECRET, DO_TOKEN, VAULT_TOKEN];

let upstream: Server;
let upstreamUrl: string;

beforeAll(async () => {
  // An identity provider that echoes the request it refused, as many do: the body it was sent, as a
  // JSON string inside its JSON error, and the callback URL, URL-encoded.
  upstream = createServer((request, response) => {
    if (request.url === '/authorize') {
      // A login redirect carrying the internal origin and the client's state, as such redirects do:
      // the one percent-encoded, the other base64.
      const next = encodeURIComponent(`postgres://app:${PASSWORD}@db.internal:5432/orders`);
      const state = Buffer.from(JSON.stringify({ client_secret: CLIENT_SECRET })).toString('base64url');
      response.writeHead(302, { location: `/login?state=${state}&next=${next}` });
      response.end();
      return;
    }
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    request.on('end', () => {
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          error: 'invalid_grant',
          request: body,
          callback: `/cb?next=${encodeURIComponent(`/home?password=${PASSWORD}&client_secret=${CLIENT_SECRET}`)}`,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const address = upstream.address() as { port: number };
  upstreamUrl = `http://127.0.0.1:${address.port}/token`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

afterEach(closeAll);

function expectNoPlantedSecret(result: unknown): void {
  const seen = JSON.stringify(result);
  for (const secret of PLANTED) expect(seen).not.toContain(secret);
}

describe('encoded secrets in what the model sees', () => {
  it('a returned failure quoting an upstream JSON body (escaped) and a URL-encoded callback', async () => {
    const logger = recordingLogger([]);
    const login = defineTool({
      name: 'exchange_token',
      description: 'Exchanges a grant.',
      input: { grant: z.string() },
      handler: async ({ grant }) => {
        const response = await fetch(upstreamUrl, {
          method: 'POST',
          body: JSON.stringify({ grant, password: PASSWORD, client_secret: CLIENT_SECRET }),
        });
        // The handler author's mistake under test: the upstream's text in the failure's message.
        return fail('unavailable', `token exchange failed (${response.status}): ${await response.text()}`);
      },
    });
    const client = await serve([login], [createRedactErrors()], logger);
    const result = await client.callTool('exchange_token', { grant: 'g-1' });
    const envelope = seenEnvelope(result);
    expect(envelope.error).toBe('unavailable');
    expect(envelope.message).toContain('invalid_grant');
    expect(envelope.message).toContain('[REDACTED]');
    expectNoPlantedSecret(result);
  });

  it('a returned failure quoting a redirect: a percent-encoded connection string, base64 state', async () => {
    const logger = recordingLogger([]);
    const authorize = defineTool({
      name: 'authorize',
      description: 'Starts a login.',
      input: {},
      handler: async () => {
        const response = await fetch(upstreamUrl.replace('/token', '/authorize'), { redirect: 'manual' });
        return fail('unavailable', `login was redirected to ${response.headers.get('location')}`);
      },
    });
    const client = await serve([authorize], [createRedactErrors()], logger);
    const result = await client.callTool('authorize', {});
    const envelope = seenEnvelope(result);
    expect(envelope.error).toBe('unavailable');
    expect(envelope.message).toBe('login was redirected to /login?state=[REDACTED]&next=[connection]');
    expectNoPlantedSecret(result);
    expect(JSON.stringify(result)).not.toContain('db.internal');
  });

  it('a returned failure and its _meta carrying prefixed provider keys and escaped JSON', async () => {
    const logger = recordingLogger([]);
    const deploy = defineTool({
      name: 'deploy',
      description: 'Deploys.',
      input: {},
      handler: async () => {
        const failure = fail(
          'unavailable',
          `DigitalOcean refused ${DO_TOKEN}; vault said {\\"token\\":\\"${VAULT_TOKEN}\\"}`,
        );
        return {
          ...failure,
          _meta: {
            [ERROR_META_KEY]: failure._meta?.[ERROR_META_KEY],
            upstream: { body: `{\\"password\\":\\"${PASSWORD}\\"}`, key: VAULT_TOKEN },
          },
        };
      },
    });
    const client = await serve([deploy], [createRedactErrors()], logger);
    const result = await client.callTool('deploy', {});
    const envelope = seenEnvelope(result);
    expect(envelope.error).toBe('unavailable');
    expect(envelope.message).toContain('DigitalOcean refused [REDACTED]');
    expectNoPlantedSecret(result);
  });

  it('a thrown error is internal: nothing of it reaches the model, all of it reaches the log', async () => {
    const entries: LogEntry[] = [];
    const logger = recordingLogger(entries);
    const login = defineTool({
      name: 'exchange_token',
      description: 'Exchanges a grant.',
      input: {},
      handler: async () => {
        const response = await fetch(upstreamUrl, { method: 'POST', body: `password=${PASSWORD}` });
        throw new Error(`token exchange failed: ${await response.text()}`);
      },
    });
    const client = await serve([login], [createRedactErrors()], logger);
    const result = await client.callTool('exchange_token', {});
    const envelope = seenEnvelope(result);
    expect(envelope.error).toBe('internal');
    expect(envelope.incidentId).toMatch(INCIDENT_ID);
    expectNoPlantedSecret(result);
    expect(JSON.stringify(entries)).toContain(envelope.incidentId);
  });
});
