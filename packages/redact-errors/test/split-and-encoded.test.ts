// Secrets that no single string holds whole, carried by real failures through a real tools/call: a
// private key's lines as `_meta` array items (a Java-ish stack dump, a pg client's TLS settings), and
// secrets in encodings a model reads at a glance: quoted-printable with soft line breaks, octal byte
// escapes, base32. Nothing of them may appear anywhere in the JSON the client received.
import { generateKeyPairSync } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { defineTool, fail, REDACTED, type ToolResult } from '@toolgate/core';
import { createTestContext, type LogEntry, recordingLogger } from '@toolgate/core/testing';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedactErrors } from '../src/index.js';
import { closeAll, closedPort, rejection, seenEnvelope, serve } from './helpers.js';

const PASSWORD = 'Tr0ub4dor-x9Q';
const CLIENT_SECRET = 'cs_7f3a9b2e41d8c6a0';
const TOKEN = 'q8Zr1vW3xK9mT2nB7cY4hJ6';
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PEM_LINES = (rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }) as string).trim().split('\n');
const DER_LINES = (rsa.privateKey.export({ type: 'pkcs8', format: 'der' }) as Buffer)
  .toString('base64')
  .match(/.{1,64}/g) as string[];
// Every body line is a secret of its own: none may survive.
const KEY_LINES = [...PEM_LINES.slice(1, -1), ...DER_LINES.slice(1)];

/** Quoted-printable as a mailer writes it: `=` and bytes outside ASCII as `=XX`, lines cut at `width`. */
function quotedPrintable(text: string, width = 76): string {
  const encoded = [...Buffer.from(text, 'utf8')]
    .map((byte) =>
      byte === 0x3d || byte > 0x7e
        ? `=${byte.toString(16).toUpperCase().padStart(2, '0')}`
        : String.fromCharCode(byte),
    )
    .join('');
  const lines: string[] = [];
  let rest = encoded;
  while (rest.length > width) {
    // Never cut an `=XX` escape: the line ends before it, with a soft break.
    let cut = width - 1;
    const lastEscape = rest.lastIndexOf('=', cut);
    if (lastEscape > cut - 3) cut = lastEscape;
    lines.push(`${rest.slice(0, cut)}=`);
    rest = rest.slice(cut);
  }
  return [...lines, rest].join('\r\n');
}

/** Bytes as a shell's `printf %q` or a byte-string logger prints them: `\160\141...`. */
function octal(text: string): string {
  return [...Buffer.from(text, 'utf8')].map((byte) => `\\${byte.toString(8).padStart(3, '0')}`).join('');
}

/** RFC 4648 base32 with padding. */
function base32(text: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const byte of Buffer.from(text, 'utf8')) bits += byte.toString(2).padStart(8, '0');
  let out = '';
  for (let i = 0; i < bits.length; i += 5)
    out += alphabet[Number.parseInt(bits.slice(i, i + 5).padEnd(5, '0'), 2)];
  return out.padEnd(Math.ceil(out.length / 8) * 8, '=');
}

/** The whole answer as the client received it must hold none of `secrets`. */
function expectNone(received: unknown, secrets: readonly string[]): void {
  const seen = JSON.stringify(received);
  for (const secret of secrets) expect(seen).not.toContain(secret);
}

afterEach(closeAll);

describe('a secret split over sibling strings, through a real tools/call', () => {
  it('a pg connection failure whose _meta lists the TLS client key line by line: no line survives', async () => {
    const port = await closedPort();
    const connectionString = `postgres://app:${PASSWORD}@127.0.0.1:${port}/orders`;
    const tool = defineTool({
      name: 'get_order_status',
      description: 'Reads an order.',
      input: {},
      handler: async () => {
        const client = new pg.Client({ connectionString, ssl: false });
        const error = (await rejection(() => client.connect())) as Error & { code?: string };
        const result = fail('unavailable', `Could not reach ${connectionString}: ${error.message}`);
        // What a driver's debug dump holds: the settings it used, the key file read into lines.
        result._meta = { ...result._meta, tls: { sslkey: PEM_LINES, code: error.code } };
        return result;
      },
    });
    const client = await serve([tool], [createRedactErrors()], recordingLogger([]));
    const result = await client.callTool('get_order_status', {});
    expect(seenEnvelope(result).error).toBe('unavailable');
    expectNone(result, [PASSWORD, ...KEY_LINES]);
    expect(result._meta?.tls).toEqual({ sslkey: PEM_LINES.map(() => REDACTED), code: 'ECONNREFUSED' });
  });

  it('a Java-ish stack in _meta, a header-less key body after its cause line: every line goes', async () => {
    const trace = [
      'javax.net.ssl.SSLHandshakeException: PKIX path building failed',
      '\tat sun.security.ssl.Alert.createSSLException(Alert.java:131)',
      '\tat com.acme.billing.KeyLoader.load(KeyLoader.java:88)',
      'Caused by: java.security.InvalidKeyException: bad key, content follows:',
      ...DER_LINES,
      '\t... 12 more',
    ];
    const tool = defineTool({
      name: 'render_invoice',
      description: 'Renders an invoice.',
      input: {},
      handler: () => {
        const result = fail('internal', 'Rendering failed.');
        result._meta = { ...result._meta, upstream: { trace } };
        return result;
      },
    });
    const client = await serve([tool], [createRedactErrors()], recordingLogger([]));
    const result = await client.callTool('render_invoice', {});
    expectNone(result, [...DER_LINES, 'KeyLoader.java', 'com.acme.billing']);
    const upstream = result._meta?.upstream as { trace: string[] } | undefined;
    expect(upstream?.trace.slice(3, 3 + DER_LINES.length + 1)).toEqual([
      'Caused by: java.security.InvalidKeyException: bad key, content follows:',
      ...DER_LINES.map(() => REDACTED),
    ]);
  });

  it('a key given as one text part a line, returned by the handler, is cut from every part', async () => {
    const redact = createRedactErrors();
    const tool = defineTool({
      name: 'sign',
      description: 'Signs.',
      input: {},
      handler: () => fail('internal', 'x'),
    });
    const raw: ToolResult = {
      isError: true,
      content: [
        { type: 'text', text: 'signing key:' },
        ...PEM_LINES.map((text) => ({ type: 'text' as const, text })),
      ],
    };
    const result = await redact(createTestContext({ tool, logger: recordingLogger([]) }), async () => raw);
    expectNone(result, KEY_LINES);
    expect(result.content).toEqual([
      { type: 'text', text: 'signing key:' },
      ...PEM_LINES.map(() => ({ type: 'text', text: REDACTED })),
    ]);
  });
});

