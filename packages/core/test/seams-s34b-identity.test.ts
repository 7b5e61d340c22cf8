// Red team s34b, finding d11: distinct tokens of one public client were one caller when a verifier
// wrote an absent claim as another language writes nothing (`sub: "None"` from Python, `"<nil>"` from
// Go, `"nil"` from Ruby, `"[object Undefined]"` from `Object.prototype.toString`) or as the number an
// absent numeric id becomes (`user_id: 0` from `Number(null)` or `Number('')`). These words, in any
// letter case, and 0 (number or string) name no one, as a subject and as a person claim alike: the
// token then joins the identity's digest. A real account whose id is 0 or whose login is `nil` is
// thereby split per token (each refresh a new caller), never merged with anyone else's.
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

const APP = 'https://app.example/client.json';

function holder(token: string, extra: Record<string, unknown>, clientId = APP): AuthInfo {
  return { token, clientId, scopes: ['read'], extra };
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

/** A cache keyed on `callKey`, as @toolgate/repeat-guard and @toolgate/idempotency key theirs. */
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

const myPayslip = defineTool({
  name: 'my_payslip',
  description: "The caller's own payslip.",
  input: { month: z.string() },
  handler: async (_args, ctx) => ok({ owner: ctx.request.authInfo?.token }),
});

// What verifiers in other languages, or JavaScript's own conversions, write for a claim that is absent.
const ABSENT: Record<string, Record<string, unknown>> = {
  'user_id from Number(null)': { user_id: 0 },
  'uid as the string 0': { uid: '0' },
  'oid negative zero': { oid: -0 },
  'sub Python None': { sub: 'None' },
  'sub Go <nil>': { sub: '<nil>' },
  'sub Go %!s(<nil>)': { sub: '%!s(<nil>)' },
  'sub Ruby nil': { sub: 'nil' },
  'sub NULL': { sub: 'NULL' },
  'sub [object Undefined]': { sub: '[object Undefined]' },
  'sub [object Null]': { sub: '[object Null]' },
  'sub 0': { sub: '0' },
  'email None': { email: 'None' },
  'preferred_username <NIL>': { preferred_username: ' <NIL> ' },
  'login NIL': { login: 'NIL' },
  'username [OBJECT UNDEFINED]': { username: '[OBJECT UNDEFINED]' },
};

describe('claims written from an absent value name no one', () => {
  it('a per-caller cache serves each holder their own answer (real tools/call round trips)', async () => {
    const cache = repeatCache();
    const collided: string[] = [];
    for (const [name, extra] of Object.entries(ABSENT)) {
      const alice = await serveTools([myPayslip], {
        middleware: [cache],
        authInfo: holder(`alice-${name}`, extra),
      });
      const bob = await serveTools([myPayslip], {
        middleware: [cache],
        authInfo: holder(`bob-${name}`, extra),
      });
      open.push(alice, bob);
      const a = parseResultText(await alice.callTool('my_payslip', { month: '2026-11' })) as {
        owner: string;
      };
      const b = parseResultText(await bob.callTool('my_payslip', { month: '2026-11' })) as { owner: string };
      expect(a.owner).toBe(`alice-${name}`);
      if (b.owner !== `bob-${name}`) collided.push(name);
    }
    expect(collided).toEqual([]);
  });

  it('such a sub is no subject: the identity is the client’s with the token, principalOf falls back to the client id', () => {
    for (const [name, extra] of Object.entries(ABSENT)) {
      if (!('sub' in extra)) continue;
      const caller = identifyCaller(requestWith(holder('t1', { iss: 'https://id.example', ...extra })));
      expect(caller.kind, name).toBe('client');
      expect(caller.subject, name).toBeUndefined();
      expect(principalOf({ request: requestWith(holder('t1', extra, 'portal')) }), name).toBe('portal');
    }
  });

  it('real subjects and person claims that merely contain those words keep their ids across refreshes', () => {
    // Subjects as issuers write them: each stays `sub:<issuer>|<sub>` and its principal.
    for (const sub of [
      'nilsson',
      'Nil Özdemir',
      'none-of-your-business',
      '0042',
      '10',
      'u0',
      '<nil>x',
      'null0',
    ]) {
      expect(idOf(holder('t1', { iss: 'https://id.example', sub })), sub).toBe(
        `sub:https://id.example|${sub}`,
      );
      expect(principalOf({ request: requestWith(holder('t1', { sub }, 'portal')) }), sub).toBe(sub);
    }
    // Person claims: one caller across a refresh (another token, other time claims).
    const PERSON: Record<string, Record<string, unknown>> = {
      'numeric user_id': { user_id: 1001 },
      'negative numeric id': { uid: -5 },
      'string id 00': { uid: '00' },
      'email none@': { email: 'none@example.com' },
      'login nil-ops': { login: 'nil-ops' },
    };
    for (const [name, claims] of Object.entries(PERSON)) {
      const first = idOf(holder('tok-1', { ...claims, exp: 1, iat: 1 }));
      expect(idOf(holder('tok-2', { ...claims, exp: 9, iat: 5 })), name).toBe(first);
    }
  });
});
