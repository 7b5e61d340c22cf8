// Red team s34b, finding d8: the previous round scrubbed only the issues core does not word itself (a
// custom issue's message). But `ctx.addIssue` may give any code any field: `invalid_format` with a caught
// error as its `pattern`, `invalid_value` with it in `values` or `path`, and core quoted those fields
// verbatim. Now every piece of an issue that came from the schema, a transform or the arguments (a path
// before it is clipped, a key, a pattern, a value, a type or format name, a bound, a message) passes
// core's secret patterns, the cut and the scrub hooks on its own; core's connecting words, zod's own type
// and format names and what the tool's published input schema shows the model read as written.
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
 * internal host and a SQL statement, which no secret pattern of core's knows. Records what it saw.
 */
function internalsHook(seen: string[] = []): ToolMiddleware {
  const middleware: ToolMiddleware = (_ctx, next) => next();
  middleware.scrubText = (text) => {
    seen.push(text);
    return text
      .replace(/\bpgpayroll01\.internal\b/g, '[host]')
      .replace(/\bSELECT\b[^;]*?\bFROM\s+[\w.]+/g, '[sql]');
  };
  return middleware;
}

const DATABASE_URL = 'postgres://payroll_admin:Hunter2Payroll@pgpayroll01.internal:5432/payroll_prod';
const CAUGHT = `lookup failed: SELECT card_number, cvv_code FROM billing.payment_cards via ${DATABASE_URL}`;
const LEAKS = ['Hunter2', 'pgpayroll01', 'card_number', 'payment_cards'];

