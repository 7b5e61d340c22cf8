// Red team F, finding 2: a validly signed token whose claim nests ~5,500 arrays deep made core's caller
// identity overflow the stack in canonicalJson, so every call of that token answered `internal`. A claim
// nested past 32 levels is not digested (a mark stands for it) and the token itself joins the digest:
// the call goes on as its own caller, never as anyone else.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { defineTool, identifyCaller, ok, type ToolRequest } from '../src/index.js';
import { parseResultText, serveTools, type TestClient } from '../src/testing.js';

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

/** A claim as a token's JSON payload parses it: `depth` arrays, one inside the other. */
const nested = (depth: number, inner: unknown = []): unknown =>
  JSON.parse(`${'['.repeat(depth)}${JSON.stringify(inner)}${']'.repeat(depth)}`);

function tokenAuth(token: string, extra: Record<string, unknown>): AuthInfo {
  return { token, clientId: 'c1', scopes: ['orders:read'], expiresAt: 4_102_444_800, extra };
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
const ISS = 'https://auth.example';

const whoami = defineTool({
  name: 'whoami',
  description: 'The caller id core derived.',
  input: {},
  handler: async (_args, ctx) => ok({ id: ctx.caller.id }),
});

describe('a token claim nested thousands of levels deep', () => {
  it('a call with it is answered (its own caller), not internal', async () => {
    const auth = tokenAuth('tok-deep-1', { iss: ISS, aud: 'https://orders.example/mcp', x: nested(5_500) });
    const client = await serveTools([whoami], { authInfo: auth });
    open.push(client);
    const result = await client.callTool('whoami', {});
    expect(result.isError).not.toBe(true);
    expect((parseResultText(result) as { id: string }).id).toMatch(/^client:c1#[A-Za-z0-9_-]{22}$/);
  });

  it('two tokens that differ only deep inside the claim are two callers; the same token is one', () => {
    const a = tokenAuth('tok-a', { iss: ISS, x: nested(5_500, 'a') });
    const b = tokenAuth('tok-b', { iss: ISS, x: nested(5_500, 'b') });
    expect(idOf(a)).not.toBe(idOf(b));
    expect(idOf(a)).toBe(idOf(tokenAuth('tok-a', { iss: ISS, x: nested(5_500, 'a') })));
  });

  it('beside a person claim, the token joins the digest: deep claims never merge two holders', () => {
    // What was cut is unknown: two tokens with the same person claim may differ in it.
    const claims = () => ({ iss: ISS, email: 'ann@corp.example', x: nested(5_500, 'p') });
    expect(idOf(tokenAuth('tok-1', claims()))).not.toBe(idOf(tokenAuth('tok-2', claims())));
  });

  it('an issuer nested so deep makes a client caller, not a sub: one, and does not throw', () => {
    const auth = tokenAuth('tok-iss', { iss: nested(5_500), sub: 'alice' });
    const identity = identifyCaller(requestWith(auth));
    expect(identity.kind).toBe('client');
    expect(identity.issuer).toBeUndefined();
  });

  it('a cyclic claim (a custom verifier building objects) is no throw either', () => {
    const loop: Record<string, unknown> = { a: 1 };
    loop.self = loop;
    expect(idOf(tokenAuth('tok-loop', { iss: ISS, loop }))).toMatch(/^client:c1#/);
  });

  it('claims up to 32 levels keep their ids: digested as before, the token left out beside a person claim', () => {
    const claims = { iss: ISS, email: 'ann@corp.example', groups: nested(30, 'g') };
    expect(idOf(tokenAuth('tok-1', claims))).toBe(idOf(tokenAuth('tok-2', claims)));
  });
});
