// Red team s34, finding 1: two holders of one public client's tokens (its client id a Client ID
// Metadata Document URL) whose claims hold no `sub` but only claims every holder may share
// (`groups: []`, `email_verified: false`, `sub: " "`, ...) were ONE caller: Bob was served Alice's
// cached answer, her idempotency replay and her rate-limit count. Without a subject, the claims name a
// person only when a person claim (`email`, `oid`, `preferred_username`, ...) holds a non-blank string
// or a finite number; otherwise the token joins the identity's digest.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  callKey,
  defineTool,
  identifyCaller,
  ok,
  principalOf,
  type ToolMiddleware,
  type ToolRequest,
  type ToolResult,
} from '../src/index.js';
import { parseResultText, serveTools, type TestClient } from '../src/testing.js';

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

const APP = 'https://app.example/cimd.json';

function holder(token: string, extra: Record<string, unknown>, clientId = APP): AuthInfo {
  return { token, clientId, scopes: ['mail'], extra };
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

/**
 * Answers a repeated call from a cache keyed on `callKey` (caller identity + tool + arguments), as
 * @toolgate/repeat-guard and @toolgate/idempotency key theirs: one server-wide instance for every session.
 */
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

const myInbox = defineTool({
  name: 'my_inbox',
  description: "The caller's own inbox.",
  input: { folder: z.string() },
  handler: async (_args, ctx) => ok({ owner: ctx.request.authInfo?.token, caller: ctx.caller.id }),
});

// Claims that do not single out a person: each alone, on both holders' tokens, must leave them two callers.
const SHARED_CLAIMS: Record<string, Record<string, unknown>> = {
  'empty groups': { groups: [] },
  'email not verified': { email_verified: false },
  'blank sub': { sub: ' ' },
  'zero-width sub': { sub: '\u200b' },
  'sub written from undefined': { sub: 'undefined' },
  'sub written from null': { sub: 'null' },
  'empty profile object': { profile: {} },
  'shared roles': { roles: ['user'] },
  'shared groups': { groups: ['staff', 'mail-users'] },
  'one tenant': { tenant: 'acme', tid: '72f988bf-86f1-41af-91ab-2d7cd011db47' },
  'audience and authorized party': { aud: 'https://mail.example', azp: APP },
  'scope as an array': { scp: ['mail.read', 'mail.send'] },
  'a plan every customer shares': { plan: 'pro', locale: 'en-GB' },
  'blank email': { email: '  ', email_verified: true },
  'a person claim that is not a string': { email: ['a@x.example'], oid: true, uid: Number.NaN },
  'issuer only': { iss: 'https://id.example' },
};

describe('holders of one public client whose claims name no one are two callers', () => {
  it('a per-caller cache serves Bob his own answer, whatever shared claims the tokens carry', async () => {
    const cache = repeatCache();
    const collided: string[] = [];
    for (const [name, extra] of Object.entries(SHARED_CLAIMS)) {
      const alice = await serveTools([myInbox], {
        middleware: [cache],
        authInfo: holder(`token-of-alice-${name}`, extra),
      });
      const bob = await serveTools([myInbox], {
        middleware: [cache],
        authInfo: holder(`token-of-bob-${name}`, extra),
      });
      open.push(alice, bob);
      const a = parseResultText(await alice.callTool('my_inbox', { folder: 'inbox' })) as { owner: string };
      const b = parseResultText(await bob.callTool('my_inbox', { folder: 'inbox' })) as { owner: string };
      expect(a.owner).toBe(`token-of-alice-${name}`);
      if (b.owner !== `token-of-bob-${name}`) collided.push(name);
    }
    expect(collided).toEqual([]);
  });

  it('a blank or absent-looking sub is no subject: not a sub: identity, and principalOf falls back to the client', () => {
    for (const sub of [' ', '\t\n', '\u200b', '-', 'undefined', 'null', 'NaN', '[object Object]']) {
      const caller = identifyCaller(requestWith(holder('t1', { iss: 'https://id.example', sub })));
      expect(caller.kind).toBe('client');
      expect(caller.subject).toBeUndefined();
      expect(principalOf({ request: requestWith(holder('t1', { sub }, 'portal')) })).toBe('portal');
    }
    // A subject that names someone is read as before (what must stay unchanged).
    for (const sub of [
      'u1',
      '248289761001',
      'alice@example.com',
      'Ωmega',
      ' u2 ',
      'auth0|5f7c8ec7c33c6c004bbafe82',
      'nullable-7',
    ]) {
      expect(idOf(holder('t1', { iss: 'https://id.example', sub }))).toBe(`sub:https://id.example|${sub}`);
      expect(principalOf({ request: requestWith(holder('t1', { sub }, 'portal')) })).toBe(sub);
    }
  });

  it('a person claim keeps one caller across refreshes; shared claims alone make each token its own caller', () => {
    // Realistic tokens without `sub` whose claims single out the holder: refreshed (another token,
    // other time claims), they stay one caller with the id they always had.
    const PERSON: Record<string, Record<string, unknown>> = {
      'Entra ID object id': { oid: '00000000-0000-0000-66f3-3332eca7ea81', tid: '9188040d', roles: ['user'] },
      'Keycloak username': { preferred_username: 'alice', groups: [], email_verified: false },
      email: { email: 'alice@example.com', email_verified: true },
      upn: { upn: 'alice@corp.example', tenant: 'corp' },
      'numeric uid': { uid: 1001 },
      'numeric sub': { sub: 1001 },
      'GitHub login': { login: 'octocat', aud: 'x' },
      user_id: { user_id: 'u_123', plan: 'pro' },
      username: { username: 'bob' },
      unique_name: { unique_name: 'CORP\\alice' },
    };
    for (const [name, claims] of Object.entries(PERSON)) {
      const first = idOf(holder(`tok-1-${name}`, { ...claims, exp: 1, iat: 1, jti: 'a' }));
      const refreshed = idOf(holder(`tok-2-${name}`, { ...claims, exp: 9, iat: 5, jti: 'b' }));
      expect(refreshed, name).toBe(first);
      expect(first, name).toMatch(/^client:https:\/\/app\.example\/cimd\.json#[A-Za-z0-9_-]{22}$/);
    }
    // Two people's person claims are two callers.
    expect(idOf(holder('t', { email: 'alice@example.com' }))).not.toBe(
      idOf(holder('t', { email: 'bob@example.com' })),
    );
    // Shared claims alone: every token its own caller (a refresh is a new caller).
    for (const [name, claims] of Object.entries(SHARED_CLAIMS)) {
      expect(idOf(holder('tok-1', claims)), name).not.toBe(idOf(holder('tok-2', claims)));
    }
  });
});
