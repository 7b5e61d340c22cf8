import { lookup } from 'node:dns/promises';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import { inspect } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import { defineTool, fail, ToolError, type ToolMiddleware, type ToolResult } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closeAll, closedPort, INCIDENT_ID, rejection, seenEnvelope, serve } from './helpers.js';

// Leak markers: real errors (Node's resolver, TLS, fetch, PGlite) whose text names a host, a schema
// or a credential in a shape the first patterns missed, carried into what the model reads.
const real: Record<string, unknown> = {};
let db: PGlite;

beforeAll(async () => {
  // Node's own check, as a TLS connection runs it, against a certificate for another internal name.
  real.altname = checkServerIdentity('payments.acme-internal', {
    subject: { CN: 'orders-db.prod.acme-internal' },
    subjectaltname: 'DNS:orders-db.prod.acme-internal, DNS:*.acme-internal',
  } as PeerCertificate);
  // A single-label name, as in a container network: ENOTFOUND (or EAI_AGAIN without a resolver).
  real.dns = await rejection(() => lookup('orders-db-primary'));
  real.credentials = await rejection(() => fetch('http://svc:hunter2@127.0.0.1:1/orders'));
  const port = await closedPort();
  real.aggregate = await rejection(() =>
    Promise.any([fetch(`http://127.0.0.1:${port}/`), lookup('billing-db-replica')]),
  );
  db = new PGlite();
  await db.exec('CREATE TABLE payroll (id int PRIMARY KEY, ssn text)');
  const ddl = 'ALTER TABLE payroll ADD COLUMN ssn text';
  const error = (await rejection(() => db.exec(ddl))) as Error;
  real.ddl = new Error(`migration failed: ${ddl}: ${error.message}`, { cause: error });
}, 60_000);
afterAll(async () => {
  await db.close();
});
afterEach(closeAll);

const LEAKS = [
  'acme-internal',
  'orders-db-primary',
  'billing-db-replica',
  'hunter2',
  'svc:',
  '127.0.0.1',
  'payroll',
  'ssn',
];
const FAILURES = ['altname', 'dns', 'credentials', 'aggregate', 'ddl'] as const;
const CARRIERS = ['fail', 'tool-error', 'meta', 'part-meta'] as const;

function textOf(error: unknown, form: 'message' | 'inspect'): string {
  return form === 'inspect' ? inspect(error) : (error as Error).message;
}

const careless = defineTool({
  name: 'careless',
  description: 'Fails with a real error carried in the given way.',
  input: {
    failure: z.enum(FAILURES),
    carrier: z.enum(CARRIERS),
    form: z.enum(['message', 'inspect']),
  },
  handler: ({ failure, carrier, form }): ToolResult => {
    const text = textOf(real[failure], form);
    if (carrier === 'fail') return fail('unavailable', `Lookup failed: ${text}`);
    if (carrier === 'tool-error') throw new ToolError('unavailable', `Lookup failed: ${text}`);
    const result = fail('unavailable', 'The lookup failed.');
    if (carrier === 'meta') result._meta = { ...result._meta, 'acme/debug': { errors: [{ text }] } };
    else result.content = [...result.content, { type: 'text', text: 'details', _meta: { text } }];
    return result;
  },
});

describe('real errors naming internals in shapes of their own (through a real client)', () => {
  it('the real errors carry what this suite looks for', () => {
    expect((real.altname as Error).message).toContain('payments.acme-internal');
    expect((real.dns as Error).message).toMatch(/^getaddrinfo E[A-Z_]+ orders-db-primary$/);
    expect((real.credentials as Error).message).toContain('svc:hunter2@127.0.0.1');
    expect(real.aggregate).toBeInstanceOf(AggregateError);
    expect((real.ddl as Error).message).toBe(
      'migration failed: ALTER TABLE payroll ADD COLUMN ssn text: column "ssn" of relation "payroll" already exists',
    );
  });

  for (const failure of FAILURES) {
    it(`${failure}: message and util.inspect, in fail(), ToolError, _meta and part _meta: nothing leaks`, async () => {
      const c = await serve([careless], [createRedactErrors()], recordingLogger([]));
      for (const carrier of CARRIERS) {
        for (const form of ['message', 'inspect'] as const) {
          const seen = JSON.stringify(await c.callTool('careless', { failure, carrier, form }));
          for (const leak of LEAKS) expect(seen, `${carrier}/${form} leaked ${leak}`).not.toContain(leak);
        }
      }
    });
  }

  it('what remains still says what failed', async () => {
    const c = await serve([careless], [createRedactErrors()], recordingLogger([]));
    const message = async (failure: (typeof FAILURES)[number]): Promise<string> =>
      seenEnvelope(await c.callTool('careless', { failure, carrier: 'fail', form: 'message' })).message;
    expect(await message('altname')).toBe(
      "Lookup failed: Hostname/IP does not match certificate's altnames: Host: [host]. is not in the cert's altnames: [host]",
    );
    expect(await message('dns')).toMatch(/^Lookup failed: getaddrinfo E[A-Z_]+ \[host\]$/);
    // A statement runs to `;` or the end of the line, so it takes the error quoted after it.
    expect(await message('ddl')).toBe('Lookup failed: migration failed: [sql]');
  });
});

