// Red team s34, core's boundary with this middleware in the chain:
// - a model that chose the length of an argument echoed into a failure placed core's 4096-character cut
//   inside the internal text after it (SQL, a pg_hba line, a key=value or ADO.NET connection string, a
//   MySQL duplicate entry): this middleware's patterns, run on the cut text, no longer matched it;
// - core's own `invalid_argument` result carried a transform's `ctx.addIssue` message (a real pg
//   connection error and the connection string) past the boundary with no pattern applied.
import { defineTool, fail, ok } from '@toolgate/core';
import { recordingLogger, serveTools, type TestClient } from '@toolgate/core/testing';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closedPort, seenEnvelope } from './helpers.js';

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

// What the upstream said after the echoed value (real formats of pg, libpq and MySQL errors).
const UPSTREAM = {
  sql: 'query failed: SELECT card_number, cvv_code, ssn_hash FROM billing.payment_cards WHERE customer_id = 42',
  pg_hba:
    'no pg_hba.conf entry for host "10.9.8.7", user "payroll_admin", database "payroll_prod", no encryption',
  keyvalue:
    'connect failed host=pgpayroll01 port=5432 dbname=payroll_prod user=payroll_admin sslmode=require',
  mysql: "Duplicate entry 'victim@corp.example' for key 'users.email_unique'",
  adonet: 'Server=sqlpayroll01;Database=payroll_prod;User Id=payroll_admin;',
} as const;
const SENSITIVE = [
  'card_number',
  'cvv_code',
  'payment_cards',
  '10.9.8.7',
  'payroll_admin',
  'payroll_prod',
  'pgpayroll01',
  'victim@corp',
  'sqlpayroll01',
];

describe('core’s boundary with redact-errors in the chain', () => {
  it('an echo sized to put the 4096 cut inside the upstream’s text shows none of it', async () => {
    const saveNote = defineTool({
      name: 'save_note',
      description: 'Saves a note.',
      input: { which: z.enum(['sql', 'pg_hba', 'keyvalue', 'mysql', 'adonet']), note: z.string().max(10000) },
      handler: async ({ which, note }) =>
        fail('unavailable', `Could not save note "${note}": ${UPSTREAM[which]}`),
    });
    const client = await serveWith([saveNote]);
    const leaks: string[] = [];
    // The red team's lengths, then every fifth length that puts the cut inside each upstream text.
    const cases: [keyof typeof UPSTREAM, number][] = [
      ['sql', 4040],
      ['sql', 4025],
      ['pg_hba', 4010],
      ['pg_hba', 4005],
      ['keyvalue', 4036],
      ['mysql', 4035],
      ['adonet', 4050],
    ];
    for (const which of Object.keys(UPSTREAM) as (keyof typeof UPSTREAM)[]) {
      const start = 4096 - 'Could not save note "'.length - '": '.length - UPSTREAM[which].length;
      for (let length = start; length <= start + UPSTREAM[which].length; length += 5)
        cases.push([which, length]);
    }
    for (const [which, length] of cases) {
      const envelope = seenEnvelope(await client.callTool('save_note', { which, note: 'n'.repeat(length) }));
      for (const word of SENSITIVE)
        if (JSON.stringify(envelope).includes(word)) leaks.push(`${which} ${length}: ${word}`);
      expect(envelope.message.length).toBeLessThanOrEqual(4096 + ' …[cut]'.length);
    }
    expect(leaks).toEqual([]);
  });

  it('a transform’s ctx.addIssue message with a real pg error and its connection string is scrubbed', async () => {
    const port = await closedPort();
    const databaseUrl = `postgres://orders_app:Tr0ub4dor-pw@127.0.0.1:${port}/orders`;
    const orderRef = z.string().transform(async (ref, ctx) => {
      const db = new pg.Client({ connectionString: databaseUrl });
      try {
        await db.connect();
        const { rows } = await db.query('SELECT id FROM orders WHERE ref = $1', [ref]);
        return rows[0]?.id as number;
      } catch (error) {
        ctx.addIssue({
          code: 'custom',
          message: `could not resolve ${ref} (${String(error)}; ${databaseUrl})`,
        });
        return z.NEVER;
      } finally {
        await db.end().catch(() => {});
      }
    });
    const getOrder = defineTool({
      name: 'get_order',
      description: 'One order by reference.',
      input: { ref: orderRef },
      handler: async ({ ref }) => ok({ id: ref }),
    });
    const client = await serveWith([getOrder]);
    const envelope = seenEnvelope(await client.callTool('get_order', { ref: 'A-1', secret: 'x' }));
    expect(envelope.error).toBe('invalid_argument');
    const seen = JSON.stringify(envelope);
    for (const leak of ['Tr0ub4dor-pw', 'orders_app', '127.0.0.1', `${port}`])
      expect(seen).not.toContain(leak);
    expect(envelope.fields?.find((field) => field.path === 'ref')?.expected).toMatch(
      /^could not resolve A-1 \(/,
    );
    // Core's own words for the unknown key stay as core wrote them.
    expect(envelope.fields?.find((field) => field.path === 'secret')?.expected).toBe(
      'not an accepted argument; remove it (accepted: ref)',
    );
  });
});
