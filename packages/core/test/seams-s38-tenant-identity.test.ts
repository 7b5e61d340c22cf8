// Red team P (session 38): one person (one issuer and subject) holding tokens for two organisations
// (Auth0 Organizations' `org_id`, Entra's `tid`, a `tenant` claim) was ONE caller: a tool that reads the
// organisation from the token rather than binding it had org A's cached answer replayed to org B. A
// subject identity now carries the token's tenant claims; a token without one keeps the id it had.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  callKey,
  defineTool,
  identifyCaller,
  ok,
  TENANT_CLAIMS,
  type ToolMiddleware,
  type ToolRequest,
  type ToolResult,
} from '../src/index.js';
import { parseResultText, serveTools, type TestClient } from '../src/testing.js';

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

function token(name: string, extra: Record<string, unknown>): AuthInfo {
  return { token: name, clientId: 'desk-app', scopes: ['invoices'], extra };
}

function requestWith(authInfo: AuthInfo): ToolRequest {
  return {
    id: 1,
    sessionId: undefined,
    authInfo,
    meta: undefined,
    headers: undefined,
    local: false,
    signal: new AbortController().signal,
  };
}

const idOf = (authInfo: AuthInfo): string => identifyCaller(requestWith(authInfo)).id;

/** A server-wide cache keyed on `callKey`, as repeat-guard and idempotency key theirs. */
function repeatCache(): ToolMiddleware {
  const answers = new Map<string, ToolResult>();
  return async (ctx, next) => {
    const key = callKey(ctx);
    const cached = answers.get(key);
    if (cached !== undefined) return cached;
    const answer = await next();
    answers.set(key, answer);
    return answer;
  };
}

describe('a subject identity carries the token tenant', () => {
  it.each(TENANT_CLAIMS.map((claim) => [claim]))(
    'the same person under two %s values is two callers',
    (claim) => {
      const a = idOf(token('a', { iss: 'https://idp.example', sub: 'pat', [claim]: 'org_A' }));
      const b = idOf(token('b', { iss: 'https://idp.example', sub: 'pat', [claim]: 'org_B' }));
      expect(a).not.toBe(b);
      expect(a.startsWith('sub:')).toBe(true);
    },
  );

  it('a refreshed token for the same tenant is the same caller; one without a tenant keeps its old id', () => {
    const first = idOf(
      token('t1', { iss: 'https://idp.example', sub: 'pat', org_id: 'org_A', exp: 1, jti: 'x' }),
    );
    const again = idOf(
      token('t2', { iss: 'https://idp.example', sub: 'pat', org_id: 'org_A', exp: 2, jti: 'y' }),
    );
    expect(again).toBe(first);
    expect(idOf(token('t3', { iss: 'https://idp.example', sub: 'pat' }))).toBe('sub:https://idp.example|pat');
    expect(idOf(token('t4', { iss: 'https://idp.example', sub: 'pat', org_id: null }))).toBe(
      'sub:https://idp.example|pat',
    );
  });

  it('the tenant part cannot be forged by an issuer or a subject that spells it out', () => {
    const real = idOf(token('a', { iss: 'x', sub: 'z', org_id: 'y' }));
    const ids = new Set([
      real,
      idOf(token('b', { iss: 'x%T{"org_id":"y"}', sub: 'z' })),
      idOf(token('c', { iss: 'x', sub: '%T{"org_id":"y"}|z' })),
      idOf(token('d', { iss: 'x', sub: 'z', org_id: 'y|z' })),
      idOf(token('e', { iss: 'x', sub: 'y|z', org_id: '' })),
      idOf(token('f', { iss: 'x', sub: 'z', org_id: 1 })),
      idOf(token('g', { iss: 'x', sub: 'z', org_id: '1' })),
      idOf(token('h', { iss: 'x', sub: 'z', tid: 'y' })),
    ]);
    expect(ids.size).toBe(8);
  });

  // Red team AA (session 38): namespaced custom claims (Auth0's `https://app/...`) and `org_slug`,
  // `tenant_name` were not read, and a tenant claim of 200,000 items made a 3 MB caller id.
  it.each([
    ['https://app.example/org_id'],
    ['https://app.example/tenant'],
    ['urn:app:organization'],
    ['org_slug'],
    ['tenant_name'],
  ])('reads %s as a tenant claim', (claim) => {
    const a = idOf(token('a', { iss: 'https://idp.example', sub: 'pat', [claim]: 'acme' }));
    const b = idOf(token('b', { iss: 'https://idp.example', sub: 'pat', [claim]: 'globex' }));
    expect(a).not.toBe(b);
    expect(a.startsWith('sub:https://idp.example%T')).toBe(true);
  });

  it('a claim merely ending in a tenant word, or naming nothing after its namespace, is no tenant claim', () => {
    const plain = idOf(token('p', { iss: 'https://idp.example', sub: 'pat' }));
    expect(
      idOf(token('q', { iss: 'https://idp.example', sub: 'pat', subtenant: 'x', 'https://app/': 'y' })),
    ).toBe(plain);
  });

  it('a long tenant part is written as its digest: the id stays short, and two tenants stay apart', () => {
    const many = (tag: string) => Array.from({ length: 200_000 }, (_, index) => `${tag}-${index}`);
    const a = idOf(token('a', { iss: 'https://idp.example', sub: 'pat', org: many('a') }));
    const b = idOf(token('b', { iss: 'https://idp.example', sub: 'pat', org: many('b') }));
    expect(a.length).toBeLessThan(120);
    expect(a).toMatch(/^sub:https:\/\/idp\.example%T#[A-Za-z0-9_-]{43}\|pat$/);
    expect(a).not.toBe(b);
  });

  it('a tenant claim nested past the depth bound makes the token its own client caller, without throwing', () => {
    let deep: unknown = 'leaf';
    for (let level = 0; level < 5_000; level += 1) deep = [deep];
    const a = identifyCaller(
      requestWith(token('deep-1', { iss: 'https://idp.example', sub: 'pat', tid: deep })),
    );
    const b = identifyCaller(
      requestWith(token('deep-2', { iss: 'https://idp.example', sub: 'pat', tid: deep })),
    );
    expect(a.kind).toBe('client');
    expect(a.id).not.toBe(b.id);
  });

  it('over a real round trip, org B is never answered from org A cache', async () => {
    let runs = 0;
    const invoices = defineTool({
      name: 'list_invoices',
      description: "The current organisation's invoices for a month.",
      input: { month: z.string().max(7) },
      handler: async ({ month }, ctx) => {
        runs += 1;
        const org = String(ctx.request.authInfo?.extra?.org_id);
        return ok({ org, month, invoices: [`${org}-invoice-1`] });
      },
    });
    const cache = repeatCache();
    const answers: unknown[] = [];
    for (const org of ['org_A', 'org_B', 'org_A']) {
      const client = await serveTools([invoices], {
        middleware: [cache],
        authInfo: token(`t-${org}`, { iss: 'https://idp.example', sub: 'pat', org_id: org }),
      });
      open.push(client);
      answers.push(parseResultText(await client.callTool('list_invoices', { month: '2026-11' })));
    }
    expect(runs).toBe(2);
    expect(answers).toEqual([
      { ok: true, org: 'org_A', month: '2026-11', invoices: ['org_A-invoice-1'] },
      { ok: true, org: 'org_B', month: '2026-11', invoices: ['org_B-invoice-1'] },
      { ok: true, org: 'org_A', month: '2026-11', invoices: ['org_A-invoice-1'] },
    ]);
  });
});
