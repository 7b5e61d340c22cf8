// Secrets that reach an error in an encoded form: an upstream's JSON body quoted into a JSON string, a
// URL-encoded callback or query, provider keys only their prefix identifies, an HTML page's entities,
// JSON's escaped slashes and a hex dump. Each is carried by a real loopback HTTP exchange or a real
// returned failure, and must appear nowhere the model can read (content, the `_meta` envelope,
// structured content), while the log keeps it under the incident id.
import { createServer, type Server } from 'node:http';
import { inspect } from 'node:util';
import { defineTool, ERROR_META_KEY, fail, REDACTED } from '@toolgate/core';
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

describe('an upstream’s error body in other encodings, through a real client', () => {
  // One upstream, three ways an error body hides the same connection string: an HTML error page whose
  // template escapes every character but letters and digits as a hex entity (OWASP ESAPI's
  // encodeForHTML), a JSON body as PHP's json_encode writes it (every `/` as `\/`), and a binary frame
  // the handler quotes as Node prints a Buffer.
  const CONNECTION = `postgres://app:${PASSWORD}@db.internal:5432/orders`;
  const FILE = '/var/www/app/Database/Connection.php';
  const entities = (text: string) =>
    text.replace(/[^A-Za-z0-9,._ -]/g, (char) => `&#x${(char.codePointAt(0) ?? 0).toString(16)};`);
  const frame = Buffer.from(JSON.stringify({ dsn: CONNECTION }));
  let reports: Server;
  let reportsUrl: string;
  beforeAll(async () => {
    reports = createServer((request, response) => {
      if (request.url === '/html') {
        response.writeHead(502, { 'content-type': 'text/html' });
        response.end(
          `<html><head><title>Orders &amp; Billing</title></head><body><h1>Bad Gateway</h1><p>Upstream ${entities(CONNECTION)} refused the connection.</p></body></html>`,
        );
      } else if (request.url === '/php') {
        response.writeHead(500, { 'content-type': 'application/json' });
        const body = {
          message: 'Server Error',
          exception: 'PDOException',
          file: FILE,
          line: 70,
          url: CONNECTION,
        };
        response.end(JSON.stringify(body).replaceAll('/', '\\/'));
      } else {
        response.writeHead(200, { 'content-type': 'application/octet-stream' });
        response.end(frame);
      }
    });
    await new Promise<void>((resolve) => reports.listen(0, '127.0.0.1', resolve));
    reportsUrl = `http://127.0.0.1:${(reports.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => reports.close(() => resolve()));
  });

  const fetchReport = defineTool({
    name: 'fetch_report',
    description: 'Fetches a report from the reporting upstream (test).',
    input: { source: z.enum(['html', 'php', 'frame']) },
    handler: async ({ source }) => {
      const response = await fetch(`${reportsUrl}/${source}`);
      if (source === 'frame') {
        // The handler author's mistake under test: the frame it could not parse, as Node prints it.
        const received = Buffer.from(await response.arrayBuffer());
        return fail('unavailable', `unexpected report frame: ${inspect(received)}`);
      }
      return fail('unavailable', `report upstream failed (${response.status}): ${await response.text()}`);
    },
  });

  async function seenFor(source: 'html' | 'php' | 'frame') {
    const client = await serve([fetchReport], [createRedactErrors()], recordingLogger([]));
    const result = await client.callTool('fetch_report', { source });
    const seen = JSON.stringify(result);
    for (const leak of [PASSWORD, 'db.internal', '5432', 'www', '3a 2f 2f', '&#x3a;&#x2f;']) {
      expect(seen, `leaked ${leak}`).not.toContain(leak);
    }
    return seenEnvelope(result);
  }

  it('an HTML error page with the connection string as hex entities: the model reads [connection]', async () => {
    // Core's patterns read the page with its entities decoded (where the secret is); what they leave
    // keeps its entities as written (`&amp;`: until session 36 the whole page came back decoded).
    expect((await seenFor('html')).message).toBe(
      'report upstream failed (502): <html><head><title>Orders &amp; Billing</title></head><body><h1>Bad Gateway</h1><p>Upstream [connection] refused the connection.</p></body></html>',
    );
  });

  it('a PHP JSON body with escaped slashes: the file and the connection string go', async () => {
    expect((await seenFor('php')).message).toBe(
      'report upstream failed (500): {"message":"Server Error","exception":"PDOException","file":"[path]","line":70,"url":"[connection]"}',
    );
  });

  it('a binary frame Node prints as hex bytes, cut at 50: the bytes go whole', async () => {
    expect(inspect(frame)).toMatch(/^<Buffer 7b 22 64 73 6e 22 3a 22 70 6f .* more bytes>$/);
    expect((await seenFor('frame')).message).toBe(
      `unexpected report frame: <Buffer ${REDACTED} ... ${frame.length - 50} more bytes>`,
    );
  });
});