/** A tool whose transform catches a lookup's error and reports it with `issue` (as the red team did). */
function reporting(name: string, issue: (caught: string, input: string) => Record<string, unknown>) {
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

// Each issue field core quotes, carrying the caught error: none may reach the model unscrubbed.
const CARRIERS: Record<string, (caught: string, input: string) => Record<string, unknown>> = {
  'invalid_format pattern': (caught, input) => ({
    code: 'invalid_format',
    format: 'regex',
    pattern: caught,
    input,
  }),
  'invalid_format format': (caught, input) => ({ code: 'invalid_format', format: caught, input }),
  'invalid_value values': (caught, input) => ({ code: 'invalid_value', values: ['A', caught], input }),
  'invalid_value path': (caught, input) => ({ code: 'invalid_value', values: ['A'], path: [caught], input }),
  'invalid_type expected': (caught, input) => ({ code: 'invalid_type', expected: caught, input }),
  'too_big maximum': (caught, input) => ({ code: 'too_big', origin: 'string', maximum: caught, input }),
  'too_small minimum': (caught, input) => ({ code: 'too_small', origin: 'number', minimum: caught, input }),
  'unrecognized_keys keys': (caught, input) => ({ code: 'unrecognized_keys', keys: [caught], input }),
  'custom path segments': (caught, input) => ({
    code: 'custom',
    message: 'lookup failed',
    path: [...caught.split('.'), 'x'],
    input,
  }),
};

describe('invalid_argument: every piece of an issue core did not word itself is scrubbed', () => {
  it.each(Object.keys(CARRIERS))(
    '%s: the caught error loses its password, host and statement',
    async (name) => {
      const seen: string[] = [];
      client = await serveTools([reporting('lookup', CARRIERS[name] as never)], {
        middleware: [internalsHook(seen)],
      });
      const failure = expectFailure(await client.callTool('lookup', { sku: 'A1' }));
      expect(failure.error).toBe('invalid_argument');
      const text = JSON.stringify(failure);
      for (const leak of LEAKS) expect(text, `${name}: ${leak}`).not.toContain(leak);
      // What is left is usable: the non-secret words of the error, and the hint names each field.
      expect(text).toContain('lookup failed');
      for (const field of failure.fields ?? [])
        expect(failure.hint).toContain(`${field.path}: ${field.expected}`);
      // The hooks saw the caught error's pieces, never core's connecting words.
      expect(seen.some((piece) => piece.includes('pgpayroll01'))).toBe(true);
      expect(seen.some((piece) => /one of|a string matching|at most|not an accepted/.test(piece))).toBe(
        false,
      );
    },
  );

  it('a path is scrubbed whole before it is clipped: a URL straddling the 128-character clip leaves no part of its password', async () => {
    const tool = reporting('lookup', (caught, input) => ({
      code: 'custom',
      message: 'lookup failed',
      // The password straddles character 128 of the joined path (`sku.` + 91 + `postgres://payroll_admin:`).
      path: [`${'x'.repeat(90)} ${caught.slice(caught.indexOf('postgres'))}`],
      input,
    }));
    client = await serveTools([tool]);
    const failure = expectFailure(await client.callTool('lookup', { sku: 'A1' }));
    const text = JSON.stringify(failure);
    expect(text).not.toContain('Hunter');
    expect(text).not.toMatch(/payroll_admin:H/);
    expect(failure.fields?.[0]?.path.length).toBeLessThanOrEqual(129);
  });

  it('a bigint value (which JSON cannot write) is quoted, not a crash', async () => {
    const tool = reporting('lookup', (_caught, input) => ({
      code: 'invalid_value',
      values: [10n, 'A'],
      input,
    }));
    client = await serveTools([tool]);
    const failure = expectFailure(await client.callTool('lookup', { sku: 'A1' }));
    expect(failure.error).toBe('invalid_argument');
    expect(failure.fields).toEqual([{ path: 'sku', expected: 'one of 10, "A"' }]);
  });

  it('a middleware that rewrites an issue in ctx.validation has its words scrubbed whole', async () => {
    const annotate: ToolMiddleware = (ctx, next) => {
      if (!ctx.validation.ok) {
        const first = ctx.validation.issues[0];
        if (first !== undefined) first.expected = `${first.expected} (backend: ${DATABASE_URL})`;
        ctx.validation.issues.push({ path: 'pgpayroll01.internal', expected: 'a reachable backend' });
      }
      return next();
    };
    const tool = defineTool({
      name: 'pick',
      description: 'Picks a plan.',
      input: { plan: z.enum(['free', 'pro']) },
      handler: async () => ok({}),
    });
    client = await serveTools([tool], { middleware: [internalsHook(), annotate] });
    const failure = expectFailure(await client.callTool('pick', { plan: 'gold' }));
    const text = JSON.stringify(failure);
    for (const leak of ['Hunter2', 'pgpayroll01']) expect(text).not.toContain(leak);
    expect(failure.fields?.[0]?.expected).toContain('one of "free", "pro" (backend: ');
    expect(failure.fields?.[1]).toEqual({ path: '[host]', expected: 'a reachable backend' });
  });
});

describe('what stays as written: core’s words, zod’s names and what the published schema shows', () => {
  // A hook that garbles everything it is given: whatever reads as written below never reached it.
  function garbling(seen: string[]): ToolMiddleware {
    const middleware: ToolMiddleware = (_ctx, next) => next();
    middleware.scrubText = (text) => {
      seen.push(text);
      return '[scrubbed]';
    };
    return middleware;
  }

  it('realistic refusals read exactly as before, and the hooks see none of the published pieces', async () => {
    const seen: string[] = [];
    const tool = defineTool({
      name: 'open_account',
      description: 'Opens an account.',
      input: {
        account: z.string().regex(/^ACC-\d+$/),
        iban: z.string().regex(/^[A-Z]{2}\d{2}[A-Z0-9]{11,30}$/),
        phone: z.string().regex(/^\+?[1-9]\d{1,14}$/i),
        key: z.string().regex(/^sk_(test|live)_[A-Za-z0-9]{24}$/),
        credential: z.enum(['password', 'api_key', 'oauth_token', 'ssh_key']),
        scheme: z.literal('Bearer'),
        host: z.enum(['db.internal', 'localhost:5432', '10.0.0.12']),
        limit: z.number().max(1000),
        count: z.number().int(),
        ratio: z.number().min(0.5),
        amount: z.number().positive(),
        note: z.string().max(10),
        tags: z.array(z.string()).max(50),
        email: z.email(),
        site: z.url(),
        at: z.iso.datetime(),
        nested: z.object({ vault_path: z.string() }),
        password: z.string(),
        token: z.string(),
      },
      handler: async () => ok({}),
    });
    client = await serveTools([tool], { middleware: [garbling(seen)] });
    const failure = expectFailure(
      await client.callTool('open_account', {
        account: 'x',
        iban: 'x',
        phone: 'x',
        key: 'x',
        credential: 'pin',
        scheme: 'Basic',
        host: 'x',
        limit: 5000,
        count: 2 ** 60,
        ratio: 0.1,
        amount: -1,
        note: 'a long note here',
        tags: Array(51).fill('a'),
        email: 'x',
        site: 'x',
        at: 'x',
        nested: { vault_path: 1 },
        password: 1,
        token: 2,
        secret: 's',
      }),
    );
    const accepted =
      'account, iban, phone, key, credential, scheme, host, limit, count, ratio, amount, note, tags, email, site, at, nested, password, token';
    expect(Object.fromEntries((failure.fields ?? []).map((f) => [f.path, f.expected]))).toEqual({
      account: 'a string matching /^ACC-\\d+$/',
      iban: 'a string matching /^[A-Z]{2}\\d{2}[A-Z0-9]{11,30}$/',
      phone: 'a string matching /^\\+?[1-9]\\d{1,14}$/i',
      key: 'a string matching /^sk_(test|live)_[A-Za-z0-9]{24}$/',
      credential: 'one of "password", "api_key", "oauth_token", "ssh_key"',
      scheme: 'one of "Bearer"',
      host: 'one of "db.internal", "localhost:5432", "10.0.0.12"',
      limit: 'a number at most 1000',
      count: 'a number at most 9007199254740991',
      ratio: 'a number at least 0.5',
      amount: 'a number above 0',
      note: 'at most 10 characters',
      tags: 'at most 50 items',
      email: 'a valid email',
      site: 'a valid url',
      at: 'a valid datetime',
      'nested.vault_path': 'a string, not a number',
      password: 'a string, not a number',
      token: 'a string, not a number',
      // The model's own key is not in the published schema: it is scrubbed (here: garbled).
      '[scrubbed]': `not an accepted argument; remove it (accepted: ${accepted})`,
    });
    expect(seen).toEqual(['secret']);
  });

  it('a refinement’s plain message and a model’s unknown key pass the hooks and come back as they said', async () => {
    const seen: string[] = [];
    const tool = defineTool({
      name: 'transfer',
      description: 'Moves money.',
      input: { to: z.string().refine(() => false, 'Unknown account; see list_accounts') },
      handler: async () => ok({}),
    });
    client = await serveTools([tool], { middleware: [internalsHook(seen)] });
    const failure = expectFailure(await client.callTool('transfer', { to: 'ACC-1', memo: 'rent' }));
    expect(failure.fields).toEqual([
      { path: 'to', expected: 'Unknown account; see list_accounts' },
      { path: 'memo', expected: 'not an accepted argument; remove it (accepted: to)' },
    ]);
    expect(seen.sort()).toEqual(['Unknown account; see list_accounts', 'memo']);
  });
});

describe('bounds: what the hooks read of an issue’s pieces stays bounded whatever the model sends', () => {
  it('200 KB unknown keys: the hooks read at most 64 KB of them together, the rest is withheld', async () => {
    const seen: string[] = [];
    const tool = defineTool({
      name: 'search',
      description: 'Searches.',
      input: { q: z.string() },
      handler: async () => ok({}),
    });
    client = await serveTools([tool], { middleware: [internalsHook(seen)] });
    // Adversarial: 32 keys of near-boundary text, 200 KB in all, each ending in an internal host.
    const args: Record<string, unknown> = { q: 'x' };
    for (let i = 0; i < 31; i += 1) args[`${i}${'a:b;'.repeat(1600)}pgpayroll01.internal`] = 1;
    // And one shaped against the regex-literal test of a published pattern (`/…/flags`).
    args[`/${'/dgimsuvy'.repeat(700)}x`] = 1;
    const failure = expectFailure(await client.callTool('search', args));
    expect(failure.error).toBe('invalid_argument');
    expect(failure.fields).toHaveLength(32);
    const read = seen.reduce((sum, text) => sum + text.length, 0);
    expect(read).toBeLessThanOrEqual(64 * 1024);
    expect(failure.fields?.filter((f) => f.path === '[withheld: too much text]').length).toBeGreaterThan(20);
    expect(JSON.stringify(failure)).not.toContain('pgpayroll01');
    for (const field of failure.fields ?? []) expect(field.path.length).toBeLessThanOrEqual(129);
  });
});