describe('encodings decoded before matching, through a real tools/call', () => {
  it('quoted-printable: a connection string and a JWT cut by soft line breaks', async () => {
    const jwt = `eyJhbGciOiJIUzI1NiJ9.${Buffer.from(JSON.stringify({ sub: 'ann', scope: 'orders:write' })).toString('base64url')}.${'s'.repeat(43)}`;
    const report = `Alert from billing-worker at 03:12 UTC. DATABASE_URL=postgres://app:${PASSWORD}@db-primary.internal:5432/orders token=${jwt}`;
    // A mailer's lines (72 characters here) cut the password after its first letter and the token
    // after its header: no plain pattern sees either whole.
    const body = quotedPrintable(report, 72);
    expect(body).not.toContain(PASSWORD);
    expect(body).not.toContain(jwt);
    const tool = defineTool({
      name: 'send_receipt',
      description: 'Mails a receipt.',
      input: {},
      handler: () => {
        const result = fail('unavailable', 'The mail relay refused the message.');
        result._meta = { ...result._meta, bounce: { body } };
        return result;
      },
    });
    const client = await serve([tool], [createRedactErrors()], recordingLogger([]));
    const result = await client.callTool('send_receipt', {});
    expectNone(result, [PASSWORD, PASSWORD.slice(1), jwt, jwt.slice(30), 'db-primary']);
  });

  it('octal escapes: a Node error whose stderr dump prints the bytes of a credential', async () => {
    const stderr = `curl: (22) The requested URL returned error: 401\n$'${octal(`Authorization: Bearer ${TOKEN}`)}'\n${octal(`password=${PASSWORD}`)}`;
    const tool = defineTool({
      name: 'track_shipment',
      description: 'Tracks a shipment.',
      input: {},
      handler: async () => {
        const error = (await rejection(() => readFile('/nonexistent/carrier/credentials.txt'))) as Error;
        const result = fail('unavailable', `Carrier lookup failed: ${error.message}`);
        result._meta = { ...result._meta, stderr };
        return result;
      },
    });
    const entries: LogEntry[] = [];
    const client = await serve([tool], [createRedactErrors()], recordingLogger(entries));
    const result = await client.callTool('track_shipment', {});
    expectNone(result, [
      TOKEN,
      PASSWORD,
      octal(TOKEN).slice(0, 40),
      octal(PASSWORD).slice(0, 40),
      '/nonexistent',
    ]);
    expect(result._meta?.stderr).toBe(
      `curl: (22) The requested URL returned error: 401\n$'Authorization: Bearer ${REDACTED}'\npassword=${REDACTED}`,
    );
  });

  it('base32: an encoded client_secret in a field and a blob that decodes to a connection string', async () => {
    const seed = base32(`client_secret=${CLIENT_SECRET}`);
    const blob = base32(`postgres://app:${PASSWORD}@10.0.0.5:5432/orders`);
    const tool = defineTool({
      name: 'refresh_token',
      description: 'Refreshes a token.',
      input: {},
      handler: () => {
        const result = fail('unavailable', `The identity provider refused state ${seed}.`);
        result._meta = { ...result._meta, upstream: { cursor: blob.toLowerCase() } };
        return result;
      },
    });
    const client = await serve([tool], [createRedactErrors()], recordingLogger([]));
    const result = await client.callTool('refresh_token', {});
    expectNone(result, [seed, blob, blob.toLowerCase(), CLIENT_SECRET, PASSWORD]);
    expect(seenEnvelope(result).message).toBe(`The identity provider refused state ${REDACTED}.`);
    expect(result._meta?.upstream).toEqual({ cursor: REDACTED });
  });

  it('ordinary text with = signs, digits after a backslash and long upper-case words stays', async () => {
    const message =
      'Filter id=AB12 and x=3D4 matched no order (code \\101); status ORDERSTATUSPENDINGREVIEWABCD, seed JBSWY3DPEHPK3PXP.';
    const tool = defineTool({
      name: 'search_orders',
      description: 'Searches orders.',
      input: {},
      handler: () => fail('not_found', message),
    });
    const client = await serve([tool], [createRedactErrors()], recordingLogger([]));
    const result = await client.callTool('search_orders', {});
    expect(seenEnvelope(result).message).toBe(message);
  });
});
