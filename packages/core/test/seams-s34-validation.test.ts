// Red team s34, finding 2: core's own `invalid_argument` result passed the boundary unchanged, but it
// carries each zod issue's message, which a schema's transform or refinement writes (the zod-documented
// way to fail inside a transform is `ctx.addIssue({ message: String(error) })`). What the schema's
// author wrote now passes core's secret patterns, the cut and the scrub hooks, piece by piece, while
// core's own words ("secret: not an accepted argument") read exactly as before.
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { defineTool, ok, type ToolMiddleware } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/**
 * Stands in for @toolgate/redact-errors' `scrubText` (core's tests cannot depend on it): removes an
 * internal host and an address with its port, which no secret pattern of core's knows. Records what it saw.
 */
function internalsHook(seen: string[] = []): ToolMiddleware {
  const middleware: ToolMiddleware = (_ctx, next) => next();
  middleware.scrubText = (text) => {
    seen.push(text);
    return text.replace(/\bpgorders01\.internal\b/g, '[host]').replace(/\b127\.0\.0\.1:\d+/g, '[address]');
  };
  return middleware;
}

const DATABASE_URL = 'postgres://orders_app:Tr0ub4dor-pw@pgorders01.internal:5432/orders';

/** A reference resolved against a database that is down, reported the zod-documented way. */
const orderRef = z.string().transform(async (ref, ctx) => {
  const error = new Error('connect ECONNREFUSED 127.0.0.1:5432');
  ctx.addIssue({ code: 'custom', message: `could not resolve ${ref} (${String(error)}; ${DATABASE_URL})` });
  return z.NEVER;
});

const getOrder = defineTool({
  name: 'get_order',
  description: 'One order by reference.',
  input: { ref: orderRef },
  handler: async ({ ref }) => ok({ id: ref }),
});

describe('invalid_argument: what the schema author wrote is scrubbed, core’s own words are not', () => {
  it('a transform’s ctx.addIssue message loses its password (secret patterns) and its host (scrub hooks)', async () => {
    client = await serveTools([getOrder], { middleware: [internalsHook()] });
    const failure = expectFailure(await client.callTool('get_order', { ref: 'A-1' }));
    expect(failure.error).toBe('invalid_argument');
    expect(failure.message).toBe('Invalid arguments for get_order: ref.');
    const seen = JSON.stringify(failure);
    for (const leak of ['Tr0ub4dor-pw', 'pgorders01', '127.0.0.1']) expect(seen).not.toContain(leak);
    expect(failure.fields).toHaveLength(1);
    expect(failure.fields?.[0]?.path).toBe('ref');
    expect(failure.fields?.[0]?.expected).toContain(
      'could not resolve A-1 (Error: connect ECONNREFUSED [address]',
    );
    expect(failure.hint).toBe(`Fix and call again: ref: ${failure.fields?.[0]?.expected}.`);
  });

  it('a refinement’s message and path are scrubbed; core’s words for the other issues stay verbatim', async () => {
    const seen: string[] = [];
    const transfer = defineTool({
      name: 'transfer',
      description: 'Moves money between two of the caller’s accounts.',
      input: {
        from: z.string().regex(/^ACC-\d+$/),
        kind: z.enum(['instant', 'standard']),
        amount: z.number().max(1000),
        note: z.string().max(10),
        // Realistic refinements whose messages hold nothing to scrub: they must read as written.
        confirm: z.string().refine(() => false, 'Passwords must match'),
        date: z.string().refine(() => false, 'Expected an ISO date such as 2024-01-31'),
        card: z.string().refine(() => false, 'card number fails the Luhn check'),
        skus: z.array(z.string().refine(() => false, 'Unknown product SKU-1042; see list_products')),
        to: z.string().superRefine((to, ctx) => {
          // An author who puts the upstream's answer, host and all, into the issue and its path.
          ctx.addIssue({
            code: 'custom',
            message: `ledger at pgorders01.internal refused ${to}: password=hunter2-ledger`,
            path: ['pgorders01.internal'],
          });
        }),
      },
      handler: async () => ok({ done: true }),
    });
    client = await serveTools([transfer], { middleware: [internalsHook(seen)] });
    const failure = expectFailure(
      await client.callTool('transfer', {
        from: 'x',
        kind: 'fast',
        amount: 5000,
        note: 'a long note here',
        confirm: 'x',
        date: '31/01/2024',
        card: '4111 1111 1111 1112',
        skus: ['SKU-1042'],
        to: 'ACC-2',
        secret: 's',
        password: 1,
      }),
    );
    const byPath = Object.fromEntries((failure.fields ?? []).map((f) => [f.path, f.expected]));
    // Core's own words, exactly as core wrote them (a secret pattern would take "secret: not" for a pair).
    expect(byPath).toMatchObject({
      secret:
        'not an accepted argument; remove it (accepted: from, kind, amount, note, confirm, date, card, skus, to)',
      password:
        'not an accepted argument; remove it (accepted: from, kind, amount, note, confirm, date, card, skus, to)',
      from: 'a string matching /^ACC-\\d+$/',
      kind: 'one of "instant", "standard"',
      amount: 'a number at most 1000',
      note: 'at most 10 characters',
      confirm: 'Passwords must match',
      date: 'Expected an ISO date such as 2024-01-31',
      card: 'card number fails the Luhn check',
      'skus.0': 'Unknown product SKU-1042; see list_products',
    });
    expect(failure.hint).toContain('secret: not an accepted argument; remove it');
    expect(failure.hint).toContain('password: not an accepted argument; remove it');
    // The author's words: host and password gone, from the message, path, hint and fields alike.
    expect(byPath['to.[host]']).toBeDefined();
    expect(byPath['to.[host]']).toContain('ledger at [host] refused ACC-2');
    expect(JSON.stringify(failure)).not.toContain('pgorders01');
    expect(JSON.stringify(failure)).not.toContain('hunter2-ledger');
    // The hooks saw only the author's words, never core's.
    expect(seen.some((text) => text.includes('not an accepted argument'))).toBe(false);
  });

  it('a 200 KB issue message is cut like a failure’s string, and the hooks see a bounded part of it', async () => {
    const seen: string[] = [];
    const flood = defineTool({
      name: 'flood',
      description: 'Echoes its argument in a refinement.',
      input: {
        q: z
          .string()
          .refine(() => false, { error: (issue) => `bad ${String(issue.input)} at pgorders01.internal` }),
      },
      handler: async () => ok({}),
    });
    client = await serveTools([flood], { middleware: [internalsHook(seen)] });
    // Adversarial: 200 KB of a near-boundary shape, then an internal host the hooks must see whole.
    const q = `${'a:b;'.repeat(51_200)}`;
    const failure = expectFailure(await client.callTool('flood', { q }));
    const expected = failure.fields?.[0]?.expected ?? '';
    expect(expected.endsWith(' …[cut]')).toBe(true);
    expect(expected.length).toBeLessThanOrEqual(4096 + ' …[cut]'.length);
    expect(failure.hint.length).toBeLessThan(4096 + 200);
    expect(Math.max(...seen.map((text) => text.length))).toBeLessThanOrEqual(4096 + 16 * 1024);
    expect(JSON.stringify(failure)).not.toContain('pgorders01');
  });
});
