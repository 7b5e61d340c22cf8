// Red team s34, finding 3: the boundary cut a failure's strings at 4096 characters BEFORE the scrub
// hooks ran, so a model that chose the length of an echoed argument placed the cut inside the SQL
// statement, pg_hba line or connection string that followed: the fragment matched no hook and reached
// the model. The hooks now see the text up to a margin (16 KB) past the limit, and the cut comes after.
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { SCRUB_MARGIN } from '../src/boundary.js';
import { defineTool, fail, type ToolMiddleware } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/**
 * Stands in for @toolgate/redact-errors' `scrubText` (core's tests cannot depend on it): each pattern
 * recognises a detail only whole, as redact-errors' do. Records the length of every text it is given.
 */
function internalsHook(lengths: number[] = []): ToolMiddleware {
  const middleware: ToolMiddleware = (_ctx, next) => next();
  middleware.scrubText = (text) => {
    lengths.push(text.length);
    return text
      .replace(/\bSELECT [\w, ]{1,200} FROM [\w.]{1,100} WHERE \w{1,50} = \d{1,20}/g, '[sql]')
      .replace(
        /\bhost=\S{1,100} port=\d{1,5} dbname=\S{1,100} user=\S{1,100} sslmode=\w{1,20}/g,
        '[connection]',
      )
      .replace(
        /no pg_hba\.conf entry for host "[^"]{1,100}", user "[^"]{1,100}", database "[^"]{1,100}"/g,
        'no pg_hba.conf entry [detail]',
      )
      .replace(/\bfiller(?: filler)*/g, '[f]');
  };
  return middleware;
}

// What the upstream said after the echoed value (the red team's real formats of pg and libpq errors).
const UPSTREAM: Record<string, string> = {
  sql: 'query failed: SELECT card_number, cvv_code, ssn_hash FROM billing.payment_cards WHERE customer_id = 42',
  pg_hba:
    'no pg_hba.conf entry for host "10.9.8.7", user "payroll_admin", database "payroll_prod", no encryption',
  keyvalue:
    'connect failed host=pgpayroll01 port=5432 dbname=payroll_prod user=payroll_admin sslmode=require',
};
const SENSITIVE = [
  'card_number',
  'cvv_code',
  'payment_cards',
  '10.9.8.7',
  'payroll_admin',
  'payroll_prod',
  'pgpayroll01',
];

const saveNote = defineTool({
  name: 'save_note',
  description: 'Saves a note.',
  input: { which: z.enum(['sql', 'pg_hba', 'keyvalue']), note: z.string() },
  handler: async ({ which, note }) =>
    fail('unavailable', `Could not save note "${note}": ${UPSTREAM[which]}`),
});

describe('the scrub hooks see a failure’s string whole before it is cut', () => {
  it('an echo sized to put the 4096 cut inside SQL, a pg_hba line or a connection string shows none of it', async () => {
    client = await serveTools([saveNote], { middleware: [internalsHook()] });
    const leaks: string[] = [];
    // Every length that puts the cut somewhere inside the upstream's text (and a few either side).
    for (const which of ['sql', 'pg_hba', 'keyvalue'] as const) {
      const prefix = 'Could not save note "'.length;
      for (let into = -4; into <= UPSTREAM[which]!.length + 4; into += 3) {
        const note = 'n'.repeat(4096 - prefix - 3 - into);
        const failure = expectFailure(await client.callTool('save_note', { which, note }));
        const seen = JSON.stringify(failure);
        for (const word of SENSITIVE) if (seen.includes(word)) leaks.push(`${which}+${into}: ${word}`);
        expect(failure.message.length).toBeLessThanOrEqual(4096 + ' …[cut]'.length);
      }
    }
    expect(leaks).toEqual([]);
  });

  it('a short failure is scrubbed whole and not cut; a cut failure carries one marker after both boundaries', async () => {
    client = await serveTools([saveNote], { middleware: [internalsHook()] });
    const short = expectFailure(await client.callTool('save_note', { which: 'sql', note: 'n'.repeat(10) }));
    expect(short.message).toBe(`Could not save note "${'n'.repeat(10)}": query failed: [sql]`);
    // The first boundary cuts near the limit; the second (where the result leaves the chain) must not
    // cut the cut text again, which added a second marker ("… …[cut]", "…[cut …[cut]") whenever the
    // first cut ended a few characters before the limit.
    const echo = defineTool({
      name: 'echo_failure',
      description: 'Fails with its text.',
      input: { text: z.string() },
      handler: async ({ text }) => fail('unavailable', text),
    });
    await client.close();
    client = await serveTools([echo], { middleware: [internalsHook()] });
    for (let end = 4088; end <= 4096; end += 1) {
      const text = `${'n'.repeat(end)} ${'z'.repeat(100)}`;
      const failure = expectFailure(await client.callTool('echo_failure', { text }));
      expect(failure.message, String(end)).toBe(`${'n'.repeat(end)} …[cut]`);
    }
  });

  it('a 200 KB echo: the hooks see at most the limit plus the margin, and what straddles the limit is scrubbed', async () => {
    const lengths: number[] = [];
    const echo = defineTool({
      name: 'find_order',
      description: 'Find an order by its reference.',
      input: { reference: z.string() },
      handler: async ({ reference }) =>
        fail('not_found', `No order matches ${reference} ${UPSTREAM.keyvalue} ${'q '.repeat(100_000)}`),
    });
    client = await serveTools([echo], { middleware: [internalsHook(lengths)] });
    // The connection string starts some 30 characters before the limit and ends after it.
    const reference = 'r'.repeat(4096 - 'No order matches '.length - 60);
    const failure = expectFailure(await client.callTool('find_order', { reference }));
    for (const word of SENSITIVE) expect(failure.message).not.toContain(word);
    expect(failure.message.endsWith(' …[cut]')).toBe(true);
    expect(failure.message.length).toBeLessThanOrEqual(4096 + ' …[cut]'.length);
    expect(Math.max(...lengths)).toBeLessThanOrEqual(4096 + SCRUB_MARGIN);
    // Two passes over a string past the margin (with and without it), each bounded: not the 200 KB.
    expect(lengths.reduce((sum, n) => sum + n, 0)).toBeLessThan(4 * (4096 + SCRUB_MARGIN) + 2 * 4096);
  });

  it('hooks that shorten what comes first cannot bring a detail cut at the margin under the limit', async () => {
    // 20 KB of text the hook collapses to "[f]", then a connection string straddling where the hooks'
    // view ends (4096 + 16384): seen cut there, it would match nothing and land near the start.
    const echo = defineTool({
      name: 'find_order',
      description: 'Find an order by its reference.',
      input: { reference: z.string() },
      handler: async ({ reference }) =>
        fail('not_found', `${reference}${UPSTREAM.keyvalue} and more text after it`),
    });
    client = await serveTools([echo], { middleware: [internalsHook()] });
    const leaks: string[] = [];
    for (const into of [5, 20, 40, 60, 80]) {
      const filler = 'filler '.repeat(Math.floor((4096 + SCRUB_MARGIN - into) / 7));
      const reference = `${filler}${'z'.repeat(4096 + SCRUB_MARGIN - into - filler.length)}`;
      const failure = expectFailure(await client.callTool('find_order', { reference }));
      for (const word of SENSITIVE)
        if (JSON.stringify(failure).includes(word)) leaks.push(`${into}: ${word}`);
      expect(failure.message.endsWith(' …[cut]')).toBe(true);
    }
    expect(leaks).toEqual([]);
  });
});