describe('invisible characters and fullwidth forms inside a secret (through a real client)', () => {
  const disguised = defineTool({
    name: 'disguised',
    description: 'Fails with a secret split by an invisible character.',
    input: { text: z.string() },
    handler: ({ text }) => fail('unavailable', `Upstream said: ${text}`),
  });

  it.each([
    ['a zero-width space in a Stripe key', 'key sk_live_abc\u200bdefghijklmnopqrs rejected', 'sk_live'],
    ['a word joiner in a password key', 'pass\u2060word=hunter2', 'hunter2'],
    [
      'a soft hyphen in a connection URL',
      'postgres\u00ad://admin:hunter2@db.internal:5432/orders',
      'hunter2',
    ],
    ['a bidi mark in an IP address', 'connect ECONNREFUSED 10.0.\u200e3.7:5432', '10.0.3.7'],
    [
      'fullwidth letters in a key name',
      '\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44=hunter2',
      'hunter2',
    ],
  ])('%s never reaches the model', async (_name, text, secret) => {
    const c = await serve([disguised], [createRedactErrors()], recordingLogger([]));
    const { message } = seenEnvelope(await c.callTool('disguised', { text }));
    // What a model reads once invisible characters are ignored and forms folded, as it may well do.
    const read = message.replace(/\p{Cf}/gu, '').normalize('NFKC');
    expect(read).not.toContain(secret);
    expect(message).toMatch(/^Upstream said: /);
  });
});

describe('the log keeps what the model never sees', () => {
  it('a thrown real AggregateError: the model sees unavailable with an incident id; the log has every member and cause', async () => {
    const entries: LogEntry[] = [];
    const thrower = defineTool({
      name: 'thrower',
      description: 'Rethrows a real AggregateError.',
      input: {},
      handler: () => {
        throw real.aggregate;
      },
    });
    const c = await serve([thrower], [createRedactErrors()], recordingLogger(entries));
    const envelope = seenEnvelope(await c.callTool('thrower', {}));
    expect(envelope).toMatchObject({ error: 'unavailable', incidentId: expect.stringMatching(INCIDENT_ID) });
    const line = entries.find(
      (entry) => entry.fields.incidentId === envelope.incidentId && entry.fields.error,
    );
    const aggregate = real.aggregate as AggregateError;
    expect(line?.fields.error).toMatchObject({
      name: 'AggregateError',
      message: aggregate.message,
      errors: [
        { name: 'TypeError', message: 'fetch failed', cause: { fields: { code: 'ECONNREFUSED' } } },
        {
          message: (aggregate.errors[1] as Error).message,
          fields: { hostname: 'billing-db-replica' },
        },
      ],
    });
  });

  it('a ToolError thrown below with internals in its message: the model sees it scrubbed, the debug log the original', async () => {
    const entries: LogEntry[] = [];
    const below: ToolMiddleware = async () => {
      throw new ToolError('unavailable', `Store failed: ${(real.altname as Error).message}`);
    };
    const c = await serve([careless], [createRedactErrors(), below], recordingLogger(entries));
    const envelope = seenEnvelope(
      await c.callTool('careless', { failure: 'dns', carrier: 'fail', form: 'message' }),
    );
    expect(envelope.message).not.toContain('acme-internal');
    const debug = entries.find((entry) => entry.message === 'redact-errors: scrubbed an error result');
    expect(debug?.fields.original).toMatchObject({
      message: `Store failed: ${(real.altname as Error).message}`,
    });
  });
});
