// Red team, round 28: a real PostgreSQL error carried to the model the ways careless handlers carry it:
// `JSON.stringify(err)` (its `detail`, `schema`, `table`, `constraint` fields), its message inside JSON
// text (quotes escaped: `relation \"users\"`), inside JSON quoted in JSON, `{ ...err }` copied into
// `_meta`, and cut off mid-name by a length bound. Each through a real SDK client; the planted names,
// row values and texts appear nowhere in what the client received.
import tls from 'node:tls';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { defineTool, fail, ok, type ToolDefinition, type ToolResult } from '@toolgate/core';
import { recordingLogger, reportMissingService, serveTools, type TestClient } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRedactErrors } from '../src/index.js';
import { rejection } from './helpers.js';

const DATABASE_URL = process.env.TEST_DATABASE_URL;
const SCHEMA = 'rt_pgtext_schema';
// Everything planted starts with one of these: a schema, table, column or constraint name, a row value,
// or the text a PL/pgSQL RAISE put in DETAIL and HINT.
const PLANTED = ['rt_', 'rt.alice', 'rt-detail', 'rt-hint'];

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

/** What the client received, as one string: everything a model could be shown. */
function expectNone(result: CallToolResult): void {
  expect(result.isError).toBe(true);
  const seen = JSON.stringify(result);
  for (const planted of PLANTED) expect(seen, `leaked ${planted}: ${seen}`).not.toContain(planted);
}

/** A tool that fails with whatever `next` holds (the test sets it before each call). */
async function serveFailure() {
  const state: { result: ToolResult } = { result: ok() };
  const tool = defineTool({
    name: 'lookup_customer',
    description: 'Fails as the test says (test).',
    input: {},
    handler: async () => state.result,
  }) as ToolDefinition;
  const client = await serveTools([tool], {
    middleware: [createRedactErrors({ logger: recordingLogger([]) })],
    logger: recordingLogger([]),
  });
  open.push(client);
  return {
    async seen(result: ToolResult): Promise<CallToolResult> {
      state.result = result;
      return client.callTool('lookup_customer', {});
    },
  };
}

/** The usual careless handler: `text` as the message, the hint, a field and a `_meta` value. */
function carrying(text: string): ToolResult[] {
  const withMeta = fail('unavailable', 'Lookup failed.');
  withMeta._meta = { ...withMeta._meta, 'acme/upstream': { body: text } };
  return [
    fail('unavailable', text),
    fail('unavailable', 'Lookup failed.', { hint: text }),
    fail('invalid_argument', 'Lookup failed.', { fields: [{ path: 'email', expected: text }] }),
    withMeta,
  ];
}

/** A pg error's own enumerable fields, as `{ ...err }` copies them. */
function fieldsOf(error: unknown): Record<string, unknown> {
  return { ...(error as object) };
}

