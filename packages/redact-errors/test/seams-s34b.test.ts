// Red team s34b, finding d8, with this middleware's patterns as core's scrub hooks: a transform that
// caught a lookup's error and reported it with an issue code core words itself (`invalid_format` with
// the error as its `pattern`, `invalid_value` with it in `values` and `path`) reached the model with its
// SQL and its connection string. And what must stay: refusals of realistic schemas (enums of hosts,
// patterns, bounds) read exactly as the tool's published schema shows them.
import { defineTool, ok } from '@toolgate/core';
import { expectFailure, recordingLogger, serveTools, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

async function serveWith(tools: Parameters<typeof serveTools>[0]): Promise<TestClient> {
  const logs: never[] = [];
  const client = await serveTools(tools, {
    middleware: [createRedactErrors({ logger: recordingLogger(logs) })],
    logger: recordingLogger(logs),
  });
  open.push(client);
  return client;
}

const SQL = 'SELECT card_number, cvv_code FROM billing.payment_cards WHERE customer_id = 42';
const CONN = 'postgres://payroll_admin:Hunter2Payroll@pgpayroll01.internal:5432/payroll_prod';
const CAUGHT = `lookup failed: ${SQL} via ${CONN}`;

function lookupTool(name: string, issue: (caught: string, input: string) => Record<string, unknown>) {
  return defineTool({
    name,
    description: 'Looks a SKU up.',
    input: {
      sku: z.string().transform((value, ctx) => {
        ctx.addIssue(issue(CAUGHT, value) as Parameters<typeof ctx.addIssue>[0]);
        return z.NEVER;
      }),
    },
    handler: async () => ok({}),
  });
}

describe('core’s invalid_argument with redact-errors: issue fields core words itself', () => {
  it.each([
    [
      'coded',
      (caught: string, input: string) => ({ code: 'invalid_value', values: [caught], path: [caught], input }),
    ],
    [
      'fmt',
      (caught: string, input: string) => ({
        code: 'invalid_format',
        format: 'regex',
        pattern: caught,
        input,
      }),
    ],
  ])('%s: the statement, the password and the host are gone', async (name, issue) => {
    const client = await serveWith([lookupTool(name, issue)]);
    const failure = expectFailure(await client.callTool(name, { sku: 'A1' }));
    expect(failure.error).toBe('invalid_argument');
    const text = JSON.stringify(failure);
    for (const leak of ['card_number', 'payment_cards', 'Hunter2', 'payroll_admin', 'pgpayroll01']) {
      expect(text, leak).not.toContain(leak);
    }
    expect(text).toContain('lookup failed');
  });

  it('realistic refusals read as the published schema shows them', async () => {
    const tool = defineTool({
      name: 'connect_replica',
      description: 'Connects a read replica.',
      input: {
        host: z.enum(['db.internal', 'localhost:5432', '10.0.0.12']),
        dsn: z.string().regex(/^postgres:\/\/[\w.-]+(:\d+)?\/\w+$/),
        key: z.string().regex(/^sk_(test|live)_[A-Za-z0-9]{24}$/),
        credential: z.enum(['password', 'api_key', 'oauth_token']),
        port: z.number().int().min(1024).max(65535),
        password: z.string(),
      },
      handler: async () => ok({}),
    });
    const client = await serveWith([tool]);
    const failure = expectFailure(
      await client.callTool('connect_replica', {
        host: 'x',
        dsn: 'x',
        key: 'x',
        credential: 'pin',
        port: 80,
        password: 1,
        token: 'x',
      }),
    );
    expect(Object.fromEntries((failure.fields ?? []).map((f) => [f.path, f.expected]))).toEqual({
      host: 'one of "db.internal", "localhost:5432", "10.0.0.12"',
      dsn: 'a string matching /^postgres:\\/\\/[\\w.-]+(:\\d+)?\\/\\w+$/',
      key: 'a string matching /^sk_(test|live)_[A-Za-z0-9]{24}$/',
      credential: 'one of "password", "api_key", "oauth_token"',
      port: 'a number at least 1024',
      password: 'a string, not a number',
      token: 'not an accepted argument; remove it (accepted: host, dsn, key, credential, port, password)',
    });
  });
});