if (DATABASE_URL === undefined) {
  reportMissingService(
    it,
    'real PostgreSQL errors as JSON text',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
} else {
  const errors: Record<'unique' | 'check' | 'raise' | 'noDatabase', Error> = {} as never;
  beforeAll(async () => {
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      await client.query(`CREATE SCHEMA ${SCHEMA}`);
      await client.query(
        `CREATE TABLE ${SCHEMA}.rt_customers (id int, rt_email text CONSTRAINT rt_email_key UNIQUE,
          rt_age int CONSTRAINT rt_age_check CHECK (rt_age > 0))`,
      );
      await client.query(`INSERT INTO ${SCHEMA}.rt_customers VALUES (1, 'rt.alice@shop.test', 30)`);
      errors.unique = (await rejection(() =>
        client.query(`INSERT INTO ${SCHEMA}.rt_customers VALUES (2, 'rt.alice@shop.test', 30)`),
      )) as Error;
      errors.check = (await rejection(() =>
        client.query(`INSERT INTO ${SCHEMA}.rt_customers VALUES (3, 'rt.alice.b@shop.test', -1)`),
      )) as Error;
      errors.raise = (await rejection(() =>
        client.query(`DO $$ BEGIN RAISE EXCEPTION 'refund refused' USING DETAIL = 'rt-detail card 4711',
          HINT = 'rt-hint ask billing', SCHEMA = 'rt_billing', TABLE = 'rt_refunds', COLUMN = 'rt_amount',
          CONSTRAINT = 'rt_refund_cap'; END $$`),
      )) as Error;
    } finally {
      await client.end();
    }
    const url = new URL(DATABASE_URL);
    url.pathname = '/rt_no_such_database';
    const missing = new pg.Client({ connectionString: url.href });
    missing.on('error', () => {});
    errors.noDatabase = (await rejection(() => missing.connect())) as Error;
  });
  afterAll(async () => {
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await client.end();
  });

  describe('a real pg error as JSON text', () => {
    it('JSON.stringify(err): its detail, schema, table, column and constraint fields go', async () => {
      const { seen } = await serveFailure();
      for (const name of ['unique', 'check', 'raise'] as const) {
        // As pg's error serializes (`"severity":"ERROR","code":"23505","detail":…,"table":…`), also
        // indented, as `JSON.stringify(err, null, 2)` writes it.
        for (const text of [JSON.stringify(errors[name]), JSON.stringify(errors[name], null, 2)]) {
          for (const result of carrying(text)) expectNone(await seen(result));
        }
      }
    });

    it('its message in JSON text: names in escaped quotes (relation \\"x\\", role, database) go', async () => {
      const { seen } = await serveFailure();
      for (const error of Object.values(errors)) {
        // The stack and message as JSON writes them: `duplicate key … constraint \"rt_email_key\"`.
        const all = JSON.stringify(error, Object.getOwnPropertyNames(error));
        // The same quoted once more, as an upstream's JSON body inside an error's JSON.
        const nested = JSON.stringify({ body: JSON.stringify({ error: error.message }) });
        for (const text of [all, nested]) for (const result of carrying(text)) expectNone(await seen(result));
      }
      // What the model still reads: what kind of failure it was.
      const shown = await seen(fail('unavailable', JSON.stringify({ error: errors.unique.message })));
      expect(JSON.stringify(shown)).toContain('duplicate key value violates unique constraint [name]');
    });

    it('{ ...err } in _meta: the schema names and the detail, hint and where fields go', async () => {
      const { seen } = await serveFailure();
      for (const error of Object.values(errors)) {
        const result = fail('unavailable', 'Lookup failed.');
        result._meta = { ...result._meta, 'acme/pg': fieldsOf(error), 'acme/list': [fieldsOf(error)] };
        const shown = await seen(result);
        expectNone(shown);
        // The envelope's own hint is not a pg field: it stays.
        expect(JSON.stringify(shown)).toContain('Do not retry now');
      }
      const raised = fail('unavailable', 'Lookup failed.');
      raised._meta = { ...raised._meta, 'acme/pg': fieldsOf(errors.raise) };
      const shown = await seen(raised);
      expect(shown._meta?.['acme/pg']).toMatchObject({
        code: 'P0001',
        severity: 'ERROR',
        detail: '[REDACTED]',
        hint: '[REDACTED]',
        schema: '[name]',
        table: '[name]',
        column: '[name]',
        constraint: '[name]',
      });
    });

    it('cut off mid-name or mid-row by a length bound: the part before the cut goes', async () => {
      const { seen } = await serveFailure();
      const cuts: string[] = [];
      for (const error of [errors.unique, errors.check]) {
        const json = JSON.stringify(error, Object.getOwnPropertyNames(error));
        const detail = (error as Error & { detail: string }).detail;
        // Right after each planted name starts, in the message, its JSON form, and pg's detail.
        for (const text of [error.message, json, detail, JSON.stringify({ detail })]) {
          for (let at = text.indexOf('rt'); at !== -1; at = text.indexOf('rt', at + 1))
            cuts.push(text.slice(0, at + 4));
        }
      }
      expect(cuts.length).toBeGreaterThan(10);
      for (const text of cuts) for (const result of carrying(text)) expectNone(await seen(result));
    });
  });
}

describe('a real TLS error cut off by a length bound', () => {
  it('the host asked for goes before the names the certificate holds', async () => {
    // Node's own check of a certificate against the name asked for (what tls.connect runs).
    const error = tls.checkServerIdentity('rt-ledger.corp.internal', {
      subject: { CN: 'rt-vault.corp.internal' },
      subjectaltname: 'DNS:rt-vault.corp.internal, IP Address:10.20.30.40',
    } as unknown as tls.PeerCertificate) as Error & { code: string };
    expect(error.code).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
    const { seen } = await serveFailure();
    const at = error.message.indexOf('rt-ledger');
    for (const cut of [at + 2, at + 9, at + 14, at + 20, error.message.length]) {
      for (const result of carrying(error.message.slice(0, cut))) {
        const text = JSON.stringify(await seen(result));
        for (const planted of ['rt-le', 'rt-vault', '10.20.30.40']) expect(text, text).not.toContain(planted);
      }
    }
  });
});

describe('a log message a call sends with a system error copied into it', () => {
  // Core passed each string of a log message's `data` to the `scrubText` hooks alone, without its key,
  // and numbers not at all: a port (`port: 5432`) and a pg error's `detail`/`table` copied field by field
  // have no shape a text hook can know, so they reached the client. Core now hands the whole value to
  // this middleware's `scrubValue`, which walks it as it walks a failure's `_meta` (the key rules).
  it('carries no port, no schema name and no detail to the client', async () => {
    const tool = defineTool({
      name: 'chatty_lookup',
      description: 'Logs the error it retries (test).',
      input: {},
      handler: async (_args, ctx) => {
        await ctx.server.log('warning', {
          retrying: { code: 'ECONNREFUSED', syscall: 'connect', address: '127.0.0.1', port: 54329 },
          pg: { severity: 'ERROR', code: '23505', detail: 'rt-detail card 4711', table: 'rt_refunds' },
        });
        return ok();
      },
    }) as ToolDefinition;
    const client = await serveTools([tool], {
      middleware: [createRedactErrors({ logger: recordingLogger([]) })],
      logger: recordingLogger([]),
    });
    open.push(client);
    await client.callTool('chatty_lookup', {});
    const sent = JSON.stringify(client.notifications);
    expect(sent).toContain('ECONNREFUSED');
    for (const planted of ['54329', 'rt-detail', 'rt_refunds']) expect(sent).not.toContain(planted);
  });
});
